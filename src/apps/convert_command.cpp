// `zt convert`: get data and weights into and out of zt's formats. Subcommands:
//   text-to-tokens [--tokenizer PATH] IN.txt [IN2.txt ...] OUT.h5
//                                                byte tokenizer or a Hugging Face /
//                                                SentencePiece one; one document per input
//   sft-to-tokens --tokenizer PATH --format FMT --seq-len N IN... OUT.h5
//   pairs-to-tokens --tokenizer PATH --seq-len N IN... OUT.h5
//   kto-to-tokens --tokenizer PATH --seq-len N [--kl-batch B] IN... OUT.h5
//                                                instruction data (alpaca, prompt-response,
//                                                chat + --chat-template): prompt masked, packed rows
//   h5-to-hf CKPT OUTDIR                         a checkpoint -> Hugging Face safetensors
//                                                (LoRA adapters: merged into their base, or
//                                                with --adapter a PEFT adapter folder)
//   hf-to-h5 HFDIR OUT.h5                        Hugging Face Llama -> weights for ckpt.init_from
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "options.hpp"
#include "zt/ckpt/adapter_export.hpp"
#include "zt/ckpt/hf_convert.hpp"
#include "zt/ckpt/publish.hpp"
#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"
#include "zt/core/outputs.hpp"
#include "zt/core/progress.hpp"
#include "zt/core/units.hpp"
#include "zt/data/kto.hpp"
#include "zt/data/pairs.hpp"
#include "zt/data/sft.hpp"
#include "zt/data/text.hpp"
#include "zt/data/text_tokenizer.hpp"

namespace zt::apps {
namespace {

struct ConvertArgs {
  std::vector<std::string> text_files;  // text-to-tokens: inputs..., output
  std::string tokenizer;                // --tokenizer (text-to-tokens: empty is bytes)
  std::vector<std::string> sft_files;   // sft-to-tokens: inputs..., output
  std::string sft_format, too_long = "truncate", chat_template = "auto";
  std::vector<std::string> pair_files;  // pairs-to-tokens: inputs..., output
  std::vector<std::string> kto_files;   // kto-to-tokens: inputs..., output
  size_t kl_batch = 8;                  // kto-to-tokens --kl-batch
  std::string truncation = "keep_start";
  size_t seq_len = 0;
  bool no_pack = false;
  std::string checkpoint, outdir, dtype, max_shard = "5G";  // h5-to-hf
  std::string base;                                         // h5-to-hf --base (adapters)
  bool adapter = false;                                     // h5-to-hf --adapter
  bool saturate = false;                                    // h5-to-hf --saturate
  std::string hfdir, out_h5;                                // hf-to-h5
  double progress = kDefaultProgressInterval;               // --progress SECONDS
  bool force = false;                                       // --force: replace existing outputs
};

// The files a converter reads from `path`: itself, or every file in it when it is a
// folder (a Hugging Face folder, a ckpt.dir); compared with the outputs by inode.
std::vector<std::string> inputs_at(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};
  std::vector<std::string> files;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) files.push_back(e.path().string());
  return files;
}

// The files `h5-to-hf` may write into OUTDIR that exist now (its shard names depend on
// --max-shard-size, so every model-K-of-N.safetensors there counts).
std::vector<std::string> hf_outputs_in(const std::string& dir) {
  namespace fs = std::filesystem;
  static const std::regex shard(R"(model-\d+-of-\d+\.safetensors)");
  std::vector<std::string> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == "config.json" || name == "model.safetensors" ||
        name == "model.safetensors.index.json" || std::regex_match(name, shard) ||
        name == "adapter_model.safetensors" || name == "adapter_config.json")
      found.push_back(e.path().string());
  }
  return found;
}

