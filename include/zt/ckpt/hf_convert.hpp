#pragma once
// Hugging Face <-> zt checkpoint conversion (`zt convert h5-to-hf`, `zt convert hf-to-h5`).
//
// A Hugging Face model folder holds config.json (LlamaForCausalLM, see hf_config.hpp) and
// either model.safetensors, or model.safetensors.index.json
//   {"metadata": {"total_size": BYTES}, "weight_map": {"<tensor>": "<shard file>", ...}}
// with shards model-00001-of-0000N.safetensors ... Tensor names and shapes are the same
// on both sides (zt's parameters carry their HF names and [out, in] shapes), so conversion
// only changes the element type: the checkpoint holds fp32; safetensors F32, BF16 or F16.
// BF16/F16 -> fp32 is exact, so hf-to-h5 then h5-to-hf in the source dtype gives back
// every tensor's bytes.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "zt/ckpt/format.hpp"
#include "zt/model/config.hpp"

namespace zt::ckpt {

struct HfExportOptions {
  // "f32", "bf16" or "f16" (also "float32", "bfloat16", "float16"); "" = the checkpoint's
  // source_dtype attribute when it has one, else f32.
  std::string dtype;
  // Largest shard (tensor bytes); a model above it is split into shards with an index.
  // A single tensor larger than this gets a shard of its own.
  uint64_t max_shard_size = 5ull << 30;
  // BF16/F16: a value beyond the dtype's range (or a NaN) refuses the export, naming the
  // tensors and counts, before any file is written; saturate writes +-max instead of +-inf
  // (NaN stays NaN) and warns with the counts.
  bool saturate = false;
  // Called with the checkpoint's tokenizer record before anything is written (`zt convert
  // h5-to-hf` checks the tokenizer files there, so a refusal leaves no half export).
  std::function<void(const TokenizerRecord&)> before_write;
  // An adapter checkpoint's base (a copy of the file its base_path names); "" = base_path.
  // Refused for any other checkpoint.
  std::string base;
};

struct HfExportResult {
  std::string dtype;                // "f32", "bf16" or "f16"
  std::vector<std::string> files;   // written into the folder (safetensors, index, config)
  int64_t tensors = 0;
  uint64_t tensor_bytes = 0;        // sum over tensors (the index's total_size)
  TokenizerRecord tokenizer;        // the checkpoint's (the caller copies its files)
  std::string export_id;            // in every file's metadata (zt_export_id)
};

// Writes OUTDIR/config.json and the safetensors file(s) from a zt checkpoint (its
// parameters; optimizer moments are ignored), or from the checkpoint `latest` names when
// `checkpoint` is a ckpt.dir. OUTDIR is created when missing. Whole or visibly absent:
// the earlier export's model files are removed first, config.json and the shards written
// next (each through SafeFile), the index (or model.safetensors) last; every file carries
// a fresh zt_export_id, which the import checks across index and shards.
HfExportResult export_hf(const std::string& checkpoint, const std::string& outdir,
                         const HfExportOptions& options = {});

struct HfImportResult {
  std::string source_dtype;         // "f32", "bf16" or "f16"
  std::vector<std::string> files;   // safetensors files read
  int64_t tensors = 0;
  int64_t params = 0;               // elements
  std::string model_name;           // the matching preset, or "custom"
};

// Reads a Hugging Face Llama folder (config.json + model.safetensors, or when that is
// absent model.safetensors.index.json and its shards, as transformers does) into a
// weights-only zt checkpoint at OUT.h5 (for ckpt.init_from). Refuses, with zt::InputError naming the file
// and the field: a missing file, a hostile safetensors header or index, a model zt cannot
// represent, a tensor whose shape disagrees with config.json, a missing or unknown tensor.
HfImportResult import_hf(const std::string& hfdir, const std::string& out_h5);

// A model's weights in memory: its configuration and every unit's flat buffer.
struct Weights {
  model::Config config;
  std::vector<std::vector<float>> units;  // [units][numel] (ParamLayout order)
  std::string source;                     // the file or folder read
  std::string source_dtype;               // "f32", "bf16", "f16", or "" (unrecorded)
  TokenizerRecord tokenizer;              // a checkpoint's training tokenizer (name "" if none)
  // A multimodal folder's vision tower, projector and config.json, carried unchanged
  // (nullptr for a text model; src/ckpt/hf_folder.hpp).
  std::shared_ptr<const struct HfCarried> carried;
};
// The parameters of a zt checkpoint (a training or weights-only file, or the one a
// ckpt.dir's `latest` names), every checksum verified. An adapter checkpoint (contents
// "adapters", zt/ckpt/adapter_export.hpp) gives its base with the adapters merged in; `base`
// names that base instead of the file's base_path (refused for other checkpoints).
Weights read_checkpoint_weights(const std::string& checkpoint, const std::string& base = "");
// The weights of a Hugging Face Llama folder (checked as import_hf does; info: what was read).
Weights read_hf_weights(const std::string& hfdir, HfImportResult* info = nullptr);
// Either: a folder holding config.json is a Hugging Face model, anything else a checkpoint
// (file or ckpt.dir; adapters merged into their base, `base` as read_checkpoint_weights).
// For `zt generate` and tools.
Weights load_weights(const std::string& path, const std::string& base = "");

// model.safetensors.index.json, checked: a JSON object whose "weight_map" maps each tensor
// name (once) to a shard file name that stays in the folder (no "/", "\\", "..", NUL, not
// empty); "metadata.total_size", when present, a non-negative integer. No file access (a
// fuzzing entry point); `where` names the file in errors (zt::InputError).
struct HfIndex {
  std::map<std::string, std::string> weight_map;  // tensor -> shard file
  std::optional<uint64_t> total_size;
  std::string export_id;  // metadata.zt_export_id of a zt export ("" when absent)
};
HfIndex parse_hf_index(const std::string& json_text, const std::string& where);

// Shard file names of the index: "model-00001-of-00003.safetensors" (1-based k of n).
std::string hf_shard_name(int k, int n);

}  // namespace zt::ckpt
