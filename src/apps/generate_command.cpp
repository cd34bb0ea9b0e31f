// `zt generate`: text from a trained model (a zt checkpoint, a ckpt.dir, a weights file
// for ckpt.init_from, a LoRA adapter checkpoint merged into its base, or a Hugging Face
// folder), one process, with a key/value cache.
// Sampling: greedy (--temperature 0), temperature, top-k, top-p; stops after
// --max-new-tokens, at an --eos id or a --stop string. The prompt is encoded with the
// model's tokenizer (--tokenizer, the one a Hugging Face folder holds, or the one the
// checkpoint's training data was made with), as Hugging Face encodes it, and the output
// decoded; --chat wraps it as a user turn of the chat template and stops at the turn's
// end. Without a tokenizer the prompt is byte-tokenized (the vocabulary must hold bytes)
// or given as ids.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <optional>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "options.hpp"
#include "zt/ckpt/hf_convert.hpp"
#include "zt/core/error.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/log.hpp"
#include "zt/core/memory.hpp"
#include "zt/core/units.hpp"
#include "zt/data/chat_template.hpp"
#include "zt/data/text_tokenizer.hpp"
#include "zt/estimate/estimate.hpp"
#include "zt/model/model.hpp"
#include "zt/train/config.hpp"
#include "zt/train/generate.hpp"

