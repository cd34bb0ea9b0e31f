// Work, then one agreement over the ranks (see agree.hpp).
#include "zt/runtime/agree.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <string_view>

#include "zt/core/error.hpp"
#include "zt/core/hash.hpp"
#include "zt/core/log.hpp"
#include "zt/runtime/mpi_check.hpp"

namespace zt::runtime {

void Agreement::rethrow(const std::string& elsewhere, const std::string& hint) const {
  if (error) std::rethrow_exception(error);
  if (code != 0) throw Error(elsewhere, hint, static_cast<ExitCode>(code));
}

std::string Agreement::own_message() const {
  if (!error) return {};
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return e.message();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

Agreement agree(MPI_Comm comm, const std::function<void()>& work, bool rank0_only) {
  int rank = 0;
  if (comm != MPI_COMM_NULL) ZT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  Agreement a;
  if (!rank0_only || rank == 0) {
    try {
      work();
    } catch (const Error& e) {
      a.code = static_cast<int>(e.exit_code());
      a.error = std::current_exception();
    } catch (...) {  // std::filesystem_error, bad_alloc, ...: still tell the others
      a.code = static_cast<int>(ExitCode::kFailed);
      a.error = std::current_exception();
    }
  }
  if (comm != MPI_COMM_NULL)
    ZT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &a.code, 1, MPI_INT, MPI_MAX, comm));
  return a;
}

void collectively(MPI_Comm comm, const std::function<void()>& work, bool rank0_only) {
  agree(comm, work, rank0_only)
      .rethrow(rank0_only ? "rank 0 failed (its message above says why)"
                          : "another rank failed (its message above says why)");
}

namespace {

std::string serialize(const Settings& settings) {
  std::string out;
  for (const auto& [name, value] : settings) {
    out += name;
    out.push_back('\0');
    out += value;
    out.push_back('\0');
  }
  return out;
}

Settings deserialize(std::string_view text) {
  Settings out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t a = text.find('\0', at);
    const size_t b = a == std::string_view::npos ? a : text.find('\0', a + 1);
    if (b == std::string_view::npos) break;
    out.emplace_back(std::string(text.substr(at, a - at)), std::string(text.substr(a + 1, b - a - 1)));
    at = b + 1;
  }
  return out;
}

// "0,2-4" for ranks {0, 2, 3, 4}.
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += j > i ? strf("%s%d-%d", out.empty() ? "" : ",", ranks[i], ranks[j])
                 : strf("%s%d", out.empty() ? "" : ",", ranks[i]);
    i = j + 1;
  }
  return out;
}

std::string shown(const std::string& value) {
  constexpr int kMax = 200;
  if (value.size() <= kMax) return strf("'%s'", value.c_str());
  return strf("'%.*s...' (%zu characters)", kMax, value.c_str(), value.size());
}

}  // namespace

void require_same(MPI_Comm comm, const Settings& settings, const std::string& what,
                  const std::string& hint) {
  if (comm == MPI_COMM_NULL) return;
  int size = 1;
  ZT_MPI_CHECK(MPI_Comm_size(comm, &size));
  if (size == 1) return;
  const std::string mine = serialize(settings);
  const uint64_t hash = fnv1a(mine);
  std::vector<uint64_t> hashes(static_cast<size_t>(size));
  ZT_MPI_CHECK(MPI_Allgather(&hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, comm));
  if (std::all_of(hashes.begin(), hashes.end(), [&](uint64_t h) { return h == hashes[0]; })) return;

  // They differ: every rank gathers every rank's texts and finds the same first difference.
  ZT_CHECK(mine.size() < static_cast<size_t>(std::numeric_limits<int>::max()),
           "settings too long to compare", "report this as a bug");
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  ZT_MPI_CHECK(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm));
  int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[static_cast<size_t>(r)] = static_cast<int>(total);
    total += lengths[static_cast<size_t>(r)];
  }
  ZT_CHECK(total < std::numeric_limits<int>::max(), "settings too long to compare", "report this as a bug");
  std::string all(static_cast<size_t>(total), '\0');
  ZT_MPI_CHECK(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
                              offsets.data(), MPI_CHAR, comm));
  std::vector<std::map<std::string, std::string>> by_rank(static_cast<size_t>(size));
  std::vector<std::string> names;  // rank 0's order, then names only later ranks have
  for (int r = 0; r < size; ++r) {
    const Settings s = deserialize(std::string_view(all).substr(
        static_cast<size_t>(offsets[static_cast<size_t>(r)]), static_cast<size_t>(lengths[static_cast<size_t>(r)])));
    for (const auto& [name, value] : s) {
      if (by_rank[static_cast<size_t>(r)].emplace(name, value).second &&
          std::find(names.begin(), names.end(), name) == names.end())
        names.push_back(name);
    }
  }
  for (const std::string& name : names) {
    std::vector<std::pair<std::string, std::vector<int>>> groups;  // value -> ranks, first seen first
    for (int r = 0; r < size; ++r) {
      const auto& m = by_rank[static_cast<size_t>(r)];
      const auto it = m.find(name);
      const std::string value = it == m.end() ? std::string("(absent)") : shown(it->second);
      auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == value; });
      if (g == groups.end()) groups.push_back({value, {r}});
      else g->second.push_back(r);
    }
    if (groups.size() == 1) continue;
    std::string detail;
    for (size_t i = 0; i < groups.size() && i < 8; ++i)
      detail += strf("%s%s %s %s %s", i ? "; " : "", groups[i].second.size() == 1 ? "rank" : "ranks",
                     rank_list(groups[i].second).c_str(), groups[i].second.size() == 1 ? "has" : "have",
                     groups[i].first.c_str());
    if (groups.size() > 8) detail += strf("; and %zu more values", groups.size() - 8);
    throw InputError(strf("the ranks disagree on %s '%s': %s", what.c_str(), name.c_str(), detail.c_str()),
                     hint);
  }
  // Same names and values, different texts: cannot happen (the serialisation is a function
  // of the pairs); a hash collision of different texts would make them compare equal.
  throw InputError(strf("the ranks disagree on %s (the order of the settings differs)", what.c_str()), hint);
}

}  // namespace zt::runtime
