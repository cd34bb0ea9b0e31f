// zt_lora_logits: zt's LoRA forward for one checkpoint, one PEFT adapter file and one token
// sequence, as JSON, for tests/model/hf/lora_peer_test.py to set beside HF PEFT.
//
//   zt_lora_logits CKPT ADAPTER RANK ALPHA TARGETS RSLORA TOKENS DTYPE
//     CKPT     a zt checkpoint (read with zt::ckpt::read_full): the base
//     ADAPTER  PEFT's adapter_model.safetensors ("-": fresh adapters from zt's init, seed 1)
//     RANK, ALPHA, TARGETS ("q,v,lm_head"), RSLORA (0/1): the lora.* keys
//     TOKENS   comma-separated token ids t0,...,t(T-1)
//     DTYPE    f32 (Model<float>) or f64 (Model<double>, the weights widened exactly)
//
// Prints {"trainable": n, "all": n, "banner": "...", "logits": [[V] x T], "loss": x,
//         "grads": {"<PEFT name>.lora_A.weight": [r*in], "...lora_B.weight": [out*r], ...}}:
//   trainable, all, banner  model::trainable_counts / trainable_banner of the checkpoint's
//                           model and these keys
//   logits[i]  the logits of position i given t0..ti (Model::logits_last on each prefix)
//   loss       Model::loss: mean cross-entropy of t1..t(T-1) given the previous tokens
//   grads      d(loss)/d(adapter) of Model::loss_and_grad on the same tokens, per adapter
//              tensor (row-major, named as PEFT saves them, without "base_model.model.")
// Exit 0 on success, 1 with a message on stderr otherwise.
#include <cstdio>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "hf_names.hpp"  // src/ckpt: PEFT's row order of a B
#include "zt/ckpt/safetensors.hpp"
#include "zt/ckpt/serial.hpp"
#include "zt/core/error.hpp"
#include "zt/model/lora.hpp"
#include "zt/model/model.hpp"

