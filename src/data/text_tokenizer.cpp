// Loading a text tokenizer from a folder or file, tokenizer_config.json, the files' hash,
// batch encoding, and UTF-8 repair (see zt/data/text_tokenizer.hpp).
#include "zt/data/text_tokenizer.hpp"

#include <atomic>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "tokenizer_internal.hpp"
#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/hash.hpp"
#include "zt/core/json.hpp"
#include "zt/core/log.hpp"

namespace zt::data {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kPathHint =
    "--tokenizer names a Hugging Face model folder holding tokenizer.json or tokenizer.model "
    "(and tokenizer_config.json), or one of those files";

// bos_token / eos_token of tokenizer_config.json: a string, {"content": string}, or null.
std::optional<std::string> token_name(const json& cfg, const char* key, const std::string& where) {
  const auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && it->at("content").is_string())
    return it->at("content").get<std::string>();
  throw InputError("tokenizer config '" + where + "': " + key + " is " + describe_json(*it) +
                       ", not a token (a string or {\"content\": string})",
                   "fix tokenizer_config.json");
}

std::optional<bool> flag(const json& cfg, const char* key, const std::string& where) {
  const auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean())
    throw InputError("tokenizer config '" + where + "': " + key + " is " + describe_json(*it) +
                         ", not true or false",
                     "fix tokenizer_config.json");
  return it->get<bool>();
}

// "chat_template": a string, or a list of {"name", "template"} (the one named "default").
std::string chat_template_of(const json& cfg, const std::string& where) {
  const auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array())
    for (const json& t : *it)
      if (t.is_object() && t.value("name", json()) == "default" && t.contains("template") &&
          t.at("template").is_string())
        return t.at("template").get<std::string>();
  throw InputError("tokenizer config '" + where + "': chat_template is " + describe_json(*it) +
                       ", not a template string (or a list holding one named \"default\")",
                   "fix tokenizer_config.json, or name the template with --chat-template");
}

}  // namespace

std::vector<uint32_t> encode_for_row(const TextTokenizer& tokenizer, std::string_view text, size_t keep,
                                     size_t* encoded_bytes) {
  constexpr size_t kMargin = 64;
  for (size_t budget = 16 * (keep + kMargin); text.size() > budget; budget *= 4) {
    size_t cut = budget;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    std::vector<uint32_t> ids = tokenizer.encode(text.substr(0, cut));
    if (ids.size() >= keep + kMargin) {
      ids.resize(keep + 1);
      if (encoded_bytes) *encoded_bytes = cut;
      return ids;
    }
  }
  if (encoded_bytes) *encoded_bytes = text.size();
  return tokenizer.encode(text);
}

std::string utf8_replace_invalid(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto u = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = u(i);
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // Table 3-7: the length and the range of the second byte for each lead byte.
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) n = 3, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) n = 3;
    else if (c == 0xED) n = 3, hi = 0x9F;
    else if (c == 0xF0) n = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) n = 4, hi = 0x8F;
    size_t k = 1;  // bytes of the maximal subpart seen so far
    if (n > 0) {
      while (k < n && i + k < s.size()) {
        const unsigned char x = u(i + k);
        const bool ok = k == 1 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xBF);
        if (!ok) break;
        ++k;
      }
    }
    if (n > 0 && k == n) out.append(s.substr(i, n));
    else out += "\xEF\xBF\xBD";
    i += k;
  }
  return out;
}

void resolve_specials(TokenizerInfo& info, std::vector<uint32_t> prefix, std::vector<uint32_t> suffix,
                      std::string_view config, const std::string& where,
                      const std::function<std::optional<uint32_t>(const std::string&)>& id_of,
                      bool default_add_bos, std::optional<uint32_t> bos, std::optional<uint32_t> eos) {
  if (!prefix.empty()) bos = prefix.front();
  if (!suffix.empty()) eos = suffix.back();
  if (default_add_bos && bos) prefix = {*bos};
  if (!config.empty()) {
    const std::string cwhere = where + " (tokenizer_config.json)";
    const json cfg = parse_json_strict(config, "tokenizer config '" + cwhere + "'",
                                       "fix tokenizer_config.json, or remove it");
    if (!cfg.is_object())
      throw InputError("tokenizer config '" + cwhere + "' is " + describe_json(cfg) + ", not an object",
                       "fix tokenizer_config.json, or remove it");
    for (const auto& [key, slot] : {std::pair{"bos_token", &bos}, std::pair{"eos_token", &eos}}) {
      if (const auto name = token_name(cfg, key, cwhere)) {
        const auto id = id_of(*name);
        if (!id)
          throw InputError("tokenizer config '" + cwhere + "': " + key + " \"" + *name +
                               "\" is not a token of the tokenizer",
                           "fix tokenizer_config.json, or remove it");
        *slot = *id;
        (slot == &bos ? info.bos_token : info.eos_token) = *name;
      }
    }
    info.chat_template = chat_template_of(cfg, cwhere);
    if (const auto add = flag(cfg, "add_bos_token", cwhere)) {
      if (*add && !bos)
        throw InputError("tokenizer config '" + cwhere + "': add_bos_token is true but no BOS token is known",
                         "set bos_token in tokenizer_config.json");
      prefix = *add ? std::vector<uint32_t>{*bos} : std::vector<uint32_t>{};
    }
    if (const auto add = flag(cfg, "add_eos_token", cwhere)) {
      if (*add && !eos)
        throw InputError("tokenizer config '" + cwhere + "': add_eos_token is true but no EOS token is known",
                         "set eos_token in tokenizer_config.json");
      suffix = *add ? std::vector<uint32_t>{*eos} : std::vector<uint32_t>{};
    }
  }
  std::vector<uint32_t> all = prefix;
  all.insert(all.end(), suffix.begin(), suffix.end());
  if (bos) all.push_back(*bos);
  if (eos) all.push_back(*eos);
  for (const uint32_t v : all)
    if (v >= info.vocab_size)
      throw InputError(strf("tokenizer '%s': special token id %u is outside the vocabulary (%u)",
                            where.c_str(), v, info.vocab_size),
                       "fix the tokenizer files");
  info.bos = bos;
  info.eos = eos;
  info.prefix = std::move(prefix);
  info.suffix = std::move(suffix);
}

