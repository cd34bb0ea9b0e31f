// Every key of `zt train` with hostile values (issue 20, class 8's table): each value is
// either accepted or refused with a zt::InputError (exit 2). Never an internal error
// (zt::Error, exit 1), another exception, or a crash. An accepted configuration is then
// resolved as `zt train` does (train::resolve) and estimated as `zt estimate` does (every
// row), which runs the model's size checks and the per-rank arithmetic without
// allocating the model: a key whose bounds let a value through that the arithmetic
// cannot take fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "zt/core/config.hpp"
#include "zt/core/error.hpp"
#include "zt/estimate/estimate.hpp"
#include "zt/train/config.hpp"

namespace {

// What a careless or hostile user types: signs, zero, extremes of int64 and double,
// non-finite, tiny, empty, not a number.
const std::vector<std::string> kHostile = {
    "-1", "0", "1", "3", "1000000000", "9223372036854775807", "-9223372036854775808",
    "1e308", "-1e308", "1e-320", "nan", "inf", "-inf", "0.5", "\"\"", "x", "true"};

// Throws what resolving and estimating `override` throws (nothing when accepted).
void resolve_and_estimate(const zt::config::Schema& schema, const std::string& override) {
  const zt::config::Config cfg = zt::config::load(schema, "", {override});
  const zt::train::TrainConfig tc = zt::train::resolve(cfg, 1);
  zt::estimate::Setup s;
  s.model = tc.model;
  s.micro_batch = tc.micro_batch;
  s.seq_len = tc.seq_len;
  s.device = zt::estimate::Device::kCpu;
  s.zero = tc.zero;
  s.threads = tc.threads > 0 ? tc.threads : 1;
  zt::zero::EngineOptions checked = s.zero;
  if (checked.offload.nvme_path.empty()) checked.offload.nvme_path = "(estimate)";
  checked.validate(s.world(), s.gpus_per_node);
  (void)zt::estimate::estimate_all(s);
}

TEST(HostileKeys, EveryKeyIsAcceptedOrRefusedAsBadInput) {
  const zt::config::Schema schema = zt::train::train_schema();
  int accepted = 0, refused = 0;
  for (const zt::config::Key& key : schema.keys()) {
    // And each limit itself: the largest accepted value is where arithmetic overflows.
    std::vector<std::string> values = kHostile;
    for (const std::optional<double>& limit : {key.min, key.max})
      if (limit)
        values.push_back(key.type == zt::config::Type::kInt
                             ? std::to_string(static_cast<int64_t>(*limit))
                             : zt::config::value_to_string(zt::config::Value{*limit}));
    for (const std::string& value : values) {
      const std::string override = key.name + "=" + value;
      try {
        resolve_and_estimate(schema, override);
        ++accepted;
      } catch (const zt::InputError&) {
        ++refused;
      } catch (const zt::Error& e) {
        ADD_FAILURE() << "--set " << override << ": internal error (exit "
                      << static_cast<int>(e.exit_code()) << "): " << e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "--set " << override << ": unexpected exception: " << e.what();
      }
    }
  }
  std::printf("%zu keys x %zu values and each key's limits: %d accepted, %d refused (exit 2)\n",
              schema.keys().size(), kHostile.size(), accepted, refused);
  EXPECT_GT(refused, 0);
  EXPECT_GT(accepted, 0);
}

// The one rule (issue 35 item 4, issue 36 class 10), with an oracle on the outcome: every
// numeric key refuses NaN, +-inf, a value just below its minimum and just above its
// maximum (the limits from the schema itself, so a new key cannot be missed) with a
// zt::InputError (exit 2) whose message names the key.
TEST(HostileKeys, EveryNumericKeyRefusesNonFiniteAndOutOfRangeNamingIt) {
  const zt::config::Schema schema = zt::train::train_schema();
  int tried = 0, numeric = 0, unbounded_above = 0;
  for (const zt::config::Key& key : schema.keys()) {
    if (key.type != zt::config::Type::kInt && key.type != zt::config::Type::kFloat) continue;
    ++numeric;
    const bool is_int = key.type == zt::config::Type::kInt;
    std::vector<std::string> refused = {"nan", "inf", "-inf", "1e400"};
    if (is_int) refused = {"nan", "inf", "-inf", "99999999999999999999", "1.5"};
    const auto text = [is_int](double x) {
      return is_int ? std::to_string(static_cast<int64_t>(x)) : zt::config::value_to_string(zt::config::Value{x});
    };
    if (key.min)
      refused.push_back(key.min_exclusive ? text(*key.min)
                                          : text(*key.min - (is_int ? 1.0 : std::max(1.0, std::fabs(*key.min)))));
    if (key.max)
      refused.push_back(text(*key.max + (is_int ? 1.0 : std::max(1.0, std::fabs(*key.max)))));
    else
      ++unbounded_above;
    for (const std::string& value : refused) {
      ++tried;
      const std::string override = key.name + "=" + value;
      try {
        (void)zt::config::load(schema, "", {override});
        ADD_FAILURE() << "--set " << override << ": accepted, expected exit 2 naming the key";
      } catch (const zt::InputError& e) {
        EXPECT_NE(e.message().find(key.name), std::string::npos) << "--set " << override << ": " << e.message();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "--set " << override << ": not an InputError: " << e.what();
      }
    }
  }
  std::printf("%d numeric keys (%d without an upper limit), %d refused values, each exit 2 naming the key\n",
              numeric, unbounded_above, tried);
  EXPECT_GT(numeric, 40);
}

}  // namespace
