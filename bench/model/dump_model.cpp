// dump_model: writes a model's parameters, a batch, and zt's loss, gradients and
// last-position logits to a folder, so that another implementation (the PyTorch peer:
// `python3 bench/peers/llama_torch.py --check DIR`) can recompute them from the same
// weights. A cross-implementation check of the Hugging Face conventions (names, [out, in]
// weights, rotate_half RoPE, GQA head mapping), not a test: it needs torch.
//
//   dump_model DIR [preset=tiny] [batch=2] [seq=64] [seed=1234]
// Files: manifest.json (config, tensors with unit/offset/shape, loss), unit_<u>.f32 (params),
// grad_<u>.f32, tokens.i32, targets.i32 ([B, T]), logits_last.f32 (sequence 0).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "zt/core/error.hpp"
#include "zt/model/model.hpp"

namespace {

template <class T>
void write_raw(const std::filesystem::path& p, const std::vector<T>& v) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!f) throw zt::Error("cannot write " + p.string(), "check the folder is writable.");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) {
      std::fprintf(stderr, "usage: dump_model DIR [preset=tiny] [batch=2] [seq=64] [seed=1234]\n");
      return 2;
    }
    const std::filesystem::path dir = argv[1];
    const std::string preset = argc > 2 ? argv[2] : "tiny";
    const int64_t B = argc > 3 ? std::stoll(argv[3]) : 2;
    const int64_t T = argc > 4 ? std::stoll(argv[4]) : 64;
    const uint64_t seed = argc > 5 ? std::stoull(argv[5]) : 1234;
    std::filesystem::create_directories(dir);

    const zt::model::Config cfg = zt::model::Config::preset(preset);
    zt::model::ParamLayout layout(cfg);
    zt::model::Parameters<float> P(layout);
    P.init({seed, 0.02, true});
    // give the norm weights non-trivial values so they are checked too
    for (const auto& t : layout.tensors()) {
      if (t.init != zt::model::InitKind::kOnes) continue;
      for (int64_t i = 0; i < t.numel; ++i)
        P.params(t.unit)[t.offset + i] = 1.0f + 0.1f * static_cast<float>(zt::model::init_standard_normal(seed, t.name, i));
    }
    zt::model::Model<float> model(cfg, B, T);
    P.bind(model);

    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(cfg.vocab - 1));
    std::vector<int32_t> tok(B * T), tgt(B * T);
    for (auto& t : tok) t = d(rng);
    for (auto& t : tgt) t = d(rng);
    tgt[1] = -100;  // ignored (PyTorch's default ignore_index)

    P.zero_grads();
    const double loss = model.loss_and_grad(tok, tgt, B, T);
    std::vector<float> logits(cfg.vocab);
    model.logits_last(std::span<const int32_t>(tok.data(), T), T, logits);

    nlohmann::json m;
    m["config"] = {{"name", cfg.name},         {"vocab", cfg.vocab},
                   {"hidden", cfg.hidden},     {"layers", cfg.layers},
                   {"heads", cfg.heads},       {"kv_heads", cfg.kv_heads},
                   {"intermediate", cfg.intermediate}, {"context", cfg.context},
                   {"tied_embeddings", cfg.tied_embeddings}, {"rope_theta", cfg.rope_theta},
                   {"norm_eps", cfg.norm_eps}};
    m["batch"] = B;
    m["seq"] = T;
    m["loss"] = loss;
    for (const auto& t : layout.tensors())
      m["tensors"].push_back({{"name", t.name}, {"unit", t.unit}, {"offset", t.offset}, {"shape", t.shape}});
    for (int u = 0; u < P.num_units(); ++u) {
      write_raw(dir / ("unit_" + std::to_string(u) + ".f32"),
                std::vector<float>(P.params(u).begin(), P.params(u).end()));
      write_raw(dir / ("grad_" + std::to_string(u) + ".f32"),
                std::vector<float>(P.grads(u).begin(), P.grads(u).end()));
    }
    write_raw(dir / "tokens.i32", tok);
    write_raw(dir / "targets.i32", tgt);
    write_raw(dir / "logits_last.f32", logits);
    std::ofstream(dir / "manifest.json") << m.dump(1) << "\n";
    std::printf("wrote %s: %s, batch %lld x %lld, loss %.7f\n", dir.c_str(), cfg.name.c_str(),
                static_cast<long long>(B), static_cast<long long>(T), loss);
    return 0;
  } catch (const zt::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(e.exit_code());
  }
}
