// Safetensors reading (with full validation of hostile headers) and streaming writing.
// See include/zt/ckpt/safetensors.hpp for the format and the checks.
#include "zt/ckpt/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "zt/core/escape.hpp"
#include "zt/core/json.hpp"

#include "zt/core/dtype.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; zt reads it in place on little-endian hosts only");

namespace zt::ckpt {
namespace {

using json = nlohmann::json;

// Largest header accepted (the Python/Rust package uses the same 100 MB bound).
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

constexpr const char* kHint =
    "the file is not a valid safetensors file (truncated, corrupted or hand-edited); "
    "re-export it, e.g. with safetensors.torch.save_file";

struct DTypeName { StDType t; const char* name; size_t size; };
constexpr DTypeName kDTypes[] = {
    {StDType::kBool, "BOOL", 1}, {StDType::kU8, "U8", 1},     {StDType::kI8, "I8", 1},
    {StDType::kI16, "I16", 2},   {StDType::kU16, "U16", 2},   {StDType::kF16, "F16", 2},
    {StDType::kBF16, "BF16", 2}, {StDType::kI32, "I32", 4},   {StDType::kU32, "U32", 4},
    {StDType::kF32, "F32", 4},   {StDType::kF64, "F64", 8},   {StDType::kI64, "I64", 8},
    {StDType::kU64, "U64", 8}};

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw InputError("safetensors file '" + where + "': " + what, kHint);
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t read_u64_le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

StTensor parse_entry(const std::string& name, const json& e, const std::string& where) {
  const std::string field = "tensor '" + name + "'";
  if (name.empty()) bad(where, "a tensor has an empty name");
  if (!e.is_object()) bad(where, field + " is not a JSON object");
  for (const auto& [key, value] : e.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      bad(where, field + " has unknown field '" + key + "'");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!e.contains(key)) bad(where, field + " has no '" + key + "'");

  StTensor t;
  t.name = name;
  const json& dt = e.at("dtype");
  if (!dt.is_string()) bad(where, field + ": 'dtype' is not a string");
  t.dtype = parse_st_dtype(dt.get<std::string>(), where, field + ".dtype");

  const json& shape = e.at("shape");
  if (!shape.is_array()) bad(where, field + ": 'shape' is not an array");
  uint64_t numel = 1;
  for (const json& d : shape) {
    if (!d.is_number_unsigned())
      bad(where, field + ": 'shape' holds " + describe_json(d) + ", not a non-negative integer");
    const uint64_t dim = d.get<uint64_t>();
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(numel, dim, &numel) ||
        numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      bad(where, field + ": 'shape' has more elements than fit in 63 bits");
    t.shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(st_dtype_size(t.dtype)), &nbytes))
    bad(where, field + ": 'shape' " + shape_str(t.shape) + " is too large");

  const json& off = e.at("data_offsets");
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned())
    bad(where, field + ": 'data_offsets' must be [begin, end] (non-negative integers), got " +
                   describe_json(off));
  t.begin = off[0].get<uint64_t>();
  t.end = off[1].get<uint64_t>();
  const std::string offsets = "[" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
  if (t.end < t.begin)
    bad(where, field + ": 'data_offsets' " + offsets + " ends before it begins");
  if (t.end - t.begin != nbytes)
    bad(where, strf("%s: 'data_offsets' %s span %llu bytes but dtype %s and shape %s need %llu",
                    field.c_str(), offsets.c_str(),
                    static_cast<unsigned long long>(t.end - t.begin), st_dtype_name(t.dtype),
                    shape_str(t.shape).c_str(), static_cast<unsigned long long>(nbytes)));
  return t;
}

