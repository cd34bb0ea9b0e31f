// Liveness: the probe side channel that names dead or stopped ranks (see liveness.hpp).
#include "zt/runtime/liveness.hpp"

#include <unistd.h>

#include <array>
#include <cstring>
#include <exception>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/runtime/mpi_check.hpp"

namespace zt::runtime {
namespace {

constexpr int kProbeTag = 1;   // payload: the round number
constexpr int kAnswerTag = 2;  // payload: the round number being answered

// The MPI attribute key under which MPI_COMM_SELF holds the process's Liveness. Created
// once, on first use (MPI is running then), and never changed.
int self_keyval() {
  static const int keyval = [] {
    int kv = MPI_KEYVAL_INVALID;
    ZT_MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &kv,
                                        nullptr));
    return kv;
  }();
  return keyval;
}

bool mpi_running() {
  int initialized = 0, finalized = 0;
  if (MPI_Initialized(&initialized) != MPI_SUCCESS || !initialized) return false;
  return MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized;
}

// What every rank tells the others at start-up.
struct Card {
  std::array<char, MPI_MAX_PROCESSOR_NAME + 1> host{};
  int64_t pid = 0;
};

}  // namespace

Liveness::Liveness(MPI_Comm world) {
  ZT_MPI_CHECK(MPI_Comm_dup(world, &comm_));
  ZT_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  int size = 0;
  ZT_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  ZT_MPI_CHECK(MPI_Comm_size(comm_, &size));

  Card mine;
  int len = 0;
  ZT_MPI_CHECK(MPI_Get_processor_name(mine.host.data(), &len));
  mine.pid = static_cast<int64_t>(::getpid());
  std::vector<Card> all(static_cast<size_t>(size));
  ZT_MPI_CHECK(MPI_Allgather(&mine, sizeof(Card), MPI_BYTE, all.data(), sizeof(Card), MPI_BYTE,
                             comm_));
  for (const Card& c : all) {
    PeerInfo p;
    p.host.assign(c.host.data(), strnlen(c.host.data(), c.host.size()));
    p.pid = static_cast<long>(c.pid);
    peers_.push_back(std::move(p));
  }
  answered_.assign(static_cast<size_t>(size), 0);

  ZT_MPI_CHECK(MPI_Irecv(&probe_in_, 1, MPI_INT, MPI_ANY_SOURCE, kProbeTag, comm_, &probe_req_));
  ZT_MPI_CHECK(MPI_Irecv(&answer_in_, 1, MPI_INT, MPI_ANY_SOURCE, kAnswerTag, comm_, &answer_req_));
  ZT_MPI_CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, self_keyval(), this));
}

Liveness::~Liveness() {
  if (!mpi_running()) return;
  if (current() == this) MPI_Comm_delete_attr(MPI_COMM_SELF, self_keyval());  // a newer one stays
  // Unwinding from an error (the job is being aborted): touch nothing else.
  if (std::uncaught_exceptions() > 0) return;
  for (MPI_Request* r : {&probe_req_, &answer_req_}) {
    if (*r == MPI_REQUEST_NULL) continue;
    MPI_Cancel(r);
    MPI_Wait(r, MPI_STATUS_IGNORE);
  }
  // Sends still in flight complete on their own (their payloads are leaked on purpose:
  // MPI may still read them).
  for (Send& s : sends_)
    if (s.req != MPI_REQUEST_NULL) {
      MPI_Request_free(&s.req);
      (void)s.payload.release();
    }
  MPI_Comm_free(&comm_);
}

Liveness* Liveness::current() {
  if (!mpi_running()) return nullptr;
  void* value = nullptr;
  int found = 0;
  if (MPI_Comm_get_attr(MPI_COMM_SELF, self_keyval(), &value, &found) != MPI_SUCCESS || !found)
    return nullptr;
  return static_cast<Liveness*>(value);
}

void Liveness::send(int payload, int peer, int tag) {
  Send s;
  s.payload = std::make_unique<int>(payload);
  // A failed send (to a rank that is gone) is what this channel exists to notice, not an
  // error of its own: the peer simply never answers.
  if (MPI_Isend(s.payload.get(), 1, MPI_INT, peer, tag, comm_, &s.req) != MPI_SUCCESS) return;
  sends_.push_back(std::move(s));
}

void Liveness::reap_sends() {
  std::vector<Send> still;
  for (Send& s : sends_) {
    int done = 0;
    if (MPI_Test(&s.req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      (void)s.payload.release();  // failed: MPI may hold on to it; drop the request
      continue;
    }
    if (!done) still.push_back(std::move(s));
  }
  sends_ = std::move(still);
}

void Liveness::serve() {
  // Another thread serving right now does the same work: skip rather than wait.
  const std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (lock.owns_lock()) serve_locked();
}

void Liveness::serve_locked() {
  // Answer every probe that arrived; record every answer that arrived.
  for (;;) {
    int done = 0;
    MPI_Status st;
    if (probe_req_ == MPI_REQUEST_NULL) break;  // a re-post failed earlier
    if (MPI_Test(&probe_req_, &done, &st) != MPI_SUCCESS || !done) break;
    send(probe_in_, st.MPI_SOURCE, kAnswerTag);
    if (MPI_Irecv(&probe_in_, 1, MPI_INT, MPI_ANY_SOURCE, kProbeTag, comm_, &probe_req_) != MPI_SUCCESS)
      break;
  }
  for (;;) {
    int done = 0;
    MPI_Status st;
    if (answer_req_ == MPI_REQUEST_NULL) break;  // a re-post failed earlier
    if (MPI_Test(&answer_req_, &done, &st) != MPI_SUCCESS || !done) break;
    if (st.MPI_SOURCE < 0 || st.MPI_SOURCE >= size()) break;
    int& a = answered_[static_cast<size_t>(st.MPI_SOURCE)];
    if (answer_in_ > a) a = answer_in_;
    if (MPI_Irecv(&answer_in_, 1, MPI_INT, MPI_ANY_SOURCE, kAnswerTag, comm_, &answer_req_) != MPI_SUCCESS)
      break;
  }
  reap_sends();
}

int Liveness::start_round() {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++round_;
  round_start_ = std::chrono::steady_clock::now();
  for (int p = 0; p < size(); ++p)
    if (p != rank_) send(round_, p, kProbeTag);
  answered_[static_cast<size_t>(rank_)] = round_;
  return round_;
}

std::vector<int> Liveness::silent(int round) {
  const std::lock_guard<std::mutex> lock(mutex_);
  return silent_locked(round);
}

std::vector<int> Liveness::silent_locked(int round) {
  serve_locked();
  std::vector<int> out;
  for (int p = 0; p < size(); ++p)
    if (answered_[static_cast<size_t>(p)] < round) out.push_back(p);
  return out;
}

std::string Liveness::describe(const std::vector<int>& ranks) const {
  std::string s;
  for (const int r : ranks) {
    if (!s.empty()) s += ", ";
    s += strf("world rank %d (host %s, pid %ld)", r, peer(r).host.c_str(), peer(r).pid);
  }
  return s;
}

std::string Liveness::verdict() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (round_ == 0) return {};
  const std::vector<int> lost = silent_locked(round_);
  const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - round_start_)
                           .count();
  if (lost.empty())
    return strf("every rank answered a liveness probe within %lld ms: none died or stopped, "
                "so some rank is waiting in a different operation",
                ms);
  return strf("no answer to a liveness probe for %lld ms from %s: lost (dead, stopped, or "
              "stuck outside communication)",
              ms, describe(lost).c_str());
}

}  // namespace zt::runtime
