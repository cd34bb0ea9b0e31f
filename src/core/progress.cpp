#include "zt/core/progress.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt {
namespace {

std::atomic<double>& interval_setting() {
  static std::atomic<double> seconds{kDefaultProgressInterval};
  return seconds;
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A terminal line is redrawn at most this often.
constexpr double kTtyRedraw = 0.1;

// 1234 -> "1234", 1234567 -> "1.23M"
std::string count_str(double v) {
  if (v < 1e4) return strf("%.0f", v);
  if (v < 1e6) return strf("%.1fk", v / 1e3);
  if (v < 1e9) return strf("%.2fM", v / 1e6);
  return strf("%.2fG", v / 1e9);
}

const char* unit_word(ProgressUnit u) {
  switch (u) {
    case ProgressUnit::kBytes: return "";
    case ProgressUnit::kTensors: return " tensors";
    case ProgressUnit::kTokens: return " tokens";
    case ProgressUnit::kSizes: return " sizes";
    case ProgressUnit::kPairs: return " pairs";
    case ProgressUnit::kPhases: return " phases";
    case ProgressUnit::kItems: return "";
  }
  return "";
}

std::string amount(uint64_t n, ProgressUnit u) {
  if (u == ProgressUnit::kBytes) return format_si(n);
  return count_str(static_cast<double>(n));
}

std::string rate_str(double per_s, ProgressUnit u) {
  switch (u) {
    case ProgressUnit::kBytes: return strf("%.1f MB/s", per_s / 1e6);
    case ProgressUnit::kTokens: return count_str(per_s) + " tok/s";
    case ProgressUnit::kTensors: return strf("%.1f tensors/s", per_s);
    case ProgressUnit::kSizes: return strf("%.2f sizes/s", per_s);
    case ProgressUnit::kPairs: return strf("%.2f pairs/s", per_s);
    case ProgressUnit::kPhases: return "";  // phases differ too much for a rate
    case ProgressUnit::kItems: return strf("%.1f/s", per_s);
  }
  return "";
}

}  // namespace

void set_progress_interval(double seconds, const std::string& source) {
  if (!std::isfinite(seconds) || seconds < 0)
    throw InputError(source + " is " + strf("%g", seconds) + ": it must be 0 (off) or more seconds",
                     "give the seconds between progress lines, e.g. 10, or 0 to turn them off");
  interval_setting().store(seconds);
}

double progress_interval() { return interval_setting().load(); }

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  if (s < 60) return strf("%.1fs", s);
  const long t = static_cast<long>(s + 0.5);
  if (t < 3600) return strf("%ldm%02lds", t / 60, t % 60);
  return strf("%ldh%02ldm", t / 3600, (t % 3600) / 60);
}

Progress::Progress(std::string what, uint64_t total, ProgressUnit unit, ProgressOptions o)
    : what_(std::move(what)), total_(total), unit_(unit) {
  out_ = o.out ? o.out : stderr;
  tty_ = o.tty ? *o.tty : ::isatty(::fileno(out_)) == 1;
  clock_ = o.clock ? std::move(o.clock) : ProgressClock(steady_seconds);
  interval_ = o.interval ? *o.interval : progress_interval();
  const bool print = o.print ? *o.print : process_rank() <= 0;
  enabled_ = print && interval_ > 0;
  start_ = enabled_ ? clock_() : 0;
  last_print_ = start_;
}

Progress::~Progress() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (drawn_ && !finished_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
}

void Progress::count_items(uint64_t total, std::string name) {
  std::lock_guard<std::mutex> lock(mutex_);
  items_total_ = total;
  items_name_ = std::move(name);
}

void Progress::note(std::string text) {
  std::lock_guard<std::mutex> lock(mutex_);
  note_ = std::move(text);
}

std::string Progress::figures(double now) const {
  const double elapsed = now - start_;
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
  std::string s = amount(done_, unit_);
  if (total_ > 0) {
    s += " / " + amount(total_, unit_) + unit_word(unit_);
    s += strf(" (%.0f%%)", 100.0 * static_cast<double>(done_) / static_cast<double>(total_));
  } else {
    s += unit_word(unit_);
  }
  if (!items_name_.empty()) {
    s += ", ";
    s += count_str(static_cast<double>(items_done_));
    if (items_total_) {
      s += '/';
      s += count_str(static_cast<double>(items_total_));
    }
    s += ' ';
    s += items_name_;
  }
  if (elapsed > 0 && unit_ != ProgressUnit::kPhases) s += ", " + rate_str(rate, unit_);
  if (!note_.empty()) s += ", " + note_;
  if (total_ > 0 && rate > 0 && done_ < total_ && unit_ != ProgressUnit::kPhases)
    s += ", ETA " + format_duration(static_cast<double>(total_ - done_) / rate);
  return s;
}

void Progress::print_locked(double now, bool final, const std::string& detail) {
  std::string line;
  if (final) {
    const double elapsed = now - start_;
    line = "progress: " + what_ + " done: " + amount(done_, unit_) + unit_word(unit_);
    if (!items_name_.empty())
      line += ", " + count_str(static_cast<double>(items_done_)) + " " + items_name_;
    line += " in " + format_duration(elapsed);
    if (elapsed > 0 && unit_ != ProgressUnit::kPhases)
      line += ", " + rate_str(static_cast<double>(done_) / elapsed, unit_);
    if (!detail.empty()) line += "; " + detail;
  } else {
    line = "progress: " + what_ + " " + figures(now);
  }
  if (tty_) {
    // Redraw in place: carriage return, the line, clear to the end of the line.
    std::fprintf(out_, "\r%s\x1b[K%s", line.c_str(), final ? "\n" : "");
    drawn_ = !final;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
  last_print_ = now;
}

void Progress::advance(uint64_t n, uint64_t items) {
  std::lock_guard<std::mutex> lock(mutex_);
  done_ += n;
  items_done_ += items;
  if (!enabled_ || finished_) return;
  const double now = clock_();
  const double every = tty_ ? kTtyRedraw : interval_;
  if (now - last_print_ >= every) print_locked(now, false);
}

void Progress::finish(const std::string& detail) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  finished_ = true;
  if (enabled_) print_locked(clock_(), true, detail);
}

}  // namespace zt
