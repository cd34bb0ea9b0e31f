// poll_until (zt/core/poll.hpp), the one polled wait: it returns once ready() says so,
// calls between() after each poll that was not ready, throws naming the wait and its hint
// past the bound, and waits from several threads at once.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "zt/core/error.hpp"
#include "zt/core/poll.hpp"

TEST(Poll, ReadyBetweenBoundAndThreads) {
  int asked = 0;
  std::vector<int64_t> seen;
  zt::PollOptions o;
  o.between = [&](int64_t polls) { seen.push_back(polls); };
  zt::poll_until([&] { return ++asked == 100; }, "counting", o);
  EXPECT_EQ(asked, 100);
  ASSERT_EQ(seen.size(), 99u);  // after each of the 99 polls that were not ready, in order
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int64_t>(i));

  o = {};
  o.limit = std::chrono::milliseconds(50);
  o.limit_hint = "reset the thing";
  o.pause = std::chrono::microseconds(100);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    zt::poll_until([] { return false; }, "the stuck work", o);
    FAIL() << "no error past the bound";
  } catch (const zt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the stuck work did not finish within 0.05 s"), std::string::npos)
        << e.what();
    EXPECT_EQ(e.hint(), "reset the thing");
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(s, 0.05);
  EXPECT_LT(s, 5.0);

  std::atomic<int> go{0};
  std::vector<std::thread> threads;
  std::atomic<int> done{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      zt::poll_until([&] { return go.load() == 1; }, "the start", {});
      ++done;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(done.load(), 0);
  go = 1;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(done.load(), 4);
}
