// `zt check`: the CLI (CLI11). Every flag is validated while parsing or before the
// runtime starts, so bad input ends every rank with exit 2 before any collective.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>

#include "commands.hpp"
#include "options.hpp"
#include "zt/check/checklist.hpp"
#include "zt/check/environment.hpp"
#include "zt/check/report_writer.hpp"
#include "zt/check/stages.hpp"
#include "zt/comm/mpi_comm.hpp"
#include "zt/comm/nccl_comm.hpp"
#include "zt/core/error.hpp"
#include "zt/core/hash.hpp"
#include "zt/core/log.hpp"
#include "zt/core/progress.hpp"
#include "zt/core/units.hpp"
#include "zt/runtime/runtime.hpp"

namespace zt::apps {
namespace {

// Sizes and seconds beyond these are typing errors, and past them the arithmetic
// overflows (--timeout 1e8 s was "-9223372036854775808 ms").
constexpr uint64_t kMaxCheckBytes = uint64_t{1} << 40;  // 1T
constexpr double kMaxTimeoutSeconds = 7 * 24 * 3600.0;  // a week, as comm.timeout

// The flags as typed; turned into CheckOptions once parsing is done.
struct CheckCli {
  double progress = kDefaultProgressInterval;  // --progress SECONDS (0 = off)
  std::string backend = "auto";
  std::string mpi_collectives = "blocking";
  std::string ops = "all";
  std::string min_bytes = "8";
  std::string max_bytes = "256M";
  int64_t step_factor = 2;
  int iters = 20;
  int warmup = 5;
  std::string dtype = "float";
  std::string redop = "sum";
  int root = 0;
  std::string thresholds;
  std::string report;
  double timeout_s = 0.0;  // 0: the comm's default
  int ranks_per_node = 0;
  std::string baseline;
  double baseline_fraction = 0.9;
  std::string pair_bytes = "64M";
  int pair_iters = 5;
  int pair_rounds_above = 16;
  double slow_node_fraction = 0.5;
  std::string straggler_bytes = "1M";
  int straggler_iters = 20;
  double straggler_factor = 1.5;
  std::string copy_bytes = "256M";
  double burn_seconds = 30.0;
  std::string io_dir;
  std::string io_bytes = "256M";
  std::string nccl_log_dir;
  std::string tier = "full";
  int gpus_per_node = -1;
  std::string sysfs_root = "/";
  std::string exit_codes = "zt";
};

// --tier quick: what a Slurm prolog can afford (docs/checklist.md, "Tiers"): node health,
// a short GPU burn, one short all-reduce sweep inside the node, short straggler and pair
// loops. Flags the user gave keep their values.
void apply_tier(const CLI::App& sub, CheckCli& cli) {
  if (cli.tier != "quick") return;
  const auto unset = [&sub](const char* flag) { return sub.get_option(flag)->count() == 0; };
  if (unset("--ops")) cli.ops = "all_reduce";
  if (unset("--max-bytes")) cli.max_bytes = "1M";
  if (unset("--iters")) cli.iters = 5;
  if (unset("--warmup")) cli.warmup = 1;
  if (unset("--pair-bytes")) cli.pair_bytes = "1M";
  if (unset("--pair-iters")) cli.pair_iters = 2;
  if (unset("--straggler-iters")) cli.straggler_iters = 5;
  if (unset("--copy-bytes")) cli.copy_bytes = "64M";
  if (unset("--burn-seconds")) cli.burn_seconds = 5.0;
}

// A CLI11 validator from a function that throws zt::InputError: its message becomes the
// parse error ("--max-bytes: bad size string '12Q': ..."), so the exit code is 2.
template <typename F>
CLI::Validator throwing_validator(F parse, const std::string& name) {
  return CLI::Validator(
      [parse](std::string& value) -> std::string {
        try {
          parse(value);
          return {};
        } catch (const InputError& e) {
          std::string message = e.message();
          if (!e.hint().empty()) message += " (" + e.hint() + ")";
          return message;
        }
      },
      name);
}

check::CheckOptions to_options(const CheckCli& cli) {
  check::CheckOptions o;
  o.ops = check::parse_check_ops(cli.ops);
  o.min_bytes = parse_size(cli.min_bytes);
  o.max_bytes = parse_size(cli.max_bytes);
  o.step_factor = static_cast<uint64_t>(cli.step_factor);
  o.mpi_blocking = cli.mpi_collectives == "blocking";
  o.iters = cli.iters;
  o.warmup = cli.warmup;
  o.dtype = parse_dtype(cli.dtype);
  o.redop = check::parse_check_redop(cli.redop);
  o.root = cli.root;
  if (cli.thresholds == "auto") o.thresholds_auto = true;
  else if (!cli.thresholds.empty()) o.thresholds = check::parse_thresholds_file(cli.thresholds);
  if (!cli.baseline.empty()) {
    o.baseline = check::parse_baseline_file(cli.baseline);
    check::check_baseline_ops(*o.baseline, o.ops);
    o.baseline->fraction = cli.baseline_fraction;
  }
  o.pair_bytes = parse_size(cli.pair_bytes);
  o.pair_iters = cli.pair_iters;
  o.pair_sequential_max_nodes = cli.pair_rounds_above;
  o.slow_node_fraction = cli.slow_node_fraction;
  o.straggler_bytes = parse_size(cli.straggler_bytes);
  o.straggler_iters = cli.straggler_iters;
  o.straggler_factor = cli.straggler_factor;
  o.copy_bytes = parse_size(cli.copy_bytes);
  o.burn_seconds = cli.burn_seconds;
  o.io_bytes = parse_size(cli.io_bytes);
  if (!cli.io_dir.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(cli.io_dir, ec) || ::access(cli.io_dir.c_str(), W_OK | X_OK) != 0)
      throw InputError("--io-dir '" + cli.io_dir + "' is not a writable directory",
                       "give the checkpoint or offload directory the job will write to");
    o.io_dir = cli.io_dir;
  }
  o.tier = cli.tier;
  o.health.gpus_per_node = cli.gpus_per_node;
  o.health.sysfs_root = cli.sysfs_root;
  o.nagios_exit_codes = cli.exit_codes == "nagios";
  check::validate_options(o);
  // The sweep holds a send and a receive buffer of the largest size on every rank: more
  // than the host's memory ends in "out of host memory" after the environment checks.
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) {
    const uint64_t host = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
    const std::pair<const char*, uint64_t> sizes[] = {{"--max-bytes", o.max_bytes},
                                                       {"--pair-bytes", o.pair_bytes},
                                                       {"--straggler-bytes", o.straggler_bytes},
                                                       {"--copy-bytes", o.copy_bytes}};
    for (const auto& [flag, bytes] : sizes)
      if (2 * bytes > host)
        throw InputError(strf("%s %s: the check holds two buffers of this size on each rank, more "
                              "than this host's %s of memory",
                              flag, format_size_approx(bytes).c_str(), format_size_approx(host).c_str()),
                         strf("lower %s (the sweep's largest size)", flag));
  }
  return o;
}

