// LoRA / QLoRA checkpoints: the finetune attribute, the file's tensor layout, the base's
// content hash and the resume checks (adapters.hpp).
#include "zt/ckpt/adapters.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

#include "h5.hpp"
#include "zt/ckpt/adapter_export.hpp"
#include "zt/core/error.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/files.hpp"
#include "zt/core/hash.hpp"
#include "zt/core/log.hpp"
#include "zt/runtime/mpi_check.hpp"

namespace zt::ckpt {
namespace {

const char* method_name(model::FinetuneMethod m) {
  return m == model::FinetuneMethod::kQlora ? "qlora" : m == model::FinetuneMethod::kLora ? "lora" : "full";
}

}  // namespace

std::string finetune_to_json(const model::LoraConfig& lora) {
  nlohmann::json targets = nlohmann::json::array();
  for (int t = 0; t < model::kNumLoraTargets; ++t)
    if (lora.has_target(static_cast<model::LoraTarget>(t)))
      targets.push_back(std::string(model::lora_target_name(static_cast<model::LoraTarget>(t))));
  const nlohmann::json j = {{"method", method_name(lora.method)}, {"rank", lora.rank},
                            {"alpha", lora.alpha},                {"dropout", lora.dropout},
                            {"rslora", lora.rslora},              {"targets", targets}};
  return json_dump(j);
}

std::string base_hash_of(const std::string& path) {
  const char* hint = "ckpt.init_from names the base checkpoint (a zt checkpoint file; "
                     "`zt convert hf-to-h5` makes one from a Hugging Face model)";
  require_regular_file(path, "the base checkpoint", hint);  // a FIFO would hang H5Fopen
  h5::QuietErrors quiet;
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw InputError("cannot open the base checkpoint '" + path + "'", hint);
  h5::Handle file(id, h5::Kind::kFile);
  h5::Handle params = h5::open_group(file.get(), "/params", path);
  std::vector<uint64_t> seq;  // (fnv1a(name), checksum) per dataset, in name order
  for (const std::string& name : h5::group_members(params.get(), path)) {
    const hid_t d = H5Dopen2(params.get(), name.c_str(), H5P_DEFAULT);
    if (d < 0) throw InputError("base checkpoint '" + path + "': cannot open /params/" + name, hint);
    h5::Handle dset(d, h5::Kind::kDataset);
    seq.push_back(fnv1a(name));
    seq.push_back(h5::read_u64_attr(dset.get(), "checksum", path, "dataset '/params/" + name + "'"));
  }
  file.close(path);
  return strf("%016llx", static_cast<unsigned long long>(sum64_u64(seq)));
}

model::ParamLayout file_layout(const Header& h) {
  if (h.contents != kContentsAdapters) return model::ParamLayout(h.config);
  return model::ParamLayout(h.config, parse_finetune_json(h.adapters.finetune, h.config, "(adapters)"))
      .trainable_only();
}

std::string base_hash(MPI_Comm comm, const std::string& path) {
  if (path.empty()) return "";
  return from_rank0(comm, [&] { return base_hash_of(path); });
}

std::string from_rank0(MPI_Comm comm, const std::function<std::string()>& work) {
  int rank = 0;
  ZT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  int code = 0;
  std::string text, hint;
  if (rank == 0) {
    try {
      text = work();
    } catch (const Error& e) {
      code = static_cast<int>(e.exit_code());
      text = e.message();
      hint = e.hint();
    }
  }
  ZT_MPI_CHECK(MPI_Bcast(&code, 1, MPI_INT, 0, comm));
  for (std::string* s : {&text, &hint}) {
    int len = static_cast<int>(s->size());
    ZT_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, comm));
    s->resize(static_cast<size_t>(len));
    ZT_MPI_CHECK(MPI_Bcast(s->data(), len, MPI_CHAR, 0, comm));
  }
  if (code != 0) throw Error(text, hint, static_cast<ExitCode>(code));
  return text;
}

void check_loadable(const Header& file, const std::string& path, const model::LoraConfig& lora,
                    bool resume) {
  const bool adapters = file.contents == kContentsAdapters;
  if (adapters && !lora.enabled())
    throw InputError("checkpoint '" + path + "' holds LoRA adapters only (finetune " +
                         file.adapters.finetune + ", base '" + file.adapters.base_path +
                         "'); this run has finetune.method = full",
                     "resume it with its finetune.method and lora.* keys and ckpt.init_from = its "
                     "base (or export it: zt convert h5-to-hf)");
  if (!lora.enabled()) return;
  if (!adapters && resume)
    throw InputError("checkpoint '" + path + "' holds a whole model (contents \"" + file.contents +
                         "\"); this run trains adapters (finetune.method = " +
                         method_name(lora.method) + ") and resumes adapters files only",
                     "start the LoRA run from these weights instead: --set ckpt.init_from=" + path +
                         " (with ckpt.resume = none or a fresh ckpt.dir)");
  if (adapters && !resume)
    throw InputError("ckpt.init_from = '" + path + "' is an adapters file; ckpt.init_from names "
                     "the base model",
                     "set ckpt.init_from to the base (" +
                         (file.adapters.base_path.empty() ? std::string("a whole-model checkpoint")
                                                          : file.adapters.base_path) +
                         ") and ckpt.resume to this file");
  const std::string run = finetune_to_json(lora);
  if (adapters && file.adapters.finetune != run)
    throw InputError("checkpoint '" + path + "' was trained with finetune " +
                         file.adapters.finetune + "; this run's finetune.* / lora.* keys give " + run,
                     "resume with the file's finetune.method and lora.* settings");
}

void check_same_base(const Header& file, const std::string& path, const std::string& base,
                     const std::string& hash) {
  if (file.adapters.base_hash == hash) return;
  throw InputError("checkpoint '" + path + "' holds adapters of the base '" +
                       file.adapters.base_path + "' (hash " +
                       (file.adapters.base_hash.empty() ? "none: a random base" : file.adapters.base_hash) +
                       "); this run's base '" + base + "' has hash " +
                       (hash.empty() ? "none (no ckpt.init_from: a random base)" : hash),
                   "set ckpt.init_from to the base the adapters were trained on");
}

}  // namespace zt::ckpt
