// The progress reporter (issue 24): the plain lines of a log and their cadence under a
// fake clock, the terminal form's redraws, and silence when progress is off.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "zt/core/error.hpp"
#include "zt/core/progress.hpp"

namespace {

// A FILE* that writes into memory; text() reads what was written so far.
class MemFile {
 public:
  MemFile() : f_(open_memstream(&buf_, &size_)) {}
  ~MemFile() {
    std::fclose(f_);
    std::free(buf_);
  }
  FILE* file() { return f_; }
  std::string text() {
    std::fflush(f_);
    return std::string(buf_, size_);
  }

 private:
  char* buf_ = nullptr;
  size_t size_ = 0;
  FILE* f_;
};

struct FakeClock {
  double now = 100.0;
  zt::ProgressClock fn() {
    return [this] { return now; };
  }
};

zt::ProgressOptions opts(MemFile& m, FakeClock& c, bool tty, double interval) {
  zt::ProgressOptions o;
  o.out = m.file();
  o.tty = tty;
  o.clock = c.fn();
  o.interval = interval;
  o.print = true;
  return o;
}

}  // namespace

TEST(Progress, PlainLinesEveryIntervalAndOneAtTheEnd) {
  MemFile m;
  FakeClock c;
  zt::Progress p("text-to-tokens", 100'000'000, zt::ProgressUnit::kBytes, opts(m, c, false, 10));
  c.now += 5;
  p.advance(10'000'000);  // 5 s: too early, nothing
  EXPECT_EQ(m.text(), "");
  c.now += 5;
  p.advance(10'000'000);  // 10 s: the first line
  c.now += 9;
  p.advance(10'000'000);  // 19 s: 9 s after the last line, nothing
  c.now += 1;
  p.advance(20'000'000);  // 20 s: the second
  c.now += 5;
  p.advance(50'000'000);
  p.finish();
  p.finish();  // once
  EXPECT_EQ(m.text(),
            "progress: text-to-tokens 20.00 MB / 100.00 MB (20%), 2.0 MB/s, ETA 40.0s\n"
            "progress: text-to-tokens 50.00 MB / 100.00 MB (50%), 2.5 MB/s, ETA 20.0s\n"
            "progress: text-to-tokens done: 100.00 MB in 25.0s, 4.0 MB/s\n");
}