std::vector<std::string> tokenizer_files(const std::string& path) {
  std::error_code ec;
  const fs::path folder = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
  std::vector<std::string> out;
  for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json",
                           "chat_template.jinja"})
    if (fs::is_regular_file(folder / name, ec)) out.push_back((folder / name).string());
  return out;
}

void verify_tokenizer(const std::string& path, const std::string& hash, const std::string& what_recorded) {
  const std::string hint = "restore the tokenizer files the model was trained with, or name them with "
                           "--tokenizer PATH (a folder or tokenizer file of the same hash)";
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw InputError(what_recorded + " names tokenizer '" + path + "', which is gone", hint);
  const std::unique_ptr<TextTokenizer> t = load_tokenizer(path);
  if (t->info().hash != hash)
    throw InputError(strf("%s names tokenizer '%s' of hash %s, but its files now hash to %s: they "
                          "changed since",
                          what_recorded.c_str(), path.c_str(), hash.c_str(), t->info().hash.c_str()),
                     hint);
}

std::vector<std::string> copy_tokenizer_files(const std::string& path, const std::string& outdir) {
  std::vector<std::string> written;
  for (const std::string& file : tokenizer_files(path)) {
    const std::string name = fs::path(file).filename().string();
    write_file_safely((fs::path(outdir) / name).string(),
                      read_regular_file(file, "tokenizer file", kPathHint, false), "tokenizer file");
    written.push_back(name);
  }
  return written;
}

std::unique_ptr<TextTokenizer> load_tokenizer(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw InputError("tokenizer '" + path + "' not found", kPathHint);
  fs::path file = path;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(file / "tokenizer.json", ec)) file /= "tokenizer.json";
    else if (fs::exists(file / "tokenizer.model", ec)) file /= "tokenizer.model";
    else
      throw InputError("tokenizer folder '" + path + "' holds neither tokenizer.json nor tokenizer.model",
                       kPathHint);
  }
  const std::string name = file.filename().string();
  const bool is_json = file.extension() == ".json";
  if (!is_json && file.extension() != ".model")
    throw InputError("tokenizer '" + file.string() + "' is neither a tokenizer.json nor a tokenizer.model",
                     kPathHint);
  const std::string main_text = read_regular_file(file.string(), "tokenizer file", kPathHint, false);
  const fs::path config_path = file.parent_path() / "tokenizer_config.json";
  std::string config;
  std::vector<std::string> files{file.string()};
  if (fs::exists(config_path, ec)) {
    config = read_regular_file(config_path.string(), "tokenizer config", kPathHint, false);
    files.push_back(config_path.string());
  }
  std::unique_ptr<TextTokenizer> t = is_json ? tokenizer_from_json(main_text, config, file.string())
                                             : tokenizer_from_sentencepiece(main_text, config, file.string());
  // chat_template.jinja (how transformers 5 saves a template) wins over tokenizer_config.json's
  // "chat_template", as in transformers; it is not hashed (the ids do not depend on it).
  const fs::path jinja = file.parent_path() / "chat_template.jinja";
  if (fs::exists(jinja, ec)) {
    t->info_mut().chat_template = read_regular_file(jinja.string(), "chat template", kPathHint, false);
    t->info_mut().chat_template_file = "chat_template.jinja";
    files.push_back(jinja.string());
  }
  // The hash covers each file's name and bytes, so an edited vocabulary gets a new hash.
  std::string hashed;
  hashed += name + '\n' + main_text;
  if (!config.empty()) hashed += "\ntokenizer_config.json\n" + config;
  TokenizerInfo& info = t->info_mut();
  info.hash = strf("%016llx", static_cast<unsigned long long>(fnv1a(hashed)));
  info.files = files;
  info.path = fs::absolute(path, ec).lexically_normal().string();
  std::string folder = fs::absolute(file, ec).parent_path().filename().string();
  info.name = info.kind + ":" + (folder.empty() ? name : folder);
  return t;
}

void for_each_parallel(size_t count, int threads, const std::function<void(size_t)>& fn) {
  size_t n = threads > 0 ? static_cast<size_t>(threads) : std::max(1u, std::thread::hardware_concurrency());
  n = std::min(n, std::max<size_t>(count, 1));
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    try {
      for (size_t i; (i = next.fetch_add(1)) < count;) fn(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next = count;
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

std::vector<std::vector<uint32_t>> encode_batch(const TextTokenizer& tokenizer,
                                                const std::vector<std::string>& texts, int threads) {
  std::vector<std::vector<uint32_t>> out(texts.size());
  for_each_parallel(texts.size(), threads, [&](size_t i) { out[i] = tokenizer.encode(texts[i]); });
  return out;
}

}  // namespace zt::data
