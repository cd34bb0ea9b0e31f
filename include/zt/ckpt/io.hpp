#pragma once
// Writing and reading one checkpoint file from per-rank shards of the parameter units
// (docs/checkpoint-format.md). Collective over `comm` (parallel HDF5, MPI-IO, collective
// metadata, independent transfers): each rank writes / reads only the parts of the tensors
// its shards cover, as unions of hyperslabs; checksums are computed by a worker thread
// beside the transfers. With comm == MPI_COMM_NULL the same code runs serially (HDF5's
// default file driver, no MPI needed): then the shards must cover every unit whole.
//
// These functions touch exactly `path`: publishing (tmp, fsync, rename, `latest`) is
// publish.hpp's job; engine-level save/load is checkpoint.hpp's.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "zt/ckpt/format.hpp"
#include "zt/model/config.hpp"
#include "zt/model/layout.hpp"

namespace zt::ckpt {

// This rank's part of unit u: elements [begin, begin + count) of the unit's flat buffer
// (no padding). exp_avg / exp_avg_sq are empty for a weights-only file.
struct UnitShard {
  int64_t begin = 0;
  int64_t count = 0;
  std::span<const float> params;      // [count]
  std::span<const float> exp_avg;     // [count] or empty
  std::span<const float> exp_avg_sq;  // [count] or empty
};

// Where a load puts this rank's part of unit u. exp_avg / exp_avg_sq empty: not read.
struct UnitTarget {
  int64_t begin = 0;
  int64_t count = 0;
  std::span<float> params;      // [count]
  std::span<float> exp_avg;     // [count] or empty
  std::span<float> exp_avg_sq;  // [count] or empty
};

// Optional (ckpt.async's copy on reach): where the writer reads a unit's bytes, asked at
// each read (a checksum slice, an I/O piece of <= 8 MiB), on the writer's threads. begin()
// returns the bytes to read in place of p (p itself, or the same offset in a copy the
// owner made of the unit's shard); end() follows each read with begin()'s answer. Units
// are WriteContents::units indices.
class UnitSource {
 public:
  virtual ~UnitSource() = default;
  virtual const char* begin_read(size_t unit, const char* p) = 0;
  virtual void end_read(size_t unit, const char* read) = 0;
};

struct WriteContents {
  Header header;                       // config, contents, source_dtype; version filled in
  std::vector<UnitShard> units;        // one per unit of header.config's layout
  std::optional<TrainState> state;     // required when contents == "training"
  uint64_t rng_seed = 0;               // this rank's element of /state/rng
  // Optional (ckpt.async without a snapshot): called, on any thread, once every element
  // of units[u] this rank writes has left its memory (written to the file and
  // checksummed), after which the caller may change them; called for every unit before
  // write_file returns or throws. When set, the slices are written unit by unit (the
  // params, exp_avg, exp_avg_sq of unit 0, then of unit 1...), so the first units the
  // optimizer updates are released first; else in file order.
  std::function<void(size_t unit)> unit_done;
  UnitSource* source = nullptr;  // optional (with unit_done): see UnitSource; outlives the write
  // Expert parallelism (optional): the engine's layout (model::ParamLayout::expert_slice),
  // whose units `units` are shards of: its expert tensors go to their slice of the whole
  // tensor (TensorInfo::global_begin), and the other tensors, replicated over the expert
  // group, are written by the group's first rank only (first_expert() == 0). The file is
  // the same as without expert parallelism.
  const model::ParamLayout* slices = nullptr;
};

// Where one write or read of a file spent its time, on this rank (seconds). Checksums are
// computed by a worker thread beside the transfers (ahead of the writes, behind the reads):
// `checksum` is its busy time, overlapped with `data`; `checksum_wait` what the transfers
// did not hide (the wait for the worker after the last one).
struct IoTimes {
  double metadata = 0;       // create / open, groups, datasets, attributes, /state, close
  double data = 0;           // the tensors' transfers (raw ranges queued until the last one
                             // moved; H5Dwrite / H5Dread for other layouts)
  double checksum = 0;       // the worker's checksums (and NaN/Inf counts when writing)
  double checksum_wait = 0;  // waiting for the worker after the transfers
  double checksum_tails = 0;  // writing: reading back and hashing the zt-xxh3 chunks this
                              // rank holds only the start of (reading: inside `data`)
  size_t chunks_read_back = 0;  // those chunks (<= 256 KiB each)
  double copies = 0;          // bounce-buffer copies on the I/O threads (memory not aligned
                              // for O_DIRECT), summed over the threads
  double prefault = 0;        // reading: faulting the target memory in, beside the reads
  double ranks = 0;           // waiting for the other ranks (the checksums' all-reduce)
  uint64_t page_faults = 0;   // minor page faults of the process during the call (first
                              // touches of fresh memory: the kernel zeroes each page)
  double total = 0;          // the whole call
};

// Creates (truncates) `path` and writes it. Collective. Throws zt::Error naming the path
// and HDF5's reason on failure, or the tensors holding a NaN/Inf (every rank alike; the
// caller removes the partial file). times: where the time went (optional).
void write_file(MPI_Comm comm, const std::string& path, const WriteContents& contents,
                IoTimes* times = nullptr);

// Reads and checks the root attributes (format, version, model config). Collective.
// Throws zt::InputError naming the file for a missing file, a non-HDF5 or truncated file,
// another format, a newer version.
Header read_header(MPI_Comm comm, const std::string& path);

enum class ReadWhat { kParams, kTraining };

// Reads this rank's parts of every tensor into `units` (one per unit of `run_config`'s
// layout) and verifies every dataset's checksum (partial sums, one all_reduce). kTraining
// also reads the moments and /state and refuses a weights-only file. Throws
// zt::InputError naming the file and the dataset for a missing or extra tensor, a wrong
// shape or type, a checksum mismatch, or a model of another shape. Collective.
// `part` (optional) reads only its tensors, into its units (`units` one per unit of
// `part`; offsets and unit numbers its own): a part of the file's model, by name, the
// file checked against the whole model as without it (QLoRA's base: the units without the
// targeted W (lora_base_layout), then each unit's targeted W whole (ParamLayout::only)).
// `slices` (optional; not with `part`): as WriteContents::slices, `units` are shards of
// that layout's units; the replicated tensors are read by the expert group's first rank
// only (the engine shares them over the group: Engine::after_load).
std::optional<TrainState> read_file(MPI_Comm comm, const std::string& path,
                                    const model::Config& run_config,
                                    std::span<const UnitTarget> units, ReadWhat what,
                                    std::vector<std::string>* warnings = nullptr,
                                    IoTimes* times = nullptr,
                                    const model::ParamLayout* part = nullptr,
                                    const model::ParamLayout* slices = nullptr);

}  // namespace zt::ckpt
