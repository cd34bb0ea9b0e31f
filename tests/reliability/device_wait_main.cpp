// The polled device wait (zt/comm/device_wait.hpp) on the host-staged space, the CPU
// stand-in of the device space: with a stuck collective in flight (a receive from rank 1,
// which never sends), each host wait of the device path must end the job within the
// timeout with the CPU path's message naming the lost rank (device_wait_test.sh checks
// the time, the exit code and the message). Rank 1 sits in a blocking MPI_Recv, where it
// cannot answer the liveness probe (as under SIGSTOP). Rank 0's engine runs alone (over
// MPI_COMM_SELF), so only the stuck receive, never the engine's own collectives, can
// time out.
//
// Usage (2 ranks): device_wait_main PLACE TIMEOUT_MS, PLACE one of
//   micro_step   Engine::micro_step: its first host wait (the copy of the staged
//                gradient reduction, before the model's read of the loss)
//   loss_and_grad  the space's model: its read of the loss after forward and backward
//   eval_loss    Engine::eval_loss, the same read after a forward only
//   logits_last  Engine::logits_last, the read of the last logits
//   to_host      the space's copy to the host
//   from_host    the space's copy from the host
//   copier       the offload copier's wait for a copy
// Prints "PLACE reached" before the wait; the wait never returns (MPI_Abort with 3 if it does).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "memory.hpp"
#include "offload_copy.hpp"
#include "zero/zero_fixtures.hpp"
#include "zt/comm/device_wait.hpp"
#include "zt/comm/mpi_comm.hpp"
#include "zt/model/init.hpp"
#include "zt/model/model.hpp"
#include "zt/runtime/runtime.hpp"
#include "zt/zero/engine.hpp"

int main(int argc, char** argv) {
  using namespace zt;
  if (argc != 3) {
    std::fprintf(stderr, "usage: device_wait_main PLACE TIMEOUT_MS\n");
    return 2;
  }
  const std::string place = argv[1];
  const auto timeout = std::chrono::milliseconds(std::atol(argv[2]));
  runtime::Runtime rt;
  std::unique_ptr<comm::Comm> world = comm::make_mpi_comm(rt.world());
  world->set_timeout(timeout);
  if (world->size() != 2) {
    std::fprintf(stderr, "device_wait_main needs 2 ranks\n");
    return 2;
  }
  if (world->rank() == 1) {  // stopped: blocked outside communication, answers nothing
    int never = 0;
    MPI_Recv(&never, 1, MPI_INT, 0, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return 0;
  }

  // Rank 0: the engine on the host-staged space, alone.
  std::unique_ptr<comm::Comm> self = comm::make_mpi_comm(MPI_COMM_SELF);
  const model::Config cfg = zero::testing::reduced_config();
  zero::testing::Hyper h;
  zero::EngineOptions o = zero::testing::engine_options(h, 0);
  o.device = zero::EngineOptions::Device::kHostStaged;
  zero::Engine engine(cfg, *self, nullptr, nullptr, o, h.init, self.get());
  const zero::testing::Batch b = zero::testing::make_batch(0, h.B, h.T, cfg.vocab);
  engine.eval_loss(b.tokens, b.targets, h.B, h.T);  // nothing in flight: returns

  // The stuck collective: in flight, as an NCCL launch registers itself.
  std::vector<float> buf(1024);
  comm::Handle stuck = world->irecv(buf.data(), buf.size(), DType::kF32, 1);
  comm::register_in_flight({[&] { return stuck->test(); }, {}, "nccl",
                            "recv of 1024 x float (4096 bytes) from rank 1", 0, 2, timeout});

  std::unique_ptr<zero::detail::Space> space =
      zero::detail::make_host_space(offload::Isa::kScalar, true, "fp32");
  std::vector<float> a(16), c(16);
  // The space's own model, bound to host parameters (as the engine binds its units).
  std::unique_ptr<model::TrainableModel> m = space->make_model(cfg, h.B, h.T, {});
  model::Parameters<float> params(m->layout());
  for (int u = 0; u < m->layout().num_units(); ++u) {
    model::init_unit<float>(m->layout(), u, h.init, params.params(u));
    m->bind_unit(u, model::host_view(std::span<const float>(params.params(u))),
                 model::host_view(params.grads(u)));
  }
  std::printf("%s reached\n", place.c_str());
  std::fflush(stdout);
  if (place == "micro_step") {
    engine.micro_step(b.tokens, b.targets, h.B, h.T, false, 1.0);
  } else if (place == "loss_and_grad") {
    m->loss_and_grad(b.tokens, b.targets, h.B, h.T, false, 1.0, {});
  } else if (place == "eval_loss") {
    engine.eval_loss(b.tokens, b.targets, h.B, h.T);
  } else if (place == "logits_last") {
    std::vector<float> logits(static_cast<size_t>(cfg.vocab));
    engine.logits_last(std::span<const int32_t>(b.tokens).first(h.T), h.T, logits);
  } else if (place == "to_host") {
    space->to_host(a.data(), c.data(), a.size() * sizeof(float));
  } else if (place == "from_host") {
    space->from_host(a.data(), c.data(), a.size() * sizeof(float));
  } else if (place == "copier") {
    std::unique_ptr<zero::detail::Copier> copier = zero::detail::make_copier(*space);
    copier->wait(0);
  } else {
    std::fprintf(stderr, "unknown place %s\n", place.c_str());
    return 2;
  }
  std::fprintf(stderr, "the wait at %s returned with a stuck collective in flight\n",
               place.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);  // rank 1 never returns from its receive
  return 3;
}
