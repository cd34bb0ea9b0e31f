#pragma once
// The tensors of a Hugging Face folder (private to the converter): where each lives, and a
// multimodal folder's split. A gemma3 folder (Gemma3ForConditionalGeneration) is a text
// model (config.json's text_config, tensors language_model.model.* as transformers writes
// them, or model.language_model.* as it names them at run time) beside a vision tower and
// a projector; a qwen3_5 folder (Qwen3_5ForConditionalGeneration) or a qwen3_5_moe one
// (Qwen3_5MoeForConditionalGeneration) a text model (model.language_model.*,
// lm_head.weight) beside model.visual.* (and the published checkpoints' mtp.*). One row per
// class (hf_folder.cpp: multimodal_forms). zt trains the text model; the rest, and the
// folder's config.json, are carried through the weights file (and a full fine-tune's
// checkpoints) unchanged and written back by the export, so the export loads as the same
// class with the same vision weights, bit for bit. A tensor that is neither the text
// model's nor a carried part is refused.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zt/ckpt/safetensors.hpp"

namespace zt::ckpt {

inline constexpr const char* kSingleFile = "model.safetensors";
inline constexpr const char* kIndexFile = "model.safetensors.index.json";
inline constexpr const char* kIndexHint =
    "model.safetensors.index.json must map every tensor to a shard file in the same folder "
    "(as transformers' save_pretrained writes it)";
// Every file of one h5-to-hf export carries its id (the shards' __metadata__, the index's
// metadata): hf-to-h5 refuses a folder whose shards come from different exports. The id
// is a hash of what the export holds (every parameter's bytes, XXH3 as checkpoints use,
// the dtype and the shard plan): two exports of one checkpoint with the same options are
// byte-identical files, so mixing them is harmless; any other pair differs.
inline constexpr const char* kExportIdKey = "zt_export_id";

struct Located {
  std::string file;  // full path of its safetensors file
  StTensor tensor;
};

// Every tensor of the folder, located: model.safetensors when present, else the index and
// its shards (checked against each other, as transformers). The files read into *files.
std::map<std::string, Located> locate_tensors(const std::string& hfdir,
                                              std::vector<std::string>* files);

struct CarriedTensor {
  std::string name;  // the file's name
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // as stored in the file
};
struct HfCarried {
  std::string config_json;  // the folder's config.json, as read
  std::vector<CarriedTensor> tensors;
};

// config.json's text model: text_config's text (gemma3_text, qwen3_5_text, qwen3_5_moe_text)
// when config.json is a multimodal model_type (gemma3, qwen3_5, qwen3_5_moe); nullopt
// otherwise. One without a text_config object is a zt::InputError naming the file and the
// field.
std::optional<std::string> multimodal_text_config(const std::string& config_text,
                                                  const std::string& where);

// A multimodal folder: its text tensors renamed to zt's names in *found (model.X,
// lm_head.weight); the vision tower's and projector's taken out of *found, read and
// returned. Refuses (naming the folder and the tensor) a vision tower or projector tensor
// that config.json's vision_config implies and the folder lacks, and (naming the file and
// the tensor) one that is neither the text model's nor a carried part.
std::shared_ptr<const HfCarried> split_multimodal(std::map<std::string, Located>* found,
                                                  const std::string& config_text,
                                                  const std::string& hfdir);

// The export's names: a text tensor's file name in the multimodal folder `carried` came from.
std::string multimodal_name(const HfCarried& carried, const std::string& zt_name);
// A text module's name in Gemma3ForConditionalGeneration and Qwen3.5's classes at run time
// (PEFT's names: model.layers.N.X -> model.language_model.layers.N.X; lm_head stays).
std::string multimodal_module(const std::string& zt_module);
// The export's config.json: the carried one with text_config replaced by `text_json` (zt's
// config.json of the text model) and the dtype set.
std::string multimodal_config(const HfCarried& carried, const std::string& text_json,
                              const std::string& torch_dtype);

// The carried part in a weights file (group /hf_carried; every dataset checksummed) and
// back (nullptr when the file has none).
void write_carried(const std::string& h5_path, const HfCarried& carried);
std::shared_ptr<const HfCarried> read_carried(const std::string& h5_path);
// The multimodal class of the weights file's /hf_carried group (Gemma3ForConditionalGeneration,
// ...), "" when it has none (only config.json is read).
std::string carried_class(const std::string& h5_path);

}  // namespace zt::ckpt
