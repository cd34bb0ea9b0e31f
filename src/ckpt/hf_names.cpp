// Hugging Face tensor names <-> zt's layout (see hf_names.hpp).
#include "hf_names.hpp"

#include <algorithm>

#include "zt/core/log.hpp"
#include "zt/model/family.hpp"

namespace zt::ckpt {

std::vector<HfPiece> hf_pieces(const model::ParamLayout& layout, bool fused) {
  const model::Config& cfg = layout.config();
  const int64_t C = cfg.hidden, I = cfg.expert_width(), E = cfg.experts;
  // Per-expert file names: Mixtral's block_sparse_moe.experts.E.w1 (gate) / w3 (up) / w2
  // (down) and block_sparse_moe.gate (router), Qwen's mlp.experts.E.gate_proj / up_proj /
  // down_proj and mlp.gate.
  const bool mixtral = model::family(cfg.family).moe == model::Family::kMixtral;
  const char* moe = mixtral ? "block_sparse_moe." : "mlp.";
  const auto expert = [&](int64_t e, int which) {  // which: 0 gate, 1 up, 2 down
    static const char* const kMixtral[] = {"w1", "w3", "w2"};
    static const char* const kQwen[] = {"gate_proj", "up_proj", "down_proj"};
    return strf("%sexperts.%lld.%s.weight", moe, static_cast<long long>(e),
                (mixtral ? kMixtral : kQwen)[which]);
  };
  std::vector<HfPiece> out;
  const auto& tensors = layout.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const model::TensorInfo& t = tensors[i];
    const int ti = static_cast<int>(i);
    const auto cut = [&](const std::string& suffix) {  // "mlp.gate.weight" -> its prefix
      return t.name.size() > suffix.size() && t.name.ends_with(suffix)
                 ? std::optional<std::string>(t.name.substr(0, t.name.size() - suffix.size()))
                 : std::nullopt;
    };
    const bool gpt_oss = model::family(cfg.family).moe == model::Family::kGptOss;
    if (gpt_oss && cut("mlp.experts.gate_up_proj")) {
      out.push_back({t.name, {E, C, 2 * I}, ti, 0, t.numel, HfPiece::kGateUpT, E, I, C});
    } else if (gpt_oss && cut("mlp.experts.down_proj")) {
      out.push_back({t.name, {E, I, C}, ti, 0, t.numel, HfPiece::kDownT, E, C, I});
    } else if (gpt_oss && cut("mlp.experts.gate_up_proj_bias")) {
      out.push_back({t.name, {E, 2 * I}, ti, 0, t.numel, HfPiece::kInterleave, E, I, 1});
    } else if (!cfg.moe() || fused) {
      out.push_back({t.name, t.shape, ti, 0, t.numel});
    } else if (auto router = cut("mlp.gate.weight")) {
      out.push_back({*router + moe + "gate.weight", t.shape, ti, 0, t.numel});
    } else if (auto gu = cut("mlp.experts.gate_up_proj")) {  // [E, 2I, C]: gate then up per expert
      for (int64_t e = 0; e < E; ++e)
        for (int half = 0; half < 2; ++half)
          out.push_back({*gu + expert(e, half), {I, C}, ti, (2 * e + half) * I * C, I * C});
    } else if (auto down = cut("mlp.experts.down_proj")) {  // [E, C, I]: down per expert
      for (int64_t e = 0; e < E; ++e)
        out.push_back({*down + expert(e, 2), {C, I}, ti, e * C * I, C * I});
    } else {
      out.push_back({t.name, t.shape, ti, 0, t.numel});
    }
  }
  return out;
}

HfPiece hf_lora_b_piece(const model::Config& cfg, const std::string& name, model::LoraTarget target,
                        int64_t out, int64_t cols) {
  HfPiece p{name, {out, cols}, 0, 0, out * cols};
  if (model::family(cfg.family).moe == model::Family::kGptOss &&
      target == model::LoraTarget::kExpertsGateUp) {
    p.order = HfPiece::kInterleave;
    p.E = 1;
    p.rows = out / 2;
    p.cols = cols;
  }
  return p;
}

// (e, a, b) of zt's tensor <-> its index in the file's, for each order.
template <bool kToZt, class T>
void reorder(const HfPiece& p, const T* from, T* to) {
  const int64_t E = p.E, R = p.rows, K = p.cols;
  const auto move = [&](int64_t zt, int64_t file) {
    if (kToZt) to[zt] = from[file];
    else to[file] = from[zt];
  };
  switch (p.order) {
    case HfPiece::kSame:
      std::copy_n(from, p.numel, to);
      return;
    case HfPiece::kGateUpT:  // zt [E, 2R, K] (R = I, K = C), file [E, K, 2R]
      for (int64_t e = 0; e < E; ++e)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t i = 0; i < R; ++i)
            for (int64_t c = 0; c < K; ++c)
              move((e * 2 * R + h * R + i) * K + c, (e * K + c) * 2 * R + 2 * i + h);
      return;
    case HfPiece::kDownT:  // zt [E, R, K] (R = C, K = I), file [E, K, R]
      for (int64_t e = 0; e < E; ++e)
        for (int64_t r = 0; r < R; ++r)
          for (int64_t k = 0; k < K; ++k) move((e * R + r) * K + k, (e * K + k) * R + r);
      return;
    case HfPiece::kInterleave:  // zt [E, 2R, K] gate rows then up rows, file rows interleaved
      for (int64_t e = 0; e < E; ++e)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t i = 0; i < R; ++i)
            for (int64_t k = 0; k < K; ++k)
              move((e * 2 * R + h * R + i) * K + k, (e * 2 * R + 2 * i + h) * K + k);
      return;
  }
}

void hf_to_zt(const HfPiece& p, const float* file, float* zt) { reorder<true>(p, file, zt); }
void zt_to_hf(const HfPiece& p, const float* zt, float* file) { reorder<false>(p, zt, file); }
void zt_to_hf(const HfPiece& p, const double* zt, double* file) { reorder<false>(p, zt, file); }

}  // namespace zt::ckpt
