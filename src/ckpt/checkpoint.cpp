// Engine-level save and load over the collective file writer and reader (see
// checkpoint.hpp): the engine's owned slices are the shards.
#include "zt/ckpt/checkpoint.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <thread>

#include "hf_folder.hpp"
#include "zt/ckpt/adapters.hpp"
#include "zt/ckpt/io.hpp"
#include "zt/ckpt/publish.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/lora.hpp"
#include "zt/runtime/agree.hpp"
#include "zt/runtime/mpi_check.hpp"

namespace zt::ckpt {
namespace {

// The units a file of the engine's run holds: all of them; with LoRA the adapters'
// (training files) or the base's (ckpt.init_from's whole-model file).
enum class Units { kAll, kTrainable, kBase };
std::vector<int> units_of(zero::Engine& engine, Units which) {
  const model::ParamLayout& layout = engine.model().layout();
  const int base = model::ParamLayout(layout.config()).num_units();
  std::vector<int> us;
  for (int u = 0; u < layout.num_units(); ++u)
    if (which == Units::kAll || (which == Units::kTrainable ? !layout.frozen(u) : u < base)) us.push_back(u);
  return us;
}
bool has_adapters(zero::Engine& engine) { return engine.model().layout().adapter_unit() >= 0; }
// Expert parallelism: the engine's layout, whose units hold this rank's experts only
// (io.hpp WriteContents::slices); else null.
const model::ParamLayout* expert_slices(zero::Engine& engine) {
  const model::ParamLayout& l = engine.model().layout();
  return l.expert_parts() > 1 ? &l : nullptr;
}

std::vector<UnitTarget> targets_of(zero::Engine& engine, bool moments, Units which) {
  std::vector<UnitTarget> t;
  for (int u : units_of(engine, which)) {
    const zero::OwnedSlice s = engine.owned(u);
    t.push_back(UnitTarget{s.begin, s.count, s.params, moments ? s.m : std::span<float>(),
                           moments ? s.v : std::span<float>()});
  }
  return t;
}

// QLoRA: the W the NF4 base quantises (the targeted projections', or the embedding for a
// tied lm_head), read whole from the base's file one unit at a time by every rank (a
// serial read: each rank holds the whole NF4 base) and quantised by the engine; the
// peak is one unit of fp32, never all the targeted W at once.
void load_qlora_base(zero::Engine& engine, const std::string& path, const model::ParamLayout& base) {
  const model::ParamLayout full(base.config());
  const model::LoraConfig& lora = engine.options().lora;
  const bool tied_head = base.config().tied_embeddings && lora.has_target(model::LoraTarget::kLmHead);
  std::vector<float> unit;  // [numel] of full's unit u: its quantised W read, the rest zero
  engine.set_qlora_base([&](int u) -> std::span<const float> {
    const model::ParamLayout part = full.only([&](const model::TensorInfo& x) {
      return x.unit == u && (!base.try_find(x.name) || (tied_head && x.name == "model.embed_tokens.weight"));
    });
    unit.assign(static_cast<size_t>(full.unit(u).numel), 0.0f);
    std::vector<UnitTarget> targets(static_cast<size_t>(full.num_units()));  // unit u's only
    targets[static_cast<size_t>(u)] = UnitTarget{0, full.unit(u).numel, unit, {}, {}};
    read_file(MPI_COMM_NULL, path, full.config(), targets, ReadWhat::kParams, nullptr, nullptr, &part);
    return unit;
  });
}

// Publishes `c` as DIR/step-N.h5: .tmp, collective write, agreement, fsync + rename.
SaveResult save_contents(MPI_Comm comm, const std::string& dir, const WriteContents& c, int keep) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t step = c.state->step;
  // Rank 0 adds a multimodal import's carried part (TrainState::carried) after the
  // collective write, before the publish.
  int rank = 0;
  if (comm != MPI_COMM_NULL) ZT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  const HfCarried* carried = c.state && rank == 0 ? c.state->carried.get() : nullptr;
  // Tensor bytes (params + 2 moments, the carried tensors), a lower bound of the file's size.
  uint64_t bytes = static_cast<uint64_t>(file_layout(c.header).total_numel()) * 3 * sizeof(float);
  if (carried)
    for (const CarriedTensor& t : carried->tensors) bytes += t.bytes.size();
  Staging staging = begin_publish(comm, dir, step, bytes);
  const std::string& tmp = staging.path;
  // Every rank reaches the agreement, failed or not, so none waits for another.
  const runtime::Agreement written = runtime::agree(comm, [&] {
    write_file(comm, tmp, c);
    if (carried) write_carried(tmp, *carried);
  });
  if (written.failed()) {
    abandon_publish(comm, staging);
    const std::string own = written.own_message();
    throw Error(own.empty() ? "writing checkpoint '" + tmp + "' failed on another rank (its "
                              "message says why); the file was removed"
                            : own,
                "check free disk space and that ckpt.dir is writable; `latest` still names the "
                "previous checkpoint");
  }
  SaveResult r;
  r.path = finish_publish(comm, dir, step, keep, staging);
  r.bytes = bytes;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// The engine units a training file of the engine's run holds, in file order.
std::vector<int> saved_units(zero::Engine& engine) {
  return units_of(engine, has_adapters(engine) ? Units::kTrainable : Units::kAll);
}

WriteContents contents_of(zero::Engine& engine, const TrainState& state, uint64_t rng_seed) {
  WriteContents c;
  c.header.config = engine.model().layout().config();
  c.header.contents = kContentsTraining;
  c.header.tokenizer = state.tokenizer;
  c.state = state;
  c.rng_seed = rng_seed;
  const bool lora = has_adapters(engine);
  if (lora) {  // the adapters alone, and the base they train on (adapters.hpp)
    c.header.contents = kContentsAdapters;
    c.header.adapters = {finetune_to_json(engine.options().lora), state.base_path, state.base_hash};
  }
  for (int u : saved_units(engine)) {
    const zero::OwnedSlice s = engine.owned(u);
    c.units.push_back(UnitShard{s.begin, s.count, s.params, s.m, s.v});
  }
  c.slices = expert_slices(engine);
  return c;
}

}  // namespace

SaveResult save(zero::Engine& engine, MPI_Comm comm, const std::string& dir, const TrainState& state,
                int keep, uint64_t rng_seed) {
  return save_contents(comm, dir, contents_of(engine, state, rng_seed), keep);
}

// ---- AsyncSaver ----------------------------------------------------------------------

// One buffer of the snapshot: page-aligned, so the writer's O_DIRECT pieces go straight
// from it (no bounce copy on the background thread, which shares the cores with training).
class PageBuffer {
 public:
  // Holds n elements (contents kept only when n is unchanged); touched (zeroed) when new.
  void resize(size_t n) {
    if (n == n_ && p_) return;
    const size_t bytes = (std::max<size_t>(n, 1) * sizeof(float) + kPage - 1) / kPage * kPage;
    void* p = std::aligned_alloc(kPage, bytes);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, bytes);  // the page faults here (prepare's thread), not in a save
    p_.reset(static_cast<float*>(p));
    n_ = n;
  }
  std::span<float> span() { return {p_.get(), n_}; }

