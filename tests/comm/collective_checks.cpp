// The backend-independent collective checks (see collective_checks.hpp).
#include "collective_checks.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "values.hpp"

namespace zt::comm::testing {
namespace {

// A salt that differs between cases, so a stale result from an earlier case never
// passes for a later one.
int salt_of(const Case& c) {
  return static_cast<int>(c.count % 5) + 3 * static_cast<int>(c.op) +
         static_cast<int>(c.dtype) + (c.in_place ? 1 : 0);
}

std::string label(const char* what, const Case& c, const Comm& comm) {
  return std::string(what) + " " + std::string(dtype_name(c.dtype)) + " " +
         std::string(reduce_op_name(c.op)) + " count " + std::to_string(c.count) +
         (c.in_place ? " in-place" : " out-of-place") + " root " + std::to_string(c.root) +
         " rank " + std::to_string(comm.rank()) + "/" + std::to_string(comm.size());
}

// input_value(dtype, rank, base + i, salt) for i < count, as bytes of the dtype.
std::vector<unsigned char> make_input(DType t, int rank, size_t base, size_t count, int salt) {
  std::vector<unsigned char> host(count * dtype_size(t) + 1);
  for (size_t i = 0; i < count; ++i) store(t, host.data(), i, input_value(t, rank, base + i, salt));
  return host;
}

// Element-by-element comparison; reports the first few mismatches, returns how many.
int compare(const std::string& what, DType t, const unsigned char* got, size_t count,
            const std::function<double(size_t)>& expected, double tolerance = 0) {
  int wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const double want = expected(i);
    const double have = load(t, got, i);
    if (!(have == want || std::fabs(have - want) <= tolerance)) {
      if (++wrong <= 3)
        ADD_FAILURE() << what << ": element " << i << " is " << have << ", expected " << want;
    }
  }
  if (wrong > 3) ADD_FAILURE() << what << ": " << wrong << " wrong elements in all";
  return wrong;
}

}  // namespace

void* HostSpace::alloc(size_t bytes) { return std::malloc(bytes == 0 ? 1 : bytes); }
void HostSpace::release(void* p) { std::free(p); }
void HostSpace::upload(void* dst, const void* host, size_t bytes) { std::memcpy(dst, host, bytes); }
void HostSpace::download(void* host, const void* src, size_t bytes) {
  std::memcpy(host, src, bytes);
}

Buffer::Buffer(BufferSpace& space, size_t count, DType dtype)
    : space_(space), count_(count), elem_(dtype_size(dtype)), dtype_(dtype),
      ptr_(space.alloc(count * dtype_size(dtype))) {}

Buffer::~Buffer() { space_.release(ptr_); }

void Buffer::fill(int rank, size_t base, int salt) {
  const std::vector<unsigned char> host = make_input(dtype_, rank, base, count_, salt);
  space_.upload(ptr_, host.data(), count_ * elem_);
}

void Buffer::fill_sentinel() {
  std::vector<unsigned char> host(count_ * elem_ + 1);
  for (size_t i = 0; i < count_; ++i) store(dtype_, host.data(), i, dtype_ == DType::kU8 ? 99 : -99);
  space_.upload(ptr_, host.data(), count_ * elem_);
}

std::vector<unsigned char> Buffer::to_host() const {
  std::vector<unsigned char> host(count_ * elem_ + 1);
  space_.download(host.data(), ptr_, count_ * elem_);
  return host;
}

int check_all_reduce(Comm& comm, BufferSpace& space, const Case& c) {
  const int salt = salt_of(c);
  const int n = comm.size();
  Buffer send(space, c.count, c.dtype);
  send.fill(comm.rank(), 0, salt);
  Buffer out(space, c.count, c.dtype);
  out.fill_sentinel();
  Buffer& recv = c.in_place ? send : out;
  comm.all_reduce(send.data(), recv.data(), c.count, c.dtype, c.op);
  const std::string what = label("all_reduce", c, comm);
  int wrong = compare(what, c.dtype, recv.to_host().data(), c.count, [&](size_t i) {
    return reference_reduce(c.op, c.dtype, n, i, salt);
  }, c.tolerance);
  if (!c.in_place)  // out of place leaves the input alone
    wrong += compare(what + " (send buffer)", c.dtype, send.to_host().data(), c.count,
                     [&](size_t i) { return input_value(c.dtype, comm.rank(), i, salt); });
  return wrong;
}

int check_all_gather(Comm& comm, BufferSpace& space, const Case& c) {
  const int salt = salt_of(c);
  const int n = comm.size();
  const size_t mine = c.count * static_cast<size_t>(comm.rank());
  Buffer recv(space, c.count * static_cast<size_t>(n), c.dtype);  // [n][count]
  recv.fill_sentinel();
  Buffer send(space, c.count, c.dtype);
  if (c.in_place) {
    const std::vector<unsigned char> host = make_input(c.dtype, comm.rank(), 0, c.count, salt);
    space.upload(recv.at(mine), host.data(), c.count * dtype_size(c.dtype));
    comm.all_gather(recv.at(mine), recv.data(), c.count, c.dtype);
  } else {
    send.fill(comm.rank(), 0, salt);
    comm.all_gather(send.data(), recv.data(), c.count, c.dtype);
  }
  return compare(label("all_gather", c, comm), c.dtype, recv.to_host().data(),
                 c.count * static_cast<size_t>(n), [&](size_t j) {
                   const int r = static_cast<int>(j / c.count);
                   return in_dtype(c.dtype, input_value(c.dtype, r, j % c.count, salt));
                 });
}