std::string run_header(const check::CheckOptions& o, const std::string& backend, int nranks) {
  const std::string shown = backend == "mpi" ? strf("mpi(%s)", o.mpi_collectives()) : backend;
  return strf("# zt check: nranks %d backend %s minBytes %llu maxBytes %llu step: %llu(factor) "
              "warmup iters: %d iters: %d validation: 1 type: %s redop: %s\n",
              nranks, shown.c_str(), static_cast<unsigned long long>(o.min_bytes),
              static_cast<unsigned long long>(o.max_bytes),
              static_cast<unsigned long long>(o.step_factor), o.warmup, o.iters,
              std::string(dtype_name(o.dtype)).c_str(),
              std::string(comm::reduce_op_name(o.redop)).c_str());
}

// What the ranks compare before their first collective: every option as given (or its
// default), and the bytes of the files they read (--thresholds, --baseline). None may
// differ per rank.
runtime::Settings check_settings(const CLI::App& sub, const CheckCli& cli) {
  runtime::Settings s = option_values(sub);
  for (const auto& [flag, path] : {std::pair<const char*, const std::string&>{"--thresholds", cli.thresholds},
                                   {"--baseline", cli.baseline}}) {
    if (path.empty() || path == "auto") continue;
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    s.emplace_back(std::string(flag) + " (its contents)", strf("%zu bytes, fnv1a %016llx", bytes.size(),
                                                                  static_cast<unsigned long long>(fnv1a(bytes))));
  }
  return s;
}

