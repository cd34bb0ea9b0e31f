#pragma once
// The DPO reference log-probs of a full fine-tune, kept beside its checkpoints
// (ckpt.dir/dpo-reference.h5; docs/finetune.md "The reference"): computed once before
// step 1 from the weights of step 0, which no later checkpoint holds, and read back on a
// resume. HDF5: /logp float64 [rows] (file row order), root attributes format =
// "zt-dpo-reference", rows (uint64), row_len (uint32), data_hash (uint64: zt-xxh3 of the
// pair file's /tokens and /loss_mask), data_path (string, informational).
#include <cstdint>
#include <string>
#include <vector>

#include "zt/data/token_file.hpp"

namespace zt::train {

inline constexpr const char* kReferenceFile = "dpo-reference.h5";

// zt-xxh3 of the tokens and the mask: the identity of the rows the log-probs belong to.
uint64_t pair_data_hash(const data::TokenFile& data);

// Writes `path` atomically (SafeFile); zt::Error naming it and HDF5's reason on failure.
void write_reference(const std::string& path, const std::vector<double>& logp, uint32_t row_len,
                     uint64_t data_hash, const std::string& data_path);

// Reads `path`; zt::InputError naming it for a missing or malformed file, or one of other
// rows (another data.path, re-tokenised data, another seq_len).
std::vector<double> read_reference(const std::string& path, size_t rows, uint32_t row_len,
                                   uint64_t data_hash, const std::string& data_path);

}  // namespace zt::train
