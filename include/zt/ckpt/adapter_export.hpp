#pragma once
// LoRA/QLoRA adapter checkpoints (docs/checkpoint-format.md, "Adapter checkpoints"): a
// zt-checkpoint file with contents = "adapters", the adapters' configuration (root
// attribute `finetune`, JSON), the base they were trained on (`base_path`, `base_hash`)
// and /params/<PEFT name>.lora_A.weight [r, in], .lora_B.weight [out, r] (+ their AdamW
// moments and /state/rng); no base tensors.
//
// This header reads them for export (the packed buffer of model::LoraLayout, serially),
// checks the base, merges
// the adapters into it (`zt convert h5-to-hf`, `zt generate`) and writes them as a Hugging
// Face PEFT folder (`zt convert h5-to-hf --adapter`).
#include <cstdint>
#include <string>
#include <vector>

#include "zt/ckpt/format.hpp"
#include "zt/ckpt/hf_convert.hpp"
#include "zt/model/lora.hpp"

namespace zt::ckpt {

// The root attribute `finetune` as JSON text:
//   {"method": "lora"|"qlora", "rank": int, "alpha": float, "dropout": float,
//    "rslora": bool, "targets": ["q", "v", ...]}   (names as model::lora_target_name)
// checked against `model` as the lora.* keys are (model::resolve_lora). Throws
// zt::InputError naming `where` and the field.
model::LoraConfig parse_finetune_json(const std::string& text, const model::Config& model,
                                      const std::string& where);

struct AdapterCheckpoint {
  std::string path;              // the file read (a ckpt.dir's `latest` resolved)
  Header header;                 // config (the base's shape), tokenizer, ...
  model::LoraConfig lora;        // from `finetune`
  std::string base_path;         // absolute path of the base checkpoint; "" for a random base
  std::string base_hash;         // 16 hex digits; "" for a random base
  std::vector<float> params;     // [LoraLayout(header.config, lora).numel()], packed A then B
};

// True when `path` (a file, or a ckpt.dir's `latest`) is a checkpoint of contents
// "adapters"; a missing or unreadable checkpoint is zt::InputError naming it.
bool is_adapter_checkpoint(const std::string& path);

// Reads an adapter checkpoint's attributes and /params (every checksum verified; the
// moments and /state are not read). Throws zt::InputError naming the file and the field:
// a missing or malformed `finetune`, `base_path` or `base_hash`, a missing, extra or
// misshapen adapter tensor.
AdapterCheckpoint read_adapters(const std::string& path);

// Checks that `path` is the base an adapter checkpoint names: a zt checkpoint of weights
// (not adapters) whose model has `model`'s shape, and, when `expected_hash` is not empty,
// the same content hash. zt::InputError naming `what` (who asked for it) otherwise.
void check_base(const std::string& path, const std::string& expected_hash,
                const model::Config& model, const std::string& what);

// The base of an adapter checkpoint with its adapters merged (model::merge_lora): the base
// is `base` when not empty (a copy of the one the file names), else its base_path; checked
// with check_base. The tokenizer is the adapter file's record, else the base's.
Weights read_merged_weights(const std::string& adapters, const std::string& base = "");

// `zt convert h5-to-hf --adapter`: OUTDIR/adapter_model.safetensors (F32, PEFT's names
// "base_model.model.<module>.lora_A.weight" ...) and OUTDIR/adapter_config.json (LoraConfig
// of PEFT: peft_type LORA, task_type CAUSAL_LM, r, lora_alpha, ...), which PEFT's
// PeftModel.from_pretrained loads onto the base exported by `zt convert h5-to-hf BASE`.
struct PeftExportResult {
  std::vector<std::string> files;  // written into OUTDIR
  int64_t tensors = 0;
  uint64_t tensor_bytes = 0;
  std::string base_path;           // the base the adapters belong to ("" for a random base)
  std::string multimodal;          // the base's multimodal class (PEFT's names are its text
                                   // model's: Gemma3ForConditionalGeneration, ...); "" if none
};
PeftExportResult export_peft(const std::string& adapters, const std::string& outdir);

}  // namespace zt::ckpt
