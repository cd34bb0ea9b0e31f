// DPO / ORPO steps and evaluation over pair files (see preference_loop.hpp).
#include "preference_loop.hpp"

#include <algorithm>
#include <filesystem>

#include "preference_reference.hpp"
#include "zt/model/model.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::train {

PreferenceLoop::PreferenceLoop(const TrainConfig& cfg, comm::Comm& comm, const data::TokenFile& data,
                               const data::Split& split, zero::Engine& engine)
    : cfg_(cfg),
      comm_(comm),
      data_(data),
      engine_(engine),
      B_(static_cast<size_t>(cfg.micro_batch)),
      T_(static_cast<size_t>(cfg.seq_len)),
      row_(T_ + 1),
      sampler_([&] {
        const char* name = objective_name(cfg.pref.objective);
        // (the data's kind: Trainer's check_objective_data, before this)
        if (cfg.micro_batch % 2 != 0 || cfg.global_batch % 2 != 0)
          throw InputError(strf("finetune.objective = %s: train.micro_batch = %lld and train.global_batch "
                                "= %lld count rows, and a pair is two rows: both must be even",
                                name, static_cast<long long>(cfg.micro_batch),
                                static_cast<long long>(cfg.global_batch)),
                           "set train.micro_batch to twice the pairs per micro-batch");
        return data::Sampler::rows(split.train, 2 * (static_cast<size_t>(cfg.seq_len) + 1) - 1,
                                   static_cast<size_t>(cfg.global_batch) / 2, cfg.seed);
      }()),
      tokens_(B_ * T_),
      targets_(B_ * T_),
      rows_(B_) {
  if (cfg.eval_fraction > 0 && split.eval.size() >= 2 * row_)
    eval_.emplace(split.eval, 2 * row_ - 1, 2 * row_);
  engine_.set_row_objective({});
}

// A row's sequence ends at its last completion token (the completion is the sequence's
// tail; padding after it): that token's index in the row.
size_t PreferenceLoop::last_target(size_t start) const {
  size_t last = 0;
  for (size_t t = 1; t <= T_; ++t)
    if (data_.loss_mask[start + t]) last = t;
  return last;
}

// ORPO with orpo.nll = sequence: a chosen row's (even file row) prompt tokens after its
// first are context targets (-2 - token, model.hpp RowObjective).
bool PreferenceLoop::sequence_nll(size_t start) const {
  return cfg_.pref.objective == Objective::kOrpo && cfg_.pref.orpo_sequence_nll && (start / row_) % 2 == 0;
}

void PreferenceLoop::fill(size_t i, size_t start) {
  rows_[i] = start / row_;
  const size_t context_end = sequence_nll(start) ? last_target(start) : 0;
  for (size_t t = 0; t < T_; ++t) {
    const auto next = static_cast<int32_t>(data_.tokens[start + t + 1]);
    tokens_[i * T_ + t] = static_cast<int32_t>(data_.tokens[start + t]);
    targets_[i * T_ + t] = data_.loss_mask[start + t + 1] ? next : t + 1 <= context_end ? model::context_target(next) : -1;
  }
}

// The chosen row's NLL targets: its completion, or (orpo.nll = sequence) every token
// after the first up to the completion's end, as TRL's ORPO's labels.
int64_t PreferenceLoop::chosen_targets(size_t start) const {
  if (sequence_nll(start)) return static_cast<int64_t>(last_target(start));
  int64_t n = 0;
  for (size_t t = 1; t <= T_; ++t) n += data_.loss_mask[start + t];
  return n;
}

