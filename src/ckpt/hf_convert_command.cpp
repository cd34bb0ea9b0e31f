// `zt convert h5-to-hf` and `zt convert hf-to-h5`: the Hugging Face subcommands of
// `zt convert` (which src/data creates; see include/zt/ckpt/hf_convert.hpp).
#include <memory>
#include <string>

#include "commands.hpp"
#include "zt/ckpt/hf_convert.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::apps {

std::vector<LeafRun> add_hf_convert_commands(CLI::App& convert) {
  struct Args {
    std::string checkpoint, outdir, dtype, max_shard = "5G";
    std::string hfdir, out_h5;
  };
  auto a = std::make_shared<Args>();

  CLI::App* export_cmd = convert.add_subcommand(
      "h5-to-hf",
      "zt checkpoint -> Hugging Face folder: config.json (LlamaForCausalLM) and "
      "model.safetensors, or shards model-0000k-of-0000N.safetensors with "
      "model.safetensors.index.json above --max-shard-size. Optimizer state is not exported.");
  export_cmd->add_option("checkpoint", a->checkpoint,
                         "CKPT.h5 (a zt checkpoint), or a ckpt.dir: the checkpoint its `latest` names")
      ->required();
  export_cmd->add_option("outdir", a->outdir, "OUTDIR (created when missing)")->required();
  export_cmd->add_option("--dtype", a->dtype,
                         "safetensors dtype: f32, bf16 or f16 (default: the checkpoint's "
                         "source_dtype attribute, else f32)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  export_cmd->add_option("--max-shard-size", a->max_shard,
                         "largest shard, e.g. 5G, 500M (binary units; default 5G)");

  CLI::App* import_cmd = convert.add_subcommand(
      "hf-to-h5",
      "Hugging Face Llama folder (config.json + model.safetensors or index + shards; F32, "
      "BF16, F16) -> a weights-only zt checkpoint, to start training from with ckpt.init_from.");
  import_cmd->add_option("hfdir", a->hfdir, "HFDIR (holds config.json)")->required();
  import_cmd->add_option("out", a->out_h5, "OUT.h5")->required();

  Run run_export = [a]() -> int {
    ckpt::HfExportOptions o;
    o.dtype = a->dtype;
    o.max_shard_size = parse_size(a->max_shard);
    const ckpt::HfExportResult r = ckpt::export_hf(a->checkpoint, a->outdir, o);
    std::string files;
    for (const std::string& f : r.files) files += (files.empty() ? "" : ", ") + f;
    log::info(strf("wrote %s: %lld tensors, %s of %s weights (%s)", a->outdir.c_str(),
                   static_cast<long long>(r.tensors), format_size_approx(r.tensor_bytes).c_str(),
                   r.dtype.c_str(), files.c_str()));
    return 0;
  };
  Run run_import = [a]() -> int {
    const ckpt::HfImportResult r = ckpt::import_hf(a->hfdir, a->out_h5);
    log::info(strf("wrote %s: %lld tensors, %lld parameters (model %s), source dtype %s, "
                   "from %zu safetensors file%s",
                   a->out_h5.c_str(), static_cast<long long>(r.tensors),
                   static_cast<long long>(r.params), r.model_name.c_str(),
                   r.source_dtype.c_str(), r.files.size(), r.files.size() == 1 ? "" : "s"));
    return 0;
  };
  return {{export_cmd, run_export}, {import_cmd, run_import}};
}

}  // namespace zt::apps