// ---- small POSIX file helpers ------------------------------------------------------

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { if (fd_ >= 0) ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

void pread_all(int fd, void* buf, uint64_t n, uint64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      throw Error("reading '" + path + "' failed: " + std::strerror(errno),
                  "check the file system and the file's permissions");
    if (got == 0)
      throw InputError(strf("safetensors file '%s' ends early (at byte %llu)", path.c_str(),
                            static_cast<unsigned long long>(offset)),
                       kHint);
    p += got;
    n -= static_cast<uint64_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

}  // namespace

// ---- dtypes ----------------------------------------------------------------------

const char* st_dtype_name(StDType t) {
  for (const DTypeName& d : kDTypes)
    if (d.t == t) return d.name;
  return "?";
}

size_t st_dtype_size(StDType t) {
  for (const DTypeName& d : kDTypes)
    if (d.t == t) return d.size;
  return 0;
}

StDType parse_st_dtype(const std::string& name, const std::string& where, const std::string& field) {
  for (const DTypeName& d : kDTypes)
    if (name == d.name) return d.t;
  bad(where, field + " is '" + name +
                 "', not a safetensors dtype (BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, "
                 "F64, I64, U64)");
}

int64_t StTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const StTensor* StHeader::find(const std::string& name) const {
  for (const StTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

// ---- reading ---------------------------------------------------------------------

StHeader parse_safetensors_header(std::span<const std::byte> bytes, uint64_t file_size,
                                  const std::string& where) {
  if (file_size < 8 || bytes.size() < 8)
    bad(where, strf("%llu bytes are too few for the 8-byte header length",
                    static_cast<unsigned long long>(std::min<uint64_t>(file_size, bytes.size()))));
  StHeader h;
  h.header_len = read_u64_le(bytes.data());
  if (h.header_len > file_size - 8)
    bad(where, strf("header length %llu runs past the end of the file (%llu bytes)",
                    static_cast<unsigned long long>(h.header_len),
                    static_cast<unsigned long long>(file_size)));
  if (h.header_len > kMaxHeaderBytes)
    bad(where, strf("header length %llu exceeds the %llu-byte limit",
                    static_cast<unsigned long long>(h.header_len),
                    static_cast<unsigned long long>(kMaxHeaderBytes)));
  if (h.header_len < 2) bad(where, "header length is below 2 (no JSON object fits)");
  if (bytes.size() - 8 < h.header_len)
    bad(where, strf("only %zu of the %llu header bytes were given", bytes.size() - 8,
                    static_cast<unsigned long long>(h.header_len)));
  h.data_start = 8 + h.header_len;
  h.data_size = file_size - h.data_start;

  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), h.header_len);
  const json j = parse_json_strict(text, "safetensors file '" + where + "' header", kHint);
  if (!j.is_object()) bad(where, "header is not a JSON object");

  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) bad(where, "'__metadata__' is not a JSON object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) bad(where, "'__metadata__." + mk + "' is not a string");
        h.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_entry(key, value, where));
  }

  // The tensors must tile the data buffer: sorted by offset, no gap, no overlap, no
  // bytes left over.
  std::sort(h.tensors.begin(), h.tensors.end(), [](const StTensor& a, const StTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expect = 0;
  for (const StTensor& t : h.tensors) {
    if (t.end > h.data_size)
      bad(where, strf("tensor '%s': 'data_offsets' [%llu, %llu] run past the data buffer "
                      "(%llu bytes)",
                      t.name.c_str(), static_cast<unsigned long long>(t.begin),
                      static_cast<unsigned long long>(t.end),
                      static_cast<unsigned long long>(h.data_size)));
    if (t.begin != expect)
      bad(where, strf("tensor '%s': 'data_offsets' begin at %llu but the previous tensor ends "
                      "at %llu (%s)",
                      t.name.c_str(), static_cast<unsigned long long>(t.begin),
                      static_cast<unsigned long long>(expect),
                      t.begin < expect ? "overlap" : "gap"));
    expect = t.end;
  }
  if (expect != h.data_size)
    bad(where, strf("the tensors cover %llu bytes of the %llu-byte data buffer (bytes left over)",
                    static_cast<unsigned long long>(expect),
                    static_cast<unsigned long long>(h.data_size)));
  return h;
}

StHeader read_safetensors_header(const std::string& path) {
  // O_NONBLOCK: a FIFO in place of the file must not hang the open (fstat refuses it).
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0)
    throw InputError("cannot open safetensors file '" + path + "': " + std::strerror(errno),
                     "check the path; a Hugging Face model folder holds model.safetensors or "
                     "model.safetensors.index.json with its shards");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw InputError("'" + path + "' is not a regular file", "give the path of a .safetensors file");
  const auto file_size = static_cast<uint64_t>(st.st_size);
  std::byte len_bytes[8];
  if (file_size < 8) bad(path, strf("file has %llu bytes, fewer than the 8-byte header length",
                                    static_cast<unsigned long long>(file_size)));
  pread_all(fd.get(), len_bytes, 8, 0, path);
  const uint64_t n = read_u64_le(len_bytes);
  if (n > file_size - 8 || n > kMaxHeaderBytes)  // let the parser word the error
    return parse_safetensors_header(std::span<const std::byte>(len_bytes, 8), file_size, path);
  std::vector<std::byte> bytes(8 + n);
  pread_all(fd.get(), bytes.data(), bytes.size(), 0, path);
  return parse_safetensors_header(bytes, file_size, path);
}