int check_reduce_scatter(Comm& comm, BufferSpace& space, const Case& c) {
  const int salt = salt_of(c);
  const int n = comm.size();
  const size_t mine = c.count * static_cast<size_t>(comm.rank());
  Buffer send(space, c.count * static_cast<size_t>(n), c.dtype);  // [n][count]
  send.fill(comm.rank(), 0, salt);
  Buffer out(space, c.count, c.dtype);
  out.fill_sentinel();
  void* recv = c.in_place ? send.at(mine) : out.data();
  comm.reduce_scatter(send.data(), recv, c.count, c.dtype, c.op);
  std::vector<unsigned char> got(c.count * dtype_size(c.dtype) + 1);
  space.download(got.data(), recv, c.count * dtype_size(c.dtype));
  return compare(label("reduce_scatter", c, comm), c.dtype, got.data(), c.count,
                 [&](size_t i) { return reference_reduce(c.op, c.dtype, n, mine + i, salt); },
                 c.tolerance);
}

int check_broadcast(Comm& comm, BufferSpace& space, const Case& c) {
  const int salt = salt_of(c);
  Buffer buf(space, c.count, c.dtype);
  if (comm.rank() == c.root)
    buf.fill(c.root, 0, salt);
  else
    buf.fill_sentinel();
  comm.broadcast(buf.data(), c.count, c.dtype, c.root);
  return compare(label("broadcast", c, comm), c.dtype, buf.to_host().data(), c.count,
                 [&](size_t i) { return in_dtype(c.dtype, input_value(c.dtype, c.root, i, salt)); });
}

int check_ring_sendrecv(Comm& comm, BufferSpace& space, const Case& c) {
  const int salt = salt_of(c);
  const int n = comm.size();
  const int next = (comm.rank() + 1) % n;
  const int prev = (comm.rank() + n - 1) % n;
  Buffer send(space, c.count, c.dtype);
  send.fill(comm.rank(), 0, salt);
  Buffer recv(space, c.count, c.dtype);
  recv.fill_sentinel();
  comm.sendrecv(send.data(), next, recv.data(), prev, c.count, c.dtype);
  return compare(label("sendrecv ring", c, comm), c.dtype, recv.to_host().data(), c.count,
                 [&](size_t i) { return in_dtype(c.dtype, input_value(c.dtype, prev, i, salt)); });
}

namespace {
// Elements rank r sends to rank p in check_all_to_all: uneven, zero for some pairs.
size_t a2a_count(const Case& c, int r, int p) {
  return (r * 7 + p * 3 + static_cast<int>(c.count)) % 4 == 0 ? 0 : c.count + static_cast<size_t>(r + 2 * p);
}
}  // namespace

int check_all_to_all(Comm& comm, BufferSpace& space, const Case& c, bool counted) {
  const int salt = salt_of(c) + 11;
  const int n = comm.size(), me = comm.rank();
  const auto un = static_cast<size_t>(n);
  std::vector<size_t> sc(un), so(un), rc(un), ro(un);
  size_t send_total = 0, recv_total = 0;
  for (int p = 0; p < n; ++p) {
    const auto i = static_cast<size_t>(p);
    sc[i] = a2a_count(c, me, p);
    so[i] = send_total;
    send_total += sc[i];
    rc[i] = a2a_count(c, p, me);
    ro[i] = recv_total;
    recv_total += rc[i] + 1;  // one element between receive ranges stays untouched
  }
  Buffer send(space, send_total, c.dtype);
  send.fill(me, 0, salt);  // element j: input_value(dtype, me, j, salt)
  Buffer recv(space, recv_total, c.dtype);
  recv.fill_sentinel();
  const std::vector<unsigned char> sentinel = recv.to_host();
  const Counters before = comm.counters();
  comm.all_to_all(send.data(), sc, so, recv.data(), rc, ro, c.dtype);
  const std::vector<unsigned char> got = recv.to_host();
  int wrong = 0;
  for (int p = 0; p < n; ++p) {
    const auto i = static_cast<size_t>(p);
    size_t from = 0;  // where rank p's part for this rank starts in p's send buffer
    for (int q = 0; q < me; ++q) from += a2a_count(c, p, q);
    wrong += compare(label("all_to_all", c, comm) + " from rank " + std::to_string(p), c.dtype,
                     got.data() + ro[i] * dtype_size(c.dtype), rc[i], [&](size_t k) {
                       return in_dtype(c.dtype, input_value(c.dtype, p, from + k, salt));
                     });
    const size_t gap = ro[i] + rc[i];
    wrong += compare(label("all_to_all gap", c, comm), c.dtype, got.data() + gap * dtype_size(c.dtype),
                     1, [&](size_t) { return load(c.dtype, sentinel.data(), gap); });
  }
  const int op = static_cast<int>(Op::kAllToAll);
  size_t sent = 0;
  for (int p = 0; p < n; ++p) sent += p == me ? 0 : sc[static_cast<size_t>(p)];
  if (counted) {
    EXPECT_EQ(comm.counters().bytes[op] - before.bytes[op], sent * dtype_size(c.dtype))
        << label("all_to_all bytes", c, comm);
    EXPECT_EQ(comm.counters().calls[op] - before.calls[op], 1u) << label("all_to_all calls", c, comm);
  }
  return wrong;
}

}  // namespace zt::comm::testing
