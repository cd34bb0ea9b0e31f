// LoRA/QLoRA adapter checkpoints for export: read, base checked, merged, written for PEFT
// (see include/zt/ckpt/adapter_export.hpp and docs/checkpoint-format.md "Adapter checkpoints").
#include "zt/ckpt/adapter_export.hpp"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "h5.hpp"
#include "hf_folder.hpp"
#include "hf_names.hpp"
#include "io_detail.hpp"
#include "zt/ckpt/adapters.hpp"
#include "zt/ckpt/io.hpp"
#include "zt/ckpt/safetensors.hpp"
#include "zt/ckpt/serial.hpp"
#include "zt/core/config.hpp"
#include "zt/ckpt/publish.hpp"
#include "zt/core/error.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/files.hpp"
#include "zt/core/json.hpp"
#include "zt/core/log.hpp"

namespace zt::ckpt {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kFinetuneHint =
    "the adapter checkpoint's finetune attribute must be JSON {\"method\": \"lora\"|\"qlora\", "
    "\"rank\": int, \"alpha\": number, \"dropout\": number, \"rslora\": bool, \"targets\": "
    "[\"q\", \"v\", ...]} (docs/checkpoint-format.md, \"Adapter checkpoints\"); write the file "
    "again with zt train";
constexpr const char* kAdapterFile = "adapter_model.safetensors";
constexpr const char* kAdapterConfig = "adapter_config.json";

// "<name>.lora_B.weight": zt's name of an adapter's B (hf_lora_b_piece's argument).
std::string b_name(const model::LoraAdapterInfo& a) { return a.name + ".lora_B.weight"; }

// One field of the finetune JSON, of the JSON type `ok` accepts.
template <class Ok>
const json& field(const json& j, const char* key, Ok ok, const char* type, const std::string& where) {
  if (!j.contains(key))
    throw InputError(where + ": attribute finetune has no \"" + key + "\"", kFinetuneHint);
  const json& v = j.at(key);
  if (!ok(v))
    throw InputError(where + ": attribute finetune: \"" + key + "\" is " + describe_json(v) +
                         ", not " + type,
                     kFinetuneHint);
  return v;
}

// The multimodal class of the adapters' base (its file carries /hf_carried), "" for a
// text-only base. A base that cannot be read is taken as text-only, with a warning.
std::string multimodal_base(const AdapterCheckpoint& ac) {
  if (ac.base_path.empty()) return "";
  std::error_code ec;
  if (!fs::exists(ac.base_path, ec)) {
    log::warn("adapter checkpoint '" + ac.path + "': its base '" + ac.base_path +
              "' is not there, so the adapter folder is written for a text-only base (Llama-style "
              "module names); for a multimodal base, export again with the base at that path");
    return "";
  }
  return carried_class(resolve_checkpoint(ac.base_path, "checkpoint"));
}

// PEFT's target_modules for a multimodal class: a regular expression over the
// text model's modules (PEFT matches it against the whole module name). A list of names
// would adapt the vision tower's q_proj, k_proj and v_proj too.
std::string multimodal_targets(const std::vector<std::string>& names) {
  std::string text, head;
  for (const std::string& n : names)
    if (n == "lm_head") head = "lm_head";
    else text += (text.empty() ? "" : "|") + n;
  std::string re = text.empty() ? "" : "model\\.language_model\\.layers\\.\\d+\\.[^.]+\\.(" + text + ")";
  if (!head.empty()) re = re.empty() ? head : "(" + re + ")|" + head;
  return re;
}

}  // namespace

