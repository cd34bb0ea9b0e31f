// Hugging Face folder <-> zt checkpoint (see include/zt/ckpt/hf_convert.hpp).
#include "zt/ckpt/hf_convert.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "zt/core/escape.hpp"
#include "zt/core/json.hpp"
#include "hf_folder.hpp"
#include "hf_names.hpp"
#include "mxfp4.hpp"
#include "zt/ckpt/adapter_export.hpp"
#include "zt/ckpt/hf_config.hpp"
#include "zt/ckpt/io.hpp"
#include "zt/ckpt/publish.hpp"
#include "zt/ckpt/safetensors.hpp"
#include "zt/ckpt/serial.hpp"
#include "zt/core/checksum.hpp"
#include "zt/core/dtype.hpp"
#include "zt/core/error.hpp"
#include "zt/core/hash.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"
#include "zt/core/progress.hpp"
#include "zt/model/layout.hpp"

namespace zt::ckpt {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kConfigFile = "config.json";

struct DTypeNames { const char* zt; const char* torch; StDType st; };
constexpr DTypeNames kDTypes[] = {{"f32", "float32", StDType::kF32},
                                  {"bf16", "bfloat16", StDType::kBF16},
                                  {"f16", "float16", StDType::kF16}};

const DTypeNames& dtype_by_name(const std::string& name) {
  for (const DTypeNames& d : kDTypes)
    if (name == d.zt || name == d.torch) return d;
  throw InputError("unknown export dtype '" + name + "'", "use --dtype f32, bf16 or f16");
}

const DTypeNames& dtype_by_st(StDType t) {
  for (const DTypeNames& d : kDTypes)
    if (d.st == t) return d;
  throw InputError(std::string("dtype ") + st_dtype_name(t) + " is not a weight dtype zt imports",
                   "zt imports F32, BF16 and F16 tensors");
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void write_text(const fs::path& path, const std::string& text) {
  write_file_safely(path.string(), text, "Hugging Face export");
}

// A model::Config equal to a preset in every shape field takes the preset's name.
void name_after_preset(model::Config& cfg) {
  for (const std::string& name : model::Config::preset_names()) {
    const model::Config p = model::Config::preset(name);
    if (p.family == cfg.family && p.head_dim() == cfg.head_dim() &&
        p.attention_bias == cfg.attention_bias && p.vocab == cfg.vocab &&
        p.hidden == cfg.hidden && p.layers == cfg.layers &&
        p.heads == cfg.heads && p.kv_heads == cfg.kv_heads && p.intermediate == cfg.intermediate &&
        p.context == cfg.context && p.tied_embeddings == cfg.tied_embeddings &&
        p.experts == cfg.experts && p.experts_per_token == cfg.experts_per_token &&
        p.moe_intermediate == cfg.moe_intermediate && p.norm_topk_prob == cfg.norm_topk_prob &&
        p.shared_expert_intermediate == cfg.shared_expert_intermediate &&
        p.decoder_sparse_step == cfg.decoder_sparse_step &&
        p.mlp_only_layers == cfg.mlp_only_layers &&
        p.sliding_window == cfg.sliding_window &&
        p.rope_theta == cfg.rope_theta && p.rope_scaling == cfg.rope_scaling &&
        p.norm_eps == cfg.norm_eps) {
      cfg.name = name;
      return;
    }
  }
  cfg.name = "custom";
}

}  // namespace

std::string hf_shard_name(int k, int n) {
  return strf("model-%05d-of-%05d.safetensors", k, n);
}

HfIndex parse_hf_index(const std::string& json_text, const std::string& where) {
  const std::string what = "index '" + where + "'";
  const json j = parse_json_strict(json_text, what, kIndexHint);
  if (!j.is_object()) throw InputError(what + " is not a JSON object", kIndexHint);
  HfIndex idx;
  if (j.contains("metadata")) {
    const json& m = j.at("metadata");
    if (!m.is_object()) throw InputError(what + ": 'metadata' is not an object", kIndexHint);
    if (m.contains("total_size")) {
      const json& t = m.at("total_size");
      if (!t.is_number_unsigned())
        throw InputError(what + ": 'metadata.total_size' is " + describe_json(t) +
                             ", not a non-negative integer",
                         kIndexHint);
      idx.total_size = t.get<uint64_t>();
    }
    if (m.contains(kExportIdKey) && m.at(kExportIdKey).is_string())
      idx.export_id = m.at(kExportIdKey).get<std::string>();
  }
  if (!j.contains("weight_map")) throw InputError(what + " has no 'weight_map'", kIndexHint);
  const json& wm = j.at("weight_map");
  if (!wm.is_object() || wm.empty())
    throw InputError(what + ": 'weight_map' is not a non-empty object", kIndexHint);
  for (const auto& [name, file] : wm.items()) {
    const std::string field = what + ": 'weight_map." + name + "'";
    if (name.empty()) throw InputError(what + ": 'weight_map' names an empty tensor", kIndexHint);
    if (!file.is_string()) throw InputError(field + " is " + describe_json(file) + ", not a file name", kIndexHint);
    const std::string f = file.get<std::string>();
    const bool escapes = f.empty() || f == "." || f.find('/') != std::string::npos ||
                         f.find('\\') != std::string::npos || f.find("..") != std::string::npos ||
                         f.find('\0') != std::string::npos;
    if (escapes)
      throw InputError(field + " is \"" + f +
                           "\": a shard must be a plain file name in the model's folder (no "
                           "path separators, no '..')",
                       kIndexHint);
    idx.weight_map[name] = f;
  }
  return idx;
}

// The id (above): a hash of the bytes the export writes (every tensor in the export's
// dtype, XXH3 as checkpoints use), the dtype and the shard plan. Two exports of the same
// values with the same options are byte-identical files (mixing them is harmless); any
// other pair differs. Narrowing to BF16/F16 goes through narrow_floats (as the writer's):
// the tensors with values the dtype cannot represent are refused here, before any file
// is touched, unless `saturate`.
std::string export_id_of(const std::vector<std::vector<float>>& units,
                         const model::ParamLayout& layout, const std::vector<HfPiece>& pieces,
                         const DTypeNames& dt, int shards, uint64_t max_shard_size, bool saturate) {
  uint64_t h = fnv1a(std::string(dt.zt) + "/" + std::to_string(shards) + "/" +
                     std::to_string(max_shard_size));
  constexpr size_t kChunk = size_t{1} << 20;  // elements converted at a time
  std::vector<uint16_t> half;
  std::vector<std::pair<std::string, NarrowCount>> bad;
  for (const HfPiece& piece : pieces) {
    const model::TensorInfo& t = layout.tensors()[static_cast<size_t>(piece.tensor)];
    const std::span<const float> p = std::span<const float>(units[static_cast<size_t>(t.unit)])
                                         .subspan(static_cast<size_t>(t.offset + piece.offset),
                                                  static_cast<size_t>(piece.numel));
    NarrowCount count;
    for (size_t first = 0; first < p.size(); first += kChunk) {
      const size_t n = std::min(kChunk, p.size() - first);
      std::span<const std::byte> bytes = std::as_bytes(p.subspan(first, n));
      if (dt.st != StDType::kF32) {
        half.resize(n);
        narrow_floats(p.subspan(first, n), st_narrow_target(dt.st), half, saturate, count);
        bytes = std::as_bytes(std::span<const uint16_t>(half));
      }
      h = mix64(h ^ xxh3_sum(bytes));
    }
    if (!count.clean()) bad.emplace_back(piece.name, count);
  }
  if (!bad.empty() && !saturate)
    refuse_narrowing(std::string("h5-to-hf --dtype ") + dt.zt, bad, st_narrow_target(dt.st));
  if (!bad.empty()) {
    NarrowCount all;
    for (const auto& [name, c] : bad) {
      all.overflow += c.overflow;
      all.nan += c.nan;
      all.largest = std::max(all.largest, c.largest);
    }
    log::warn(strf("--saturate: %s in %zu tensors (written as the largest finite %s value; "
                   "NaN stays NaN)",
                   narrow_count_text(all, st_narrow_target(dt.st)).c_str(), bad.size(), dt.zt));
  }
  return strf("%016llx", static_cast<unsigned long long>(h));
}

// ---- export ----------------------------------------------------------------------

Weights read_checkpoint_weights(const std::string& checkpoint, const std::string& base) {
  const std::string ckpt_file = resolve_checkpoint(checkpoint, "checkpoint");
  // The parameters only (a training file's moments stay on disk), every checksum verified.
  const Header header = read_header(MPI_COMM_NULL, ckpt_file);
  if (header.contents == kContentsAdapters) return read_merged_weights(ckpt_file, base);
  if (!base.empty())
    throw InputError("--base '" + base + "' is given, but checkpoint '" + ckpt_file +
                         "' holds a whole model (contents \"" + header.contents + "\"), not adapters",
                     "--base names the base of a LoRA adapter checkpoint; drop it");
  Weights w{header.config, {}, ckpt_file, header.source_dtype, header.tokenizer};
  const model::ParamLayout layout(w.config);
  w.units.resize(static_cast<size_t>(layout.num_units()));  // [units][numel]
  std::vector<UnitTarget> targets;
  for (int u = 0; u < layout.num_units(); ++u) {
    std::vector<float>& p = w.units[static_cast<size_t>(u)];
    p.resize(static_cast<size_t>(layout.unit(u).numel));
    targets.push_back(UnitTarget{0, layout.unit(u).numel, p, {}, {}});
  }
  read_file(MPI_COMM_NULL, ckpt_file, w.config, targets, ReadWhat::kParams);
  w.carried = read_carried(ckpt_file);
  return w;
}

HfExportResult export_hf(const std::string& checkpoint, const std::string& outdir,
                         const HfExportOptions& options) {
  if (options.max_shard_size == 0)
    throw InputError("--max-shard-size is 0", "give a size such as 5G or 500M");
  const Weights weights = read_checkpoint_weights(checkpoint, options.base);
  const model::Config& cfg = weights.config;
  const model::ParamLayout layout(cfg);
  const std::vector<std::vector<float>>& params = weights.units;  // [units][numel]

  std::string dtype = options.dtype;
  if (dtype.empty()) dtype = weights.source_dtype.empty() ? "f32" : weights.source_dtype;
  const DTypeNames& dt = dtype_by_name(dtype);
  if (options.before_write) options.before_write(weights.tokenizer);

  // Plan the shards: the folder's tensors (hf_pieces: the layout's, Mixtral's experts one
  // file tensor each) in layout order, a new shard when the next tensor would push the
  // current one past max_shard_size.
  // A multimodal checkpoint: the text model under the folder's names, then the carried
  // tensors (indices from pieces.size() on) as they were read.
  std::vector<HfPiece> pieces = hf_pieces(layout);
  const HfCarried* carried = weights.carried.get();
  const size_t ncarried = carried ? carried->tensors.size() : 0;
  if (carried)
    for (HfPiece& p : pieces) p.name = multimodal_name(*carried, p.name);
  std::vector<std::vector<int>> shards;  // piece indices of each shard
  uint64_t shard_bytes = 0, total = 0;
  for (size_t i = 0; i < pieces.size() + ncarried; ++i) {
    const uint64_t bytes =
        i < pieces.size() ? static_cast<uint64_t>(pieces[i].numel) * st_dtype_size(dt.st)
                          : carried->tensors[i - pieces.size()].bytes.size();
    if (shards.empty() || (shard_bytes > 0 && shard_bytes + bytes > options.max_shard_size)) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(static_cast<int>(i));
    shard_bytes += bytes;
    total += bytes;
  }

  const int n = static_cast<int>(shards.size());
  std::string export_id =
      export_id_of(params, layout, pieces, dt, n, options.max_shard_size, options.saturate);
  if (carried) {  // the carried tensors' bytes are part of what the export holds
    uint64_t h = std::stoull(export_id, nullptr, 16);
    for (const CarriedTensor& t : carried->tensors)
      h = mix64(h ^ xxh3_sum(std::as_bytes(std::span<const uint8_t>(t.bytes))));
    export_id = strf("%016llx", static_cast<unsigned long long>(h));
  }

  std::error_code ec, is_dir_ec;
  fs::create_directories(outdir, ec);
  if (ec || !fs::is_directory(outdir, is_dir_ec))
    throw InputError("cannot create output folder '" + outdir + "'" +
                         (ec ? ": " + ec.message() : std::string()),
                     "give a folder path that is writable (it is created when missing)");
  const fs::path dir(outdir);
  HfExportResult r;
  r.tokenizer = weights.tokenizer;
  r.dtype = dt.zt;
  r.tensors = static_cast<int64_t>(pieces.size() + ncarried);
  r.tensor_bytes = total;

  // An export is whole or visibly absent (issue 36, class 4): the earlier export's model
  // files go first (its index or model.safetensors, which make a folder loadable, and
  // every shard), then config.json and the shards, and the file that makes the folder
  // loadable (the index, or model.safetensors) last. Killed anywhere, the folder holds no
  // loadable mixture; each file carries this export's id (hf-to-h5 checks it).
  static const std::regex shard_name(R"(model-\d+-of-\d+\.safetensors)");
  int removed = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f == kIndexFile || f == kSingleFile || std::regex_match(f, shard_name)) {
      unlink_if_there(e.path().string(), "Hugging Face export");
      ++removed;
    }
  }
  if (removed > 0)
    log::warn(strf("removed the %d model file%s of an earlier export in '%s'", removed,
                   removed == 1 ? "" : "s", outdir.c_str()));
  write_text(dir / kConfigFile, carried ? multimodal_config(*carried, hf_config_json(cfg, dt.torch),
                                                           dt.torch)
                                        : hf_config_json(cfg, dt.torch));
  r.export_id = export_id;
  Progress progress("h5-to-hf", total, ProgressUnit::kBytes);
  progress.count_items(pieces.size() + ncarried, "tensors");
  json weight_map = json::object();
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {kExportIdKey, export_id}};
  std::vector<float> reordered;
  for (int k = 0; k < n; ++k) {
    const std::string file = n == 1 ? kSingleFile : hf_shard_name(k + 1, n);
    std::vector<StTensorSpec> specs;
    for (int i : shards[static_cast<size_t>(k)]) {
      const size_t c = static_cast<size_t>(i) - pieces.size();  // a carried tensor's index
      specs.push_back(static_cast<size_t>(i) < pieces.size()
                          ? StTensorSpec{pieces[static_cast<size_t>(i)].name, dt.st,
                                         pieces[static_cast<size_t>(i)].shape}
                          : StTensorSpec{carried->tensors[c].name, carried->tensors[c].dtype,
                                         carried->tensors[c].shape});
      weight_map[specs.back().name] = file;
    }
    SafetensorsWriter w((dir / file).string(), specs, metadata, options.saturate);
    for (int i : shards[static_cast<size_t>(k)]) {
      if (static_cast<size_t>(i) >= pieces.size()) {  // carried: the bytes as read
        const std::vector<uint8_t>& b = carried->tensors[static_cast<size_t>(i) - pieces.size()].bytes;
        w.write_raw(b);
        progress.advance(b.size(), 1);
        continue;
      }
      const HfPiece& piece = pieces[static_cast<size_t>(i)];
      const model::TensorInfo& t = layout.tensors()[static_cast<size_t>(piece.tensor)];
      const std::vector<float>& unit = params[static_cast<size_t>(t.unit)];
      const std::span<const float> zt_order = std::span<const float>(unit).subspan(
          static_cast<size_t>(t.offset + piece.offset), static_cast<size_t>(piece.numel));
      if (piece.order == HfPiece::kSame) {
        w.write(zt_order);
      } else {  // gpt-oss's experts: the file's order
        reordered.resize(zt_order.size());
        zt_to_hf(piece, zt_order.data(), reordered.data());
        w.write(reordered);
      }
      progress.advance(static_cast<uint64_t>(piece.numel) * st_dtype_size(dt.st), 1);
    }
    w.finish();
    r.files.push_back(file);
  }
  if (n > 1) {
    const json index = {{"metadata", {{"total_size", total}, {kExportIdKey, export_id}}},
                        {"weight_map", weight_map}};
    write_text(dir / kIndexFile, json_dump(index, 2) + "\n");
    r.files.push_back(kIndexFile);
  }
  r.files.push_back(kConfigFile);
  progress.finish();
  return r;
}

