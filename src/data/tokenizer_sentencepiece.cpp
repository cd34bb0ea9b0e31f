// SentencePiece tokenizer.model through libsentencepiece (Llama 2, TinyLlama, Mistral).
#include <sentencepiece_processor.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>

#include "tokenizer_internal.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::data {
namespace {

constexpr const char* kHint =
    "give the tokenizer.model of a SentencePiece model (Llama 2, TinyLlama, Mistral), or a "
    "folder holding tokenizer.json";

// libsentencepiece 0.1.97 ends the process on some corrupt models (std::terminate from its
// Darts trie builder on a piece that holds a NUL byte; found by fuzz_sentencepiece), and
// its model proto is not public (Debian ships no sentencepiece_model.pb.h), so zt cannot
// check the pieces first. It loads the model once in a child process: a child that dies
// is an InputError naming the file, and only a model the library survives is loaded here.
void require_loads_in_child(std::string_view proto, const std::string& where) {
  const pid_t pid = ::fork();
  if (pid < 0)
    throw Error(strf("fork() to check tokenizer '%s' failed: %s", where.c_str(), std::strerror(errno)),
                "check the process limits (ulimit -u) and free memory");
  if (pid == 0) {  // the child: default signal actions, no output, no exit handlers
    for (const int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE}) std::signal(sig, SIG_DFL);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, STDERR_FILENO);
    try {
      sentencepiece::SentencePieceProcessor sp;
      (void)sp.LoadFromSerializedProto(proto);
    } catch (...) {
      ::_exit(3);  // the library threw (gcc builds: Darts' exception reaches the caller)
    }
    ::_exit(0);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      throw Error(strf("waitpid() for the check of tokenizer '%s' failed: %s", where.c_str(),
                       std::strerror(errno)),
                  "report this");
  if (WIFSIGNALED(status))
    throw InputError(strf("tokenizer '%s': libsentencepiece crashes loading it (signal %d): the "
                          "file is corrupt",
                          where.c_str(), WTERMSIG(status)),
                     kHint);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
    throw InputError("tokenizer '" + where + "': libsentencepiece fails loading it (an exception "
                     "inside the library): the file is corrupt",
                     kHint);
}

class SentencePieceTokenizer final : public TextTokenizer {
 public:
  SentencePieceTokenizer(std::string_view proto, std::string_view config, const std::string& where) {
    require_loads_in_child(proto, where);
    const auto status = sp_.LoadFromSerializedProto(proto);
    if (!status.ok())
      throw InputError("tokenizer '" + where + "': SentencePiece cannot load it: " + status.ToString(),
                       kHint);
    info_.kind = "sentencepiece";
    info_.name = info_.kind + ":" + where;  // load_tokenizer names it by its folder
    info_.vocab_size = static_cast<uint32_t>(sp_.GetPieceSize());
    auto id = [&](int v) -> std::optional<uint32_t> {
      if (v < 0 || v >= sp_.GetPieceSize()) return std::nullopt;
      return static_cast<uint32_t>(v);
    };
    resolve_specials(
        info_, {}, {}, config, where,
        [this](const std::string& token) -> std::optional<uint32_t> {
          const int v = sp_.PieceToId(token);
          if (v == sp_.unk_id() && token != sp_.IdToPiece(v)) return std::nullopt;
          return static_cast<uint32_t>(v);
        },
        /*default_add_bos=*/true, id(sp_.bos_id()), id(sp_.eos_id()));
  }

  std::vector<uint32_t> encode(std::string_view text) const override {
    std::vector<int> ids;
    const auto status = sp_.Encode(text, &ids);
    if (!status.ok())
      throw Error("SentencePiece Encode failed: " + status.ToString(), "report the input that fails");
    return {ids.begin(), ids.end()};
  }

  std::string decode(std::span<const uint32_t> ids) const override {
    std::vector<int> v;
    v.reserve(ids.size());
    for (const uint32_t id : ids) {
      if (id >= info_.vocab_size)
        throw InputError(strf("token id %u is not in the tokenizer's vocabulary (%u ids)", id, info_.vocab_size),
                         "decode ids made by this tokenizer");
      v.push_back(static_cast<int>(id));
    }
    std::string text;
    const auto status = sp_.Decode(v, &text);
    if (!status.ok())
      throw Error("SentencePiece Decode failed: " + status.ToString(), "report the ids that fail");
    return text;
  }

 private:
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

std::unique_ptr<TextTokenizer> tokenizer_from_sentencepiece(std::string_view model_proto,
                                                            std::string_view tokenizer_config,
                                                            const std::string& where) {
  return std::make_unique<SentencePieceTokenizer>(model_proto, tokenizer_config, where);
}

}  // namespace zt::data