// The lock of a converter's one output file OUT (OUT.lock, issue 36 class 1), taken after
// OUT's folder is checked and before OUT is: held for the whole conversion, so a second
// conversion into OUT is refused (exit 2, naming the holder), never raced; the lock of a
// conversion that died is taken over with a warning.
std::unique_ptr<FolderLock> lock_output(const std::string& out, std::string_view what) {
  std::unique_ptr<FolderLock> lock(new FolderLock(FolderLock::beside(  // no copy: C++17 elision
      out, what, "another zt convert is writing that file: wait for it, or name another output")));
  if (!lock->taken_over().empty())
    log::warn(std::string(what) + " '" + out + "': took over the lock of a run that ended without "
              "releasing it (" + lock->taken_over() + ")");
  return lock;
}

// A converter's paths (core/outputs.hpp): `out` against every input (a folder input owns
// all its files), before anything is read: the same file, or the output inside an input
// folder, is exit 2 naming both.
void refuse_convert_collisions(const PathUse& out, const std::vector<std::pair<std::string, std::string>>& inputs) {
  std::vector<PathUse> uses{out};
  for (const auto& [key, path] : inputs) {
    std::error_code ec;
    uses.push_back({key, path, false, std::filesystem::is_directory(path, ec) ? ".*" : ""});
  }
  refuse_collisions(uses);
}

// IN... OUT of a token-file converter: the inputs, and the output (its folder checked,
// locked; not an input; replaced only with --force).
struct InputsOutput {
  std::vector<std::string> inputs;
  std::string output;
};
InputsOutput inputs_output(const std::vector<std::string>& files, const std::string& tokenizer,
                           const std::string& command, const std::string& usage) {
  if (files.size() < 2)
    throw InputError(command + " needs at least one input and one output file", usage);
  InputsOutput io{{files.begin(), files.end() - 1}, files.back()};
  require_output_folder(io.output, "output token file");
  std::vector<std::pair<std::string, std::string>> inputs{{"--tokenizer", tokenizer}};
  for (const std::string& in : io.inputs) inputs.emplace_back("the input", in);
  refuse_convert_collisions({"the output token file", io.output}, inputs);
  return io;
}

int text_to_tokens(const ConvertArgs& a) {
  const auto [inputs, output] = inputs_output(a.text_files, a.tokenizer, "text-to-tokens",
                                              "zt convert text-to-tokens IN.txt OUT.h5");
  const auto lock = lock_output(output, "output token file");
  require_new_output(output, "output token file", inputs, a.force);
  const data::TokenFile f = data::convert_text_to_tokens(inputs, output, {}, a.tokenizer);
  const size_t docs = f.doc_starts.empty() ? 1 : f.doc_starts.size();
  log::info(strf("wrote %s: %zu tokens (%s), vocab %u, tokenizer \"%s\"%s, %zu document%s",
                 output.c_str(), f.tokens.size(), f.vocab_size <= 65536 ? "uint16" : "uint32",
                 f.vocab_size, f.tokenizer.c_str(),
                 f.tokenizer_hash.empty() ? "" : (" (hash " + f.tokenizer_hash + ")").c_str(), docs,
                 docs == 1 ? "" : "s"));
  return 0;
}

int pairs_to_tokens(const ConvertArgs& a) {
  const auto [inputs, output] = inputs_output(
      a.pair_files, a.tokenizer, "pairs-to-tokens", "zt convert pairs-to-tokens --tokenizer DIR --seq-len 512 IN.jsonl OUT.h5");
  const auto lock = lock_output(output, "output token file");
  require_new_output(output, "output token file", inputs, a.force);
  data::PairOptions o;
  o.seq_len = a.seq_len;
  o.truncation = data::parse_truncation(a.truncation);
  o.chat_template = a.chat_template;
  data::PairStats s;
  const data::TokenFile f = data::convert_pairs_to_tokens(inputs, output, a.tokenizer, o, &s);
  log::info(strf("wrote %s: %zu of %zu pairs (%zu truncated to max_length %u with %s, %zu dropped "
                 "whose prompt fills max_length, %zu dropped with a row of no completion token; "
                 "%zu whose prompt ids are not a prefix of the whole sequence's), %zu rows of %u "
                 "tokens (chosen, rejected), %zu target tokens, tokenizer \"%s\" (hash %s)",
                 output.c_str(), s.written, s.pairs, s.truncated, f.row_len, a.truncation.c_str(),
                 s.dropped_prompt, s.dropped_empty, s.prefix_differs, 2 * s.written, f.row_len,
                 s.target_tokens, f.tokenizer.c_str(), f.tokenizer_hash.c_str()));
  return 0;
}

