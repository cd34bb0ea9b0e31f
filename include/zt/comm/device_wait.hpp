#pragma once
// The one way the host waits for the device (docs/reliability.md, "Faults"): a wait
// that polls instead of blocking, so a dead or stuck peer ends the job within comm.timeout
// as it does on the CPU path.
//
// On a GPU the host blocks on work that waits, on the device, for NCCL collectives (the
// compute stream is ordered after their events). With a dead peer those collectives never
// complete, and a plain cudaStreamSynchronize would never return: comm.timeout, the abort
// and the liveness probe only run inside a request's own wait. So every host-blocking wait
// of the device path goes through wait_ready (wait_stream / wait_event on CUDA, a check in
// the suite finds any other: tests/reliability/device_waits_check.py), which polls, and
// while it polls
//   - tests every in-flight operation (registered here by the NCCL backend at each launch)
//     against its communicator's timeout, counted from its launch or from the start of
//     this wait, whichever is later;
//   - serves the liveness channel and, half way to the earliest deadline, probes every
//     rank, so the timeout can name the lost ones (as the comm layer's own wait does).
// On a timeout, or an operation that failed, it aborts every communicator of the process
// (not only the one that timed out: the others' kernels would keep the device busy), logs
// the error exactly as `zt` main does (the message of a CPU-path timeout: "nccl <op> did
// not complete within N ms on rank r of s (host h): no answer to a liveness probe ...
// from world rank k (host, pid): lost ..."), and ends the job through MPI_Abort without
// unwinding: no destructor's cudaFree or stream synchronisation runs after the abort.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "zt/comm/comm.hpp"
#include "zt/core/error.hpp"

namespace zt::comm {

// An operation the device may be waiting on. test() returns true once it completed and
// may throw (the operation failed); launched() (when set) says whether it was launched
// yet: a queued send or receive is not, and has no deadline until it is.
struct InFlight {
  std::function<bool()> test;
  std::function<bool()> launched;
  std::string backend;  // "nccl"
  std::string what;     // detail::describe(...) of the operation
  int rank = 0;         // in its communicator
  int size = 1;
  std::chrono::milliseconds timeout{0};
};
// Registers an in-flight operation until unregister_in_flight (or until a wait saw it
// complete). Thread-safe; unregistering an unknown id is a no-op. Only waits on the
// registering thread test it (requests are not thread-safe).
uint64_t register_in_flight(InFlight op);
void unregister_in_flight(uint64_t id);
size_t in_flight_count();

// Every communicator a failure must abort registers its abort (NCCL: ncclCommAbort).
uint64_t register_abort(std::function<void()> abort);
void unregister_abort(uint64_t id);
// Aborts every registered communicator, each once. Thread-safe, never throws.
void abort_all_communicators() noexcept;
// True once abort_all_communicators ran: teardown must not wait on the device.
bool communicators_aborted() noexcept;

// Polls ready() until it returns true (see the top of this file). `what` names the wait in
// messages ("reading the loss"). Exceptions of ready() propagate; a timeout or a failed
// in-flight operation ends the job (never returns).
void wait_ready(const std::function<bool()>& ready, std::string_view what);

// The host stand-in for a device stream (the host-staged test space): the host "stream"
// is ordered after every in-flight operation, so it is ready once none is left.
void wait_in_flight(std::string_view what);

// CUDA builds (device_wait_cuda.cpp): the work queued so far on `stream` (a cudaStream_t),
// or the event `event` (a cudaEvent_t, recorded), through wait_ready on cudaEventQuery.
void wait_stream(void* stream, std::string_view what);
void wait_event(void* event, std::string_view what);

// Logs e as zt's main does and ends the job: MPI_Abort over MPI_COMM_WORLD with e's exit
// code when MPI runs (every rank ends), else _exit. Never unwinds.
[[noreturn]] void end_job(const Error& e) noexcept;

}  // namespace zt::comm
