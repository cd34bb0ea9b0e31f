// The prompt of the sample after training (see sample_prompt.hpp).
#include "sample_prompt.hpp"

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/data/tokenizer.hpp"

namespace zt::train {

SamplePrompt sample_prompt(const TrainConfig& cfg, const data::TokenFile& data, comm::Comm& comm,
                           int rank) {
  SamplePrompt p;
  if (rank == 0) {
    if (data.tokenizer == "bytes") {
      for (const char ch : cfg.sample_prompt)
        p.ids.push_back(static_cast<int32_t>(static_cast<unsigned char>(ch)));
    } else {
      try {
        data::verify_tokenizer(data.tokenizer_path, data.tokenizer_hash,
                               "the training data (tokenizer \"" + data.tokenizer + "\")");
        p.tokenizer = data::load_tokenizer(data.tokenizer_path);
        const std::vector<uint32_t> ids = p.tokenizer->encode_with_specials(cfg.sample_prompt);
        p.ids.assign(ids.begin(), ids.end());
        if (p.tokenizer->info().eos) p.stop_ids.push_back(static_cast<int32_t>(*p.tokenizer->info().eos));
      } catch (const InputError& e) {  // the checkpoint is saved: say why, skip the sample
        log::warn("no sample: " + e.message() +
                  "\n  HINT: the checkpoint is saved; `zt generate --weights CKPT --tokenizer PATH` "
                  "samples from it with the tokenizer named");
        p.ids.clear();
      }
    }
  }
  // [2] prompt length, stop id (-1: none), then the prompt: the same on every rank.
  int32_t head[2] = {static_cast<int32_t>(p.ids.size()), p.stop_ids.empty() ? -1 : p.stop_ids[0]};
  comm.broadcast(head, 2, DType::kI32, 0);
  p.ids.resize(static_cast<size_t>(head[0]));
  if (head[0] > 0) comm.broadcast(p.ids.data(), p.ids.size(), DType::kI32, 0);
  p.stop_ids.assign(head[1] >= 0 ? 1 : 0, head[1]);
  return p;
}

}  // namespace zt::train