int kto_to_tokens(const ConvertArgs& a) {
  const auto [inputs, output] = inputs_output(
      a.kto_files, a.tokenizer, "kto-to-tokens", "zt convert kto-to-tokens --tokenizer DIR --seq-len 512 IN.jsonl OUT.h5");
  const auto lock = lock_output(output, "output token file");
  require_new_output(output, "output token file", inputs, a.force);
  data::KtoOptions o;
  o.seq_len = a.seq_len;
  o.kl_batch = a.kl_batch;
  o.chat_template = a.chat_template;
  data::KtoStats s;
  const data::TokenFile f = data::convert_kto_to_tokens(inputs, output, a.tokenizer, o, &s);
  log::info(strf("wrote %s: %zu of %zu examples (%zu desirable, %zu undesirable; %zu truncated to max_length %u, "
                 "%zu dropped whose prompt fills max_length; %zu whose prompt ids are not a prefix of the "
                 "whole sequence's), %zu rows of %u tokens (completion, mismatched completion in blocks of "
                 "%zu), %zu target tokens, tokenizer \"%s\" (hash %s)",
                 output.c_str(), s.written, s.examples, s.desirable, s.written - s.desirable, s.truncated,
                 f.row_len, s.dropped_prompt, s.prefix_differs, 2 * s.written, f.row_len, a.kl_batch,
                 s.target_tokens, f.tokenizer.c_str(), f.tokenizer_hash.c_str()));
  if (s.desirable == 0 || s.desirable == s.written)
    log::warn(strf("%s: every example is %s: KTO then learns from one side only", output.c_str(),
                   s.desirable == 0 ? "undesirable" : "desirable"));
  return 0;
}

int sft_to_tokens(const ConvertArgs& a) {
  const auto [inputs, output] = inputs_output(
      a.sft_files, a.tokenizer, "sft-to-tokens",
      "zt convert sft-to-tokens --tokenizer DIR --format alpaca --seq-len 512 IN.jsonl OUT.h5");
  const auto lock = lock_output(output, "output token file");
  require_new_output(output, "output token file", inputs, a.force);
  data::SftOptions o;
  o.format = data::parse_sft_format(a.sft_format);
  o.seq_len = a.seq_len;
  o.pack = !a.no_pack;
  o.drop_long = a.too_long == "drop";
  o.chat_template = a.chat_template;
  data::SftStats s;
  const data::TokenFile f = data::convert_sft_to_tokens(inputs, output, a.tokenizer, o, &s);
  log::info(strf("wrote %s: %zu of %zu examples (%zu truncated to a row, %zu dropped longer than a "
                 "row, %zu dropped with no response token), %zu rows of %u tokens (%s), %zu "
                 "padding tokens, %zu target tokens (%.1f%%), tokenizer \"%s\" (hash %s)",
                 output.c_str(), s.written, s.examples, s.truncated, s.dropped_long, s.dropped_empty,
                 s.rows, f.row_len, o.pack ? "packed" : "one example each", s.pad_tokens,
                 s.target_tokens, 100.0 * static_cast<double>(s.target_tokens) /
                                      static_cast<double>(f.tokens.size()),
                 f.tokenizer.c_str(), f.tokenizer_hash.c_str()));
  return 0;
}

