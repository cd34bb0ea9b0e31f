// zt_sft_loss: zt's masked loss of a batch, as JSON, for tests/ckpt/hf/sft_peer_test.py to
// set beside Hugging Face transformers (labels -100 on the prompt).
//
//   zt_sft_loss CKPT BATCH.json
//     CKPT        a zt checkpoint, read with zt::ckpt::read_full
//     BATCH.json  {"tokens": [[T ids] x B], "targets": [[T ids] x B] (-1: masked),
//                  "positions": [[T] x B] (optional: packed examples)}
//
// Prints {"loss": x, "count": n}: Model<float>::loss (the mean over the unmasked targets,
// positions and attention reset at each example start when positions are given) and the
// number of targets it is the mean over. Exit 0 on success, 1 with a message otherwise.
#include <cstdio>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "zt/ckpt/serial.hpp"
#include "zt/model/model.hpp"

namespace {
// rows [[T] x B] -> [B * T] row-major; T out
std::vector<int32_t> flat(const nlohmann::json& rows, int64_t* T) {
  std::vector<int32_t> out;
  for (const auto& r : rows) {
    *T = static_cast<int64_t>(r.size());
    for (const auto& x : r) out.push_back(x.get<int32_t>());
  }
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: zt_sft_loss CKPT BATCH.json\n");
    return 2;
  }
  try {
    const zt::ckpt::FullCheckpoint ck = zt::ckpt::read_full(argv[1]);
    const zt::model::Config& cfg = ck.header.config;
    std::ifstream in(argv[2]);
    const nlohmann::json batch = nlohmann::json::parse(in);
    int64_t T = 0;
    const std::vector<int32_t> tokens = flat(batch.at("tokens"), &T);
    const std::vector<int32_t> targets = flat(batch.at("targets"), &T);
    const std::vector<int32_t> positions =
        batch.contains("positions") ? flat(batch.at("positions"), &T) : std::vector<int32_t>{};
    const int64_t B = static_cast<int64_t>(batch.at("tokens").size());
    zt::model::Model<float> model(cfg, B, T);
    for (int u = 0; u < static_cast<int>(ck.params.size()); ++u)
      model.bind_unit(u, ck.params[static_cast<size_t>(u)], {});
    int64_t count = 0;
    for (const int32_t t : targets) count += t >= 0;
    nlohmann::json out;
    out["loss"] = model.loss(tokens, targets, B, T, positions);
    out["count"] = count;
    std::printf("%s\n", out.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt_sft_loss: %s\n", e.what());
    return 1;
  }
}