namespace zt::apps {
namespace {

constexpr int64_t kMaxId = std::numeric_limits<int32_t>::max();  // token ids are int32

struct GenerateArgs {
  std::string weights;
  std::string base;                     // --base: an adapter checkpoint's base
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<std::string> prompt_ids_text, eos_text;  // as typed (options.hpp: int_list)
  int64_t max_new_tokens = 100;
  double temperature = 0.8;
  int64_t top_k = 50;
  double top_p = 1.0;
  uint64_t seed = 42;
  int64_t window = 0;
  std::vector<int32_t> eos;
  std::vector<std::string> stop;
  int threads = 0;
  bool json = false;
  std::string tokenizer;                // --tokenizer PATH
  bool chat = false;                    // --chat
  std::string chat_template = "auto";   // --chat-template
  bool no_thinking = false;             // --no-thinking (enable_thinking=False)
};

// The tokenizer of the run: --tokenizer, else a Hugging Face folder's own, else the one
// the checkpoint records (its hash checked: files that changed since are refused), else
// none (bytes or ids).
std::unique_ptr<data::TextTokenizer> tokenizer_of(const GenerateArgs& a, const ckpt::Weights& w) {
  if (!a.tokenizer.empty()) return data::load_tokenizer(a.tokenizer);
  std::error_code ec;
  if (std::filesystem::is_directory(a.weights, ec) &&
      std::filesystem::exists(std::filesystem::path(a.weights) / "config.json", ec)) {
    const std::vector<std::string> files = data::tokenizer_files(a.weights);
    const bool has = std::any_of(files.begin(), files.end(), [](const std::string& f) {
      return f.ends_with("tokenizer.json") || f.ends_with("tokenizer.model");
    });
    return has ? data::load_tokenizer(a.weights) : nullptr;
  }
  if (w.tokenizer.name.empty()) return nullptr;
  data::verify_tokenizer(w.tokenizer.path, w.tokenizer.hash,
                         "checkpoint '" + w.source + "' (trained on tokenizer \"" + w.tokenizer.name + "\")");
  return data::load_tokenizer(w.tokenizer.path);
}

// The id of `text` when it is one token of the tokenizer (a template's end token).
std::optional<int32_t> single_token(const data::TextTokenizer& t, const std::string& text) {
  if (text.empty()) return std::nullopt;
  const std::vector<uint32_t> ids = t.encode(text);
  if (ids.size() != 1) return std::nullopt;
  return static_cast<int32_t>(ids[0]);
}

std::string bytes_text(std::span<const int32_t> ids) {
  std::string s;
  for (const int32_t id : ids) s.push_back(static_cast<char>(static_cast<unsigned char>(id)));
  return s;
}

// Before the cache is allocated: what the run will allocate (estimate::generation_bytes:
// the cache, RoPE tables, one prefill chunk's scratch) against memory_room() (MemAvailable,
// a cgroup's memory.max, the room under ulimit -v); more is exit 2 with the bytes, not the
// OOM killer or a bad_alloc.
void check_generation_memory(const model::Config& cfg, int64_t capacity, int64_t prompt,
                             int64_t new_tokens) {
  const estimate::GenerationBytes b =
      estimate::generation_bytes(cfg, capacity, static_cast<int64_t>(train::kPrefillChunk));
  int64_t attention = 0;
  for (int64_t l = 0; l < cfg.layers; ++l) attention += cfg.linear(l) ? 0 : 1;
  require_memory(static_cast<double>(b.total()),
                 strf("generating %lld new tokens after a %lld-token prompt", static_cast<long long>(new_tokens),
                      static_cast<long long>(prompt)),
                 strf("a key/value cache of %lld positions x %lld attention layers x %lld key/value dims, %llu bytes%s, "
                      "RoPE tables and the prefill's scratch",
                      static_cast<long long>(capacity), static_cast<long long>(attention),
                      static_cast<long long>(cfg.kv_dim()), static_cast<unsigned long long>(b.cache),
                      cfg.linear_layers() ? " with the Gated DeltaNet layers' conv inputs and recurrent state" : ""),
                 "generate fewer tokens (--max-new-tokens), give a shorter prompt, or bound the tokens "
                 "the model sees with --window N");
}

int run_generate(const GenerateArgs& a) {
  if (a.prompt.empty() == a.prompt_ids.empty())
    throw InputError("zt generate needs exactly one of --prompt TEXT and --prompt-ids IDS",
                     "e.g. zt generate --weights ckpt/ --prompt 'ROMEO:'");
  if (a.chat && a.prompt.empty())
    throw InputError("--chat needs --prompt TEXT (the user's message)", "e.g. --chat --prompt 'Hello!'");
  omp_set_num_threads(train::resolve_threads(a.threads, 1, "--threads"));
  const auto t_load = std::chrono::steady_clock::now();
  ckpt::Weights w = ckpt::load_weights(a.weights, a.base);  // adapters: merged into their base
  const model::Config& cfg = w.config;
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();

  // With --prompt-ids, a tokenizer only when named (it decodes the output).
  const std::unique_ptr<data::TextTokenizer> tok =
      a.prompt_ids.empty() || !a.tokenizer.empty() ? tokenizer_of(a, w) : nullptr;
  if (a.chat && !tok)
    throw InputError("--chat needs the model's tokenizer, and none is known",
                     "name it with --tokenizer PATH (a folder holding tokenizer.json)");
  if (tok && static_cast<int64_t>(tok->info().vocab_size) > cfg.vocab)
    throw InputError(strf("tokenizer '%s' has %u ids, more than the model's vocabulary (%lld)",
                          tok->info().name.c_str(), tok->info().vocab_size, static_cast<long long>(cfg.vocab)),
                     "give the tokenizer the model was trained with (--tokenizer PATH)");
  std::vector<int32_t> prompt = a.prompt_ids;
  std::vector<int32_t> stop_ids = a.eos;
  std::string chat_name;
  const bool bytes = a.prompt_ids.empty() && !tok;
  if (tok && a.prompt_ids.empty()) {
    const data::TokenizerInfo& info = tok->info();
    std::vector<uint32_t> ids;
    if (a.chat) {  // as apply_chat_template(add_generation_prompt=True): the template adds specials
      const data::ChatTemplate& t = data::chat_template_for(a.chat_template, *tok);
      chat_name = data::chat_template_name(t);
      data::ChatTokens ct = data::chat_tokens_of(info);
      ct.enable_thinking = !a.no_thinking;
      std::string text;
      for (const data::ChatPiece& p : data::render_chat(t, {{"user", a.prompt}}, ct, true, "--prompt"))
        text += p.text;
      ids = tok->encode(text);
      if (const auto end = single_token(*tok, data::chat_end_text(t, ct))) stop_ids.push_back(*end);
    } else {  // as tokenizer(prompt): BOS/EOS as tokenizer_config.json says
      ids = tok->encode_with_specials(a.prompt);
    }
    prompt.assign(ids.begin(), ids.end());
    if (info.eos) stop_ids.push_back(static_cast<int32_t>(*info.eos));
    if (prompt.empty())
      throw InputError("--prompt encodes to no tokens", "give a prompt with some text");
  } else if (bytes) {
    if (cfg.vocab < 256)
      throw InputError(strf("--prompt is byte-tokenized, and the model's vocabulary has only "
                            "%lld ids", static_cast<long long>(cfg.vocab)),
                       "give the prompt as ids with --prompt-ids");
    for (const char ch : a.prompt) prompt.push_back(static_cast<unsigned char>(ch));
  }
  for (const int32_t id : prompt)
    if (id < 0 || id >= cfg.vocab)
      throw InputError(strf("--prompt-ids: id %d is outside the vocabulary [0, %lld)", id,
                            static_cast<long long>(cfg.vocab)),
                       "give ids of this model's tokenizer");
  // The options' ranges are checked while parsing (options.hpp); what depends on the model:
  for (const int32_t id : a.eos)
    if (id >= cfg.vocab)
      throw InputError(strf("--eos: id %d is outside the vocabulary [0, %lld)", id,
                            static_cast<long long>(cfg.vocab)),
                       "give an end-of-text id of this model's tokenizer");
  if (!(a.top_p > 0))
    throw InputError("--top-p: must be above 0 (the mass of the most likely tokens kept), got 0",
                     "e.g. --top-p 0.9; 1 keeps every token");

  model::Model<float> m(cfg, 1, 0);
  for (int u = 0; u < static_cast<int>(w.units.size()); ++u)
    m.bind_unit(u, w.units[static_cast<size_t>(u)], {});
  const int64_t window = a.window > 0 ? std::min(a.window, cfg.context) : cfg.context;
  if (a.window > cfg.context)
    log::warn(strf("--window %lld is more than the model's context (%lld tokens): the model sees at "
                   "most %lld; give --window %lld or less",
                   static_cast<long long>(a.window), static_cast<long long>(cfg.context),
                   static_cast<long long>(cfg.context), static_cast<long long>(cfg.context)));
  if (static_cast<int64_t>(prompt.size()) > window)
    log::warn(strf("the prompt is %zu tokens, more than the %lld the model sees (%s): only its last "
                   "%lld are used; give a shorter prompt%s",
                   prompt.size(), static_cast<long long>(window),
                   window < cfg.context ? "--window" : "the model's context", static_cast<long long>(window),
                   window < cfg.context ? ", or a larger --window" : ""));
  // The cache holds what this run decodes, not the context the model declares (issue 36,
  // class 6): the prompt's last `window` tokens + the new ones, at most the window (then
  // generate() restarts it from its last half). It never needs to grow past that.
  const int64_t held_prompt = std::min<int64_t>(static_cast<int64_t>(prompt.size()), window);
  const int64_t capacity = std::max<int64_t>(1, std::min(window, held_prompt + a.max_new_tokens));
  check_generation_memory(cfg, capacity, static_cast<int64_t>(prompt.size()), a.max_new_tokens);
  model::KvCache<float> cache(cfg, capacity);

  train::SampleOptions o;
  o.tokens = a.max_new_tokens;
  o.temperature = a.temperature;
  o.top_k = a.top_k;
  o.top_p = a.top_p;
  o.seed = a.seed;
  o.window = window;
  o.stop_ids = stop_ids;
  // Ids -> text: the tokenizer's decode (special tokens skipped), else one byte per id.
  const auto text_of = [&tok](std::span<const int32_t> ids) {
    if (!tok) return bytes_text(ids);
    const std::vector<uint32_t> u(ids.begin(), ids.end());
    return tok->decode(u);
  };
  if (!a.stop.empty()) {
    // Only the last tokens can end a match: one byte per token for bytes; with a tokenizer
    // every token but a special one decodes to a byte or more (16 more for those).
    size_t longest = 0;
    for (const std::string& s : a.stop) longest = std::max(longest, s.size());
    if (tok) longest += 16;
    o.stop = [&a, longest, &text_of](std::span<const int32_t> generated) {
      const std::string text = text_of(generated.last(std::min(longest, generated.size())));
      for (const std::string& s : a.stop)
        if (text.size() >= s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0)
          return true;
      return false;
    };
  }
  const auto t0 = std::chrono::steady_clock::now();
  const train::Generation g = train::generate(train::kv_decoder(m, cache), prompt, o);
  const double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double tok_s = gen_s > 0 ? static_cast<double>(g.tokens.size()) / gen_s : 0.0;

  if (a.json) {
    nlohmann::json j;
    j["prompt_ids"] = prompt;
    j["ids"] = g.tokens;
    if (tok || cfg.vocab <= 256) j["text"] = text_of(g.tokens);
    if (tok) j["tokenizer"] = tok->info().name;
    if (!chat_name.empty()) j["chat_template"] = chat_name;
    j["stop"] = train::stop_reason_name(g.reason);
    j["tokens_per_s"] = tok_s;
    j["seconds"] = gen_s;
    std::printf("%s\n", json_dump(j).c_str());
  } else if (a.chat) {
    std::printf("%s\n", text_of(g.tokens).c_str());
  } else if (bytes || tok) {
    std::printf("%s%s\n", a.prompt.c_str(), text_of(g.tokens).c_str());
  } else {
    std::string ids;
    for (const int32_t id : g.tokens) ids += (ids.empty() ? "" : " ") + std::to_string(id);
    std::printf("%s\n", ids.c_str());
  }
  std::fflush(stdout);
  log::info(strf("generated %zu tokens in %.2f s: %.1f tokens/s (prompt %zu tokens, window %lld, "
                 "stop: %s; weights %s loaded in %.2f s; tokenizer %s%s%s)",
                 g.tokens.size(), gen_s, tok_s, prompt.size(), static_cast<long long>(window),
                 train::stop_reason_name(g.reason), w.source.c_str(), load_s,
                 tok ? tok->info().name.c_str() : (bytes ? "bytes" : "none (ids)"),
                 chat_name.empty() ? "" : ", chat template ", chat_name.c_str()));
  return 0;
}

}  // namespace

Run add_generate_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Generate text from a trained model: a zt checkpoint or ckpt.dir, a ckpt.init_from "
      "weights file, or a Hugging Face folder. One process, key/value cache; greedy with "
      "--temperature 0. Prints the prompt and its continuation, then tokens/s (log).");
  auto a = std::make_shared<GenerateArgs>();
  cmd->add_option("--weights", a->weights,
                  "CKPT.h5, a ckpt.dir (the checkpoint `latest` names), or a Hugging Face "
                  "folder (config.json + safetensors)")
      ->required();
  cmd->add_option("--base", a->base,
                  "with a LoRA adapter checkpoint as --weights: its base checkpoint (default: "
                  "the file's base_path); the adapters are merged into it")
      ->option_text("PATH");
  cmd->add_option("--prompt", a->prompt,
                  "prompt text: encoded with the model's tokenizer (BOS as tokenizer_config.json "
                  "says), or byte-tokenized when there is none");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "the model's tokenizer: a folder holding tokenizer.json or tokenizer.model, or "
                  "the file (default: the Hugging Face folder's own, else the one the checkpoint "
                  "records)")
      ->option_text("PATH");
  cmd->add_flag("--chat", a->chat,
                "wrap --prompt as a user turn of the chat template, print only the reply, stop at "
                "the turn's end token");
  cmd->add_option("--chat-template", a->chat_template,
                  "with --chat: auto (default: from tokenizer_config.json's chat_template) or " +
                      data::chat_template_names())
      ->option_text("NAME");
  cmd->add_flag("--no-thinking", a->no_thinking,
                "with --chat: the template's enable_thinking=False (qwen3.5: an empty think block, "
                "a reply without reasoning)");
  cmd->add_option("--prompt-ids", a->prompt_ids_text, "prompt token ids, e.g. 1,2,3")
      ->check(int_list_in(0, kMaxId));
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "tokens to generate at most (default 100)")
      ->check(int_in(0, 10'000'000));  // as sample.tokens (a huge count ran for ever: issue 20)
  cmd->add_option("--temperature", a->temperature, "sampling temperature; 0: greedy (default 0.8)")
      ->check(number_in(0, 1000));
  cmd->add_option("--top-k", a->top_k, "keep the k most likely tokens; 0: all (default 50)")
      ->check(int_in(0, kMaxId));
  cmd->add_option("--top-p", a->top_p, "nucleus: keep the most likely tokens up to this mass, above 0 (default 1)")
      ->check(number_in(0, 1));
  cmd->add_option("--seed", a->seed, "seed of the sampler (default 42)")
      ->check(int_in(0, std::numeric_limits<int64_t>::max()));
  cmd->add_option("--window", a->window,
                  "tokens the model sees at most (0: its context); when full, it restarts from "
                  "its last half")
      ->check(int_in(0, 1 << 30));
  cmd->add_option("--eos", a->eos_text, "stop after this token id (repeatable; or 1,2)")
      ->check(int_list_in(0, kMaxId));
  cmd->add_option("--stop", a->stop, "stop when the output ends with this text (repeatable)");
  cmd->add_option("--threads", a->threads, "OpenMP threads (0: the cores)")
      ->check(int_in(0, train::kMaxThreads));
  cmd->add_flag("--json", a->json,
                "print one JSON line: prompt_ids, ids, text (byte models), stop, tokens_per_s");
  return [a, cmd]() -> int {
    const std::string greedy = "--temperature 0 is greedy (the most likely token); give a temperature above 0 to sample";
    warn_inert_options(*cmd, {{"--chat-template", !a->chat, "it applies with --chat; add --chat, or leave it out"},
                              {"--no-thinking", !a->chat, "it applies with --chat; add --chat, or leave it out"},
                              {"--top-k", a->temperature == 0, greedy},
                              {"--top-p", a->temperature == 0, greedy},
                              {"--seed", a->temperature == 0, greedy}});
    for (const int64_t id : int_list(a->prompt_ids_text)) a->prompt_ids.push_back(static_cast<int32_t>(id));
    for (const int64_t id : int_list(a->eos_text)) a->eos.push_back(static_cast<int32_t>(id));
    return run_generate(*a);
  };
}

}  // namespace zt::apps