int run_check(const CLI::App& sub, CheckCli& cli) {
  // 1. Everything the user gave, checked on every rank before MPI starts.
  apply_tier(sub, cli);
  check::CheckOptions options = to_options(cli);
  set_progress_interval(cli.progress, "--progress");
  if (cli.backend == "nccl" && !comm::nccl_available())
    throw InputError("--backend nccl: this zt was built without CUDA/NCCL",
                     "use --backend mpi (or auto), or rebuild with -DZT_CUDA=ON");
  std::optional<std::filesystem::path> report_dir;
  if (!cli.report.empty()) report_dir = check::prepare_report_dir(cli.report);

  // 2. Runtime, comms, environment.
  runtime::Options rt_options;
  rt_options.ranks_per_node = cli.ranks_per_node;
  rt_options.same_on_every_rank = check_settings(sub, cli);
  rt_options.same_what = "the option";
  rt_options.same_hint = "launch every rank of zt check with the same options and files";
  runtime::Runtime rt(rt_options);
  const bool rank0 = rt.topology().world_rank == 0;
  const bool use_nccl =
      cli.backend == "nccl" || (cli.backend == "auto" && comm::nccl_available() && rt.device() >= 0);
  if (use_nccl && rt.device() < 0)
    throw Error(strf("--backend nccl needs a CUDA device on every rank; this rank sees %d",
                     rt.visible_devices()),
                "check CUDA_VISIBLE_DEVICES and the GPUs the scheduler gave the job, or use --backend mpi");
  std::unique_ptr<comm::Comm> control = comm::make_mpi_comm(rt.world());
  // NCCL's network, probed before any other NCCL comm exists (NCCL reads NCCL_DEBUG once).
  const std::string log_dir = !cli.nccl_log_dir.empty() ? cli.nccl_log_dir
                              : report_dir              ? report_dir->string()
                                                        : std::filesystem::temp_directory_path().string();
  const check::NcclProbe probe = check::probe_nccl_network(rt.world(), *control, rt.device(), log_dir);
  comm::MpiCommOptions mpi_options;
  mpi_options.blocking_collectives = options.mpi_blocking;
  std::unique_ptr<comm::Comm> bench =
      use_nccl ? comm::make_nccl_comm(rt.world()) : comm::make_mpi_comm(rt.world(), mpi_options);
  if (cli.timeout_s > 0.0) {
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(cli.timeout_s * 1000.0));
    bench->set_timeout(timeout);
    control->set_timeout(timeout);
  }
  check::Environment env = check::collect_environment(rt, *control);
  if (options.thresholds_auto) options.thresholds = check::auto_thresholds(env, check::sweep_of(options));
  if (rank0)
    std::cout << run_header(options, std::string(bench->backend()), bench->size())
              << check::environment_text(env) << std::flush;

  // 3. The sweep, gates, verdict; rank 0 writes the report.
  if (rank0 && options.thresholds)
    std::cout << "# thresholds: " << options.thresholds->source << "\n";
  check::Report report = check::run_checklist(*bench, *control, options, std::move(env),
                                              rank0 ? &std::cout : nullptr, &probe);
  if (report_dir && rank0) {
    check::write_plots(report, *report_dir);
    if (!report.plot_note.empty()) std::cout << "# plots: " << report.plot_note << "\n";
    check::write_report_files(report, *report_dir);
    std::cout << "# report: " << (*report_dir / "report.json").string() << ", "
              << (*report_dir / "report.md").string() << std::endl;
  }
  control->barrier();  // the report exists before any rank exits
  return check::exit_code(report);
}

}  // namespace