// h5-to-hf --adapter: the adapters as a PEFT folder, and how to export their base.
int h5_to_peft(const ConvertArgs& a) {
  if (!a.dtype.empty() && a.dtype != "f32")
    throw InputError("--dtype " + a.dtype + " with --adapter: PEFT adapter files are written in "
                     "fp32 (as PEFT saves the adapters of an fp32 model)",
                     "drop --dtype (the base's export takes it)");
  if (a.saturate)
    throw InputError("--saturate with --adapter: PEFT adapter files are written in fp32, which "
                     "narrows nothing",
                     "drop --saturate (the base's export takes it)");
  if (!a.base.empty() || !a.tokenizer.empty())
    throw InputError("--base and --tokenizer do not apply to --adapter (the adapter folder holds "
                     "the adapters only)",
                     "give them to the base's export: zt convert h5-to-hf BASE.h5 BASE_HF");
  if (!ckpt::is_adapter_checkpoint(a.checkpoint))
    throw InputError("--adapter: checkpoint '" + a.checkpoint + "' holds no LoRA adapters "
                     "(contents is not \"adapters\")",
                     "drop --adapter to export a whole model");
  const ckpt::PeftExportResult r = ckpt::export_peft(a.checkpoint, a.outdir);
  std::string files;
  for (const std::string& f : r.files) files += (files.empty() ? "" : ", ") + f;
  log::info(strf("wrote %s: %lld adapter tensors, %s (f32) (%s), for PEFT's "
                 "PeftModel.from_pretrained(base, \"%s\")",
                 a.outdir.c_str(), static_cast<long long>(r.tensors),
                 format_size_approx(r.tensor_bytes).c_str(), files.c_str(), a.outdir.c_str()));
  if (r.base_path.empty())
    log::info("the adapters were trained on a random base (base_path is empty): PEFT needs "
              "that base's weights, which no file holds");
  else
    log::info("the base model folder: zt convert h5-to-hf " + r.base_path + " BASE_HF" +
              (!r.multimodal.empty() ? " (" + r.multimodal + ": the adapters' names and "
                                  "target_modules are that class's text model)"
                                : std::string()));
  return 0;
}

int h5_to_hf(const ConvertArgs& a) {
  require_output_dir(a.outdir, "OUTDIR", "name a folder you can write (it is created when missing)");
  // The checkpoint arguments, as every command reads them (ckpt::resolve_checkpoint).
  (void)ckpt::resolve_checkpoint(a.checkpoint, "CKPT");
  if (!a.base.empty()) (void)ckpt::resolve_checkpoint(a.base, "--base");
  // OUTDIR owns the names an export writes (config.json, model*.safetensors, adapter_*,
  // tokenizer files, zt.lock): a checkpoint file beside them is fine, a ckpt.dir as OUTDIR is not.
  refuse_convert_collisions(
      {"OUTDIR", a.outdir, true,
       R"(config\.json|model.*\.safetensors.*|adapter_.*|tokenizer.*|special_tokens_map\.json|zt\.lock)"},
      {{"CKPT", a.checkpoint}, {"--base", a.base}, {"--tokenizer", a.tokenizer}});
  const std::vector<std::string> inputs = inputs_at(a.checkpoint);
  for (const std::string& out : hf_outputs_in(a.outdir))
    require_new_output(out, "output file", inputs, a.force);
  // One writer per export folder (issue 36, classes 1 and 4): a second export into it is
  // refused, not mixed in.
  const FolderLock lock(a.outdir, "output folder",
                        "another zt convert is writing there: wait for it, or name another folder");
  if (a.adapter) return h5_to_peft(a);
  ckpt::HfExportOptions o;
  o.dtype = a.dtype;
  o.max_shard_size = parse_size(a.max_shard);
  o.base = a.base;
  o.saturate = a.saturate;
  // The tokenizer: --tokenizer, else the one the checkpoint records (its training data's),
  // its hash checked against the record before anything is written.
  std::string tokenizer = a.tokenizer;
  o.before_write = [&](const ckpt::TokenizerRecord& t) {
    if (tokenizer.empty()) tokenizer = t.path;
    if (tokenizer.empty()) return;  // no record, no --tokenizer: nothing to copy
    if (!t.hash.empty())
      data::verify_tokenizer(tokenizer, t.hash,
                             "checkpoint '" + a.checkpoint + "' (trained on tokenizer \"" + t.name + "\")");
    else
      (void)data::load_tokenizer(tokenizer);  // --tokenizer without a record: a readable one
    const std::vector<std::string> files = data::tokenizer_files(tokenizer);
    std::vector<std::string> sources = inputs;
    sources.insert(sources.end(), files.begin(), files.end());
    for (const std::string& f : files)
      require_new_output((std::filesystem::path(a.outdir) / std::filesystem::path(f).filename()).string(),
                         "output file", sources, a.force);
  };
  const ckpt::HfExportResult r = ckpt::export_hf(a.checkpoint, a.outdir, o);
  std::vector<std::string> written = r.files;
  if (!tokenizer.empty()) {
    for (const std::string& f : data::copy_tokenizer_files(tokenizer, a.outdir)) written.push_back(f);
  } else {
    log::warn("the checkpoint records no tokenizer (trained on bytes, or made by hf-to-h5): none "
              "copied; name one with --tokenizer PATH for AutoTokenizer to load the folder");
  }
  std::string files;
  for (const std::string& f : written) files += (files.empty() ? "" : ", ") + f;
  log::info(strf("wrote %s: %lld tensors, %s of %s weights (%s)", a.outdir.c_str(),
                 static_cast<long long>(r.tensors), format_size_approx(r.tensor_bytes).c_str(),
                 r.dtype.c_str(), files.c_str()));
  return 0;
}