namespace {

// A [r, in] and B [out, r] (experts: [E*r, in], [out, r*E]) of every adapter from PEFT's file (names
// "base_model.model.<module>.lora_A.weight"), into the packed buffer.
void read_peft_adapters(const std::string& path, const zt::model::Config& cfg,
                        const zt::model::LoraLayout& layout, std::vector<float>& params) {
  const zt::ckpt::StHeader h = zt::ckpt::read_safetensors_header(path);
  const int64_t r = layout.lora().rank;
  std::vector<float> t;
  size_t used = 0;
  for (const auto& a : layout.adapters()) {
    for (const char* ab : {"lora_A", "lora_B"}) {
      const std::string name = "base_model.model." + a.name + "." + ab + ".weight";
      const zt::ckpt::StTensor* st = h.find(name);
      if (!st) throw zt::Error("adapter file " + path + " has no tensor " + name);
      const bool is_a = ab[5] == 'A';
      // Experts' (PEFT's ParamWrapper): A [E*r, in], B [out, r*E].
      const std::vector<int64_t> shape = is_a ? std::vector<int64_t>{a.experts * r, a.in}
                                              : std::vector<int64_t>{a.out, r * a.experts};
      if (st->shape != shape) throw zt::Error(name + ": shape differs from zt's adapter");
      zt::ckpt::read_safetensors_tensor(path, h, *st, t);
      if (is_a)
        std::copy(t.begin(), t.end(), params.begin() + a.a_offset);
      else  // PEFT's row order (gpt-oss's gate_up interleaved) to zt's: the export's rule
        zt::ckpt::hf_to_zt(zt::ckpt::hf_lora_b_piece(cfg, name, a.target, a.out, r * a.experts), t.data(),
                           params.data() + a.b_offset);
      ++used;
    }
  }
  if (used != h.tensors.size()) throw zt::Error(path + " holds adapters zt did not target");
}

// The logits of every prefix and the loss of Model<R> over the checkpoint and adapters.
template <class R>
void forward(const zt::ckpt::FullCheckpoint& ck, const zt::model::LoraLayout& layout,
             const std::vector<float>& adapters, const std::vector<int32_t>& tokens,
             nlohmann::json& out) {
  const zt::model::Config& cfg = ck.header.config;
  const int64_t T = static_cast<int64_t>(tokens.size());
  std::vector<std::vector<R>> params;  // [units][numel]
  for (const auto& u : ck.params) params.emplace_back(u.begin(), u.end());
  const std::vector<R> lora(adapters.begin(), adapters.end());  // [layout.numel()]
  const std::unique_ptr<R[]> grad_buf = std::make_unique<R[]>(lora.size());  // zeroed
  const std::span<R> grads(grad_buf.get(), lora.size());                   // [layout.numel()]
  zt::model::Model<R> model(cfg, 1, T);
  for (int u = 0; u < static_cast<int>(params.size()); ++u)
    model.bind_unit(u, params[static_cast<size_t>(u)], {});
  model.bind_lora(layout, lora, grads);
  std::vector<R> row(static_cast<size_t>(cfg.vocab));  // [V]
  nlohmann::json logits = nlohmann::json::array();
  for (int64_t i = 1; i <= T; ++i) {
    model.logits_last(std::span<const int32_t>(tokens.data(), static_cast<size_t>(i)), i, row);
    logits.push_back(row);
  }
  out["logits"] = std::move(logits);
  std::vector<int32_t> targets(tokens.begin() + 1, tokens.end());
  const std::span<const int32_t> inputs(tokens.data(), targets.size());
  out["loss"] = model.loss(inputs, targets, 1, T - 1);
  model.loss_and_grad(inputs, targets, 1, T - 1);
  nlohmann::json g = nlohmann::json::object();
  for (const auto& a : layout.adapters()) {
    const int64_t r = layout.lora().rank;
    const auto slice = [&](int64_t at, int64_t n) {
      nlohmann::json v = nlohmann::json::array();
      for (int64_t k = 0; k < n; ++k) v.push_back(grads[static_cast<size_t>(at + k)]);
      return v;
    };
    g[a.name + ".lora_A.weight"] = slice(a.a_offset, a.experts * r * a.in);
    // B in PEFT's row order (gpt-oss's gate_up interleaved), as the export writes it
    std::vector<R> pb(static_cast<size_t>(a.out * r * a.experts));  // [out, r*E]
    zt::ckpt::zt_to_hf(zt::ckpt::hf_lora_b_piece(cfg, a.name, a.target, a.out, r * a.experts),
                       grads.data() + a.b_offset, pb.data());
    g[a.name + ".lora_B.weight"] = pb;
  }
  out["grads"] = std::move(g);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9 || (std::string(argv[8]) != "f32" && std::string(argv[8]) != "f64")) {
    std::fprintf(stderr,
                 "usage: zt_lora_logits CKPT ADAPTER RANK ALPHA TARGETS RSLORA TOKENS f32|f64\n");
    return 2;
  }
  try {
    const zt::ckpt::FullCheckpoint ck = zt::ckpt::read_full(argv[1]);
    const zt::model::Config& cfg = ck.header.config;
    zt::config::Schema schema;
    zt::model::add_finetune_keys(schema);
    const zt::config::Config keys = zt::config::load(
        schema, "",
        {"finetune.method=lora", std::string("lora.rank=") + argv[3],
         std::string("lora.alpha=") + argv[4], std::string("lora.targets=") + argv[5],
         std::string("lora.rslora=") + (std::string(argv[6]) == "1" ? "true" : "false")});
    const zt::model::LoraConfig lora = zt::model::resolve_lora(keys, cfg);
    const zt::model::LoraLayout layout(cfg, lora);
    std::vector<float> adapters(static_cast<size_t>(layout.numel()));  // [layout.numel()]
    if (std::string(argv[2]) == "-") {
      zt::model::init_lora<float>(layout, 1, adapters);
    } else {
      read_peft_adapters(argv[2], ck.header.config, layout, adapters);
    }
    std::vector<int32_t> tokens;
    std::stringstream ss(argv[7]);
    for (std::string item; std::getline(ss, item, ',');) tokens.push_back(std::stoi(item));

    const zt::model::TrainableCounts counts = zt::model::trainable_counts(cfg, lora);
    nlohmann::json out;
    out["trainable"] = counts.trainable;
    out["all"] = counts.all;
    out["banner"] = zt::model::trainable_banner(counts);
    if (std::string(argv[8]) == "f64") {
      forward<double>(ck, layout, adapters, tokens, out);
    } else {
      forward<float>(ck, layout, adapters, tokens, out);
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt_lora_logits: %s\n", e.what());
    return 1;
  }
}
