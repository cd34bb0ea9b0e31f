// The tensors of a Hugging Face folder and a multimodal folder's carried part (hf_folder.hpp).
#include "hf_folder.hpp"

#include <hdf5.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "zt/ckpt/hf_convert.hpp"
#include "zt/core/error.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/files.hpp"
#include "zt/core/json.hpp"
#include "zt/core/log.hpp"
#include "zt/h5/h5.hpp"

namespace zt::ckpt {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Every tensor of the folder, located: one file, or an index and its shards (as
// transformers: model.safetensors when present, else the index). The files into *files.
std::map<std::string, Located> locate_tensors(const std::string& hfdir,
                                              std::vector<std::string>* files) {
  const fs::path dir(hfdir);
  std::map<std::string, Located> found;
  std::error_code ec;
  const fs::path index_path = dir / kIndexFile;
  if (!fs::exists(dir / kSingleFile, ec) && fs::exists(index_path, ec)) {
    const HfIndex idx = parse_hf_index(read_regular_file(index_path.string(), "model folder file", "check the model folder"),
                                       index_path.string());
    std::map<std::string, std::set<std::string>> by_shard;  // shard -> tensors it should hold
    for (const auto& [name, file] : idx.weight_map) by_shard[file].insert(name);
    uint64_t total = 0;
    // The export every shard must come from: the index's id, else the first shard's.
    std::string export_id = idx.export_id, id_from = index_path.string();
    for (const auto& [file, names] : by_shard) {
      const std::string path = (dir / file).string();
      const StHeader h = read_safetensors_header(path);
      const auto id = h.metadata.find(kExportIdKey);
      const std::string shard_id = id == h.metadata.end() ? "" : id->second;
      if (!export_id.empty() && shard_id != export_id)
        throw InputError("shard '" + path + "' has " + kExportIdKey + " " +
                             (shard_id.empty() ? "(none)" : shard_id) + " but '" + id_from +
                             "' has " + export_id + ": the folder mixes files of two exports "
                             "(an export that was interrupted, or files copied in)",
                         "export the checkpoint again (zt convert h5-to-hf CKPT OUTDIR --force), "
                         "or copy the whole folder of one export");
      if (export_id.empty() && !shard_id.empty()) {
        export_id = shard_id;
        id_from = path;
      }
      for (const StTensor& t : h.tensors) {
        if (!names.count(t.name))
          throw InputError("shard '" + path + "' holds tensor '" + t.name + "', which '" +
                               index_path.string() + "' ('weight_map') does not place there",
                           kIndexHint);
        found[t.name] = Located{path, t};
        total += t.nbytes();
      }
      for (const std::string& name : names)
        if (!h.find(name))
          throw InputError(strf("'%s' ('weight_map') places tensor '%s' in '%s', which does not "
                                "hold it",
                                index_path.string().c_str(), name.c_str(), path.c_str()),
                           kIndexHint);
      files->push_back(path);
    }
    if (idx.total_size && *idx.total_size != total)
      log::warn(strf("'%s': metadata.total_size is %llu but the shards' tensors hold %llu bytes",
                     index_path.string().c_str(), static_cast<unsigned long long>(*idx.total_size),
                     static_cast<unsigned long long>(total)));
    return found;
  }
  const std::string path = (dir / kSingleFile).string();
  if (!fs::exists(path, ec))
    throw InputError("'" + hfdir + "' holds neither " + kSingleFile + " nor " + kIndexFile,
                     "zt imports safetensors weights; convert a pytorch_model.bin first "
                     "(e.g. load it in transformers and save_pretrained(safe_serialization=True))");
  const StHeader h = read_safetensors_header(path);
  for (const StTensor& t : h.tensors) found[t.name] = Located{path, t};
  files->push_back(path);
  return found;
}

namespace {

constexpr const char* kMultimodalHint =
    "a multimodal folder (Gemma3ForConditionalGeneration, Qwen3_5ForConditionalGeneration, "
    "Qwen3_5MoeForConditionalGeneration) "
    "holds its text model in config.json's text_config and its tensors beside the vision "
    "tower's, as transformers' save_pretrained writes it; is the folder complete?";
constexpr const char* kCarriedHint =
    "the weights file's /hf_carried group holds a multimodal folder's vision tower; convert "
    "the folder again (zt convert hf-to-h5)";

using Names = std::vector<std::string>;

// vision_config's integer `key`, `fallback` when it is absent (or not an integer).
int64_t int_or(const json& vc, const char* key, int64_t fallback) {
  return vc.is_object() && vc.contains(key) && vc.at(key).is_number_integer()
             ? vc.at(key).get<int64_t>()
             : fallback;
}

// SigLIP's tensors (Gemma 3's vision tower and projector) that vision_config implies, in
// the file's names without transformers' run-time "model." (both forms are transformers').
Names siglip_names(const json& vc, const std::set<std::string>& carried) {
  std::set<std::string> have;
  for (const std::string& n : carried)
    have.insert(n.starts_with("model.") ? n.substr(std::string_view("model.").size()) : n);
  bool vision_model = false;
  for (const std::string& n : have) vision_model = vision_model || n.starts_with("vision_tower.vision_model.");
  const std::string prefix = vision_model ? "vision_tower.vision_model." : "vision_tower.";
  const int64_t layers = int_or(vc, "num_hidden_layers", 12);  // SiglipVisionConfig's default
  Names n = {"embeddings.patch_embedding.weight", "embeddings.patch_embedding.bias",
             "embeddings.position_embedding.weight", "post_layernorm.weight",
             "post_layernorm.bias"};
  for (int64_t l = 0; l < layers; ++l)
    for (const char* t : {"layer_norm1", "layer_norm2", "mlp.fc1", "mlp.fc2", "self_attn.q_proj",
                          "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj"})
      for (const char* wb : {"weight", "bias"})
        n.push_back("encoder.layers." + std::to_string(l) + "." + t + "." + wb);
  for (std::string& s : n) s = prefix + s;
  n.push_back("multi_modal_projector.mm_input_projection_weight");
  n.push_back("multi_modal_projector.mm_soft_emb_norm.weight");
  Names missing;
  for (const std::string& s : n)
    if (!have.count(s)) missing.push_back(s);
  return missing;
}

// Qwen3.5's vision tower (model.visual.*) that vision_config implies.
Names qwen35_vision_names(const json& vc, const std::set<std::string>& carried) {
  const int64_t depth = int_or(vc, "depth", 27);  // Qwen3_5VisionConfig's default
  Names n = {"patch_embed.proj.weight", "patch_embed.proj.bias", "pos_embed.weight"};
  for (int64_t l = 0; l < depth; ++l)
    for (const char* t : {"norm1", "norm2", "attn.qkv", "attn.proj", "mlp.linear_fc1", "mlp.linear_fc2"})
      for (const char* wb : {"weight", "bias"})
        n.push_back("blocks." + std::to_string(l) + "." + t + "." + wb);
  for (const char* t : {"merger.norm", "merger.linear_fc1", "merger.linear_fc2"})
    for (const char* wb : {"weight", "bias"}) n.push_back(std::string(t) + "." + wb);
  Names missing;
  for (std::string& s : n)
    if (!carried.count("model.visual." + s)) missing.push_back("model.visual." + s);
  return missing;
}

// A multimodal class zt imports the text model of, the rest carried: one row each.
struct MultimodalForm {
  std::string_view model_type;    // config.json's
  std::string_view text_type;     // text_config's
  std::string_view architecture;  // transformers' class
  Names text_prefixes;            // the file's prefixes of zt's model.X (as read)
  Names head_names;               // the file's names of lm_head.weight (as read)
  Names carried_prefixes;         // the tensors carried through unchanged
  std::string_view export_prefix; // the export's name of zt's model.X is export_prefix + X
  std::string_view export_head;   // and of lm_head.weight
  Names (*missing)(const json& vision_config, const std::set<std::string>& carried);
};

// Qwen3.5's folder, dense or MoE (the same vision tower and names; the text model's
// experts are the text family's tensors): model.language_model.*, lm_head.weight and
// model.visual.*, and the published checkpoints add the multi-token prediction head mtp.*
// (transformers ignores it).
MultimodalForm qwen35_form(std::string_view model_type, std::string_view text_type,
                           std::string_view architecture) {
  return {model_type, text_type, architecture, {"model.language_model."}, {"lm_head.weight"},
          {"model.visual.", "mtp."}, "model.language_model.", "lm_head.weight",
          qwen35_vision_names};
}

// Gemma 3 writes language_model.model.* (transformers' run-time names model.language_model.*
// read too).
const std::vector<MultimodalForm>& multimodal_forms() {
  static const std::vector<MultimodalForm> forms = {
      {"gemma3", "gemma3_text", "Gemma3ForConditionalGeneration",
       {"language_model.model.", "model.language_model."},
       {"language_model.lm_head.weight", "lm_head.weight"},
       {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
        "model.multi_modal_projector."},
       "language_model.model.", "language_model.lm_head.weight", siglip_names},
      qwen35_form("qwen3_5", "qwen3_5_text", "Qwen3_5ForConditionalGeneration"),
      qwen35_form("qwen3_5_moe", "qwen3_5_moe_text", "Qwen3_5MoeForConditionalGeneration"),
  };
  return forms;
}

const MultimodalForm* find_form(const json& j) {
  if (!j.is_object() || !j.contains("model_type")) return nullptr;
  for (const MultimodalForm& f : multimodal_forms())
    if (j.at("model_type") == f.model_type) return &f;
  return nullptr;
}

json parse_config(const std::string& text, const std::string& where) {
  return parse_json_strict(text, "config '" + where + "'", kMultimodalHint);
}

// The row of a carried part (its config.json's model_type).
const MultimodalForm& form_of(const HfCarried& carried, const std::string& where) {
  const MultimodalForm* f = find_form(parse_config(carried.config_json, where));
  if (!f)
    throw InputError(where + ": the carried config.json is no multimodal model zt knows",
                     kCarriedHint);
  return *f;
}

// "a*, b*" of names {a, b} and tail "*".
std::string listed(const Names& names, const char* tail) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n + tail;
  return s;
}

// zt's name of a text tensor, "" for any other.
std::string text_name(const MultimodalForm& f, const std::string& name) {
  for (const std::string& p : f.text_prefixes)
    if (name.starts_with(p)) return std::string("model.").append(name, p.size());
  for (const std::string& h : f.head_names)
    if (name == h) return "lm_head.weight";
  return "";
}

}  // namespace

std::optional<std::string> multimodal_text_config(const std::string& config_text,
                                                  const std::string& where) {
  const json j = parse_config(config_text, where);
  const MultimodalForm* f = find_form(j);
  if (!f) return std::nullopt;
  const std::string type(f->model_type), text_type(f->text_type);
  if (!j.contains("text_config") || !j.at("text_config").is_object())
    throw InputError("config '" + where + "': 'text_config' is " +
                         (j.contains("text_config") ? describe_json(j.at("text_config"))
                                                    : std::string("missing")) +
                         "; a " + type + " model's text model is configured there",
                     kMultimodalHint);
  json t = j.at("text_config");
  if (!t.contains("model_type")) t["model_type"] = text_type;
  if (t.at("model_type") != text_type)
    throw InputError("config '" + where + "': 'text_config.model_type' is " +
                         describe_json(t.at("model_type")) + "; a " + type +
                         " text model is " + text_type,
                     kMultimodalHint);
  // The top level's tie_word_embeddings is the model's (transformers writes both).
  if (j.contains("tie_word_embeddings")) t["tie_word_embeddings"] = j.at("tie_word_embeddings");
  t.erase("architectures");
  return t.dump();
}

std::shared_ptr<const HfCarried> split_multimodal(std::map<std::string, Located>* found,
                                                  const std::string& config_text,
                                                  const std::string& hfdir) {
  auto carried = std::make_shared<HfCarried>();
  carried->config_json = config_text;
  const json j = parse_config(config_text, hfdir + "/config.json");
  const MultimodalForm& f = *find_form(j);
  std::map<std::string, Located> text;
  std::set<std::string> names;
  for (const auto& [name, loc] : *found) {
    const std::string t = text_name(f, name);
    if (!t.empty()) {
      text[t] = loc;
      continue;
    }
    bool carry = false;
    for (const std::string& p : f.carried_prefixes) carry = carry || name.starts_with(p);
    if (!carry)
      throw InputError("tensor '" + name + "' in '" + loc.file + "' is neither the text model's (" +
                           listed(f.text_prefixes, "*") + ", " + listed(f.head_names, "") +
                           ") nor a part zt carries through unchanged (" +
                           listed(f.carried_prefixes, "*") + ")",
                       "zt imports " + std::string(f.architecture) + " folders as transformers' "
                       "save_pretrained writes them; remove the tensor, or load the folder in "
                       "transformers and save it again");
    names.insert(name);
    CarriedTensor c{name, loc.tensor.dtype, loc.tensor.shape, {}};
    read_safetensors_bytes(loc.file, read_safetensors_header(loc.file), loc.tensor, c.bytes,
                           /*any_dtype=*/true);
    carried->tensors.push_back(std::move(c));
  }
  const json vc = j.contains("vision_config") ? j.at("vision_config") : json();
  for (const std::string& n : f.missing(vc, names))
    throw InputError("tensor '" + n + "' is missing from '" + hfdir + "': '" + hfdir +
                         "/config.json' ('vision_config') implies it",
                     kMultimodalHint);
  *found = std::move(text);
  return carried;
}

std::string multimodal_name(const HfCarried& carried, const std::string& zt_name) {
  const MultimodalForm& f = form_of(carried, "group /hf_carried");
  if (zt_name == "lm_head.weight") return std::string(f.export_head);
  return std::string(f.export_prefix).append(zt_name, std::string_view("model.").size());
}

std::string multimodal_module(const std::string& zt_module) {
  if (!zt_module.starts_with("model.")) return zt_module;
  return "model.language_model." + zt_module.substr(std::string_view("model.").size());
}

std::string multimodal_config(const HfCarried& carried, const std::string& text_json,
                              const std::string& torch_dtype) {
  json j = json::parse(carried.config_json);
  json t = j.at("text_config");
  // zt's values of the text model's fields; the rest as the folder had them (Gemma's
  // hidden_activation, the initializer_range it was made with, ...).
  const json zt_text = json::parse(text_json);
  for (auto it = zt_text.begin(); it != zt_text.end(); ++it)
    if (it.key() != "architectures" && it.key() != "torch_dtype" &&
        it.key() != "initializer_range" && it.key() != "hidden_act")
      t[it.key()] = it.value();
  j["text_config"] = t;
  j["tie_word_embeddings"] = t.at("tie_word_embeddings");
  j["dtype"] = torch_dtype;
  if (j.contains("torch_dtype")) j["torch_dtype"] = torch_dtype;
  return json_dump(j, 2) + "\n";
}

// ---- the carried part in a weights file --------------------------------------------

void write_carried(const std::string& h5_path, const HfCarried& carried) {
  const char* hint = "the weights file is being written; is the disk full?";
  h5::Handle f(ZT_H5_CHECK(H5Fopen(h5_path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), h5_path, hint),
               h5::Kind::kFile);
  h5::Handle g = h5::create_group(f.get(), "hf_carried", h5_path, hint);
  h5::write_string_attr(g.get(), "config_json", carried.config_json, h5::StringLayout::kVariable,
                        h5_path, hint);
  for (size_t i = 0; i < carried.tensors.size(); ++i) {
    const CarriedTensor& t = carried.tensors[i];
    const hsize_t n = t.bytes.size();
    h5::Handle space(ZT_H5_CHECK(H5Screate_simple(1, &n, nullptr), h5_path, hint),
                     h5::Kind::kDataspace);
    const std::string name = strf("t%zu", i);
    h5::Handle d(ZT_H5_CHECK(H5Dcreate2(g.get(), name.c_str(), H5T_STD_U8LE, space.get(),
                                        H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                             h5_path, hint),
                 h5::Kind::kDataset);
    ZT_H5_CHECK(H5Dwrite(d.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.bytes.data()),
                h5_path, hint);
    h5::write_checksum(d.get(), std::as_bytes(std::span<const uint8_t>(t.bytes)), h5_path, hint);
    json meta = {{"name", t.name}, {"dtype", st_dtype_name(t.dtype)}, {"shape", t.shape}};
    h5::write_string_attr(d.get(), "tensor", meta.dump(), h5::StringLayout::kVariable, h5_path,
                          hint);
  }
  f.close(h5_path);
}

namespace {
h5::Handle open_for_carried(const std::string& h5_path) {
  return h5::Handle(ZT_H5_CHECK(H5Fopen(h5_path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), h5_path,
                                kCarriedHint),
                    h5::Kind::kFile);
}
}  // namespace

std::string carried_class(const std::string& h5_path) {
  h5::QuietErrors quiet;
  const h5::Handle f = open_for_carried(h5_path);
  if (!h5::link_exists(f.get(), "hf_carried", h5_path, kCarriedHint)) return "";
  const h5::Handle g = h5::open_group(f.get(), "hf_carried", h5_path, kCarriedHint);
  const std::string where = "checkpoint '" + h5_path + "': group /hf_carried";
  HfCarried c;
  c.config_json = h5::read_string_attr(g.get(), "config_json", h5_path, where, kCarriedHint);
  return std::string(form_of(c, where).architecture);
}

std::shared_ptr<const HfCarried> read_carried(const std::string& h5_path) {
  h5::QuietErrors quiet;
  h5::Handle f = open_for_carried(h5_path);
  if (!h5::link_exists(f.get(), "hf_carried", h5_path, kCarriedHint)) return nullptr;
  h5::Handle g = h5::open_group(f.get(), "hf_carried", h5_path, kCarriedHint);
  auto carried = std::make_shared<HfCarried>();
  const std::string where = "checkpoint '" + h5_path + "': group /hf_carried";
  carried->config_json = h5::read_string_attr(g.get(), "config_json", h5_path, where, kCarriedHint);
  const std::vector<std::string> members = h5::group_members(g.get(), h5_path, kCarriedHint);
  for (size_t i = 0; i < members.size(); ++i) {
    const std::string name = strf("t%zu", i);
    h5::Handle d(ZT_H5_CHECK(H5Dopen2(g.get(), name.c_str(), H5P_DEFAULT), h5_path, kCarriedHint),
                 h5::Kind::kDataset);
    h5::require_stored_here(d.get(), h5_path, "/hf_carried/" + name, kCarriedHint);
    const std::string dwhere = where + "/" + name;
    const json meta = parse_json_strict(
        h5::read_string_attr(d.get(), "tensor", h5_path, dwhere, kCarriedHint), dwhere,
        kCarriedHint);
    CarriedTensor t;
    t.name = meta.at("name").get<std::string>();
    t.dtype = parse_st_dtype(meta.at("dtype").get<std::string>(), dwhere, "dtype");
    t.shape = meta.at("shape").get<std::vector<int64_t>>();
    int64_t numel = 1;
    for (int64_t s : t.shape) numel *= s;
    h5::Handle space(ZT_H5_CHECK(H5Dget_space(d.get()), h5_path, kCarriedHint),
                     h5::Kind::kDataspace);
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    if (n < 0 || static_cast<uint64_t>(n) != static_cast<uint64_t>(numel) * st_dtype_size(t.dtype))
      throw InputError(dwhere + " holds " + std::to_string(n) + " bytes, not the " +
                           std::to_string(numel * static_cast<int64_t>(st_dtype_size(t.dtype))) +
                           " its shape and dtype take",
                       kCarriedHint);
    t.bytes.resize(static_cast<size_t>(n));
    ZT_H5_CHECK(H5Dread(d.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.bytes.data()),
                h5_path, kCarriedHint);
    h5::verify_checksum(d.get(), std::as_bytes(std::span<const uint8_t>(t.bytes)), h5_path,
                        "/hf_carried/" + name, kCarriedHint);
    carried->tensors.push_back(std::move(t));
  }
  return carried;
}

}  // namespace zt::ckpt
