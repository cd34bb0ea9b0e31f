// --ops parsing and option validation (the exit-2 checks done before any collective).
#include <gtest/gtest.h>

#include "zt/check/options.hpp"
#include "zt/core/error.hpp"

using zt::check::CheckOp;

namespace {
// The InputError message of f(), or "" when it does not throw.
template <typename F>
std::string input_error(F f) {
  try {
    f();
  } catch (const zt::InputError& e) {
    return e.what();
  }
  return {};
}
}  // namespace

TEST(Ops, ParseListInRunOrder) {
  EXPECT_EQ(zt::check::parse_check_ops("broadcast,all_reduce"),
            (std::vector<CheckOp>{CheckOp::kAllReduce, CheckOp::kBroadcast}));
  EXPECT_EQ(zt::check::parse_check_ops("all").size(), 6u);
  EXPECT_EQ(zt::check::parse_check_ops("all_to_all,sendrecv"),
            (std::vector<CheckOp>{CheckOp::kSendRecv, CheckOp::kAllToAll}));
  EXPECT_EQ(zt::check::parse_check_ops("all")[0], CheckOp::kAllReduce);
  EXPECT_EQ(zt::check::parse_check_ops("sendrecv,sendrecv"), (std::vector<CheckOp>{CheckOp::kSendRecv}));
}

TEST(Ops, BadNames) {
  EXPECT_NE(input_error([] { zt::check::parse_check_ops("all_reduce,alltoall"); }).find("alltoall"),
            std::string::npos);
  EXPECT_NE(input_error([] { zt::check::parse_check_ops(""); }), "");
  EXPECT_NE(input_error([] { zt::check::parse_check_ops("all_reduce,"); }), "");
  EXPECT_NE(input_error([] { zt::check::parse_check_ops("All_Reduce"); }), "");
}

TEST(Options, DefaultsAreValid) {
  zt::check::CheckOptions o;
  EXPECT_NO_THROW(zt::check::validate_options(o));
  EXPECT_EQ(zt::check::sweep_of(o).size(), 26u);  // 8 .. 256M by 2
}

TEST(Options, EachBadValueIsAnInputError) {
  auto bad = [](auto change) {
    zt::check::CheckOptions o;
    change(o);
    return input_error([&] { zt::check::validate_options(o); });
  };
  EXPECT_NE(bad([](auto& o) { o.max_bytes = 4; }).find("smaller than --min-bytes"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.step_factor = 1; }).find("--step-factor"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.iters = 0; }).find("--iters"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.warmup = -1; }).find("--warmup"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.min_bytes = 0; }).find("--min-bytes"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.ops.clear(); }), "");
  EXPECT_NE(bad([](auto& o) { o.dtype = zt::DType::kU8; }).find("uint8"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.redop = zt::comm::ReduceOp::kAvg; }).find("avg"), std::string::npos);
}

TEST(Options, GateSizeMustBeInTheSweep) {
  zt::check::CheckOptions o;
  o.max_bytes = 1 << 20;
  o.thresholds = zt::check::parse_thresholds_text("[all_reduce]\nsize = \"64M\"\nmin_busbw_gbs = 1.0\n", "t.toml");
  const std::string e = input_error([&] { zt::check::validate_options(o); });
  EXPECT_NE(e.find("all_reduce.size = 64M is not a size of the sweep"), std::string::npos) << e;
  o.thresholds = zt::check::parse_thresholds_text("[all_reduce]\nsize = \"1M\"\nmin_busbw_gbs = 1.0\n"
                                                  "latency_size = 12\nmax_latency_us = 5\n", "t.toml");
  EXPECT_NE(input_error([&] { zt::check::validate_options(o); }).find("latency_size = 12"), std::string::npos);
  o.thresholds = zt::check::parse_thresholds_text("[all_reduce]\nsize = \"1M\"\nmin_busbw_gbs = 1.0\n"
                                                  "latency_size = 16\nmax_latency_us = 5\n", "t.toml");
  EXPECT_NO_THROW(zt::check::validate_options(o));
}

TEST(Options, Redops) {
  EXPECT_EQ(zt::check::parse_check_redop("max"), zt::comm::ReduceOp::kMax);
  EXPECT_THROW(zt::check::parse_check_redop("avg"), zt::InputError);
  EXPECT_THROW(zt::check::parse_check_redop("prod"), zt::InputError);
}
