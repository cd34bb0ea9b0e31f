#pragma once
// Token datasets on disk: one HDF5 file.
//
//   /tokens       1-D dataset of token ids, uint16 when vocab_size <= 65536, else uint32
//   /doc_starts   1-D uint64 dataset: first token of each document (ascending, [0] == 0);
//                 present when the file holds more than one document
//   attributes on the root group:
//     format = "zt-tokens", format_version = 2 (uint32; 1: older files, no checksums)
//   each dataset: attribute checksum (uint64), zt-xxh3 of its stored bytes (as checkpoint
//   datasets; zt/h5/h5.hpp write_checksum), verified at read
//     vocab_size (uint32), tokenizer (string, e.g. "bytes"), num_tokens (uint64),
//     num_docs (uint64)
//     tokenizer_hash (string, 16 hex digits): with a real tokenizer (`--tokenizer`), the
//     FNV-1a 64 of its files (zt/data/text_tokenizer.hpp); absent for "bytes"
//     tokenizer_path (string): with a real tokenizer, the absolute path it was loaded from
//     (a folder or file; the checkpoint records it, `zt convert h5-to-hf` copies its files)
//   instruction data (`zt convert sft-to-tokens`, zt/data/sft.hpp) adds:
//   /loss_mask    1-D uint8 [num_tokens]: 1 where the token is a training target (response
//                 tokens), 0 for prompt, BOS and padding
//     row_len (uint32): the tokens are rows of row_len (= seq_len + 1); /doc_starts holds
//     each example's start
//   preference pairs (`zt convert pairs-to-tokens`, zt/data/pairs.hpp) add to those:
//     pairs (uint32) = 1: one sequence a row, pair k in rows 2k (chosen), 2k + 1 (rejected)
//   KTO rows (`zt convert kto-to-tokens`, zt/data/kto.hpp) add to instruction data:
//   /labels       1-D uint8 [rows / 2]: example k's label (1 desirable, 0 undesirable); its
//                 rows are 2k (prompt + completion) and 2k + 1 (prompt + the mismatched
//                 completion of TRL's KL estimate)
//
// Document boundaries are a dataset, not an attribute, because HDF5 attributes are
// limited to 64 KiB. Files are written atomically: to PATH.tmp, flushed, fsynced, then
// renamed over PATH, so a reader never sees a half-written file.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace zt::data {

struct TokenFile {
  std::vector<uint32_t> tokens;      // [num_tokens]
  uint32_t vocab_size = 0;
  std::string tokenizer;
  std::string tokenizer_hash;        // empty for the byte tokenizer
  std::string tokenizer_path;        // where the tokenizer was loaded from; empty for bytes
  std::vector<uint64_t> doc_starts;
  std::vector<uint8_t> loss_mask;    // [num_tokens] or empty (not instruction data)
  uint32_t row_len = 0;              // rows of instruction data; 0: one stream
  bool pairs = false;                // preference pairs: rows 2k chosen, 2k + 1 rejected
  std::vector<uint8_t> labels;       // KTO rows: one per example (rows 2k, 2k + 1); else empty
};

struct WriteOptions {
  // The intermediate file is PATH + tmp_suffix; "" (the default): PATH.tmp.<host>.<pid>,
  // unique to this process (SafeFile).
  std::string tmp_suffix;
};

// Checks the contents (non-empty, ids < vocab_size, ascending doc starts) and writes
// `path` atomically. Throws zt::InputError for bad contents, zt::Error for I/O failures.
void write_token_file(const std::string& path, const TokenFile& file,
                      const WriteOptions& options = {});

// Reads and validates a token file. Throws zt::InputError naming `path` for a missing
// file, a file that is not HDF5, a missing dataset or attribute, an empty dataset, a
// token id >= vocab_size, or unordered document starts.
TokenFile read_token_file(const std::string& path);

// Before a converter reads its inputs (issue 36, class 6): the peak it will need,
// per_byte x the inputs' bytes + extra(their bytes, the largest input's bytes), against
// zt::memory_room(); more is zt::InputError (exit 2) naming the largest input, the bytes
// needed and the bytes available. `command` names the converter, `detail` the terms.
void require_convert_memory(const std::string& command, const std::vector<std::string>& inputs,
                            double per_byte, const std::function<double(double total, double largest)>& extra,
                            const std::string& detail);

}  // namespace zt::data
