#pragma once
// Test helper shared by the test folders: one temporary folder per test process
// (/tmp/zt_test_<pid>), created on first use and removed after the last test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace zt::testing {

inline std::filesystem::path temp_dir() {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / ("zt_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

// Removes temp_dir() after the last test (registered once per process: an inline variable).
class RemoveTempDir : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir(), ec);
  }
};
[[maybe_unused]] inline ::testing::Environment* const kRemoveTempDir =
    ::testing::AddGlobalTestEnvironment(new RemoveTempDir);

}  // namespace zt::testing