 private:
  static constexpr size_t kPage = 4096;
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float[], Free> p_;
  size_t n_ = 0;
};

// Copies of floats, run over the rank's OpenMP threads in pieces (the copy runs at memory
// bandwidth): the snapshot, and a unit copied on reach.
struct Copy {
  const float* from;
  float* to;
  size_t n;
};
void add_copy(std::vector<Copy>& pieces, const float* from, float* to, size_t n) {
  constexpr size_t kPiece = size_t{4} << 20;  // elements (16 MiB)
  for (size_t at = 0; at < n; at += kPiece) pieces.push_back({from + at, to + at, std::min(kPiece, n - at)});
}
void run_copies(const std::vector<Copy>& pieces) {
#pragma omp parallel for schedule(dynamic)
  for (size_t i = 0; i < pieces.size(); ++i) std::memcpy(pieces[i].to, pieces[i].from, pieces[i].n * sizeof(float));
}

// Copy on reach: a unit's shard (params, exp_avg, exp_avg_sq) copied when step() reaches
// it before the writer; the writer then reads the copy in place of the engine's bytes.
// Each array keeps its engine address's offset within a page, so the writer's O_DIRECT
// pieces are exactly as aligned as they were (straight DMA where they were).
class ReachCopy {
 public:
  // Copies s's arrays; throws std::bad_alloc when the memory cannot be had.
  explicit ReachCopy(const UnitShard& s) {
    std::vector<Copy> pieces;  // [<= 16 MiB each]
    for (const std::span<const float> x : {s.params, s.exp_avg, s.exp_avg_sq}) {
      if (x.empty()) continue;
      const char* from = reinterpret_cast<const char*>(x.data());
      const size_t lead = reinterpret_cast<uintptr_t>(from) % kPage;
      const size_t bytes = (lead + x.size_bytes() + kPage - 1) / kPage * kPage;
      void* mem = std::aligned_alloc(kPage, bytes);
      if (!mem) throw std::bad_alloc();
      Array a{from, x.size_bytes(), Block(static_cast<char*>(mem)), static_cast<char*>(mem) + lead};
      add_copy(pieces, x.data(), reinterpret_cast<float*>(a.at), x.size());
      arrays_.push_back(std::move(a));
    }
    run_copies(pieces);
  }
  // The copy of engine byte p (inside one of the arrays), else nullptr.
  const char* find(const char* p) const {
    for (const Array& a : arrays_)
      if (p >= a.from && p < a.from + a.n) return a.at + (p - a.from);
    return nullptr;
  }
  // Whether p lies in the copy.
  bool owns(const char* p) const {
    for (const Array& a : arrays_)
      if (p >= a.at && p < a.at + a.n) return true;
    return false;
  }
  uint64_t bytes() const {
    uint64_t b = 0;
    for (const Array& a : arrays_) b += a.n;
    return b;
  }

