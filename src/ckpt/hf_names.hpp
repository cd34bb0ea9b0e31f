#pragma once
// The tensors of a Hugging Face folder and where they sit in zt's parameter layout
// (private to the converter). Most families store each zt tensor under its own name and
// shape; Mixtral's files hold the router as block_sparse_moe.gate and each expert as
// three matrices (w1 the gate, w3 the up, w2 the down projection: the published
// checkpoints, and what transformers 5's save_pretrained writes back), which zt holds as
// transformers 5 does at run time: mlp.gate, and mlp.experts.gate_up_proj [E, 2I, C] /
// down_proj [E, C, I]. Qwen2-MoE's and Qwen3-MoE's files name them mlp.gate and
// mlp.experts.E.gate_proj / up_proj / down_proj (the shared expert and dense layers keep
// zt's names). transformers 5's fused names are read as well.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zt/model/layout.hpp"
#include "zt/model/lora.hpp"

namespace zt::ckpt {

struct HfPiece {
  std::string name;            // the file's tensor name
  std::vector<int64_t> shape;  // its shape in the file
  int tensor = 0;              // index into layout.tensors()
  int64_t offset = 0;          // its first element within that tensor (contiguous)
  int64_t numel = 0;           // product of shape
  // How the file orders the elements (gpt-oss's experts, as transformers holds them):
  // kSame zt's order; kGateUpT the file [E, C, 2I] with gate and up interleaved (column 2i
  // gate i, 2i + 1 up i) for zt's [E, 2I, C] (gate rows, then up rows); kDownT the file
  // [E, I, C] for zt's [E, C, I]; kInterleave the file [E, 2I, K] with rows interleaved
  // (row 2i gate i, 2i + 1 up i) for zt's [E, 2I, K] (gate rows, then up rows).
  enum Order : uint8_t { kSame, kGateUpT, kDownT, kInterleave } order = kSame;
  int64_t E = 0, rows = 0, cols = 0;  // kGateUpT: E, I, C; kDownT: E, C, I; kInterleave: E, I, K
};

// One piece's elements between the file's order and zt's (numel each).
void hf_to_zt(const HfPiece& p, const float* file, float* zt);
void zt_to_hf(const HfPiece& p, const float* zt, float* file);
void zt_to_hf(const HfPiece& p, const double* zt, double* file);  // (a gradient in double)

// The order of a LoRA B [out, r*E] in PEFT's adapter file: kInterleave (E 1, rows I,
// cols r*E) for gpt-oss's experts.gate_up (PEFT's rows are the file's gate_up_proj
// columns, gate and up interleaved; zt's B rows are gate then up), kSame otherwise. The
// same rule as the base tensor's (hf_pieces).
HfPiece hf_lora_b_piece(const model::Config& cfg, const std::string& name, model::LoraTarget target,
                        int64_t out, int64_t cols);

// Every tensor of the folder form of `layout`, in layout order. fused: a Mixtral's
// experts under transformers 5's run-time names (one piece per zt tensor); otherwise
// the per-expert tensors (Mixtral's w1/w3/w2, Qwen's gate_proj/up_proj/down_proj: what
// export writes).
std::vector<HfPiece> hf_pieces(const model::ParamLayout& layout, bool fused = false);

}  // namespace zt::ckpt
