#pragma once
// MpiRequest: one Comm operation in flight on MPI. It may hold several MPI requests
// (an operation larger than one MPI call can take is split), a scratch buffer, and a
// completion step that runs once after they all finished (e.g. the division of an
// average, or copying an in-place reduce_scatter's result to its place).
//
// wait() polls MPI_Testall; past the timeout it throws zt::Error naming the operation,
// rank and host. The request stays valid: wait() may be called again and finishes it
// if the peers caught up. Destroying an unfinished request waits for it (bounded by the
// timeout); if that times out too, or wait() already timed out, the MPI requests and
// the scratch buffer are deliberately left behind (logged), since freeing memory an
// operation may still write into is worse, and the job is ending anyway.
#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mpi_types.hpp"
#include "zt/comm/comm.hpp"

namespace zt::comm::detail {

class MpiRequest final : public Request {
 public:
  MpiRequest(std::shared_ptr<const MpiContext> ctx, std::string what,
             std::chrono::milliseconds timeout);
  ~MpiRequest() override;
  MpiRequest(const MpiRequest&) = delete;
  MpiRequest& operator=(const MpiRequest&) = delete;

  // Where the posting code puts the MPI requests it started.
  MPI_Request* add() {
    pending_.push_back(MPI_REQUEST_NULL);
    return &pending_.back();
  }
  // A temporary buffer kept until the operation finished (contents uninitialised).
  void* scratch(size_t bytes);
  // Adds a step that runs once, after every MPI request finished and before wait() or
  // test() report done. Steps run in the order they were added.
  void then(std::function<void()> step) { complete_.push_back(std::move(step)); }

  void wait() override;
  bool test() override;
  const std::string& what() const { return what_; }  // the operation, for messages

 private:
  std::shared_ptr<const MpiContext> ctx_;
  std::string what_;  // describe(...) of the operation, for messages
  std::chrono::milliseconds timeout_;
  std::vector<MPI_Request> pending_;
  std::unique_ptr<std::byte[]> scratch_;
  std::vector<std::function<void()>> complete_;
  bool done_ = false;
  bool failed_ = false;  // a wait timed out or an MPI call failed
};

}  // namespace zt::comm::detail