 private:
  static constexpr size_t kPage = 4096;
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  using Block = std::unique_ptr<char[], Free>;
  struct Array {
    const char* from;  // the engine's bytes [n]
    size_t n;
    Block mem;  // [page-rounded lead + n]
    char* at;   // the copy [n] (mem + from's offset in its page)
  };
  std::vector<Array> arrays_;
};

// The engine units a save in place still reads (not yet written and checksummed), shared
// by the saver, its writer thread (as WriteContents::source) and the guard the engine
// holds (which may outlive the saver). When step() reaches a unit still held, the guard
// copies the unit's shard (copy on reach) and lets AdamW go on once no read of the
// engine's bytes is in flight (at most one 8 MiB I/O piece or one checksum slice); the
// writer reads the copy, freed once the unit is released. Where the copy cannot be
// allocated the guard waits for the writer instead.
class UnitGate final : public UnitSource {
 public:
  // A save begins: file unit i is engine unit units[i], with this rank's shard shards[i];
  // all held until released.
  void hold(const std::vector<int>& units, const std::vector<UnitShard>& shards, int num_units) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t n = static_cast<size_t>(num_units);
    pending_.assign(n, 0);
    readers_.assign(n, 0);
    copies_.clear();
    copies_.resize(n);
    shards_.assign(n, UnitShard{});
    file_units_ = units;
    for (size_t i = 0; i < units.size(); ++i) {
      pending_[static_cast<size_t>(units[i])] = 1;
      shards_[static_cast<size_t>(units[i])] = shards[i];
    }
    stats_ = {};
  }
  void release(int u) {
    std::unique_ptr<ReachCopy> freed;  // freed outside the lock
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_[static_cast<size_t>(u)] = 0;
      freed = std::move(copies_[static_cast<size_t>(u)]);
    }
    released_.notify_all();
  }
  void release_all() {
    std::vector<std::unique_ptr<ReachCopy>> freed;  // [units] freed outside the lock
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::fill(pending_.begin(), pending_.end(), 0);
      freed = std::move(copies_);
      copies_.clear();
      copies_.resize(pending_.size());
    }
    released_.notify_all();
  }
  // The engine's guard (step()'s thread): returns once the save no longer reads unit u's
  // engine bytes: copied, or (no memory for the copy) written and checksummed.
  void reach(int u) {
    std::unique_lock<std::mutex> lock(mutex_);
    const size_t i = static_cast<size_t>(u);
    if (i >= pending_.size() || !pending_[i]) return;
    if (copies_[i]) return;  // copied at an earlier step (the writer reads that copy)
    if (!fail_copies_) {
      const UnitShard s = shards_[i];
      lock.unlock();  // the copy reads what the writer reads: both only read
      const auto t0 = std::chrono::steady_clock::now();
      std::unique_ptr<ReachCopy> copy;
      try {
        copy = std::make_unique<ReachCopy>(s);
      } catch (const std::bad_alloc&) {
        copy.reset();  // no memory: wait for the writer below
      }
      const double t = seconds_since(t0);
      lock.lock();
      if (!copy) {
        ++stats_.copy_failures;
      } else if (pending_[i]) {  // else the writer released it meanwhile: the copy is dropped
        // (only this thread copies: copies_[i] is still empty)
        stats_.copy_seconds += t;
        stats_.copied_bytes += copy->bytes();
        copies_[i] = std::move(copy);
      }
    } else {
      ++stats_.copy_failures;
    }
    const auto t1 = std::chrono::steady_clock::now();
    released_.wait(lock, [&] { return !pending_[i] || (copies_[i] && readers_[i] == 0); });
    stats_.waited += seconds_since(t1);
  }
  // UnitSource (the writer's threads): the copy's bytes once there is one.
  const char* begin_read(size_t unit, const char* p) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t u = static_cast<size_t>(file_units_[unit]);
    if (copies_[u])
      if (const char* c = copies_[u]->find(p)) return c;
    ++readers_[u];
    return p;
  }
  void end_read(size_t unit, const char* read) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const size_t u = static_cast<size_t>(file_units_[unit]);
      if (copies_[u] && copies_[u]->owns(read)) return;  // read the copy
      --readers_[u];
    }
    released_.notify_all();  // reach() may wait for the engine's bytes to be read
  }
  uint64_t held_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t b = 0;
    for (const std::unique_ptr<ReachCopy>& c : copies_) b += c ? c->bytes() : 0;
    return b;
  }
  UpdateGuardStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void fail_copies_for_tests(bool fail) {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_copies_ = fail;
  }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::mutex mutex_;
  std::condition_variable released_;
  std::vector<char> pending_;  // [engine units] 1: the save still reads it
  std::vector<int> readers_;   // [engine units] reads of the engine's bytes in flight
  std::vector<std::unique_ptr<ReachCopy>> copies_;  // [engine units] copied on reach (or null)
  std::vector<UnitShard> shards_;                   // [engine units] this rank's, as saved
  std::vector<int> file_units_;                     // [file units] engine unit
  UpdateGuardStats stats_;
  bool fail_copies_ = false;  // fail_copies_for_tests
};

