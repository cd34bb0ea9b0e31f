// The preemption flag and its signal handlers (see preemption.hpp).
#include "zt/ckpt/preemption.hpp"

#include <cerrno>
#include <cstring>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::ckpt {
namespace {

// Written by the handler, read by the loop: lock-free and async-signal-safe.
volatile std::sig_atomic_t g_signal = 0;  // NOLINT: a signal handler's only channel
volatile std::sig_atomic_t g_requested = 0;

extern "C" void on_preemption_signal(int sig) {
  g_signal = sig;
  g_requested = 1;
}

}  // namespace

PreemptionSignals::PreemptionSignals() {
  struct sigaction sa {};
  sa.sa_handler = on_preemption_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGTERM, &sa, &old_term_) != 0 || sigaction(SIGUSR1, &sa, &old_usr1_) != 0 ||
      sigaction(SIGINT, &sa, &old_int_) != 0)
    throw Error(strf("sigaction(SIGTERM/SIGUSR1/SIGINT) failed: %s", std::strerror(errno)),
                "preemption by signal is unavailable");
}

PreemptionSignals::~PreemptionSignals() {
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGUSR1, &old_usr1_, nullptr);
  sigaction(SIGINT, &old_int_, nullptr);
}

bool preemption_requested() { return g_requested != 0; }
int preemption_signal() { return g_signal; }
void request_preemption() { g_requested = 1; }
void clear_preemption() {
  g_requested = 0;
  g_signal = 0;
}

}  // namespace zt::ckpt
