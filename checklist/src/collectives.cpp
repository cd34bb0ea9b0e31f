// The table of collectives (collectives.hpp). Buffer shapes (elements of dtype, n ranks,
// c = count, "block b" = elements [b c, (b+1) c)):
//   all_reduce      out: send[c] -> recv[c]              in: recv[c]
//   all_gather      out: send[c] -> recv[n c]            in: recv[n c], own part = block rank
//   reduce_scatter  out: send[n c] -> recv[c]            in: recv[n c], result = block rank
//   broadcast                                            in: recv[c]
//   sendrecv        out: send[c] -> rank+1, recv[c] <- rank-1
//   all_to_all      out: send[n c], block d -> rank d; recv[n c], block s <- rank s
// Bus factors and S are nccl-tests' (its doc/PERFORMANCE.md and each collective's file).
#include "collectives.hpp"

#include <array>
#include <vector>

#include "zt/core/error.hpp"

namespace zt::check {
namespace {

std::byte* dev(Buffer* b) { return static_cast<std::byte*>(b->data()); }

double ring_twice(double n) { return 2.0 * (n - 1.0) / n; }
double ring_once(double n) { return (n - 1.0) / n; }
double one(double) { return 1.0; }

size_t count_elems(const Call& c) { return c.count; }
size_t all_blocks(const Call& c) { return c.count * static_cast<size_t>(c.n); }
size_t send_if_out(const Call& c) { return c.out() ? c.count : 0; }

// Poison for the recv elements the call must overwrite (out of place: all of them).
void poison_recv(const Call& c, size_t elems) {
  fill_value(c.recv->host(), c.dtype, elems, Pattern::kPoison);
}

constexpr std::array kTable = {
    Collective{
        CheckOp::kAllReduce, "all_reduce", true, true, true, false, ring_twice, send_if_out,
        count_elems,
        [](const Call& c, const Pattern& p) {
          fill_pattern(c.out() ? c.send->host() : c.recv->host(), c.dtype, c.count, p, c.rank, 0);
          if (c.out()) poison_recv(c, c.count);
        },
        [](comm::Comm& m, const Call& c) {
          m.all_reduce(c.out() ? dev(c.send) : dev(c.recv), dev(c.recv), c.count, c.dtype, c.redop);
        },
        [](const Call& c, const Pattern& p) {
          return count_wrong_reduced(c.recv->host(), c.dtype, c.count, p, c.redop, 0);
        }},
    Collective{
        CheckOp::kAllGather, "all_gather", false, true, true, true, ring_once, send_if_out,
        all_blocks,
        [](const Call& c, const Pattern& p) {
          poison_recv(c, all_blocks(c));
          std::byte* own = c.out() ? c.send->host() : c.recv->host() + c.block(c.rank);
          fill_pattern(own, c.dtype, c.count, p, c.rank, 0);
        },
        [](comm::Comm& m, const Call& c) {
          m.all_gather(c.out() ? dev(c.send) : dev(c.recv) + c.block(c.rank), dev(c.recv),
                       c.count, c.dtype);
        },
        [](const Call& c, const Pattern& p) {
          int64_t wrong = 0;
          for (int q = 0; q < c.n; ++q)
            wrong += count_wrong_from_rank(c.recv->host() + c.block(q), c.dtype, c.count, p, q, 0);
          return wrong;
        }},
    Collective{
        CheckOp::kReduceScatter, "reduce_scatter", true, true, true, true, ring_once,
        [](const Call& c) { return c.out() ? all_blocks(c) : 0; },
        [](const Call& c) { return c.out() ? c.count : all_blocks(c); },
        [](const Call& c, const Pattern& p) {
          // Global element g of the full array: rank r contributes value(r, g).
          fill_pattern(c.out() ? c.send->host() : c.recv->host(), c.dtype, all_blocks(c), p,
                       c.rank, 0);
          if (c.out()) poison_recv(c, c.count);
        },
        [](comm::Comm& m, const Call& c) {
          if (c.out()) m.reduce_scatter(dev(c.send), dev(c.recv), c.count, c.dtype, c.redop);
          else m.reduce_scatter(dev(c.recv), dev(c.recv) + c.block(c.rank), c.count, c.dtype, c.redop);
        },
        [](const Call& c, const Pattern& p) {
          const std::byte* result = c.recv->host() + (c.out() ? 0 : c.block(c.rank));
          return count_wrong_reduced(result, c.dtype, c.count, p, c.redop,
                                     static_cast<uint64_t>(c.rank) * c.count);
        }},
    Collective{
        CheckOp::kBroadcast, "broadcast", false, false, true, false, one,
        [](const Call&) -> size_t { return 0; }, count_elems,
        [](const Call& c, const Pattern& p) {
          if (c.rank == c.root) fill_pattern(c.recv->host(), c.dtype, c.count, p, c.root, 0);
          else poison_recv(c, c.count);
        },
        [](comm::Comm& m, const Call& c) { m.broadcast(dev(c.recv), c.count, c.dtype, c.root); },
        [](const Call& c, const Pattern& p) {
          return count_wrong_from_rank(c.recv->host(), c.dtype, c.count, p, c.root, 0);
        }},
    Collective{
        CheckOp::kSendRecv, "sendrecv", false, true, false, false, one, count_elems, count_elems,
        [](const Call& c, const Pattern& p) {
          fill_pattern(c.send->host(), c.dtype, c.count, p, c.rank, 0);
          poison_recv(c, c.count);
        },
        [](comm::Comm& m, const Call& c) {
          m.sendrecv(dev(c.send), (c.rank + 1) % c.n, dev(c.recv), (c.rank - 1 + c.n) % c.n,
                     c.count, c.dtype);
        },
        [](const Call& c, const Pattern& p) {
          return count_wrong_from_rank(c.recv->host(), c.dtype, c.count, p,
                                       (c.rank - 1 + c.n) % c.n, 0);
        }},
    Collective{
        CheckOp::kAllToAll, "all_to_all", false, true, false, true, ring_once, all_blocks,
        all_blocks,
        [](const Call& c, const Pattern& p) {
          // Block d of rank s: ids (s n + d) c + k, distinct per (sender, receiver, element).
          const uint64_t first = static_cast<uint64_t>(c.rank) * static_cast<uint64_t>(c.n) * c.count;
          fill_distinct(c.send->host(), c.dtype, all_blocks(c), p, first);
          poison_recv(c, all_blocks(c));
        },
        [](comm::Comm& m, const Call& c) {
          const auto n = static_cast<size_t>(c.n);
          std::vector<size_t> counts(n, c.count), offsets(n);
          for (size_t b = 0; b < n; ++b) offsets[b] = b * c.count;
          m.all_to_all(dev(c.send), counts, offsets, dev(c.recv), counts, offsets, c.dtype);
        },
        [](const Call& c, const Pattern& p) {
          int64_t wrong = 0;
          for (int s = 0; s < c.n; ++s) {
            const uint64_t first = (static_cast<uint64_t>(s) * static_cast<uint64_t>(c.n) +
                                    static_cast<uint64_t>(c.rank)) * c.count;
            wrong += count_wrong_distinct(c.recv->host() + c.block(s), c.dtype, c.count, p, first);
          }
          return wrong;
        }},
};

constexpr bool table_in_enum_order() {
  for (size_t i = 0; i < kTable.size(); ++i)
    if (static_cast<size_t>(kTable[i].op) != i) return false;
  return kTable.size() == std::size(kAllCheckOps);
}
static_assert(table_in_enum_order(), "one entry per CheckOp, in the enum's order");

}  // namespace

const Collective& collective(CheckOp op) {
  const auto i = static_cast<size_t>(op);
  ZT_CHECK(i < kTable.size(), "no collective for this CheckOp", "add its entry to collectives.cpp");
  return kTable[i];
}

}  // namespace zt::check
