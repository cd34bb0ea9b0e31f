#pragma once
// Safetensors files (the Hugging Face weight format), read and written by zt.
//
//   [8 bytes]  N, the header length, unsigned little-endian
//   [N bytes]  JSON header: {"NAME": {"dtype": "BF16", "shape": [out, in],
//                                     "data_offsets": [begin, end]}, ...,
//                            "__metadata__": {"key": "value", ...}}   (metadata optional)
//   [rest]     the data buffer; each tensor's bytes are [begin, end) of it, row-major,
//              little-endian
//
// Reading trusts nothing: parse_safetensors_header checks the header length against the
// file size, the JSON (syntax, UTF-8, no duplicate keys at any depth, no unknown fields),
// every dtype, shape and offset pair (end - begin == numel * element size, no overflow),
// and that the tensors tile the data buffer exactly: sorted by offset they start at 0,
// each begins where the previous one ends, and the last ends at the end of the file. Any
// violation throws zt::InputError naming the file (`where`) and the field.
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "zt/core/dtype.hpp"
#include "zt/core/files.hpp"

namespace zt::ckpt {

// Element types of the safetensors format. zt imports F32, BF16 and F16 weights; the
// others are recognised (so a file holding them is parsed and its sizes checked) but
// refused by the importer.
enum class StDType : uint8_t { kBool, kU8, kI8, kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kF64, kI64, kU64 };

const char* st_dtype_name(StDType t);  // "F32", "BF16", ...
size_t st_dtype_size(StDType t);       // bytes per element
// Throws zt::InputError naming `where` and `field` for a name the format does not define.
StDType parse_st_dtype(const std::string& name, const std::string& where, const std::string& field);

struct StTensor {
  std::string name;            // e.g. "model.layers.0.self_attn.q_proj.weight"
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;  // row-major; [] is a scalar (one element)
  uint64_t begin = 0;          // byte offsets into the data buffer, end - begin == nbytes()
  uint64_t end = 0;
  int64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
};

struct StHeader {
  uint64_t header_len = 0;   // N
  uint64_t data_start = 0;   // 8 + N: file offset of the data buffer
  uint64_t data_size = 0;    // bytes in the data buffer (file size - data_start)
  std::vector<StTensor> tensors;                  // sorted by begin offset
  std::map<std::string, std::string> metadata;    // "__metadata__"
  const StTensor* find(const std::string& name) const;  // nullptr when absent
};

// Parses the header of a safetensors file from its first bytes (`bytes` must hold at least
// the 8-byte length and the N header bytes; more is ignored) and checks it against the
// whole file's size. No file access: this is the fuzzing entry point. Throws
// zt::InputError naming `where` and the offending field.
StHeader parse_safetensors_header(std::span<const std::byte> bytes, uint64_t file_size,
                                  const std::string& where = "<memory>");

// Opens `path`, reads and checks its header (throws zt::InputError for a missing or
// hostile file).
StHeader read_safetensors_header(const std::string& path);

// Reads tensor `t` of the file at `path` (whose header is `h`) and converts it to fp32
// (F32, BF16, F16; other dtypes throw zt::InputError). out.size() becomes t.numel().
void read_safetensors_tensor(const std::string& path, const StHeader& h, const StTensor& t,
                             std::vector<float>& out);

// Reads tensor `t` (dtype U8: MXFP4 blocks and scales) as raw bytes; other dtypes throw
// unless any_dtype (then its bytes as stored, e.g. a carried vision tensor).
void read_safetensors_bytes(const std::string& path, const StHeader& h, const StTensor& t,
                            std::vector<uint8_t>& out, bool any_dtype = false);

// The narrowing type of a BF16/F16 safetensors dtype (zt/core/dtype.hpp), kF32 otherwise.
DType st_narrow_target(StDType t);
// The refusal of values that do not survive narrowing: "WHAT: tensor 'a' 3 values beyond
// half's range (largest |x| 7e+04); ..." (at most a few tensors named, then how many
// more), with a hint to export wider or saturate. `bad`: each tensor's name and count.
[[noreturn]] void refuse_narrowing(const std::string& what,
                                   const std::vector<std::pair<std::string, NarrowCount>>& bad,
                                   DType to);

// Writes one safetensors file tensor by tensor, so a whole model never sits in memory:
//   SafetensorsWriter w(path, specs, metadata);   // header written here
//   for each spec in order: w.write(values);      // fp32 values, converted to spec.dtype
//   w.finish();                                   // flush, fsync, rename path.tmp -> path
// The header is padded with spaces to a multiple of 8 bytes (as the Python package does),
// so every tensor's data starts 8-byte aligned when its predecessors' sizes allow.
struct StTensorSpec {
  std::string name;
  StDType dtype = StDType::kF32;  // F32, BF16 or F16
  std::vector<int64_t> shape;
};

// BF16/F16 tensors are narrowed by zt::narrow_floats (zt/core/dtype.hpp): a value beyond
// the dtype's range or a NaN refuses the tensor (zt::InputError naming it and the count)
// unless `saturate` (then +-max replaces +-inf; NaN stays NaN).
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::string path, std::vector<StTensorSpec> specs,
                    const std::map<std::string, std::string>& metadata, bool saturate = false);
  ~SafetensorsWriter() = default;  // an unfinished file is removed (SafeFile)
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  void write(std::span<const float> values);  // the next tensor, in spec order
  void write_raw(std::span<const uint8_t> bytes);  // the next tensor's bytes as stored
  void finish();
  static uint64_t file_size(const std::vector<StTensorSpec>& specs,
                            const std::map<std::string, std::string>& metadata);

 private:
  SafeFile out_;  // the one safe writer: path.tmp, O_EXCL|O_NOFOLLOW, fsync, rename
  std::vector<StTensorSpec> specs_;
  bool saturate_ = false;
  size_t next_ = 0;
};

}  // namespace zt::ckpt
