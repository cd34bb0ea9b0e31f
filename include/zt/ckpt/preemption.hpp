#pragma once
// Preemption by signal: Slurm (and people) send SIGTERM or SIGUSR1 before killing a job,
// and a person at a terminal SIGINT (Ctrl-C). While a PreemptionSignals object lives,
// those signals only set a flag (async-signal-
// safe); the training loop polls it at each step boundary, all ranks agree (max over
// ranks), save a checkpoint and end normally.
#include <csignal>

namespace zt::ckpt {

class PreemptionSignals {
 public:
  PreemptionSignals();   // installs the handlers for SIGTERM, SIGUSR1 and SIGINT
  ~PreemptionSignals();  // restores the previous handlers
  PreemptionSignals(const PreemptionSignals&) = delete;
  PreemptionSignals& operator=(const PreemptionSignals&) = delete;

 private:
  struct sigaction old_term_ {};
  struct sigaction old_usr1_ {};
  struct sigaction old_int_ {};
};

// True once SIGTERM, SIGUSR1 or SIGINT arrived (or request_preemption was called) in this
// process. The flag is the one process-wide state zt keeps: a signal handler can reach
// nothing else.
bool preemption_requested();
int preemption_signal();      // the signal that set it (0: none, or request_preemption)
void request_preemption();    // as if a signal arrived (tests)
void clear_preemption();

}  // namespace zt::ckpt