namespace {
// The file of a tensor about to be read (its header read before).
int open_tensor_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw InputError("cannot open safetensors file '" + path + "': " + std::strerror(errno),
                     "check the path");
  return fd;
}
}  // namespace

void read_safetensors_tensor(const std::string& path, const StHeader& h, const StTensor& t,
                             std::vector<float>& out) {
  if (t.dtype != StDType::kF32 && t.dtype != StDType::kBF16 && t.dtype != StDType::kF16)
    throw InputError(strf("safetensors file '%s': tensor '%s' has dtype %s; zt reads F32, BF16 "
                          "and F16 weights",
                          path.c_str(), t.name.c_str(), st_dtype_name(t.dtype)),
                     "convert the model to a floating-point dtype first");
  const Fd fd(open_tensor_file(path));
  const size_t n = static_cast<size_t>(t.numel());
  out.resize(n);
  if (t.dtype == StDType::kF32) {
    pread_all(fd.get(), out.data(), t.nbytes(), h.data_start + t.begin, path);
    return;
  }
  std::vector<uint16_t> half(n);  // [numel] raw 16-bit values
  pread_all(fd.get(), half.data(), t.nbytes(), h.data_start + t.begin, path);
  if (t.dtype == StDType::kBF16) {
    for (size_t i = 0; i < n; ++i) {
      bf16 b;
      b.bits = half[i];
      out[i] = static_cast<float>(b);
    }
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = f16::to_float(half[i]);
  }
}

void read_safetensors_bytes(const std::string& path, const StHeader& h, const StTensor& t,
                            std::vector<uint8_t>& out, bool any_dtype) {
  if (t.dtype != StDType::kU8 && !any_dtype)
    throw InputError(strf("safetensors file '%s': tensor '%s' has dtype %s, not U8",
                          path.c_str(), t.name.c_str(), st_dtype_name(t.dtype)),
                     "MXFP4 blocks and scales are U8 tensors (as openai/gpt-oss's files)");
  const Fd fd(open_tensor_file(path));
  out.resize(static_cast<size_t>(t.nbytes()));
  pread_all(fd.get(), out.data(), t.nbytes(), h.data_start + t.begin, path);
}

// ---- writing ---------------------------------------------------------------------