struct AsyncSaver::Impl {
  MPI_Comm comm = MPI_COMM_NULL;  // private duplicate: the writer's collectives never meet the trainer's
  std::vector<PageBuffer> snapshot;  // [units * 3]: params, m, v of each owned slice (not in place)
  std::shared_ptr<UnitGate> gate;    // in place: the units the save still reads
  double test_delay_s = 0;           // delay_writes_for_tests
  bool test_fail_copies = false;     // fail_reach_copies_for_tests
  std::thread preparer;  // prepare(): allocates and touches the snapshot
  std::thread writer;
  std::optional<SaveResult> result;
  std::exception_ptr error;
};

AsyncSaver::AsyncSaver(MPI_Comm comm) : impl_(std::make_unique<Impl>()) {
  int level = 0;
  ZT_MPI_CHECK(MPI_Query_thread(&level));
  if (level < MPI_THREAD_MULTIPLE)
    throw InputError("ckpt.async = true needs MPI_THREAD_MULTIPLE; MPI was initialised with "
                     "thread level " + std::to_string(level),
                     "zt train asks for it when ckpt.async is set; other callers must initialise "
                     "MPI with MPI_THREAD_MULTIPLE, or set ckpt.async = false");
  ZT_MPI_CHECK(MPI_Comm_dup(comm, &impl_->comm));
}