bool PreferenceLoop::reference(int64_t first_step, const std::string& resumed_from,
                               const std::string& ckpt_dir, const std::function<bool()>& stop) {
  if (cfg_.pref.objective != Objective::kDpo) return true;
  namespace fs = std::filesystem;
  const bool full = !cfg_.lora.enabled();
  const size_t rows = data_.tokens.size() / row_;
  ReferenceIdentity id{rows, static_cast<uint32_t>(row_), full ? pair_data_hash(data_) : 0, 0, cfg_.data_path};
  const std::string stored = ckpt_dir.empty() ? "" : (fs::path(ckpt_dir) / kReferenceFile).string();
  // Where a stored reference lies: beside the checkpoint resumed from, else in ckpt.dir.
  const fs::path dir = resumed_from.empty() ? fs::path(ckpt_dir) : fs::absolute(resumed_from).parent_path();
  const std::string from = (dir / kReferenceFile).string();
  if (full && first_step > 0) {  // the weights of step 0 are gone: the stored log-probs
    ZT_CHECK(!resumed_from.empty(), "a full-weights DPO run resumed without a checkpoint path",
             "LoopCheckpoints::last_path() names the checkpoint resumed from");
    ref_ = read_reference(from, id);
    if (comm_.rank() == 0)
      log::info(strf("DPO reference: log-probs of %zu rows read from %s (stored at step 0)", rows, from.c_str()));
    std::error_code ec;
    if (!stored.empty() && !fs::equivalent(dir, ckpt_dir, ec))
      store_reference(stored, id);  // this run's checkpoints go to another ckpt.dir
    return true;
  }
  if (full) {  // step 0: a stored reference of these very weights is reused, else recomputed
    id.weights_hash = weights_hash(engine_, comm_);
    std::error_code ec;
    if (!ckpt_dir.empty() && fs::exists(from, ec)) {
      try {
        ref_ = read_reference(from, id);
        if (comm_.rank() == 0)
          log::info(strf("DPO reference: log-probs of %zu rows reused from %s (same weights, data and "
                         "seq_len; checksum verified)", rows, from.c_str()));
        if (!fs::equivalent(dir, ckpt_dir, ec)) store_reference(stored, id);
        return true;
      } catch (const InputError& e) {
        if (comm_.rank() == 0) log::warn("DPO reference: recomputing it: " + e.message());
      }
    }
  }
  const size_t chunks = (rows + B_ - 1) / B_;
  const int world = comm_.size(), rank = comm_.rank();
  const size_t rounds = (chunks + static_cast<size_t>(world) - 1) / static_cast<size_t>(world);
  ref_.assign(rows, 0.0);
  std::vector<double> logp(B_);
  std::vector<int64_t> count(B_);
  if (rank == 0) log::info(strf("DPO reference: computing the log-probs of %zu rows", rows));
  engine_.set_adapters_enabled(false);  // LoRA: the frozen base (no-op without adapters)
  for (size_t r = 0; r < rounds; ++r) {
    if (stop && stop()) {  // agreed by every rank (collective): the pass ends between batches
      engine_.set_adapters_enabled(true);
      ref_.clear();
      if (rank == 0)
        log::info(strf("DPO reference: stop requested after %zu of %zu rows: not stored", r * B_ * world, rows));
      return false;
    }
    const size_t chunk = r * static_cast<size_t>(world) + static_cast<size_t>(rank);
    const bool mine = chunk < chunks;  // else a repeat of chunk 0, discarded (collective)
    for (size_t i = 0; i < B_; ++i) fill(i, std::min((mine ? chunk * B_ : 0) + i, rows - 1) * row_);
    engine_.row_logps(tokens_, targets_, cfg_.micro_batch, cfg_.seq_len, {}, logp, count);
    if (mine)
      for (size_t i = 0; i < B_ && chunk * B_ + i < rows; ++i) ref_[chunk * B_ + i] = logp[i];
  }
  engine_.set_adapters_enabled(true);
  // Each row comes from one rank, zeros elsewhere: the sum is exact.
  comm_.all_reduce(ref_.data(), ref_.data(), ref_.size(), DType::kF64, comm::ReduceOp::kSum);
  if (comm_.rank() == 0)
    log::info(strf("DPO reference: log-probs of %zu rows (%s)", rows,
                   cfg_.lora.enabled() ? "the base, adapters off" : "the weights before the first step"));
  if (full && !stored.empty()) store_reference(stored, id);
  return true;
}

// Rank 0 writes; every rank learns whether it could (no rank left in a collective).
void PreferenceLoop::store_reference(const std::string& path, const ReferenceIdentity& id) {
  int32_t failed = 0;
  std::string why;
  if (comm_.rank() == 0) {
    try {
      write_reference(path, ref_, id);
      log::info(strf("DPO reference: stored in %s (%zu rows, %zu bytes; a resume reads it)", path.c_str(),
                     ref_.size(), ref_.size() * sizeof(double)));
    } catch (const Error& e) {
      failed = 1;
      why = e.what();
    }
  }
  comm_.all_reduce(&failed, &failed, 1, DType::kI32, comm::ReduceOp::kMax);
  if (failed)
    throw Error("rank 0 could not store the DPO reference log-probs in " + path +
                    (why.empty() ? std::string() : ": " + why),
                "check free disk space and that ckpt.dir is writable");
}

