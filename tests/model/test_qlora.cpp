// QLoRA on the CPU model (model/lora.hpp): the base's targeted W in NF4 with double
// quantisation, dequantised per use. The layout without those W (names, shapes, init by
// name), a model on it refusing a pass before bind_qlora; logits, loss and adapter
// gradients equal LoRA's on the dequantised base bit for bit (and differ from LoRA's on the
// original base); the base from a unit reader; fp64 and a missing adapter refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <stdexcept>
#include <string>

#include "model_fixtures.hpp"
#include "zt/core/error.hpp"
#include "zt/model/lora.hpp"

namespace zt::model {
namespace {
using testing::lora_all;
using testing::unit_spans;

// QLoRA: W of the targeted projections from NF4 + double quantisation, dequantised per use.
// Its logits, loss and adapter gradients equal LoRA's on a base whose targeted W are
// replaced by their dequantised values, bit for bit; they differ from LoRA's on the
// original base (the quantisation happened).
// QLoRA's layout (ParamLayout(cfg, lora), lora_base_layout): the base units without W of
// the targeted projections (a tied lm_head's W is the embedding, which stays), every
// other tensor with its name and shape, initialised to the whole model's values (init is
// by name and element); a Model on it refuses a pass before bind_qlora, and a base that
// lacks a left-out W; with the base bound it computes what Model(cfg) with the W in fp32
// units and the same base does, bit for bit (loss, adapters' gradients, last logits).
void qlora_layout(bool tied, uint32_t targets) {
  Config cfg = Config::preset("tiny");
  cfg.tied_embeddings = tied;
  LoraConfig lc = lora_all(4, 0.0);
  lc.method = FinetuneMethod::kQlora;
  lc.targets = targets;
  const ParamLayout whole(cfg), base = lora_base_layout(cfg, lc), run(cfg, lc);
  const LoraLayout ll(cfg, lc);
  ASSERT_EQ(run.num_units(), whole.num_units() + 1);
  const uint32_t out = tied ? targets & ~(1u << static_cast<int>(LoraTarget::kLmHead)) : targets;
  EXPECT_EQ(base.left_out(), out);
  EXPECT_EQ(run.left_out(), out);
  std::set<std::string> left;  // the W the units leave out
  for (const LoraAdapterInfo& a : ll.adapters())
    if (!(tied && a.target == LoraTarget::kLmHead)) left.insert(a.name + ".weight");
  int64_t left_numel = 0;
  InitOptions init{77, 0.02, true};
  for (const TensorInfo& t : whole.tensors()) {
    const TensorInfo* r = base.try_find(t.name);
    if (left.count(t.name)) {
      EXPECT_EQ(r, nullptr) << t.name;
      EXPECT_EQ(run.try_find(t.name), nullptr) << t.name;
      left_numel += t.numel;
      continue;
    }
    ASSERT_NE(r, nullptr) << t.name;
    EXPECT_EQ(r->shape, t.shape);
    EXPECT_EQ(r->unit, t.unit);
    EXPECT_TRUE(run.frozen(r->unit));
  }
  EXPECT_EQ(base.total_numel(), whole.total_numel() - left_numel);
  EXPECT_EQ(run.total_numel(), base.total_numel() + ll.numel());
  for (int u = 0; u < whole.num_units(); ++u) {  // the same initial values, by name
    std::vector<float> w(static_cast<size_t>(whole.unit(u).numel)), r(static_cast<size_t>(base.unit(u).numel));
    init_unit<float>(whole, u, init, w);
    init_unit<float>(base, u, init, r);
    for (int i = base.unit(u).first_tensor; i < base.unit(u).first_tensor + base.unit(u).num_tensors; ++i) {
      const TensorInfo& t = base.tensors()[static_cast<size_t>(i)];
      const TensorInfo& f = whole.find(t.name);
      EXPECT_EQ(0, std::memcmp(r.data() + t.offset, w.data() + f.offset, static_cast<size_t>(t.numel) * sizeof(float)))
          << t.name;
    }
  }
  const BlockOffsets& o = base.block_offsets();
  if (lc.has_target(LoraTarget::kQ)) {
    EXPECT_EQ(o.q, 0);
  }
  if (!tied) {
    EXPECT_EQ(base.lm_head_offset(), lc.has_target(LoraTarget::kLmHead) ? 0 : cfg.hidden);
  }

  // The model on it, against the whole model with the same base.
  Parameters<float> P(whole), R(base);
  P.init(init);
  R.init(init);
  const QloraBase q(ll, whole, unit_spans(P));
  std::vector<float> lp(static_cast<size_t>(ll.numel()));
  std::mt19937_64 rng(9);
  std::normal_distribution<float> d(0.0f, 0.2f);
  for (auto& v : lp) v = d(rng);
  std::vector<float> g_w(lp.size(), 0.0f), g_r(lp.size(), 0.0f);
  const int64_t B = 2, T = 16;
  Model<float> mw(cfg, B, T), mr(base, B, T);
  for (int u = 0; u < whole.num_units(); ++u) {
    mw.bind_unit(u, P.params(u), {});
    mr.bind_unit(u, R.params(u), {});
  }
  mw.bind_lora(ll, lp, g_w);
  mw.bind_qlora(q);
  mr.bind_lora(ll, lp, g_r);
  const auto tok = testing::random_tokens(B * T, cfg.vocab, 31);
  const auto tgt = testing::random_tokens(B * T, cfg.vocab, 32);
  EXPECT_THROW(mr.loss(tok, tgt, B, T), std::logic_error);  // no base bound: no W
  LoraConfig fewer = lc;  // a base without the first targeted W
  fewer.targets &= fewer.targets - 1;
  if (fewer.targets != 0) {
    const LoraLayout lf(cfg, fewer);
    const QloraBase qf(lf, whole, unit_spans(P));
    EXPECT_THROW(mr.bind_qlora(qf), std::logic_error);
  }
  mr.bind_qlora(q);
  const double lw = mw.loss_and_grad(tok, tgt, B, T), lr = mr.loss_and_grad(tok, tgt, B, T);
  EXPECT_EQ(0, std::memcmp(&lw, &lr, sizeof lw)) << lw << " vs " << lr;
  EXPECT_EQ(g_w, g_r);
  std::vector<float> xw(static_cast<size_t>(cfg.vocab)), xr(xw.size());
  mw.logits_last(std::span(tok).first(T), T, xw);
  mr.logits_last(std::span(tok).first(T), T, xr);
  EXPECT_EQ(xw, xr);
}

TEST(Qlora, LayoutLeavesOutTheTargetedWUntied) { qlora_layout(false, kProjectionTargets); }
TEST(Qlora, LayoutLeavesOutTheTargetedWTied) { qlora_layout(true, kProjectionTargets); }
TEST(Qlora, LayoutLeavesOutTheTargetedWSome) {  // q, v, down and lm_head
  const uint32_t some = (1u << static_cast<int>(LoraTarget::kQ)) | (1u << static_cast<int>(LoraTarget::kV)) |
                        (1u << static_cast<int>(LoraTarget::kDown)) | (1u << static_cast<int>(LoraTarget::kLmHead));
  qlora_layout(false, some);
  qlora_layout(true, some);
}

TEST(Qlora, EqualsLoraOnTheDequantisedBase) {
  const Config cfg = Config::preset("tiny");
  ParamLayout layout(cfg);
  Parameters<float> P(layout), Pdq(layout);
  testing::init_general(P, layout, 0.05, 3);
  LoraConfig lc = lora_all(4, 0.0);
  lc.targets &= ~(1u << static_cast<int>(LoraTarget::kO));  // one untargeted projection
  const LoraLayout ll(cfg, lc);
  const QloraBase q(ll, layout, unit_spans(P));
  // The reference base: P with each targeted W replaced by nf4::dequantize of it.
  for (int u = 0; u < layout.num_units(); ++u)
    std::copy(P.params(u).begin(), P.params(u).end(), Pdq.params(u).begin());
  int64_t quantized = 0;
  for (const auto& a : ll.adapters()) {
    const TensorInfo& t = layout.find(a.name + ".weight");
    const kernels::nf4::Quantized* w = q.find(a.layer, a.target);
    ASSERT_NE(w, nullptr);
    ASSERT_EQ(w->n, t.numel);
    kernels::nf4::dequantize(*w, Pdq.params(t.unit).subspan(static_cast<size_t>(t.offset),
                                                             static_cast<size_t>(t.numel)));
    quantized += t.numel;
  }
  EXPECT_EQ(q.find(0, LoraTarget::kO), nullptr);
  EXPECT_EQ(q.bytes(), [&] {
    int64_t b = 0;
    for (const auto& a : ll.adapters()) b += kernels::nf4::quantized_bytes(a.in * a.out);
    return b;
  }());
  std::printf("[qlora] %lld weights quantised to %lld bytes (%.3f bits each)\n",
              static_cast<long long>(quantized), static_cast<long long>(q.bytes()),
              8.0 * static_cast<double>(q.bytes()) / static_cast<double>(quantized));

  std::vector<float> lp(static_cast<size_t>(ll.numel()));
  std::mt19937_64 rng(5);
  std::normal_distribution<float> d(0.0f, 0.2f);
  for (auto& v : lp) v = d(rng);
  std::vector<float> g_q(lp.size(), 0.0f), g_l(lp.size(), 0.0f), g_o(lp.size(), 0.0f);
  Model<float> mq(cfg), ml(cfg), mo(cfg);
  for (int u = 0; u < layout.num_units(); ++u) {
    mq.bind_unit(u, P.params(u), {});
    ml.bind_unit(u, Pdq.params(u), {});
    mo.bind_unit(u, P.params(u), {});
  }
  mq.bind_lora(ll, lp, g_q);
  mq.bind_qlora(q);
  ml.bind_lora(ll, lp, g_l);
  mo.bind_lora(ll, lp, g_o);

  const int64_t B = 2, T = 16;
  const auto tok = testing::random_tokens(B * T, cfg.vocab, 21);
  const auto tgt = testing::random_tokens(B * T, cfg.vocab, 22);
  std::vector<float> lq(static_cast<size_t>(cfg.vocab)), ll_(lq.size()), lo(lq.size());
  mq.logits_last(std::span(tok).first(T), T, lq);
  ml.logits_last(std::span(tok).first(T), T, ll_);
  mo.logits_last(std::span(tok).first(T), T, lo);
  EXPECT_EQ(lq, ll_);
  EXPECT_NE(lq, lo);
  EXPECT_EQ(mq.loss(tok, tgt, B, T), ml.loss(tok, tgt, B, T));
  EXPECT_EQ(mq.loss_and_grad(tok, tgt, B, T), ml.loss_and_grad(tok, tgt, B, T));
  EXPECT_EQ(g_q, g_l);
  // The key/value-cache path reads the same dequantised weights.
  KvCache<float> cache(cfg, T);
  std::vector<float> lkv(lq.size());
  mq.decode(std::span(tok).first(T), cache, lkv);
  KvCache<float> cache_l(cfg, T);
  std::vector<float> lkv_l(lq.size());
  ml.decode(std::span(tok).first(T), cache_l, lkv_l);
  EXPECT_EQ(lkv, lkv_l);
}

// QloraBase from a unit reader (the engine's: one unit of fp32 values live at a time):
// each W equals nf4::quantize of that tensor (the independent reference), and the reader
// is asked once for each unit holding a targeted W, for no other. The reader hands out
// one buffer, overwritten at each call, so a W quantised from a stale unit shows.
void qlora_from_reader(bool tied) {
  const Config cfg = testing::small_config(tied);
  ParamLayout layout(cfg);
  Parameters<float> P(layout);
  testing::init_general(P, layout, 0.2, 5);
  LoraConfig lc = lora_all(2, 0.0);
  lc.targets &= ~(1u << static_cast<int>(LoraTarget::kV));  // one untargeted projection
  const LoraLayout ll(cfg, lc);
  std::vector<int> asked;   // units in the order read
  std::vector<float> held;  // [numel] of the unit read last
  const QloraBase q(ll, layout, [&](int u) -> std::span<const float> {
    asked.push_back(u);
    held.assign(P.params(u).begin(), P.params(u).end());
    return held;
  });
  std::vector<int> expected;  // blocks, then the head's unit (tied: the embedding's)
  for (int l = 0; l < static_cast<int>(cfg.layers); ++l) expected.push_back(layout.block_unit(l));
  expected.push_back(tied ? ParamLayout::kEmbeddingUnit : layout.head_unit());
  EXPECT_EQ(asked, expected) << (tied ? "tied" : "untied");
  for (const auto& a : ll.adapters()) {
    const bool tied_head = tied && a.target == LoraTarget::kLmHead;
    const TensorInfo& t =
        layout.find(tied_head ? std::string("model.embed_tokens.weight") : a.name + ".weight");
    const kernels::nf4::Quantized ref = kernels::nf4::quantize(
        std::span<const float>(P.params(t.unit)).subspan(static_cast<size_t>(t.offset),
                                                         static_cast<size_t>(t.numel)));
    const kernels::nf4::Quantized* w = q.find(a.layer, a.target);
    ASSERT_NE(w, nullptr) << a.name;
    EXPECT_EQ(w->n, ref.n) << a.name;
    EXPECT_EQ(w->codes, ref.codes) << a.name;
    EXPECT_EQ(w->absmax_codes, ref.absmax_codes) << a.name;
    EXPECT_EQ(w->absmax_scale, ref.absmax_scale) << a.name;
    EXPECT_EQ(w->offset, ref.offset) << a.name;
  }
  EXPECT_EQ(q.find(0, LoraTarget::kV), nullptr);
}

TEST(Qlora, FromAUnitReaderUntied) { qlora_from_reader(false); }
TEST(Qlora, FromAUnitReaderTied) { qlora_from_reader(true); }

TEST(Qlora, RefusesFp64AndNeedsAdapters) {
  const Config cfg = testing::small_config();
  ParamLayout layout(cfg);
  Parameters<float> P(layout);
  testing::init_general(P, layout, 0.3, 7);
  const LoraLayout ll(cfg, lora_all(2, 0.0));
  const QloraBase q(ll, layout, unit_spans(P));
  Model<float> m(cfg);
  EXPECT_THROW(m.bind_qlora(q), Error);  // no adapters bound yet
  Model<double> md(cfg);
  std::vector<double> lp(static_cast<size_t>(ll.numel()));
  md.bind_lora(ll, lp, {});
  try {
    md.bind_qlora(q);
    ADD_FAILURE() << "QLoRA on Model<double> accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("finetune.method"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zt::model
