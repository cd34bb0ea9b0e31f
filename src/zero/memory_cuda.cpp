// The device memory space of the engine (memory.hpp; CUDA builds only): buffers from
// cudaMalloc, the element-wise table on the kernels of src/kernels/cuda, and the model
// on the GPU (DeviceModel behind TrainableModel). All work is queued on the space's
// compute stream; NCCL runs on the communicators' own streams, and the two are ordered
// by events only (llm.c style), so a gather or a reduction overlaps the compute around
// it: every collective launch waits for the compute queued before it
// (Groups::order_after), and compute that needs a collective's result waits for its
// event (order_compute_after) without blocking the host. The compute stream is created
// blocking with respect to the legacy default stream, so a stray legacy-stream call (a
// DeviceBuffer's cudaMemset) stays ordered. Host reads (copies to the host, the squared
// norm) wait for the compute stream once each, polled (comm::wait_stream), so a collective
// the compute waits on that never completes ends the job within comm.timeout.
#include <cuda_runtime_api.h>

#include <cmath>

#include "memory.hpp"
#include "zt/comm/device_wait.hpp"
#include "zt/comm/host_stage.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/cuda/adamw.hpp"
#include "zt/kernels/cuda/buffer.hpp"
#include "zt/kernels/cuda/check.hpp"
#include "zt/kernels/cuda/convert.hpp"
#include "zt/kernels/cuda/grad_norm.hpp"
#include "zt/kernels/cuda/quantize.hpp"
#include "zt/model/device_model.hpp"

namespace zt::zero::detail {
namespace {

namespace kc = kernels::cuda;

class DeviceSpace final : public Space {
 public:
  explicit DeviceSpace(std::string precision) : precision_(std::move(precision)) {
    if (kc::device_count() == 0)
      throw InputError("train.device = cuda, but this rank sees no CUDA device (" +
                           kc::where_device() + ")",
                       "check CUDA_VISIBLE_DEVICES and nvidia-smi on this node, or set "
                       "train.device = cpu");
    // bf16-mixed: the engine keeps bf16 copies of the fp32 master for the model to bind.
    // bf16-true: the engine's stored parameters are bf16 (no master); AdamW widens them
    // through the table's casts. Both bind bf16 weights and take fp32 gradients.
    if (precision_ != "fp32" && precision_ != "bf16-mixed" && precision_ != "bf16-true")
      throw InputError("train.precision = " + precision_ + " is not a precision",
                       "use fp32, bf16-mixed or bf16-true (LitGPT's names)");
    total_ = kc::DeviceBuffer<double>(1, "the squared gradient norm");
    partial_ = kc::DeviceBuffer<double>(kc::kSumSquaresBlocks, "the squared norm's partial sums");
    ZT_CUDA_CHECK(cudaStreamCreate(&stream_));  // last: the destructor destroys it
    stage_ = std::make_unique<comm::HostStage>(stream_);
  }

  ~DeviceSpace() override {
    // After a communicator abort nothing waits on the device (zt/comm/device_wait.hpp).
    if (!comm::communicators_aborted()) {
      try {
        comm::wait_stream(stream_, "finishing the compute stream");
      } catch (const std::exception& e) {
        log::warn(e.what());
      }
    }
    stage_.reset();
    if (cudaStreamDestroy(stream_) != cudaSuccess) log::warn("cudaStreamDestroy failed");
  }
  DeviceSpace(const DeviceSpace&) = delete;
  DeviceSpace& operator=(const DeviceSpace&) = delete;

  const char* name() const override { return "device"; }
  model::Space model_space() const override { return model::Space::kDevice; }
  bool host_accessible() const override { return false; }
  bool stages(const comm::Comm& c) const override { return c.memory() == comm::Memory::kHost; }

  std::unique_ptr<model::TrainableModel> make_model(const model::Config& cfg, int64_t max_batch,
                                                    int64_t max_seq,
                                                    const model::LoraConfig& lora) override {
    // The engine accumulates and reduces fp32 gradients in every precision, so bf16-true
    // computes with the model of bf16-mixed (bf16 weights, fp32 gradients): the
    // difference is in what the engine stores (docs/zero.md, "bf16-true"); with LoRA the
    // adapters' unit is one more stored unit (bf16 under bf16-true), the base frozen.
    const std::string model_precision = precision_ == "bf16-true" ? "bf16-mixed" : precision_;
    cfg.validate_for_device();  // what the GPU model cannot run (more experts than a warp routes)
    model::check_device_lora(lora);  // (zt estimate --device gpu applies both too)
    return model::make_device_model(cfg, max_batch, max_seq, model_precision, stream_, lora);
  }