TEST(Progress, ItemsNotesAndUnits) {
  MemFile m;
  FakeClock c;
  zt::Progress p("h5-to-hf", 4'000'000'000, zt::ProgressUnit::kBytes, opts(m, c, false, 1));
  p.count_items(291, "tensors");
  c.now += 80;
  p.advance(1'000'000'000, 73);
  c.now += 320;
  p.advance(3'000'000'000, 218);
  p.finish();
  EXPECT_EQ(m.text(),
            "progress: h5-to-hf 1.00 GB / 4.00 GB (25%), 73/291 tensors, 12.5 MB/s, ETA 4m00s\n"
            "progress: h5-to-hf 4.00 GB / 4.00 GB (100%), 291/291 tensors, 10.0 MB/s\n"
            "progress: h5-to-hf done: 4.00 GB, 291 tensors in 6m40s, 10.0 MB/s\n");

  MemFile m2;
  zt::Progress s("check sweep", 24, zt::ProgressUnit::kSizes, opts(m2, c, false, 1));
  c.now += 2;
  s.note("all_reduce 64M");
  s.advance(1);
  s.finish();
  EXPECT_EQ(m2.text(),
            "progress: check sweep 1 / 24 sizes (4%), 0.50 sizes/s, all_reduce 64M, ETA 46.0s\n"
            "progress: check sweep done: 1 sizes in 2.0s, 0.50 sizes/s\n");

  MemFile m3;
  zt::Progress t("tokens", 0, zt::ProgressUnit::kTokens, opts(m3, c, false, 1));  // no total
  c.now += 2;
  t.advance(5'000'000);
  EXPECT_EQ(m3.text(), "progress: tokens 5.00M tokens, 2.50M tok/s\n");
}

TEST(Progress, PhasesHaveNoRateOrEta) {
  MemFile m;
  FakeClock c;
  zt::Progress p("train start-up", 2, zt::ProgressUnit::kPhases, opts(m, c, false, 1));
  for (const char* next : {"resume", ""}) {  // a phase ends naming the one that runs next
    c.now += 2;
    p.note(next);
    p.advance(1);
  }
  p.finish();
  EXPECT_EQ(m.text(),
            "progress: train start-up 1 / 2 phases (50%), resume\n"
            "progress: train start-up 2 / 2 phases (100%)\n"
            "progress: train start-up done: 2 phases in 4.0s\n");
}

TEST(Progress, OffPrintsNothing) {
  MemFile m;
  FakeClock c;
  {
    zt::Progress p("quiet", 10, zt::ProgressUnit::kBytes, opts(m, c, false, 0));
    EXPECT_FALSE(p.enabled());
    c.now += 100;
    p.advance(10);
    p.finish();
    EXPECT_EQ(p.done(), 10u);
  }
  {
    zt::ProgressOptions o = opts(m, c, true, 10);
    o.print = false;  // not rank 0
    zt::Progress p("other rank", 10, zt::ProgressUnit::kBytes, o);
    c.now += 100;
    p.advance(10);
    p.finish();
  }
  EXPECT_EQ(m.text(), "");
}

TEST(Progress, TerminalRedrawsInPlace) {
  MemFile m;
  FakeClock c;
  {
    zt::Progress p("load", 200, zt::ProgressUnit::kTensors, opts(m, c, true, 10));
    c.now += 0.0625;
    p.advance(10);  // within 0.1 s of the start: no redraw yet
    c.now += 0.0625;
    p.advance(90);
    c.now += 0.125;
    p.advance(100);
    p.finish();
  }
  EXPECT_EQ(m.text(),
            "\rprogress: load 100 / 200 tensors (50%), 800.0 tensors/s, ETA 0.1s\x1b[K"
            "\rprogress: load 200 / 200 tensors (100%), 800.0 tensors/s\x1b[K"
            "\rprogress: load done: 200 tensors in 0.2s, 800.0 tensors/s\x1b[K\n");
}

TEST(Progress, UnfinishedTerminalLineEndsWithANewline) {
  MemFile m;
  FakeClock c;
  {
    zt::Progress p("save", 100, zt::ProgressUnit::kBytes, opts(m, c, true, 10));
    c.now += 1;
    p.advance(50);
  }  // an exception unwinding: no end line, but the cursor is on a fresh line
  EXPECT_EQ(m.text(), "\rprogress: save 50 B / 100 B (50%), 0.0 MB/s, ETA 1.0s\x1b[K\n");
}

TEST(Progress, IntervalSetting) {
  EXPECT_EQ(zt::progress_interval(), zt::kDefaultProgressInterval);
  zt::set_progress_interval(0, "--progress");
  EXPECT_EQ(zt::progress_interval(), 0.0);
  zt::set_progress_interval(2.5, "--progress");
  EXPECT_EQ(zt::progress_interval(), 2.5);
  try {
    zt::set_progress_interval(-1, "--progress");
    FAIL() << "a negative interval was accepted";
  } catch (const zt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--progress is -1"), std::string::npos) << e.what();
    EXPECT_EQ(e.exit_code(), zt::ExitCode::kBadInput);
  }
  EXPECT_EQ(zt::progress_interval(), 2.5);  // unchanged
  zt::set_progress_interval(zt::kDefaultProgressInterval);
}

TEST(Progress, FormatDuration) {
  EXPECT_EQ(zt::format_duration(0), "0.0s");
  EXPECT_EQ(zt::format_duration(59.94), "59.9s");
  EXPECT_EQ(zt::format_duration(65), "1m05s");
  EXPECT_EQ(zt::format_duration(7380), "2h03m");
  EXPECT_EQ(zt::format_duration(-1), "?");
}
