#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

TEST(Error, MessageCarriesCallLocationAndHint) {
  try {
    zt::fail_call("MPI_Allreduce", "MPI_ERR_TRUNCATE", "match the counts", "/a/b/comm.cpp", 42);
    FAIL() << "fail_call returned";
  } catch (const zt::Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("MPI_Allreduce failed: MPI_ERR_TRUNCATE (comm.cpp:42)"), std::string::npos) << w;
    EXPECT_NE(w.find("HINT: match the counts"), std::string::npos) << w;
    EXPECT_EQ(e.exit_code(), zt::ExitCode::kFailed);
  }
}

TEST(Error, InputErrorExitsTwoAndNamesRankOnceKnown) {
  zt::set_process_identity(3, "node7");
  const zt::InputError e("bad key 'x'", "fix it");
  EXPECT_EQ(e.exit_code(), zt::ExitCode::kBadInput);
  EXPECT_EQ(std::string(e.what()).rfind("[rank 3 on node7] bad key 'x'", 0), 0u) << e.what();
  zt::set_process_identity(-1, "node7");
}

// Occurrences of `needle` in `text`.
size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(Error, HintLabelIsPrintedOnceEvenWhenTheHintCarriesIt) {
  // The hint as written in the source -> the hint kept, and what() prints "HINT: " once.
  const std::pair<std::string, std::string> cases[] = {
      {"check the path", "check the path"},     // the rule: hints without the label
      {"HINT: check the path", "check the path"},
      {"HINT:check the path", "check the path"},
      {"HINT:  HINT: check the path", "check the path"},
      {"use a HINT: label elsewhere", "use a HINT: label elsewhere"},  // only a leading label goes
  };
  for (const auto& [written, kept] : cases) {
    const zt::InputError e("bad input", written);
    EXPECT_EQ(e.hint(), kept) << written;
    EXPECT_EQ(std::string(e.what()), zt::where_prefix() + "bad input\n  HINT: " + kept) << written;
  }
  try {
    zt::fail_call("open(f)", "ENOENT", "HINT: create it", "/x/io.cpp", 7);
    FAIL() << "fail_call returned";
  } catch (const zt::Error& e) {
    EXPECT_EQ(count(e.what(), "HINT:"), 1u) << e.what();
    EXPECT_EQ(e.hint(), "create it");
  }
  // A label with nothing after it is no hint at all: no "HINT:" line.
  const zt::Error bare("failed", "HINT: ");
  EXPECT_EQ(std::string(bare.what()), zt::where_prefix() + "failed");
  EXPECT_TRUE(bare.hint().empty());
}

TEST(Strf, Formats) { EXPECT_EQ(zt::strf("%d-%s-%.2f", 3, "x", 1.5), "3-x-1.50"); }
