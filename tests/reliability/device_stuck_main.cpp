// The GPU twin of device_wait_main.cpp (issue 53; label gpu, CUDA builds): on one GPU, a
// collective that never completes, and each place where the device path copies between
// the device and host memory must end the job within the timeout naming the lost rank
// (device_stuck_test.sh checks the time, the exit code and the message), never hang
// inside a copy before the polled wait.
//
// The stuck collective: on a side stream a host function that blocks until released (a
// collective whose peer never joins), an event recorded behind it, and the device space's
// compute stream made to wait on that event (cudaStreamWaitEvent, as the engine orders its
// compute after a collective's event); the event is registered as an in-flight NCCL
// operation with the timeout, as a launch registers itself. Rank 1 sits in a blocking
// MPI_Recv and answers no liveness probe (as under SIGSTOP). The "communicator" abort the
// wait runs before ending the job releases the host function, so the process ends clean.
//
// Usage (2 ranks, one GPU): device_stuck_main PLACE TIMEOUT_MS, PLACE one of
//   loss         the model's loss: the batch upload, the forward, the read of the loss
//   loss_and_grad  the same with the backward
//   row_logps    the model's per-row log-probs: the upload, the forward, the read of the rows
//   to_host      the device space's copy into a pageable std::vector
//   from_host    the device space's copy from a pageable std::vector
//   release      freeing an engine buffer (cudaFree waits for the whole device)
// Prints "PLACE reached" before the call; the wait never returns (MPI_Abort with 3 if it does).
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "memory.hpp"
#include "zero/zero_fixtures.hpp"
#include "zt/comm/device_wait.hpp"
#include "zt/comm/mpi_comm.hpp"
#include "zt/kernels/cuda/check.hpp"
#include "zt/model/init.hpp"
#include "zt/model/model.hpp"
#include "zt/runtime/runtime.hpp"

namespace {

std::atomic<bool> released{false};

void CUDART_CB block_until_released(void*) {
  while (!released.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace zt;
  if (argc != 3) {
    std::fprintf(stderr, "usage: device_stuck_main PLACE TIMEOUT_MS\n");
    return 2;
  }
  const std::string place = argv[1];
  const auto timeout = std::chrono::milliseconds(std::atol(argv[2]));
  runtime::Runtime rt;
  std::unique_ptr<comm::Comm> world = comm::make_mpi_comm(rt.world());
  world->set_timeout(timeout);
  if (world->size() != 2) {
    std::fprintf(stderr, "device_stuck_main needs 2 ranks\n");
    return 2;
  }
  if (world->rank() == 1) {  // stopped: blocked outside communication, answers nothing
    int never = 0;
    MPI_Recv(&never, 1, MPI_INT, 0, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return 0;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "device_stuck_main: no CUDA device visible\n");
    MPI_Abort(MPI_COMM_WORLD, 77);
  }

  // Rank 0: the device space and its model, set up while nothing is in flight.
  const model::Config cfg = zero::testing::reduced_config();
  zero::testing::Hyper h;
  std::unique_ptr<zero::detail::Space> space = zero::detail::make_device_space("fp32");
  std::unique_ptr<model::TrainableModel> m = space->make_model(cfg, h.B, h.T, {});
  const model::ParamLayout& layout = m->layout();
  model::Parameters<float> init(layout);
  std::vector<void*> bufs;
  for (int u = 0; u < layout.num_units(); ++u) {
    model::init_unit<float>(layout, u, h.init, init.params(u));
    const size_t n = init.params(u).size();
    auto* p = static_cast<float*>(space->allocate(n * sizeof(float), "a unit"));
    auto* g = static_cast<float*>(space->allocate(n * sizeof(float), "a unit's gradient"));
    space->from_host(p, init.params(u).data(), n * sizeof(float));
    m->bind_unit(u, {p, static_cast<int64_t>(n), DType::kF32, model::Space::kDevice},
                 {g, static_cast<int64_t>(n), DType::kF32, model::Space::kDevice});
    bufs.push_back(p);
    bufs.push_back(g);
  }
  const zero::testing::Batch b = zero::testing::make_batch(0, h.B, h.T, cfg.vocab);
  std::printf("loss before the stuck collective: %.6f\n", m->loss(b.tokens, b.targets, h.B, h.T, {}));
  std::vector<double> logp(static_cast<size_t>(h.B));
  std::vector<int64_t> count(logp.size());
  m->row_logps(b.tokens, b.targets, h.B, h.T, {}, logp, count);  // primes the stage as a step
  void* spare = space->allocate(4096, "a spare buffer");
  std::vector<float> host(1024, 1.0f);
  auto* dev = static_cast<float*>(space->allocate(host.size() * sizeof(float), "a buffer"));

  // The stuck collective (see the top of this file).
  cudaStream_t side = nullptr;
  cudaEvent_t done = nullptr;
  ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  ZT_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  ZT_CUDA_CHECK(cudaLaunchHostFunc(side, block_until_released, nullptr));
  ZT_CUDA_CHECK(cudaEventRecord(done, side));
  ZT_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(space->compute_stream()), done, 0));
  comm::register_in_flight({[&] { return cudaEventQuery(done) == cudaSuccess; }, {}, "nccl",
                            "all_reduce of 1024 x float (4096 bytes) with rank 1", 0, 2, timeout});
  comm::register_abort([] { released = true; });

  std::printf("%s reached\n", place.c_str());
  std::fflush(stdout);
  if (place == "loss") {
    m->loss(b.tokens, b.targets, h.B, h.T, {});
  } else if (place == "loss_and_grad") {
    m->loss_and_grad(b.tokens, b.targets, h.B, h.T, false, 1.0, {});
  } else if (place == "row_logps") {
    m->row_logps(b.tokens, b.targets, h.B, h.T, {}, logp, count);
  } else if (place == "to_host") {
    space->to_host(host.data(), dev, host.size() * sizeof(float));
  } else if (place == "from_host") {
    space->from_host(dev, host.data(), host.size() * sizeof(float));
  } else if (place == "release") {
    space->release(spare, 4096);
  } else {
    std::fprintf(stderr, "unknown place %s\n", place.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  std::fprintf(stderr, "the call at %s returned with a stuck collective in flight\n",
               place.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);  // rank 1 never returns from its receive
  return 3;
}