// ---- import ----------------------------------------------------------------------

namespace {

// Every tensor of the model is there, with the shape config.json implies and a float
// dtype; nothing unknown is.
void check_tensors(const model::ParamLayout& layout, const std::vector<HfPiece>& pieces,
                   const std::map<std::string, Located>& found, const fs::path& dir,
                   const std::string& hfdir, const HfCarried* carried) {
  std::set<std::string> names;
  for (const HfPiece& t : pieces) {
    names.insert(t.name);
    const auto it = found.find(t.name);
    const auto blocks = found.find(t.name + "_blocks"), scales = found.find(t.name + "_scales");
    if (it == found.end() && t.order != HfPiece::kSame && blocks != found.end()) {  // MXFP4
      if (scales == found.end())
        throw InputError("tensor '" + t.name + "_scales' is missing from '" + hfdir + "'",
                         "MXFP4 weights come as *_blocks and *_scales; is the folder complete?");
      check_mxfp4_shapes(t.name, t.shape, blocks->second.tensor.shape, scales->second.tensor.shape,
                         blocks->second.file, (dir / kConfigFile).string());
      names.insert({t.name + "_blocks", t.name + "_scales"});
      continue;
    }
    if (it == found.end())
      throw InputError("tensor '" + (carried ? multimodal_name(*carried, t.name) : t.name) +
                           "' is missing from '" + hfdir + "'",
                       "config.json describes a model with this tensor; is the folder complete?");
    const StTensor& st = it->second.tensor;
    if (st.shape != t.shape)
      throw InputError("tensor '" + st.name + "' in '" + it->second.file + "' has shape " +
                           shape_str(st.shape) + ", but '" + (dir / kConfigFile).string() +
                           "' implies " + shape_str(t.shape),
                       "the config and the weights come from different models");
    if (st.dtype != StDType::kF32 && st.dtype != StDType::kBF16 && st.dtype != StDType::kF16)
      throw InputError("tensor '" + st.name + "' in '" + it->second.file + "' has dtype " +
                           st_dtype_name(st.dtype) + "; zt imports F32, BF16 and F16 weights",
                       "convert the model to a floating-point dtype first");
  }
  for (const auto& [name, loc] : found) {
    if (names.count(name)) continue;
    if (name.size() > 21 && name.ends_with(".rotary_emb.inv_freq")) continue;  // derived from rope_theta
    if (name == "lm_head.weight" && layout.config().tied_embeddings) continue;  // checked equal on read
    throw InputError("tensor '" + loc.tensor.name + "' in '" + loc.file + "' is not part of zt's " +
                         layout.config().family + " model",
                     "config.json's model_type and attention_bias decide which biases and norms "
                     "the model has (docs/model.md, family table); do config and weights match?");
  }
}

// The weights in the units' flat buffers (ParamLayout order); elements per source dtype
// into *dtype_elems. A tied model's lm_head.weight, when present, must equal the embedding.
std::vector<std::vector<float>> read_units(const model::ParamLayout& layout,
                                           const std::vector<HfPiece>& pieces,
                                           const std::map<std::string, Located>& found,
                                           const fs::path& dir,
                                           std::map<StDType, int64_t>* dtype_elems,
                                           Progress& progress) {
  std::vector<std::vector<float>> units(static_cast<size_t>(layout.num_units()));
  for (int u = 0; u < layout.num_units(); ++u)
    units[static_cast<size_t>(u)].resize(static_cast<size_t>(layout.unit(u).numel));
  std::vector<float> buf;  // [numel] one tensor
  std::map<std::string, StHeader> headers;
  auto header_of = [&](const std::string& path) -> const StHeader& {
    auto it = headers.find(path);
    if (it == headers.end()) it = headers.emplace(path, read_safetensors_header(path)).first;
    return it->second;
  };
  std::vector<uint8_t> blocks, scales;
  for (const HfPiece& t : pieces) {
    const bool mxfp4 = !found.count(t.name);  // *_blocks and *_scales (check_tensors)
    const Located& loc = found.at(mxfp4 ? t.name + "_blocks" : t.name);
    const model::TensorInfo& into = layout.tensors()[static_cast<size_t>(t.tensor)];
    if (mxfp4) {  // dequantized as transformers does, counted as its bf16
      const Located& sc = found.at(t.name + "_scales");
      read_safetensors_bytes(loc.file, header_of(loc.file), loc.tensor, blocks);
      read_safetensors_bytes(sc.file, header_of(sc.file), sc.tensor, scales);
      buf = mxfp4_dequantize(blocks, scales, t.shape[0], t.shape[2], t.shape[1] / 32);
    } else {
      read_safetensors_tensor(loc.file, header_of(loc.file), loc.tensor, buf);
    }
    const auto nonfinite = std::find_if(buf.begin(), buf.end(), [](float x) { return !std::isfinite(x); });
    if (nonfinite != buf.end())
      throw InputError(strf("tensor '%s' in '%s' (model folder '%s') holds a non-finite value "
                            "(%g at element %lld)",
                            (mxfp4 ? t.name : loc.tensor.name).c_str(), loc.file.c_str(),
                            dir.string().c_str(),
                            static_cast<double>(*nonfinite),
                            static_cast<long long>(nonfinite - buf.begin())),
                       "the model's weights are damaged (NaN or infinity); download or export "
                       "the model again");
    hf_to_zt(t, buf.data(),
             units[static_cast<size_t>(into.unit)].data() + into.offset + t.offset);
    (*dtype_elems)[mxfp4 ? StDType::kBF16 : loc.tensor.dtype] += t.numel;
    progress.advance(static_cast<uint64_t>(t.numel) * (mxfp4 ? 2 : st_dtype_size(loc.tensor.dtype)), 1);
  }
  const std::string embed = "model.embed_tokens.weight";
  if (layout.config().tied_embeddings && found.count("lm_head.weight")) {
    const Located& loc = found.at("lm_head.weight");
    const std::string& head = loc.tensor.name;  // the file's names
    const std::string& emb = found.at(embed).tensor.name;
    if (loc.tensor.shape != layout.find(embed).shape)
      throw InputError("tied model: '" + head + "' in '" + loc.file + "' has shape " +
                           shape_str(loc.tensor.shape) + ", unlike '" + emb + "'",
                       "with tie_word_embeddings the head is the embedding");
    read_safetensors_tensor(loc.file, header_of(loc.file), loc.tensor, buf);
    const std::vector<float>& e = units[model::ParamLayout::kEmbeddingUnit];
    if (std::memcmp(buf.data(), e.data(), buf.size() * sizeof(float)) != 0)
      throw InputError("'" + (dir / kConfigFile).string() +
                           "' says tie_word_embeddings, but '" + head + "' in '" + loc.file +
                           "' differs from '" + emb + "'",
                       "set tie_word_embeddings to false in config.json if the head is its own "
                       "matrix");
  }
  return units;
}

// The source dtype: the one holding most elements (mixed files are rare).
std::string source_dtype_of(const std::map<StDType, int64_t>& dtype_elems, const std::string& hfdir) {
  StDType source = StDType::kF32;
  int64_t most = -1;
  for (const auto& [t, count] : dtype_elems)
    if (count > most) {
      most = count;
      source = t;
    }
  if (dtype_elems.size() > 1)
    log::warn("'" + hfdir + "' mixes dtypes; source_dtype is " + dtype_by_st(source).zt +
              " (most elements); h5-to-hf will write every tensor in it");
  return dtype_by_st(source).zt;
}

}  // namespace