AsyncSaver::~AsyncSaver() {
  if (impl_->preparer.joinable()) impl_->preparer.join();
  try {
    wait();
  } catch (const std::exception& e) {
    log::error(std::string("background checkpoint: ") + e.what());
  }
  if (impl_->comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->comm);
}

bool AsyncSaver::busy() const { return impl_->writer.joinable(); }

std::optional<SaveResult> AsyncSaver::wait() {
  Impl& a = *impl_;
  if (!a.writer.joinable()) return std::nullopt;
  a.writer.join();
  std::optional<SaveResult> r = std::move(a.result);
  a.result.reset();
  if (r && a.gate) r->update_guard = a.gate->stats();
  if (a.error) {
    std::exception_ptr e = a.error;
    a.error = nullptr;
    std::rethrow_exception(e);
  }
  return r;
}

void AsyncSaver::delay_writes_for_tests(double seconds) { impl_->test_delay_s = seconds; }
void AsyncSaver::fail_reach_copies_for_tests(bool fail) { impl_->test_fail_copies = fail; }
uint64_t AsyncSaver::reach_copy_bytes_held_for_tests() const {
  return impl_->gate ? impl_->gate->held_bytes() : 0;
}

void AsyncSaver::prepare(zero::Engine& engine) {
  Impl& a = *impl_;
  if (a.preparer.joinable() || !a.snapshot.empty() || engine.owned_in_place()) return;
  std::vector<size_t> counts;  // [units]
  for (int u = 0; u < engine.model().layout().num_units(); ++u)
    counts.push_back(static_cast<size_t>(engine.owned(u).count));
  // The first touch of fresh pages costs a page fault each (0.7 GB/s measured on the
  // development VM, 5x slower than the copy itself): taken here, beside training, not in
  // the first save's stall.
  a.preparer = std::thread([&a, counts] {
    a.snapshot.resize(counts.size() * 3);
    for (size_t u = 0; u < counts.size(); ++u)
      for (size_t k = 0; k < 3; ++k) a.snapshot[u * 3 + k].resize(counts[u]);  // touched
  });
}

