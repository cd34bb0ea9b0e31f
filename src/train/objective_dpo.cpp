// finetune.objective = dpo (docs/finetune.md "DPO and ORPO"): DPO, IPO and conservative DPO
// over pairs against reference log-probs (preference.hpp; the reference file:
// preference_reference.hpp).
#include <algorithm>
#include <filesystem>

#include "objective_pairs.hpp"
#include "preference_reference.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::train {

double dpo_value(const PreferenceConfig& cfg, std::span<const double> logp, std::span<const int64_t> count,
                 std::span<const double> ref, std::span<double> dlogp, PairMetrics& m) {
  const size_t P = pair_count(logp, count, dlogp, {}, {});
  ZT_CHECK(ref.size() == logp.size(), "DPO without reference log-probs", "compute the reference first");
  const double inv = 1.0 / static_cast<double>(P);
  double value = 0;
  for (size_t p = 0; p < P; ++p) {
    const auto [ci, ri, c, r, nc, nr] = pair_at(logp, count, p);
    const double cc = c - ref[ci], cr = r - ref[ri];
    double loss = 0;
    if (cfg.ipo) {
      const double d = cc / nc - cr / nr, e = d - 1 / (2 * cfg.beta);
      loss = e * e;
      dlogp[ci] = inv * 2 * e / nc;
      dlogp[ri] = -inv * 2 * e / nr;
    } else {
      const double bd = cfg.beta * (cc - cr), ls = cfg.label_smoothing;
      loss = -(1 - ls) * log_sigmoid(bd) - ls * log_sigmoid(-bd);
      const double g = inv * cfg.beta * (-(1 - ls) * sigmoid(-bd) + ls * sigmoid(bd));
      dlogp[ci] = g;
      dlogp[ri] = -g;
    }
    value += inv * loss;
    add_pair(m, cfg.beta * cc, cfg.beta * cr, c, r);
  }
  m.value += value * static_cast<double>(P);  // the micro-batch's mean, weighted by its pairs
  return value;
}

PreferenceConfig dpo_config(const ObjectiveConfig& o) {
  PreferenceConfig p;
  p.beta = o.number("dpo.beta");
  p.label_smoothing = o.number("dpo.label_smoothing");
  p.ipo = o.text("dpo.loss") == "ipo";
  return p;
}

namespace {

void add_dpo_keys(config::Schema& s) {
  {
    auto& k = s.add_float("dpo.beta", 0.1, "DPO's beta (the reference's KL weight; IPO's tau), > 0");
    k.min = 0.0;
    k.min_exclusive = true;
    k.max = 1e3;
  }
  {
    auto& k = s.add_float("dpo.label_smoothing", 0.0,
                          "conservative DPO's label noise, in [0, 0.5) (sigmoid loss only)");
    k.min = 0.0;
    k.max = 0.5;
  }
  s.add_string("dpo.loss", "sigmoid", "sigmoid (DPO) or ipo (IPO, length-normalised as TRL)")
      .choices = {"sigmoid", "ipo"};
}

void check_dpo(const TrainConfig& t) {
  const PreferenceConfig p = dpo_config(t.objective);
  if (p.label_smoothing >= 0.5)  // the schema's range is inclusive
    throw InputError(strf("dpo.label_smoothing = %g: must be below 0.5", p.label_smoothing),
                     "0.5 makes chosen and rejected alike; cDPO uses 0.1 .. 0.3");
  if (p.ipo && p.label_smoothing > 0)
    throw InputError("dpo.label_smoothing applies to dpo.loss = sigmoid only",
                     "set dpo.label_smoothing = 0 with dpo.loss = ipo");
  check_pairs(t);
}

class DpoObjective final : public PairObjective {
 public:
  explicit DpoObjective(const ObjectiveContext& ctx) : PairObjective(ctx), pref_(dpo_config(ctx.cfg.objective)) {}
  bool reference(const ReferenceContext& r) override;

 private:
  double value(std::span<const double> logp, std::span<const int64_t> count, std::span<double> dlogp,
               PairMetrics& m, std::span<const double> context, std::span<double> dcontext) override {
    std::vector<double> ref;
    for (const size_t r : rows_) ref.push_back(ref_[r]);
    std::fill(dcontext.begin(), dcontext.end(), 0.0);  // (no context targets in DPO)
    (void)context;
    return dpo_value(pref_, logp, count, ref, dlogp, m);
  }
  void store_reference(const std::string& path, const ReferenceIdentity& id);

  const PreferenceConfig pref_;
  std::vector<double> ref_;  // [rows of the file]
};

// The reference log-probs of every row (the base with the adapters off, or the weights
// before the first step of a full fine-tune), one forward pass over the file, rows split
// over the ranks. A full fine-tune stores them in ckpt_dir/dpo-reference.h5 and, resumed
// past step 0, reads them from beside the checkpoint it resumed from. At step 0 a stored
// file of the same identity (weights, data, seq_len) and checksum is reused; any other is
// recomputed with a warning.
bool DpoObjective::reference(const ReferenceContext& rc) {
  namespace fs = std::filesystem;
  const std::string& resumed_from = rc.resumed_from;
  const std::string& ckpt_dir = rc.ckpt_dir;
  const bool full = !cfg_.lora.enabled();
  const size_t rows = data_.tokens.size() / row_;
  ReferenceIdentity id{rows, static_cast<uint32_t>(row_), full ? pair_data_hash(data_) : 0, 0, cfg_.data_path};
  const std::string stored = ckpt_dir.empty() ? "" : (fs::path(ckpt_dir) / kReferenceFile).string();
  // Where a stored reference lies: beside the checkpoint resumed from, else in ckpt.dir.
  const fs::path dir = resumed_from.empty() ? fs::path(ckpt_dir) : fs::absolute(resumed_from).parent_path();
  const std::string from = (dir / kReferenceFile).string();
  if (full && rc.first_step > 0) {  // the weights of step 0 are gone: the stored log-probs
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
    if (rc.stop && rc.stop()) {  // agreed by every rank (collective): the pass ends between batches
      engine_.set_adapters_enabled(true);
      ref_.clear();
      if (rank == 0)
        log::info(strf("DPO reference: stop requested after %zu of %zu rows: not stored", r * B_ * world, rows));
      return false;
    }
    const size_t chunk = r * static_cast<size_t>(world) + static_cast<size_t>(rank);
    const bool mine = chunk < chunks;  // else a repeat of chunk 0, discarded (collective)
    for (size_t i = 0; i < B_; ++i) fill(i, std::min((mine ? chunk * B_ : 0) + i, rows - 1) * row_);
    engine_.row_logps(batch_.tokens, batch_.targets, cfg_.micro_batch, cfg_.seq_len, {}, logp, count);
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
void DpoObjective::store_reference(const std::string& path, const ReferenceIdentity& id) {
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

}  // namespace

const ObjectiveSpec& dpo_objective() {
  static const ObjectiveSpec spec{"dpo", "dpo.", add_dpo_keys, false, false, true, kPairsHint, check_dpo,
                                  make_as<DpoObjective>};
  return spec;
}

}  // namespace zt::train
