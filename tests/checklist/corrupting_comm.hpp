#pragma once
// A Comm decorator for fault injection: forwards everything to an inner Comm, and on
// `bad_rank` adds 1 to one received element of each all_reduce (element 0) and each
// all_to_all (element 0 of the part from the last rank), float only. The checklist
// under test sees a comm that returns one wrong element per call.
#include <memory>

#include "zt/comm/comm.hpp"

namespace zt::testing {

std::unique_ptr<comm::Comm> make_corrupting_comm(std::unique_ptr<comm::Comm> inner, int bad_rank);

}  // namespace zt::testing