double AsyncSaver::start(zero::Engine& engine, const std::string& dir, const TrainState& state,
                         int keep, uint64_t rng_seed) {
  const auto t0 = std::chrono::steady_clock::now();
  wait();
  Impl& a = *impl_;
  if (a.preparer.joinable()) a.preparer.join();
  if (engine.owned_in_place()) {
    start_in_place(engine, dir, state, keep, rng_seed);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // The snapshot: this rank's owned slices, copied (buffers reused from save to save) in
  // pieces over the rank's OpenMP threads (the copy runs at memory bandwidth).
  WriteContents c = contents_of(engine, state, rng_seed);
  a.snapshot.resize(c.units.size() * 3);
  std::vector<Copy> pieces;  // [<= 16 MiB each]
  for (size_t u = 0; u < c.units.size(); ++u) {
    UnitShard& s = c.units[u];
    std::span<const float>* parts[3] = {&s.params, &s.exp_avg, &s.exp_avg_sq};
    for (int k = 0; k < 3; ++k) {
      PageBuffer& page_buffer = a.snapshot[u * 3 + static_cast<size_t>(k)];
      page_buffer.resize(parts[k]->size());  // no-op after prepare() or an earlier save
      const std::span<float> buf = page_buffer.span();
      add_copy(pieces, parts[k]->data(), buf.data(), buf.size());
      *parts[k] = buf;
    }
  }
  run_copies(pieces);
  launch(std::move(c), dir, keep);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// No snapshot: the writer reads the engine's shards, releasing each unit (gate) once its
// bytes are in the file and checksummed; the engine's guard holds step() before AdamW
// changes a unit still held.
void AsyncSaver::start_in_place(zero::Engine& engine, const std::string& dir, const TrainState& state,
                                int keep, uint64_t rng_seed) {
  Impl& a = *impl_;
  a.snapshot.clear();  // (a snapshot of an earlier engine: not needed)
  if (!a.gate) a.gate = std::make_shared<UnitGate>();
  engine.set_update_guard([gate = a.gate](int u) { gate->reach(u); });  // (each save: any engine)
  const std::vector<int> units = saved_units(engine);  // [file units]: engine unit
  WriteContents c = contents_of(engine, state, rng_seed);
  a.gate->hold(units, c.units, engine.model().layout().num_units());
  a.gate->fail_copies_for_tests(a.test_fail_copies);
  c.unit_done = [gate = a.gate, units](size_t fu) { gate->release(units[fu]); };
  c.source = a.gate.get();  // the writer's lambda holds the gate
  launch(std::move(c), dir, keep);
}

// The writer thread: writes and publishes `c`; whatever happens, nothing stays held.
void AsyncSaver::launch(WriteContents c, const std::string& dir, int keep) {
  Impl& a = *impl_;
  a.writer = std::thread([&a, c = std::move(c), dir, keep, gate = a.gate]() {
    try {
      if (a.test_delay_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(a.test_delay_s));
      a.result = save_contents(a.comm, dir, c, keep);
    } catch (...) {
      a.error = std::current_exception();
    }
    if (gate) gate->release_all();
  });
}

TrainState load(zero::Engine& engine, MPI_Comm comm, const std::string& path,
                std::vector<std::string>* warnings) {
  const Header h = read_header(comm, path);
  check_loadable(h, path, engine.options().lora, /*resume=*/true);
  const std::vector<UnitTarget> t =
      targets_of(engine, true, has_adapters(engine) ? Units::kTrainable : Units::kAll);
  std::optional<TrainState> st =
      read_file(comm, path, engine.model().layout().config(), t, ReadWhat::kTraining, warnings,
                nullptr, nullptr, expert_slices(engine));
  engine.after_load();
  engine.set_steps_done(st->step);
  st->base_path = h.adapters.base_path;
  st->base_hash = h.adapters.base_hash;
  return *st;
}

void load_weights(zero::Engine& engine, MPI_Comm comm, const std::string& path,
                  std::vector<std::string>* warnings) {
  check_loadable(read_header(comm, path), path, engine.options().lora, /*resume=*/false);
  const std::vector<UnitTarget> t = targets_of(engine, false, Units::kBase);
  const model::ParamLayout& run = engine.model().layout();
  const model::LoraConfig& lora = engine.options().lora;
  // The base units of the run: QLoRA's leave out the targeted W (read below).
  const model::ParamLayout base = model::lora_base_layout(run.config(), lora);
  read_file(comm, path, run.config(), t, ReadWhat::kParams, warnings, nullptr,
            base.left_out() != 0 ? &base : nullptr, expert_slices(engine));
  engine.after_load();
  if (lora.method == model::FinetuneMethod::kQlora) load_qlora_base(engine, path, base);
}

std::shared_ptr<const HfCarried> read_carried(MPI_Comm comm, const std::string& path) {
  std::shared_ptr<const HfCarried> carried;
  runtime::collectively(comm, [&] { carried = read_carried(path); }, /*rank0_only=*/true);
  return carried;
}

std::string resolve_init_from(MPI_Comm comm, const std::string& init_from) {
  if (init_from.empty()) return "";
  return from_rank0(comm, [&] { return resolve_checkpoint(init_from, "ckpt.init_from"); });
}

std::string resolve_resume(MPI_Comm comm, const std::string& resume, const std::string& dir) {
  if (resume == "none" || resume.empty()) return "";
  if (resume != "auto") return from_rank0(comm, [&] { return resolve_checkpoint(resume, "ckpt.resume"); });
  // Rank 0 reads `latest`; everyone gets its answer (or its error).
  return from_rank0(comm, [&] { return read_latest(dir); });
}

}  // namespace zt::ckpt