// Rows of the batch are pairs (2p, 2p + 1); ref_ holds their reference log-probs.
double PreferenceLoop::run_objective(bool train, double grad_scale, double nll_weight, PairMetrics& m) {
  std::vector<double> ref;
  if (cfg_.pref.objective == Objective::kDpo)
    for (const size_t r : rows_) ref.push_back(ref_[r]);
  // The model passes 2B sums when the micro-batch holds context targets: the rows', then
  // the rows' context targets'.
  const bool context = std::any_of(targets_.begin(), targets_.end(), model::is_context_target);
  const auto value = [&](std::span<const double> logp, std::span<const int64_t> count,
                         std::span<double> dlogp) {
    const bool ctx = logp.size() == 2 * B_;
    ZT_CHECK(ctx || !context, "orpo.nll = sequence: the model returned no sums of the context targets",
             "a model running this objective must implement model.hpp's context targets; set "
             "orpo.nll = completion meanwhile");
    const size_t n = ctx ? B_ : logp.size();
    return preference_value(cfg_.pref, logp.first(n), count.first(n), ref, nll_weight, dlogp.first(n), m,
                            ctx ? logp.subspan(n) : std::span<const double>{},
                            ctx ? dlogp.subspan(n) : std::span<double>{});
  };
  if (train) {
    engine_.set_row_objective(value);
    const double v = engine_.micro_step(tokens_, targets_, cfg_.micro_batch, cfg_.seq_len,
                                        cfg_.recompute, grad_scale, {});
    engine_.set_row_objective({});
    return v;
  }
  const size_t n = cfg_.pref.objective == Objective::kOrpo && cfg_.pref.orpo_sequence_nll ? 2 * B_ : B_;
  std::vector<double> logp(n), dlogp(n);
  std::vector<int64_t> count(n);
  engine_.row_logps(tokens_, targets_, cfg_.micro_batch, cfg_.seq_len, {}, logp, count);
  return value(logp, count, dlogp);
}

// Every micro-batch holds micro_batch / 2 pairs: its mean weighs 1 / accum, the engine
// averages over ranks, so the step's value is the mean over the global batch's pairs.
// ORPO's NLL is the mean over the chosen rows' NLL tokens (orpo.nll) of the whole global
// batch (TRL's over one device's batch): nll_weight = accum x ranks / those tokens.
zero::StepStats PreferenceLoop::step(int64_t step, double lr, PairMetrics& metrics) {
  const int rank = comm_.rank(), world = comm_.size();
  const size_t pairs = B_ / 2;
  double chosen = 0;
  if (cfg_.pref.objective == Objective::kOrpo) {
    for (int64_t micro = 0; micro < cfg_.accum; ++micro)
      for (size_t p = 0; p < pairs; ++p)
        chosen += static_cast<double>(chosen_targets(
            sampler_.start(static_cast<uint64_t>(step), static_cast<int>(micro), rank, world, pairs, p)));
    comm_.all_reduce(&chosen, &chosen, 1, DType::kF64, comm::ReduceOp::kSum);
  }
  const double nll_weight =
      chosen > 0 ? static_cast<double>(cfg_.accum * world) / chosen : 0.0;
  PairMetrics m;
  double loss = 0;
  for (int64_t micro = 0; micro < cfg_.accum; ++micro) {
    for (size_t i = 0; i < B_; ++i)
      fill(i, sampler_.start(static_cast<uint64_t>(step), static_cast<int>(micro), rank, world, pairs, i / 2) +
                  (i % 2) * row_);
    loss += run_objective(true, 1.0 / static_cast<double>(cfg_.accum), nll_weight, m);
  }
  zero::StepStats stats = engine_.step(lr);
  loss /= static_cast<double>(cfg_.accum);
  comm_.all_reduce(&loss, &loss, 1, DType::kF64, comm::ReduceOp::kAvg);
  stats.loss = loss;
  comm_.all_reduce(&m.rewards_chosen, &m.rewards_chosen, 8, DType::kF64, comm::ReduceOp::kSum);
  metrics = m;
  return stats;
}

std::optional<double> PreferenceLoop::evaluate(PairMetrics& metrics, const std::function<bool()>& stop) {
  PairMetrics m;
  if (!eval_) return 0.0;
  const int rank = comm_.rank(), world = comm_.size();
  const size_t pairs = B_ / 2;
  for (int64_t b = 0; b < cfg_.eval_batches; ++b) {
    if (stop()) return std::nullopt;  // agreed by every rank: the step's checkpoint comes next
    for (int64_t micro = 0; micro < cfg_.accum; ++micro) {
      int64_t chosen = 0;
      for (size_t i = 0; i < B_; ++i) {
        const size_t e = static_cast<size_t>(b * cfg_.global_batch / 2) +
                         data::batch_index(static_cast<int>(micro), rank, world, pairs, i / 2);
        fill(i, eval_->start(e) + (i % 2) * row_);
        if (i % 2 == 0) chosen += chosen_targets(eval_->start(e));
      }
      run_objective(false, 0, chosen > 0 ? 1.0 / static_cast<double>(chosen) : 0.0, m);
    }
  }
  comm_.all_reduce(&m.rewards_chosen, &m.rewards_chosen, 8, DType::kF64, comm::ReduceOp::kSum);
  metrics = m;
  return m.pairs > 0 ? m.value / m.pairs : 0.0;
}

}  // namespace zt::train
