#pragma once
// The prompt of the sample after training (private to zt_train; trainer.cpp).
#include <cstdint>
#include <memory>
#include <vector>

#include "zt/comm/comm.hpp"
#include "zt/data/text_tokenizer.hpp"
#include "zt/data/token_file.hpp"
#include "zt/train/config.hpp"

namespace zt::train {

// The prompt of the sample after training, and the ids that end it, from rank 0 to every
// rank: sample.prompt one id per byte with the byte tokenizer, else encoded as Hugging
// Face's tokenizer(prompt) with the tokenizer the token file names (its recorded hash
// checked), EOS ending it. An empty prompt means no sample (the reason already logged).
struct SamplePrompt {
  std::vector<int32_t> ids, stop_ids;
  std::unique_ptr<data::TextTokenizer> tokenizer;  // rank 0, text tokenizers only
};

SamplePrompt sample_prompt(const TrainConfig& cfg, const data::TokenFile& data, comm::Comm& comm,
                           int rank);

}  // namespace zt::train
