#pragma once
// join({"a", "b"}, ", ") == "a, b": list rendering for messages and reports.
#include <string>
#include <string_view>
#include <vector>

namespace zt::check {

inline std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string s;
  for (const std::string& item : items) {
    if (!s.empty()) s.append(separator);
    s.append(item);
  }
  return s;
}

}  // namespace zt::check