  void* allocate(size_t bytes, const char* what) override {
    void* p = nullptr;
    const cudaError_t rc = cudaMalloc(&p, bytes);
    if (rc != cudaSuccess) kc::device_alloc_error(what, bytes, rc);
    ZT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
    return p;
  }
  // cudaFree waits for the whole device: first the compute stream, polled, so a collective
  // it waits on ends the job instead (buffers are freed at teardown and, rarely, when the
  // engine regrows one between passes: the logits, a checkpoint's unit buffer).
  void release(void* p, size_t) noexcept override {
    if (comm::communicators_aborted()) return;  // the process is ending: nothing waits
    try {
      comm::wait_stream(stream_, "freeing a device buffer");
    } catch (const std::exception& e) {
      log::warn(e.what());
    }
    if (cudaFree(p) != cudaSuccess) log::warn("cudaFree of an engine buffer failed");
  }
  void to_host(void* host, const void* src, size_t bytes) override {
    stage_->to_host(host, src, bytes, "copying from the device to the host");
  }
  void from_host(void* dst, const void* host, size_t bytes) override {
    if (!bytes) return;
    // Synchronous: the caller may reuse the host buffer (a staging buffer) at once.
    stage_->to_device(dst, host, bytes, "copying from the host to the device");
    comm::wait_stream(stream_, "copying from the host to the device");
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes) ZT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }

  void* compute_stream() const override { return stream_; }

  void zero(float* x, size_t n) override {
    if (n) ZT_CUDA_CHECK(cudaMemsetAsync(x, 0, n * sizeof(float), stream_));
  }
  void add(float* acc, const float* x, size_t n) override {
    if (n) kc::add_scaled<float>(acc, x, static_cast<int64_t>(n), 1.0f, stream_);
  }
  void scale(float* x, size_t n, float c) override {
    if (n) kc::scale_inplace<float>(x, static_cast<int64_t>(n), c, stream_);
  }
  void sum_squares_add(const float* x, size_t n) override {
    if (!pending_) ZT_CUDA_CHECK(cudaMemsetAsync(total_.data(), 0, sizeof(double), stream_));
    pending_ = true;
    if (n)
      kc::sum_squares<float>(total_.data(), x, static_cast<int64_t>(n), partial_.data(),
                             /*accumulate=*/true, stream_);
  }
  double sum_squares_take() override {
    double s = 0.0;
    if (pending_) to_host(&s, total_.data(), sizeof(double));
    pending_ = false;
    return s;
  }
  void sum_squares_store(double* dst) override {
    if (pending_)
      ZT_CUDA_CHECK(cudaMemcpyAsync(dst, total_.data(), sizeof(double), cudaMemcpyDeviceToDevice,
                                    stream_));
    else
      ZT_CUDA_CHECK(cudaMemsetAsync(dst, 0, sizeof(double), stream_));
    pending_ = false;
  }
  // The squares of finite floats add up finitely in double, so a finite sum of squares
  // means every element is finite (one reduction instead of a kernel of its own).
  bool all_finite(const float* x, size_t n) override {
    ZT_CHECK(!pending_, "all_finite inside a running sum of squares", "a bug in the engine");
    sum_squares_add(x, n);
    return std::isfinite(sum_squares_take());
  }
  void to_bf16(const float* x, size_t n, bf16* out) override {
    if (n) kc::convert<float, kc::bf16_t>(reinterpret_cast<kc::bf16_t*>(out), x,
                                          static_cast<int64_t>(n), stream_);
  }
  void from_bf16(const bf16* x, size_t n, float* out) override {
    if (n) kc::convert<kc::bf16_t, float>(out, reinterpret_cast<const kc::bf16_t*>(x),
                                          static_cast<int64_t>(n), stream_);
  }
  void quantize_pack(const float* x, size_t n, size_t block, uint8_t* out) override {
    kc::quantize_pack(x, n, block, out, stream_);
  }
  void dequantize(const uint8_t* in, size_t n, size_t block, float* out) override {
    kc::dequantize(in, n, block, out, stream_);
  }
  void dequantize_add(const uint8_t* in, size_t n, size_t block, float* out) override {
    kc::dequantize_add(in, n, block, out, stream_);
  }
  // One launch per run of tensors with the same weight decay (the layout's rule).
  void adamw(const model::ParamLayout& layout, int u, int64_t begin, std::span<float> params,
             std::span<const float> grads, std::span<float> m, std::span<float> v,
             const model::AdamWConfig& adam, int64_t step) override {
    model::check_unit_slice(layout, u, begin, static_cast<int64_t>(params.size()),
                            {grads.size(), m.size(), v.size()}, "the device AdamW");
    model::for_each_decay_run(layout, u, begin, static_cast<int64_t>(params.size()),
                              [&](int64_t j, int64_t count, bool decayed) {
                                kc::adamw_step<float, float>(
                                    params.data() + j, grads.data() + j, m.data() + j,
                                    v.data() + j, nullptr, count, adam.lr, adam.beta1,
                                    adam.beta2, adam.eps, decayed ? adam.weight_decay : 0.0,
                                    step, stream_);
                              });
  }

 private:
  std::string precision_;
  cudaStream_t stream_ = nullptr;  // the compute stream (see the top of this file)
  std::unique_ptr<comm::HostStage> stage_;  // the host side of to_host / from_host
  kc::DeviceBuffer<double> total_;    // [1] the running sum of squares
  kc::DeviceBuffer<double> partial_;  // [kSumSquaresBlocks] scratch
  bool pending_ = false;
};

}  // namespace

std::unique_ptr<Space> make_device_space(const std::string& precision) {
  return std::make_unique<DeviceSpace>(precision);
}

}  // namespace zt::zero::detail