Run add_check_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "check",
      "Check the cluster: environment, then collective benchmarks (all-reduce first) the way "
      "nccl-tests reports them, verified, gated by thresholds; GPU (NVML) and NIC health. "
      "Exit 0 pass, 1 a check failed, 2 bad usage or input; with --exit-codes nagios: "
      "0 healthy, 1 warning, 2 unhealthy, 3 unknown, 64 bad usage.");
  auto cli = std::make_shared<CheckCli>();
  const CLI::Validator size_check = size_in(1, kMaxCheckBytes);
  sub->add_option("--backend", cli->backend, "auto (nccl when built with CUDA and a GPU is bound, else mpi), mpi, nccl")
      ->check(CLI::IsMember({"auto", "mpi", "nccl"}))
      ->capture_default_str();
  sub->add_option("--mpi-collectives", cli->mpi_collectives,
                  "MPI backend: time blocking calls (MPI_Allreduce ..., as IMB and OSU do) or "
                  "nonblocking ones (MPI_Iallreduce + wait, as the training engine overlaps them)")
      ->check(CLI::IsMember({"blocking", "nonblocking"}))
      ->capture_default_str();
  sub->add_option("--ops", cli->ops,
                  "comma-separated: all_reduce,all_gather,reduce_scatter,broadcast,sendrecv or all")
      ->check(throwing_validator([](const std::string& s) { check::parse_check_ops(s); }, "OPS"))
      ->capture_default_str();
  sub->add_option("--min-bytes", cli->min_bytes, "smallest size of the sweep (8, 1K, 4M ...)")
      ->check(size_check)
      ->capture_default_str();
  sub->add_option("--max-bytes", cli->max_bytes, "largest size of the sweep")
      ->check(size_check)
      ->capture_default_str();
  sub->add_option("--step-factor", cli->step_factor, "multiply the size by this each step")
      ->check(int_in(2, 1024))
      ->capture_default_str();
  sub->add_option("--iters", cli->iters, "timed iterations per size")
      ->check(int_in(1, 1000000))
      ->capture_default_str();
  sub->add_option("--warmup", cli->warmup, "untimed iterations before them")
      ->check(int_in(0, 1000000))
      ->capture_default_str();
  sub->add_option("--dtype", cli->dtype, "element type: float, double, bfloat16, half, int8, int32, int64")
      ->check(throwing_validator([](const std::string& s) { parse_dtype(s); }, "TYPE"))
      ->capture_default_str();
  sub->add_option("--op", cli->redop, "reduction for all_reduce/reduce_scatter: sum, max, min")
      ->check(throwing_validator([](const std::string& s) { check::parse_check_redop(s); }, "REDOP"))
      ->capture_default_str();
  sub->add_option("--root", cli->root, "broadcast root")->check(int_in(0, 1 << 24))->capture_default_str();
  sub->add_option("--thresholds", cli->thresholds,
                  "TOML file of gates (docs/checklist.md), or 'auto': the shipped table for this GPU and fabric");
  sub->add_option("--baseline", cli->baseline, "report.json of an earlier healthy run: gate at a fraction of it");
  sub->add_option("--baseline-fraction", cli->baseline_fraction, "fraction of the baseline a result must reach")
      ->check(number_in(0.01, 1.0))
      ->capture_default_str();
  sub->add_option("--pair-bytes", cli->pair_bytes, "bytes each node leader sends per exchange in the pair test")
      ->check(size_check)
      ->capture_default_str();
  sub->add_option("--pair-iters", cli->pair_iters, "timed exchanges per pair")->check(int_in(1, 1000000))->capture_default_str();
  sub->add_option("--pair-rounds-above", cli->pair_rounds_above,
                  "above this many nodes, pairs run in rounds of disjoint pairs instead of one at a time")
      ->check(int_in(1, 1 << 24))
      ->capture_default_str();
  sub->add_option("--slow-node-fraction", cli->slow_node_fraction,
                  "a node whose best pair is under this fraction of the median node's best is named slow")
      ->check(number_in(0.01, 1.0))
      ->capture_default_str();
  sub->add_option("--straggler-bytes", cli->straggler_bytes, "all_reduce size of the straggler loop")
      ->check(size_check)
      ->capture_default_str();
  sub->add_option("--straggler-iters", cli->straggler_iters, "rounds of the straggler loop")
      ->check(int_in(1, 1000000))
      ->capture_default_str();
  sub->add_option("--straggler-factor", cli->straggler_factor, "a rank above this times the median is a straggler")
      ->check(number_in(1.0, 100.0))
      ->capture_default_str();
  sub->add_option("--copy-bytes", cli->copy_bytes, "bytes per pinned host<->device copy (CUDA builds)")
      ->check(size_check)
      ->capture_default_str();
  sub->add_option("--burn-seconds", cli->burn_seconds,
                  "seconds of bf16 GEMM burn per GPU, then the HBM test for a tenth of that (0: no GPU stress; "
                  "--tier quick: 5)")
      ->check(number_in(0, check::kMaxBurnSeconds))
      ->capture_default_str();
  sub->add_option("--io-dir", cli->io_dir, "directory whose write bandwidth to measure (checkpoint or offload dir)");
  sub->add_option("--io-bytes", cli->io_bytes, "bytes written to --io-dir per node")->check(size_check)->capture_default_str();
  sub->add_option("--nccl-log-dir", cli->nccl_log_dir, "where the NCCL probe writes its INFO log (default: --report dir, else /tmp)");
  sub->add_option("--report", cli->report, "directory for report.json and report.md (created if missing)");
  sub->add_option("--timeout", cli->timeout_s, "seconds a collective may take before the job is ended (default: the comm's)")
      ->check(number_in(0.001, kMaxTimeoutSeconds));
  sub->add_option("--ranks-per-node", cli->ranks_per_node, "simulate nodes of K ranks on one host")
      ->check(int_in(0, 1 << 24));
  sub->add_option("--tier", cli->tier,
                  "quick: node health + a short all-reduce inside the node (a Slurm prolog's minute); "
                  "full: every stage")
      ->check(CLI::IsMember({"quick", "full"}))
      ->capture_default_str();
  sub->add_option("--gpus-per-node", cli->gpus_per_node,
                  "GPUs each node must show through NVML (default: $SLURM_GPUS_ON_NODE, else not checked)")
      ->check(int_in(0, 1024));
  sub->add_option("--sysfs-root", cli->sysfs_root,
                  "root under which sys/class/infiniband and dev/kmsg are read (tests use a fake tree)")
      ->capture_default_str();
  sub->add_option("--exit-codes", cli->exit_codes,
                  "zt: 0 pass/warn, 1 fail, 2 bad usage; nagios (gcm's): 0 healthy, 1 warning, "
                  "2 unhealthy, 3 unknown, 64 bad usage")
      ->check(CLI::IsMember({"zt", "nagios"}))
      ->capture_default_str();
  sub->add_option("--progress", cli->progress,
                  "seconds between progress lines of the sweep and the pair test in a log (0 = "
                  "off); on a terminal one line is redrawn in place")
      ->check(number_in(0, 86400))
      ->capture_default_str();
  return [sub, cli]() {
    // Usage errors found from here on (InputError) exit 64 under --exit-codes nagios,
    // where 2 means "unhealthy" (main.cpp maps the code).
    if (cli->exit_codes == "nagios") error_exit_codes() = kNagiosErrorExitCodes;
    warn_inert_options(*sub, {{"--baseline-fraction", cli->baseline.empty(),
                               "it gates against --baseline; add --baseline REPORT.json, or leave it out"},
                              {"--io-bytes", cli->io_dir.empty(),
                               "it sizes the --io-dir write test; add --io-dir DIR, or leave it out"}});
    return run_check(*sub, *cli);
  };
}

}  // namespace zt::apps