model::LoraConfig parse_finetune_json(const std::string& text, const model::Config& model,
                                      const std::string& where) {
  const json j = parse_json_strict(text, where + ": attribute finetune", kFinetuneHint);
  if (!j.is_object()) throw InputError(where + ": attribute finetune is not a JSON object", kFinetuneHint);
  const std::string method =
      field(j, "method", [](const json& v) { return v.is_string(); }, "a string", where).get<std::string>();
  if (method != "lora" && method != "qlora")
    throw InputError(where + ": attribute finetune: \"method\" is \"" + method +
                         "\", not \"lora\" or \"qlora\"",
                     kFinetuneHint);
  const int64_t rank =
      field(j, "rank", [](const json& v) { return v.is_number_integer(); }, "an integer", where).get<int64_t>();
  const double alpha =
      field(j, "alpha", [](const json& v) { return v.is_number(); }, "a number", where).get<double>();
  const double dropout =
      field(j, "dropout", [](const json& v) { return v.is_number(); }, "a number", where).get<double>();
  const bool rslora =
      field(j, "rslora", [](const json& v) { return v.is_boolean(); }, "true or false", where).get<bool>();
  const json& list = field(
      j, "targets", [](const json& v) { return v.is_array() && !v.empty(); },
      "a non-empty list of target names", where);
  std::string targets;
  for (const json& t : list) {
    if (!t.is_string())
      throw InputError(where + ": attribute finetune: \"targets\" holds " + describe_json(t) +
                           ", not a target name",
                       kFinetuneHint);
    // One name per element: the list is joined for lora.targets, so a "q,v" or " q " here
    // must not pass as two names or a trimmed one.
    const std::string name = t.get<std::string>();
    if (name.find_first_of(", \t\"") != std::string::npos)
      throw InputError(where + ": attribute finetune: \"targets\" holds \"" + name +
                           "\", not one target name",
                       kFinetuneHint);
    targets += (targets.empty() ? "" : ",") + name;
  }
  // The values go through the lora.* keys' own checks (schema limits, resolve_lora), so a
  // file cannot hold what the command line could not.
  config::Schema schema;
  model::add_finetune_keys(schema);
  try {
    const config::Config keys = config::load(
        schema, "",
        {"finetune.method=" + method, strf("lora.rank=%lld", static_cast<long long>(rank)),
         strf("lora.alpha=%.17g", alpha), strf("lora.dropout=%.17g", dropout),
         "lora.targets=\"" + targets + "\"", std::string("lora.rslora=") + (rslora ? "true" : "false")});
    return model::resolve_lora(keys, model);
  } catch (const InputError& e) {
    throw InputError(where + ": attribute finetune: " + e.message(), kFinetuneHint);
  }
}

bool is_adapter_checkpoint(const std::string& path) {
  return read_header(MPI_COMM_NULL, resolve_checkpoint(path, "checkpoint")).contents == kContentsAdapters;
}

AdapterCheckpoint read_adapters(const std::string& path) {
  AdapterCheckpoint ac;
  ac.path = resolve_checkpoint(path, "checkpoint");
  const std::string& file = ac.path;
  h5::Handle f = open_file(MPI_COMM_NULL, file);
  h5::QuietErrors quiet;
  ac.header = header_of(f.get(), file);
  const std::string where = "adapter checkpoint '" + file + "'";
  if (ac.header.contents != kContentsAdapters)
    throw InputError("checkpoint '" + file + "' holds contents \"" + ac.header.contents +
                         "\", not LoRA adapters (\"adapters\")",
                     "give a checkpoint of a finetune.method = lora or qlora run");
  const std::string root = "the root group";
  ac.lora = parse_finetune_json(h5::read_string_attr(f.get(), "finetune", file, root),
                                ac.header.config, where);
  ac.base_path = h5::read_string_attr(f.get(), "base_path", file, root);
  ac.base_hash = h5::read_string_attr(f.get(), "base_hash", file, root);
  const bool hex16 = ac.base_hash.size() == 16 &&
                     ac.base_hash.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!ac.base_hash.empty() && !hex16)
    throw InputError(where + ": attribute base_hash = \"" + ac.base_hash +
                         "\" is not 16 lowercase hex digits (or empty)",
                     "the file is damaged; write it again with zt train");
  if (ac.base_path.empty() != ac.base_hash.empty())
    throw InputError(where + ": attributes base_path and base_hash must both be set (a base "
                         "checkpoint) or both be empty (a random base); base_path = \"" +
                         ac.base_path + "\", base_hash = \"" + ac.base_hash + "\"",
                     "the file is damaged; write it again with zt train");

  f.close(file);

  // /params through the one checkpoint reader (serial.hpp's read_full: the file's layout
  // of an adapters file is the adapters' unit, PEFT's names at LoraLayout's offsets):
  // every dataset of the finetune attribute's adapters present, fp32 of its shape, no
  // other dataset, every checksum verified (by the format's version), each refusal exit 2
  // naming the file and the dataset. The moments and /state are not an export's concern.
  FullCheckpoint full = read_full(file, /*params_only=*/true);
  ZT_CHECK(full.params.size() == 1 &&
               full.params[0].size() == static_cast<size_t>(model::LoraLayout(ac.header.config, ac.lora).numel()),
           "read_adapters: the adapters file's layout is not one unit of the adapters",
           "a bug in ckpt::file_layout");
  ac.params = std::move(full.params[0]);  // [numel] packed A, B
  return ac;
}

