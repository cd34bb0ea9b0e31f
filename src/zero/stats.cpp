// Traffic and memory figures of the ZeRO engine (see stats.hpp).
#include "zt/zero/stats.hpp"

#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::zero {

std::string_view group_name(Group g) {
  switch (g) {
    case Group::kWorld: return "world";
    case Group::kNode: return "node";
    case Group::kCross: return "cross";
    case Group::kHpz: return "hpz";
  }
  return "?";
}

uint64_t Traffic::total_bytes() const {
  uint64_t sum = 0;
  for (const comm::Counters& c : groups) sum += c.total_bytes();
  return sum;
}

uint64_t Traffic::intra_node_bytes() const {
  return bytes(Group::kNode) + bytes(Group::kHpz) +
         (world_spans_nodes ? 0 : bytes(Group::kWorld));
}

uint64_t Traffic::inter_node_bytes() const {
  return bytes(Group::kCross) + (world_spans_nodes ? bytes(Group::kWorld) : 0);
}

Traffic Traffic::minus(const Traffic& earlier) const {
  Traffic d = *this;
  for (int g = 0; g < kGroupCount; ++g)
    for (int op = 0; op < comm::kOpCount; ++op) {
      d.groups[g].bytes[op] -= earlier.groups[g].bytes[op];
      d.groups[g].calls[op] -= earlier.groups[g].calls[op];
    }
  return d;
}

std::string Traffic::summary() const {
  std::string s;
  for (int g = 0; g < kGroupCount; ++g) {
    if (!s.empty()) s += ", ";
    s += std::string(group_name(static_cast<Group>(g))) + " " +
         format_size_approx(groups[g].total_bytes());
  }
  return s + " (intra-node " + format_size_approx(intra_node_bytes()) + ", inter-node " +
         format_size_approx(inter_node_bytes()) + ")";
}

size_t MemoryStats::model_states() const {
  size_t sum = 0;
  for (const MemoryField& f : kMemoryFields)
    if (f.model_state) sum += this->*f.bytes;
  return sum;
}

size_t MemoryStats::total() const {
  size_t sum = 0;
  for (const MemoryField& f : kMemoryFields) sum += this->*f.bytes;
  return sum;
}

// "model states 8M (full params 2M, ..., optimizer 4M), gather 0, ...; total 9M, peak 9M"
std::string MemoryStats::summary() const {
  std::string states, working;
  for (const MemoryField& f : kMemoryFields) {
    std::string& s = f.model_state ? states : working;
    s += (s.empty() ? "" : ", ") + std::string(f.label) + " " + format_size_approx(this->*f.bytes);
  }
  return "model states " + format_size_approx(model_states()) + " (" + states + "), " + working +
         "; total " + format_size_approx(total()) + ", peak " + format_size_approx(peak_total);
}

}  // namespace zt::zero
