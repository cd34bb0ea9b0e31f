// The offload's copies through the pinned pool (engine_copies.hpp).
#include "engine_copies.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace zt::zero::detail {

void CopyQueue::start(Space& mem) { copier_ = make_copier(mem); }
void CopyQueue::track_units(int units) { unit_up_.assign(static_cast<size_t>(units), 0); }

int CopyQueue::acquire(size_t bytes) {
  for (;;) {
    const int slot = pinned_->try_acquire(bytes);
    if (slot >= 0) return slot;
    if (transfers_.empty()) return pinned_->acquire(bytes, "an offload copy");  // refused by name
    land_front(true);  // the pool is full: the oldest copy must land first (a stall)
  }
}

void CopyQueue::up(int slot, void* dst, size_t bytes, int unit) {
  const Copier::Ticket t = copier_->start(CopyDir::kToSpace, dst, pinned_->data(slot), bytes);
  transfers_.push_back({t, slot, nullptr, 0});
  if (unit >= 0) unit_up_[static_cast<size_t>(unit)] = t;
  h2d_bytes_ += bytes;
}

void CopyQueue::down(float* land, const float* src, size_t count) {
  const size_t bytes = count * sizeof(float);
  const int slot = acquire(bytes);
  transfers_.push_back({copier_->start(CopyDir::kToHost, pinned_->data(slot), src, bytes), slot, land, count});
  d2h_bytes_ += bytes;
}

void CopyQueue::to_space(float* dst, const float* host, size_t count, size_t piece) {
  for (size_t first = 0; first < count; first += piece) {
    const size_t c = std::min(piece, count - first);
    const int slot = acquire(c * sizeof(float));
    std::memcpy(pinned_->data(slot), host + first, c * sizeof(float));
    up(slot, dst + first, c * sizeof(float));
  }
  land_ready();
}

void CopyQueue::order_up(int u) {
  if (unit_up_.empty() || unit_up_[static_cast<size_t>(u)] == 0) return;
  copier_->order_before_compute(unit_up_[static_cast<size_t>(u)]);
  unit_up_[static_cast<size_t>(u)] = 0;
}

void CopyQueue::land_front(bool wait) {
  const Transfer t = transfers_.front();
  if (wait && !copier_->done(t.ticket)) {
    const auto t0 = std::chrono::steady_clock::now();
    copier_->wait(t.ticket);
    stall_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  transfers_.pop_front();
  if (t.land) std::memcpy(t.land, pinned_->data(t.slot), t.count * sizeof(float));
  pinned_->release(t.slot);
}

void CopyQueue::land_ready() {
  while (!transfers_.empty() && copier_->done(transfers_.front().ticket)) land_front(false);
}

void CopyQueue::land_all() {
  while (!transfers_.empty()) land_front(true);
}

void CopyQueue::take_times(OffloadTimes& t) {
  if (copier_) {
    t.d2h_s += copier_->take_seconds(CopyDir::kToHost);
    t.h2d_s += copier_->take_seconds(CopyDir::kToSpace);
  }
  t.stall_s += stall_s_;
  t.d2h_bytes += d2h_bytes_;
  t.h2d_bytes += h2d_bytes_;
  stall_s_ = 0;
  d2h_bytes_ = h2d_bytes_ = 0;
}

}  // namespace zt::zero::detail
