#pragma once
// The DPO reference log-probs of a full fine-tune, kept beside its checkpoints
// (ckpt.dir/dpo-reference.h5; docs/finetune.md "DPO and ORPO"): computed once before
// step 1 from the weights of step 0, which no later checkpoint holds, and read back on a
// resume. HDF5: /logp float64 [rows] (file row order) with attribute checksum (zt-xxh3 of
// its bytes, as checkpoint datasets), root attributes format = "zt-dpo-reference", rows
// (uint64), row_len (uint32), data_hash (uint64: zt-xxh3 of the pair file's /tokens and
// /loss_mask), weights_hash (uint64: zt-sum64 of the weights the log-probs were computed
// from, see weights_hash), data_path (string, informational).
#include <cstdint>
#include <string>
#include <vector>

#include "zt/comm/comm.hpp"
#include "zt/data/token_file.hpp"
#include "zt/zero/engine.hpp"

namespace zt::train {

inline constexpr const char* kReferenceFile = "dpo-reference.h5";

// zt-xxh3 of the tokens and the mask: the identity of the rows the log-probs belong to.
uint64_t pair_data_hash(const data::TokenFile& data);

// What the log-probs were computed from: every value that changes them.
struct ReferenceIdentity {
  uint64_t rows = 0;
  uint32_t row_len = 0;        // train.seq_len + 1
  uint64_t data_hash = 0;      // pair_data_hash
  uint64_t weights_hash = 0;   // weights_hash; 0: not checked (a resume past step 0)
  std::string data_path;       // informational
};

// The identity of the engine's weights now: per unit, the zt-sum64 of its elements (each
// rank sums the slices it owns at their index in the unit; one all_reduce), mixed in unit
// order. The same for any rank count or ZeRO stage. Collective.
uint64_t weights_hash(zero::Engine& engine, comm::Comm& comm);

// Writes `path` atomically (SafeFile); zt::Error naming it and HDF5's reason on failure.
void write_reference(const std::string& path, const std::vector<double>& logp, const ReferenceIdentity& id);

// Reads `path`; zt::InputError naming it for a missing or malformed file, one whose
// /logp fails its checksum, or one of another identity (another data.path, re-tokenised
// data, another seq_len, other weights when id.weights_hash is not 0).
std::vector<double> read_reference(const std::string& path, const ReferenceIdentity& id);

}  // namespace zt::train