namespace {

// The header text, padded with spaces to a multiple of 8 bytes.
std::string make_header(const std::vector<StTensorSpec>& specs,
                        const std::map<std::string, std::string>& metadata) {
  json j = json::object();
  uint64_t offset = 0;
  for (const StTensorSpec& s : specs) {
    uint64_t numel = 1;
    for (int64_t d : s.shape) numel *= static_cast<uint64_t>(d);
    const uint64_t nbytes = numel * st_dtype_size(s.dtype);
    j[s.name] = {{"dtype", st_dtype_name(s.dtype)},
                 {"shape", s.shape},
                 {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  if (!metadata.empty()) j["__metadata__"] = metadata;
  std::string text = json_dump(j);
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

DType st_narrow_target(StDType t) {
  return t == StDType::kBF16 ? DType::kBF16 : t == StDType::kF16 ? DType::kF16 : DType::kF32;
}

void refuse_narrowing(const std::string& what,
                      const std::vector<std::pair<std::string, NarrowCount>>& bad, DType to) {
  constexpr size_t kNamed = 4;
  std::string list;
  for (size_t i = 0; i < bad.size() && i < kNamed; ++i)
    list += std::string(i ? "; " : "") + "tensor '" + bad[i].first + "' " +
            narrow_count_text(bad[i].second, to);
  if (bad.size() > kNamed) list += "; and " + std::to_string(bad.size() - kNamed) + " more tensors";
  throw InputError(what + ": " + std::to_string(bad.size()) + " tensor" +
                       (bad.size() == 1 ? " holds" : "s hold") + " values " + std::string(dtype_name(to)) +
                       " cannot represent: " + list,
                   "export in a wider dtype (--dtype f32, or bf16 for values beyond half's "
                   "65504), or give --saturate to write the largest finite value instead of inf "
                   "(NaN stays NaN)");
}

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<StTensorSpec> specs,
                                     const std::map<std::string, std::string>& metadata,
                                     bool saturate)
    : out_(std::move(path), "safetensors file"), specs_(std::move(specs)), saturate_(saturate) {
  std::set<std::string> names;
  for (const StTensorSpec& s : specs_) {
    ZT_CHECK(s.dtype == StDType::kF32 || s.dtype == StDType::kBF16 || s.dtype == StDType::kF16,
             "zt writes F32, BF16 or F16 tensors only", "");
    ZT_CHECK(names.insert(s.name).second, "tensor '" + s.name + "' given twice", "");
  }
  const std::string header = make_header(specs_, metadata);
  std::byte len[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  out_.write(len, 8);
  out_.write(header);
}

void SafetensorsWriter::write(std::span<const float> values) {
  ZT_CHECK(next_ < specs_.size(), "more tensors written than declared", "");
  const StTensorSpec& s = specs_[next_];
  uint64_t numel = 1;
  for (int64_t d : s.shape) numel *= static_cast<uint64_t>(d);
  ZT_CHECK(values.size() == numel, "tensor '" + s.name + "' has the wrong number of values", "");
  if (s.dtype == StDType::kF32) {
    out_.write(values.data(), values.size_bytes());
  } else {
    constexpr size_t kChunk = size_t{1} << 20;  // elements converted per write
    std::vector<uint16_t> half(std::min(values.size(), kChunk));
    NarrowCount count;
    for (size_t first = 0; first < values.size(); first += kChunk) {
      const size_t n = std::min(kChunk, values.size() - first);
      narrow_floats(values.subspan(first, n), st_narrow_target(s.dtype),
                    std::span<uint16_t>(half).first(n), saturate_, count);
      if (!count.clean() && !saturate_)
        refuse_narrowing("safetensors file '" + out_.path() + "'", {{s.name, count}},
                         st_narrow_target(s.dtype));
      out_.write(half.data(), n * sizeof(uint16_t));
    }
  }
  ++next_;
}

void SafetensorsWriter::write_raw(std::span<const uint8_t> bytes) {
  ZT_CHECK(next_ < specs_.size(), "more tensors written than declared", "");
  const StTensorSpec& s = specs_[next_];
  uint64_t numel = 1;
  for (int64_t d : s.shape) numel *= static_cast<uint64_t>(d);
  ZT_CHECK(bytes.size() == numel * st_dtype_size(s.dtype),
           "tensor '" + s.name + "' has the wrong number of bytes", "");
  out_.write(bytes.data(), bytes.size());
  ++next_;
}

void SafetensorsWriter::finish() {
  ZT_CHECK(next_ == specs_.size(), "fewer tensors written than declared", "");
  out_.commit();
}

uint64_t SafetensorsWriter::file_size(const std::vector<StTensorSpec>& specs,
                                      const std::map<std::string, std::string>& metadata) {
  uint64_t data = 0;
  for (const StTensorSpec& s : specs) {
    uint64_t numel = 1;
    for (int64_t d : s.shape) numel *= static_cast<uint64_t>(d);
    data += numel * st_dtype_size(s.dtype);
  }
  return 8 + make_header(specs, metadata).size() + data;
}

}  // namespace zt::ckpt
