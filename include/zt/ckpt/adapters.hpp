#pragma once
// LoRA / QLoRA checkpoints (docs/checkpoint-format.md "Adapter checkpoints"): a
// zt-checkpoint file with contents = "adapters" holding only the adapters' tensors
// (/params/<PEFT module>.lora_A.weight [r, in], .lora_B.weight [out, r]), their AdamW
// moments and /state, with root attributes `finetune` (the LoRA settings as JSON),
// `base_path` and `base_hash` (the base checkpoint the adapters were trained on).
#include <mpi.h>

#include <functional>
#include <string>

#include "zt/ckpt/format.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/lora.hpp"

namespace zt::ckpt {

// {"method": "lora"|"qlora", "rank": int, "alpha": float, "dropout": float, "rslora": bool,
//  "targets": ["q", "v", ...]} (targets in lora_target_name order).
std::string finetune_to_json(const model::LoraConfig& lora);
// (Read back by parse_finetune_json, zt/ckpt/adapter_export.hpp.)

// The tensors a file of `h` holds, in file order: the model's (ParamLayout(h.config)),
// or for an adapters file the adapters' unit of ParamLayout(h.config, finetune) alone.
model::ParamLayout file_layout(const Header& h);

// The content hash of a base checkpoint: zt-sum64 (sum64_u64) of the sequence
// (fnv1a(name), stored checksum) of its /params datasets in name order, as 16 hex
// digits. Reads only the datasets' checksum attributes (cheap at any size); the stored
// checksums are verified whenever the base is loaded. Collective: rank 0 reads, every
// rank gets the answer (or the error). "" for path "".
std::string base_hash(MPI_Comm comm, const std::string& path);
// The same on this process alone (no MPI: zt convert, zt generate). zt::InputError naming
// the file when it cannot be read.
std::string base_hash_of(const std::string& path);

// The run's engine (finetune `lora`; method full: no adapters) can load `file`:
// zt::InputError (exit 2) naming `path` and the keys when an adapters file meets a run
// without adapters or with other finetune.* / lora.* settings, or a whole-model file a
// LoRA run's resume. (ckpt.init_from of a LoRA run takes whole-model files: load_weights.)
void check_loadable(const Header& file, const std::string& path, const model::LoraConfig& lora,
                    bool resume);

// The base of a resumed adapters file: zt::InputError (exit 2) naming both files and both
// hashes when the run's base `base` (hash `hash`, "" for none) is not the file's.
void check_same_base(const Header& file, const std::string& path, const std::string& base,
                     const std::string& hash);

// Runs `work` on rank 0 of `comm` and gives every rank its answer, or rethrows its
// zt::Error (same exit code, message and hint) on every rank. Collective.
std::string from_rank0(MPI_Comm comm, const std::function<std::string()>& work);

}  // namespace zt::ckpt
