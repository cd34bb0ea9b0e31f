#pragma once
// The zt checkpoint format, version 1 (docs/checkpoint-format.md): dataset paths, the
// header (root attributes), the training state (/state) and the model config as JSON.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "zt/model/config.hpp"

namespace zt::ckpt {

struct HfCarried;  // a multimodal import's carried part (group /hf_carried)

inline constexpr const char* kFormat = "zt-checkpoint";
// 2: zt-xxh3 checksums (1: zt-sum64, still read; docs/checkpoint-format.md).
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr const char* kContentsTraining = "training";  // params + moments + state
inline constexpr const char* kContentsWeights = "weights";    // params only
// A LoRA / QLoRA run's checkpoint: the adapters' tensors, their moments and /state, no
// base tensors; the base it trained on is named by path and hash (adapters.hpp).
inline constexpr const char* kContentsAdapters = "adapters";

// Dataset paths of a tensor, by its Hugging Face name.
std::string param_path(std::string_view hf_name);       // "/params/<name>"
std::string exp_avg_path(std::string_view hf_name);     // "/optim/exp_avg/<name>"
std::string exp_avg_sq_path(std::string_view hf_name);  // "/optim/exp_avg_sq/<name>"

// The tokenizer of the data a checkpoint was trained on, as the token file records it
// (zt/data/token_file.hpp): root attributes tokenizer, tokenizer_path, tokenizer_hash,
// present when name is not empty. `zt convert h5-to-hf` copies its files.
struct TokenizerRecord {
  std::string name;  // e.g. "tokenizer.json:TinyLlama-1.1B"
  std::string path;  // absolute folder or file it was loaded from
  std::string hash;  // 16 hex digits over its files
};

// What an adapters file adds to the root attributes (all three present exactly when
// contents == "adapters"; docs/checkpoint-format.md "Adapter checkpoints").
struct AdapterRecord {
  std::string finetune;   // JSON {"method","rank","alpha","dropout","rslora","targets"}
  std::string base_path;  // absolute path of the base checkpoint; "" for a random base
  std::string base_hash;  // 16 hex digits (ckpt::base_hash); "" for a random base
};

// Root attributes.
struct Header {
  uint32_t format_version = kFormatVersion;
  std::string contents = kContentsTraining;  // kContentsTraining, kContentsWeights or kContentsAdapters
  std::string zt_version;
  std::string zt_commit;
  model::Config config;
  std::string source_dtype;  // optional ("" when absent), set by `zt convert hf-to-h5`
  TokenizerRecord tokenizer;  // optional (name "" when absent), set by the trainer
  AdapterRecord adapters;     // contents == "adapters" only
};

// /state: where training stands. Written by the trainer, restored on resume.
struct TrainState {
  int64_t step = 0;         // optimizer steps done
  int64_t tokens_seen = 0;  // training tokens consumed, all ranks
  uint64_t sampler_seed = 0;
  int64_t sampler_next_step = 0;  // = step (the sampler is a pure function of seed, step)
  double lr = 0, min_lr = 0;      // schedule
  int64_t warmup = 0, steps = 0;
  double beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, grad_clip = 0;
  int64_t global_batch = 0, seq_len = 0;
  int64_t world_size = 1, zero_stage = 0, hpz = 1;  // layout at save (informational)
  std::vector<uint64_t> rng;  // [world]: the seed each rank's randomness derives from
  // Not in /state: the save writes it as the header's tokenizer (root attributes).
  TokenizerRecord tokenizer;
  // Not in /state either: a LoRA run's base (header attributes base_path, base_hash).
  std::string base_path, base_hash;
  // Not in /state either: a multimodal import's vision tower and config.json (group
  // /hf_carried), copied into every training file of a full fine-tune (rank 0's; null
  // elsewhere and for a text-only model).
  std::shared_ptr<const HfCarried> carried;
  // /state attribute `objective` (string, training files): the finetune.objective that
  // trained it ("sft", "dpo", "orpo"); "" when the file predates it.
  std::string objective;
};

// The scalar fields of TrainState, each an attribute of /state of the same name and type
// (int64, uint64, float64), in file order. The checkpoint writer and reader walk this one
// table. Weights-only files carry only the fields not marked training_only.
struct StateField {
  const char* name;
  std::variant<int64_t TrainState::*, uint64_t TrainState::*, double TrainState::*> member;
  bool training_only;
};
inline const StateField kStateFields[] = {
    {"step", &TrainState::step, false},
    {"tokens_seen", &TrainState::tokens_seen, false},
    {"sampler_seed", &TrainState::sampler_seed, true},
    {"sampler_next_step", &TrainState::sampler_next_step, true},
    {"lr", &TrainState::lr, true},
    {"min_lr", &TrainState::min_lr, true},
    {"warmup", &TrainState::warmup, true},
    {"steps", &TrainState::steps, true},
    {"beta1", &TrainState::beta1, true},
    {"beta2", &TrainState::beta2, true},
    {"eps", &TrainState::eps, true},
    {"weight_decay", &TrainState::weight_decay, true},
    {"grad_clip", &TrainState::grad_clip, true},
    {"global_batch", &TrainState::global_batch, true},
    {"seq_len", &TrainState::seq_len, true},
    {"world_size", &TrainState::world_size, true},
    {"zero_stage", &TrainState::zero_stage, true},
    {"hpz", &TrainState::hpz, true},
};

// The model config as JSON text (every field), and back. from_json throws zt::InputError
// naming `file` for malformed text or a missing field.
std::string config_to_json(const model::Config& cfg);
model::Config config_from_json(const std::string& text, const std::string& file);

// A model's RoPE scaling in words ("none", "linear (factor 2)", "llama3 (factor 8, ...)").
std::string rope_scaling_text(const kernels::RopeScaling& r);

// Throws zt::InputError naming `file` and the field when `saved` and `run` differ in a
// shape field (family, head_dim, attention_bias, vocab, hidden, layers, heads, kv_heads,
// intermediate, tied_embeddings);
// returns warnings for the rest (name, context, rope_theta, rope_scaling, norm_eps).
// The --set flags that make a run's model `saved`: "--set model.preset=NAME" when it was
// made with that preset unchanged, else "--set model.K=V" for each model.* key that
// differs from `run` (check_same_shape's hint: a family or shape mismatch).
std::string keys_to_match(const model::Config& saved, const model::Config& run);

std::vector<std::string> check_same_shape(const model::Config& saved, const model::Config& run,
                                          const std::string& file);

// zt-sum64 of uint64 data (same definition as zt::sum64 with the 64-bit pattern).
uint64_t sum64_u64(std::span<const uint64_t> x, uint64_t first = 0);

}  // namespace zt::ckpt