void check_base(const std::string& path, const std::string& expected_hash,
                const model::Config& model, const std::string& what) {
  std::error_code ec;
  const char* hint = "pass the base checkpoint with --base PATH (a copy of the file the adapters "
                     "were trained on)";
  if (!fs::exists(path, ec))
    throw InputError(what + ": its base checkpoint '" + path + "' does not exist", hint);
  const Header base = read_header(MPI_COMM_NULL, resolve_checkpoint(path, "checkpoint"));
  if (base.contents == kContentsAdapters)
    throw InputError(what + ": base '" + path + "' holds adapters, not a model's weights", hint);
  try {
    (void)check_same_shape(base.config, model, path);
  } catch (const InputError& e) {
    throw InputError(what + ": base '" + path + "' is not the model the adapters were trained on: " +
                         e.message(),
                     hint);
  }
  // The content hash the trainer recorded (ckpt::base_hash): the same shape with other
  // values is another base.
  if (!expected_hash.empty()) {
    const std::string hash = base_hash_of(resolve_checkpoint(path, "checkpoint"));
    if (hash != expected_hash)
      throw InputError(what + ": base '" + path + "' has content hash " + hash +
                           ", the adapters were trained on a base with hash " + expected_hash,
                       hint);
  }
}

Weights read_merged_weights(const std::string& adapters, const std::string& base) {
  const AdapterCheckpoint ac = read_adapters(adapters);
  const std::string what = "adapter checkpoint '" + ac.path + "'";
  const std::string base_path = base.empty() ? ac.base_path : base;
  if (base_path.empty())
    throw InputError(what + " was trained on a random base (base_path is empty): there are no "
                         "base weights to merge the adapters into",
                     "name the base with --base PATH if you have one");
  check_base(base_path, ac.base_hash, ac.header.config, what);
  Weights b = read_checkpoint_weights(base_path);
  const model::LoraLayout layout(ac.header.config, ac.lora);
  const bool base_tied = b.config.tied_embeddings;
  model::MergedWeights m = model::merge_lora(b.config, std::move(b.units), layout, ac.params);
  Weights w{std::move(m.config), std::move(m.units), ac.path, b.source_dtype,
            ac.header.tokenizer.name.empty() ? b.tokenizer : ac.header.tokenizer};
  w.carried = b.carried;  // a multimodal base's vision tower: the merged export is whole
  log::info(strf("merged %zu adapters (%s, r %lld, scale %g) of '%s' into base '%s'%s",
                 layout.adapters().size(),
                 ac.lora.method == model::FinetuneMethod::kQlora ? "qlora" : "lora",
                 static_cast<long long>(ac.lora.rank), ac.lora.scale(), ac.path.c_str(),
                 base_path.c_str(),
                 base_tied && !w.config.tied_embeddings
                     ? " (lm_head untied from the embedding: it carries the adapter)"
                     : ""));
  return w;
}