int hf_to_h5(const ConvertArgs& a) {
  require_output_folder(a.out_h5, "output file");
  refuse_convert_collisions({"OUT.h5", a.out_h5}, {{"HFDIR", a.hfdir}});
  const auto lock = lock_output(a.out_h5, "output file");
  require_new_output(a.out_h5, "output file", inputs_at(a.hfdir), a.force);
  const ckpt::HfImportResult r = ckpt::import_hf(a.hfdir, a.out_h5);
  log::info(strf("wrote %s: %lld tensors, %lld parameters (model %s), source dtype %s, "
                 "from %zu safetensors file%s",
                 a.out_h5.c_str(), static_cast<long long>(r.tensors),
                 static_cast<long long>(r.params), r.model_name.c_str(), r.source_dtype.c_str(),
                 r.files.size(), r.files.size() == 1 ? "" : "s"));
  return 0;
}

}  // namespace

Run add_convert_command(CLI::App& app) {
  CLI::App* convert = app.add_subcommand("convert", "Convert data into zt's formats");
  convert->require_subcommand(1);
  auto a = std::make_shared<ConvertArgs>();
  // Every converter takes --progress and --force (after its name: `zt convert hf-to-h5
  // --progress 5 ...`).
  auto progress_flag = [a](CLI::App* cmd) {
    cmd->add_flag("--force", a->force,
                  "replace outputs that exist (never an input: an output that is one of the "
                  "inputs is refused even so)");
    cmd->add_option("--progress", a->progress,
                    "seconds between progress lines in a log (default 10; 0 = off); on a "
                    "terminal one line is redrawn in place")
        ->check(number_in(0, 86400));
  };

  CLI::App* t2t = convert->add_subcommand(
      "text-to-tokens",
      "Text files -> an HDF5 token file; each input file is one document. Default: the "
      "byte-level tokenizer \"bytes\" (vocab 256). With --tokenizer: a Hugging Face "
      "tokenizer.json or SentencePiece tokenizer.model, ids as Hugging Face encodes them, BOS "
      "as tokenizer_config.json says and EOS after each document (docs/finetune.md). The file "
      "is written to OUT.h5.tmp.<host>.<pid>, then renamed, under the lock OUT.h5.lock (a "
      "second conversion into OUT.h5 meanwhile is refused).");
  t2t->add_option("files", a->text_files, "IN.txt [IN2.txt ...] OUT.h5")->required();
  // --tokenizer of text-to-tokens (optional) and sft-to-tokens (required).
  auto tokenizer_option = [a](CLI::App* cmd) {
    return cmd
        ->add_option("--tokenizer", a->tokenizer,
                     "a model folder holding tokenizer.json or tokenizer.model (and "
                     "tokenizer_config.json), or one of those files")
        ->option_text("PATH");
  };
  tokenizer_option(t2t);
  // What the preference converters (pairs-to-tokens, kto-to-tokens) share: FILES, a
  // required --tokenizer, --seq-len, --chat-template.
  auto preference_options = [&tokenizer_option](CLI::App* cmd, std::vector<std::string>& files, ConvertArgs& args) {
    cmd->add_option("files", files, "IN.jsonl [IN2.jsonl ...] OUT.h5")->required();
    tokenizer_option(cmd)->required()->option_text("PATH REQUIRED");
    cmd->add_option("--seq-len", args.seq_len,
                    "train.seq_len of the run: rows hold seq_len + 1 tokens (TRL's max_length)")
        ->check(int_in(1, int64_t{1} << 24))
        ->required();
    cmd->add_option("--chat-template", args.chat_template,
                    "conversational examples: the model's template, auto (default) or " +
                        data::chat_template_names())
        ->option_text("NAME");
  };

  CLI::App* sft = convert->add_subcommand(
      "sft-to-tokens",
      "Instruction data -> an HDF5 token file for fine-tuning: each example is BOS + prompt "
      "(masked out of the loss) + response + EOS, in rows of --seq-len + 1 tokens, packed "
      "(each example where it fits, rows padded) or one example per row (--no-pack); "
      "/loss_mask marks the targets and /doc_starts each example's start (docs/finetune.md).");
  sft->add_option("files", a->sft_files, "IN.jsonl [IN2.jsonl ...] OUT.h5")->required();
  tokenizer_option(sft)->required()->option_text("PATH REQUIRED");
  sft->add_option("--format", a->sft_format,
                  "alpaca: JSON array or JSONL of {instruction, input, output}, the prompt in "
                  "LitGPT's Alpaca style; prompt-response: JSONL of {prompt, response}; chat: "
                  "JSONL of {messages: [{role, content}, ...]} rendered with --chat-template")
      ->check(CLI::IsMember({"alpaca", "prompt-response", "chat"}))
      ->required();
  sft->add_option("--seq-len", a->seq_len, "train.seq_len of the run: rows hold seq_len + 1 tokens")
      ->check(int_in(1, int64_t{1} << 24))
      ->required();
  sft->add_option("--chat-template", a->chat_template,
                  "chat: the model's template, auto (default: recognised from "
                  "tokenizer_config.json's chat_template) or " + data::chat_template_names() +
                      "; only assistant turns are trained")
      ->option_text("NAME");
  sft->add_flag("--no-pack", a->no_pack, "one example per row, padded (default: packed)");
  sft->add_option("--too-long", a->too_long,
                  "an example longer than a row: truncate (default) or drop; both are counted")
      ->check(CLI::IsMember({"truncate", "drop"}));

  CLI::App* pairs = convert->add_subcommand(
      "pairs-to-tokens",
      "Preference pairs (JSONL of {prompt, chosen, rejected}: strings, or lists of chat "
      "messages) -> an HDF5 token file for DPO / ORPO (finetune.objective): each pair two rows "
      "of --seq-len + 1 tokens, prompt + chosen then prompt + rejected, tokenized as TRL's "
      "DPOTrainer, the completions the targets of /loss_mask (docs/finetune.md).");
  preference_options(pairs, a->pair_files, *a);
  pairs->add_option("--truncation", a->truncation,
                    "a sequence longer than a row: keep_start (default; a pair whose prompt fills "
                    "the row is dropped) or keep_end, TRL's truncation_mode")
      ->check(CLI::IsMember({"keep_start", "keep_end"}));

  CLI::App* kto = convert->add_subcommand(
      "kto-to-tokens",
      "Unpaired labelled completions (JSONL of {prompt, completion, label: true | false}: "
      "strings, or lists of chat messages) -> an HDF5 token file for KTO (finetune.objective = "
      "kto): each example two rows of --seq-len + 1 tokens, prompt + completion then prompt + "
      "the mismatched completion of TRL's KL estimate, tokenized as TRL's KTOTrainer "
      "(docs/finetune.md \"KTO\").");
  preference_options(kto, a->kto_files, *a);
  kto->add_option("--kl-batch", a->kl_batch,
                  "the mismatched completions rotate by one within blocks of this many examples "
                  "(TRL's per_device_train_batch_size; default 8)")
      ->check(int_in(2, int64_t{1} << 30));

  CLI::App* export_cmd = convert->add_subcommand(
      "h5-to-hf",
      "zt checkpoint -> Hugging Face folder: config.json (LlamaForCausalLM or MistralForCausalLM, by its family) and "
      "model.safetensors, or shards model-0000k-of-0000N.safetensors with "
      "model.safetensors.index.json above --max-shard-size. Optimizer state is not exported. "
      "A LoRA/QLoRA adapter checkpoint is merged into its base (W += scale B A, as PEFT's "
      "merge_and_unload), or with --adapter written as a PEFT adapter folder.");
  export_cmd->add_option("checkpoint", a->checkpoint,
                         "CKPT.h5 (a zt checkpoint), or a ckpt.dir: the checkpoint its `latest` names")
      ->required();
  export_cmd->add_option("outdir", a->outdir, "OUTDIR (created when missing)")->required();
  export_cmd->add_option("--dtype", a->dtype,
                         "safetensors dtype: f32, bf16 or f16 (default: the checkpoint's "
                         "source_dtype attribute, else f32)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  export_cmd->add_flag("--saturate", a->saturate,
                       "bf16/f16: write a weight beyond the dtype's range as its largest finite "
                       "value (default: refuse the export, naming the tensors; NaN stays NaN "
                       "and is counted either way)");
  export_cmd->add_flag("--adapter", a->adapter,
                       "an adapter checkpoint: write OUTDIR as a PEFT adapter folder "
                       "(adapter_model.safetensors, adapter_config.json) for the base exported "
                       "on its own, instead of the merged model");
  export_cmd->add_option("--base", a->base,
                         "an adapter checkpoint's base checkpoint (default: its base_path "
                         "attribute); a copy of that file")
      ->option_text("PATH");
  export_cmd->add_option("--max-shard-size", a->max_shard,
                         "largest shard, e.g. 5G, 500M (binary units; default 5G)")
      ->check(size_in(1, uint64_t{1} << 40));
  tokenizer_option(export_cmd)->description(
      "the tokenizer files to copy into OUTDIR (default: the tokenizer the checkpoint's training "
      "data was made with; its hash must match the checkpoint's record)");

  CLI::App* import_cmd = convert->add_subcommand(
      "hf-to-h5",
      "Hugging Face Llama folder (config.json + model.safetensors or index + shards; F32, "
      "BF16, F16) -> a weights-only zt checkpoint, to start training from with ckpt.init_from.");
  import_cmd->add_option("hfdir", a->hfdir, "HFDIR (holds config.json)")->required();
  import_cmd->add_option("out", a->out_h5, "OUT.h5")->required();

  for (CLI::App* cmd : {t2t, sft, pairs, kto, export_cmd, import_cmd}) progress_flag(cmd);

  return [=]() -> int {
    set_progress_interval(a->progress, "--progress");
    // SIGTERM / SIGINT / SIGHUP: the outputs' staging files go with the process.
    remove_staging_on_signals();
    if (t2t->parsed()) return text_to_tokens(*a);
    if (sft->parsed()) {
      warn_inert_options(*sft, {{"--chat-template", a->sft_format != "chat",
                                 "it renders --format chat; use --format chat for conversations, or leave it out"}});
      return sft_to_tokens(*a);
    }
    if (pairs->parsed()) return pairs_to_tokens(*a);
    if (kto->parsed()) return kto_to_tokens(*a);
    if (export_cmd->parsed()) return h5_to_hf(*a);
    if (import_cmd->parsed()) return hf_to_h5(*a);
    return static_cast<int>(ExitCode::kBadInput);
  };
}

}  // namespace zt::apps