Weights read_hf_weights(const std::string& hfdir, HfImportResult* info) {
  const fs::path dir(hfdir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError("Hugging Face model folder '" + hfdir + "' not found (or not a folder)",
                     "give the folder that holds config.json and model.safetensors (or "
                     "model.safetensors.index.json and its shards)");
  // A multimodal folder: its text model (text_config, language_model.*), the rest carried.
  const std::string config_path = (dir / kConfigFile).string();
  const std::string config_text = read_regular_file(
      config_path, "config", "a Hugging Face model folder holds config.json beside its weights");
  const std::optional<std::string> text_config = multimodal_text_config(config_text, config_path);
  HfConfig hc = text_config ? parse_hf_config(*text_config, config_path + " (text_config)")
                            : parse_hf_config(config_text, config_path);
  Weights w{hc.model, {}, hfdir, ""};
  name_after_preset(w.config);
  const model::ParamLayout layout(w.config);

  HfImportResult r;
  std::map<std::string, Located> found = locate_tensors(hfdir, &r.files);
  if (text_config) w.carried = split_multimodal(&found, config_text, hfdir);
  // Mixtral's experts: per-expert w1/w3/w2 (the published form), or transformers 5's fused
  // tensors when the folder holds those.
  bool fused = false;
  for (const model::TensorInfo& t : layout.tensors())
    if (t.name.ends_with("mlp.experts.gate_up_proj")) fused = found.count(t.name) > 0;
  const std::vector<HfPiece> pieces = hf_pieces(layout, fused);
  check_tensors(layout, pieces, found, dir, hfdir, w.carried.get());
  std::map<StDType, int64_t> dtype_elems;
  // Progress over the safetensors bytes read.
  uint64_t source_bytes = 0;
  for (const HfPiece& t : pieces)
    source_bytes += static_cast<uint64_t>(t.numel) *
                    (found.count(t.name) ? st_dtype_size(found.at(t.name).tensor.dtype) : 2);
  Progress progress("hf-to-h5", source_bytes, ProgressUnit::kBytes);
  progress.count_items(pieces.size(), "tensors");
  w.units = read_units(layout, pieces, found, dir, &dtype_elems, progress);
  w.source_dtype = r.source_dtype = source_dtype_of(dtype_elems, hfdir);
  r.tensors = static_cast<int64_t>(pieces.size());
  r.params = layout.total_numel();
  r.model_name = w.config.name;
  progress.finish();
  if (info) *info = std::move(r);
  return w;
}

HfImportResult import_hf(const std::string& hfdir, const std::string& out_h5) {
  HfImportResult r;
  const Weights w = read_hf_weights(hfdir, &r);
  WeightsOptions wo;
  wo.source_dtype = w.source_dtype;
  if (w.carried) wo.also_write = [&w](const std::string& path) { write_carried(path, *w.carried); };
  write_weights_only(out_h5, w.config, w.units, wo);
  return r;
}

Weights load_weights(const std::string& path, const std::string& base) {
  const std::string resolved = resolve_checkpoint(path, "--weights", /*hf_folder=*/true);
  std::error_code ec;
  if (fs::is_directory(resolved, ec)) {
    if (!base.empty())
      throw InputError("--base '" + base + "' is given, but '" + path + "' is a Hugging Face "
                       "model folder, not a LoRA adapter checkpoint",
                       "--base names the base of an adapter checkpoint; drop it");
    return read_hf_weights(resolved);
  }
  return read_checkpoint_weights(resolved, base);
}

}  // namespace zt::ckpt