PeftExportResult export_peft(const std::string& adapters, const std::string& outdir) {
  const AdapterCheckpoint ac = read_adapters(adapters);
  const model::LoraLayout layout(ac.header.config, ac.lora);
  const int64_t r = ac.lora.rank;
  std::error_code ec, dir_ec;
  fs::create_directories(outdir, ec);
  if (ec || !fs::is_directory(outdir, dir_ec))
    throw InputError("cannot create output folder '" + outdir + "'" + (ec ? ": " + ec.message() : std::string()),
                     "give a folder path that is writable (it is created when missing)");
  PeftExportResult res;
  res.base_path = ac.base_path;
  res.multimodal = multimodal_base(ac);
  // adapter_model.safetensors: A then B of each adapter, in the layout's order, F32 (what
  // PEFT's save_pretrained writes for an fp32 model), under PEFT's module names (a
  // multimodal base's: its class's, e.g. Gemma3ForConditionalGeneration's).
  std::vector<StTensorSpec> specs;
  // Experts' adapters (PEFT's ParamWrapper) are A [E*r, in], B [out, r*E].
  for (const model::LoraAdapterInfo& a : layout.adapters()) {
    const std::string m = "base_model.model." + (!res.multimodal.empty() ? multimodal_module(a.name) : a.name);
    specs.push_back({m + ".lora_A.weight", StDType::kF32, {a.experts * r, a.in}});
    specs.push_back({m + ".lora_B.weight", StDType::kF32, {a.out, r * a.experts}});
  }
  SafetensorsWriter w((fs::path(outdir) / kAdapterFile).string(), specs, {{"format", "pt"}});
  std::vector<float> b;  // [out, r*E] one B in PEFT's row order
  for (const model::LoraAdapterInfo& a : layout.adapters()) {
    w.write(std::span<const float>(ac.params).subspan(static_cast<size_t>(a.a_offset), static_cast<size_t>(a.experts * r * a.in)));
    b.resize(static_cast<size_t>(a.out * r * a.experts));
    zt_to_hf(hf_lora_b_piece(ac.header.config, b_name(a), a.target, a.out, r * a.experts),
             ac.params.data() + a.b_offset, b.data());
    w.write(b);
  }
  w.finish();
  res.files.push_back(kAdapterFile);
  res.tensors = static_cast<int64_t>(specs.size());
  res.tensor_bytes = static_cast<uint64_t>(layout.numel()) * sizeof(float);

  // adapter_config.json: the fields of PEFT's LoraConfig that define these adapters; PEFT
  // fills the others with its defaults. target_modules sorted, as PEFT writes its set; the
  // experts go in target_parameters ("experts.gate_up_proj", "experts.down_proj"), sorted
  // as PEFT writes them (it nests their wrappers in the parameters' order, not this list's).
  std::vector<std::string> names, params;
  for (int t = 0; t < model::kNumLoraTargets; ++t) {
    const auto target = static_cast<model::LoraTarget>(t);
    if (ac.lora.has_target(target))
      (model::is_expert_target(target) ? params : names).emplace_back(model::lora_module_name(target));
  }
  std::sort(names.begin(), names.end());
  std::sort(params.begin(), params.end());
  const json modules = !res.multimodal.empty() ? json(multimodal_targets(names)) : json(names);
  const json cfg = {{"peft_type", "LORA"},
                    {"task_type", "CAUSAL_LM"},
                    {"r", r},
                    {"lora_alpha", ac.lora.alpha},
                    {"lora_dropout", ac.lora.dropout},
                    {"use_rslora", ac.lora.rslora},
                    {"target_modules", modules},
                    {"target_parameters", params.empty() ? json(nullptr) : json(params)},
                    {"bias", "none"},
                    {"fan_in_fan_out", false},
                    {"use_dora", false},
                    {"lora_bias", false},
                    {"init_lora_weights", true},
                    {"modules_to_save", nullptr},
                    {"layers_to_transform", nullptr},
                    {"base_model_name_or_path", nullptr},
                    {"inference_mode", true}};
  write_file_safely((fs::path(outdir) / kAdapterConfig).string(), json_dump(cfg, 2) + "\n",
                    "PEFT adapter export");
  res.files.push_back(kAdapterConfig);
  return res;
}

}  // namespace zt::ckpt
