// libFuzzer target: every reader of training examples on arbitrary bytes: the
// instruction-data readers (zt::data::read_sft_examples, Alpaca JSON array / JSONL,
// prompt-response JSONL and chat-messages JSONL), the preference pairs reader
// (read_preference_pairs: text and chat pairs) and the KTO reader (read_kto_examples), and
// the chat templates (render_chat with every template) on accepted conversations. The first
// byte picks the reader (mod 4: the three SFT formats, then pairs, or KTO rows when its bit 2
// is set too); the rest is written to an anonymous in-memory file (memfd) and read through its
// /proc/self/fd path, the way a user's file would be. Anything rejected must be a
// zt::Error (InputError naming FILE:LINE and the field); an accepted file must give at
// least one example, each passing the examples' rule (a conversation renders to text).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "zt/core/error.hpp"
#include "zt/data/chat_template.hpp"
#include "zt/data/kto.hpp"
#include "zt/data/pairs.hpp"
#include "zt/data/sft.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using zt::data::SftFormat;
  const SftFormat formats[3] = {SftFormat::kAlpaca, SftFormat::kPromptResponse, SftFormat::kChat};
  const bool pairs = data[0] % 4 == 3 && (data[0] & 4) == 0;
  const bool kto = data[0] % 4 == 3 && (data[0] & 4) != 0;
  const SftFormat format = formats[data[0] % 4 % 3];
  const int fd = memfd_create("zt-fuzz-sft", 0);
  if (fd < 0) std::abort();
  for (size_t off = 1; off < size;) {
    const ssize_t n = write(fd, data + off, size - off);
    if (n <= 0) std::abort();
    off += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  std::vector<zt::data::SftExample> examples;
  try {
    if (kto) {
      std::vector<uint8_t> labels;
      const std::vector<zt::data::PromptCompletions> got = zt::data::read_kto_examples(path, labels);
      if (got.empty() || labels.size() != got.size()) std::abort();
      for (const zt::data::PromptCompletions& p : got)
        if (p.chat) {  // rendered below as prompt + completion
          std::vector<zt::data::ChatMessage> m = p.prompt_m;
          m.insert(m.end(), p.completions_m.at(0).begin(), p.completions_m.at(0).end());
          examples.push_back({{}, {}, std::move(m), p.where});
        }
    } else if (pairs) {
      const std::vector<zt::data::PreferencePair> got = zt::data::read_preference_pairs(path);
      if (got.empty()) std::abort();
      for (const zt::data::PreferencePair& p : got)
        if (p.chat) {  // rendered below as prompt + chosen, prompt + rejected
          for (const auto* c : {&p.chosen_m, &p.rejected_m}) {
            std::vector<zt::data::ChatMessage> m = p.prompt_m;
            m.insert(m.end(), c->begin(), c->end());
            examples.push_back({{}, {}, std::move(m), p.where});
          }
        }
    } else {
      examples = zt::data::read_sft_examples(path, format);
      if (examples.empty()) std::abort();
    }
  } catch (const zt::Error&) {
    // rejected with a message: fine
  }
  const bool chat = pairs || kto || format == SftFormat::kChat;
  const zt::data::ChatTokens tokens{"<s>", "</s>", true};
  for (const zt::data::SftExample& e : examples) {
    if (chat && e.messages.empty()) std::abort();
    for (const char* name : {"llama2", "llama3", "chatml", "alpaca", "gemma3", "gpt-oss", "qwen3.5"}) {
      try {
        std::string text;  // the pieces are the whole text, and only they
        for (const zt::data::ChatPiece& p : zt::data::render_chat(zt::data::chat_template(name), e.messages,
                                                                   tokens, true, e.where))
          text += p.text;
        if (text.empty()) std::abort();
      } catch (const zt::Error&) {
        // a conversation the template refuses (roles out of order...): fine
      }
    }
  }
  close(fd);
  return 0;
}
