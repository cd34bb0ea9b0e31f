#pragma once
// Progress of long work (issue 24): converting a model, tokenizing text, writing or
// reading a big checkpoint, allocating offload files, a `zt check` sweep.
//
//   Progress p("text-to-tokens", total_bytes, ProgressUnit::kBytes);
//   for (...) p.advance(chunk_bytes);
//   p.finish();
//
// On a terminal: one line redrawn in place ("\r", at most 10 times a second) with
// done / total, the rate and the ETA. Anywhere else (Slurm output, a pipe, CI): a plain
// "progress: ..." line every progress_interval() seconds (default 10) and one line at
// the end with the total and the rate; never a carriage return or an escape code.
// progress_interval() 0 turns both forms off. Lines go to stderr, so the results a
// command prints on stdout stay as they were. Only rank 0 prints by default (a process
// without MPI has rank -1 and prints); work done per node passes `print` itself.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace zt {

// What `total` and `advance(n)` count; sets how figures and rates are printed.
enum class ProgressUnit { kBytes, kTensors, kTokens, kSizes, kPairs, kPhases, kItems };

// The process-wide interval between plain lines, in seconds; 0 = off. Set by the
// apps from `--progress SECONDS` or `log.progress_every`. Throws InputError when
// negative or not finite, naming `source` (the flag or key).
void set_progress_interval(double seconds, const std::string& source = "progress interval");
double progress_interval();
constexpr double kDefaultProgressInterval = 10.0;

// Seconds on some monotonic clock.
using ProgressClock = std::function<double()>;

struct ProgressOptions {
  FILE* out = nullptr;                 // default stderr
  std::optional<bool> tty;             // default isatty(out), decided once
  ProgressClock clock;                 // default std::chrono::steady_clock
  std::optional<double> interval;      // default progress_interval()
  std::optional<bool> print;           // default process_rank() <= 0
};

class Progress {
 public:
  Progress(std::string what, uint64_t total, ProgressUnit unit, ProgressOptions options = {});
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // Without finish() (an exception unwinds): a terminal line is ended with a newline so
  // the error message starts on its own line; no end line is printed.
  ~Progress();

  // A second count carried in each line, e.g. tensors while bytes are the unit:
  // "... 120/291 tensors ...". Call before the first advance.
  void count_items(uint64_t total, std::string name);

  // n more units done (and `items` more of count_items'). Thread-safe.
  void advance(uint64_t n, uint64_t items = 0);
  // A short note shown after the figures until the next note ("size 64M").
  void note(std::string text);
  // The end line: "progress: WHAT done: TOTAL in 12.3s, RATE", then "; DETAIL" when
  // given (e.g. where the time went). Once.
  void finish(const std::string& detail = {});

  bool enabled() const { return enabled_; }
  uint64_t done() const { return done_; }

  // The text of the current line, without prefix or line end (for tests and the tty).
  std::string figures(double now) const;

 private:
  void print_locked(double now, bool final, const std::string& detail = {});

  std::string what_;
  uint64_t total_;
  ProgressUnit unit_;
  FILE* out_;
  bool tty_;
  ProgressClock clock_;
  double interval_;
  bool enabled_;
  double start_;
  double last_print_;
  uint64_t done_ = 0;
  uint64_t items_total_ = 0, items_done_ = 0;
  std::string items_name_, note_;
  bool drawn_ = false;    // a terminal line is on screen
  bool finished_ = false;
  mutable std::mutex mutex_;
};

// "1m05s", "12.3s", "2h03m"; for ETAs and durations.
std::string format_duration(double seconds);

}  // namespace zt
