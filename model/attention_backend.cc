// SDPA's backends by measurement: see attention_backend.h.
#include "model/attention_backend.h"

#include <ATen/Context.h>

#include <chrono>
#include <mutex>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/device.h"

namespace xmod {
namespace {

constexpr int kRepetitions = 3;  // timed forward + backward passes per backend (after one)
constexpr SdpaBackend kCandidates[] = {SdpaBackend::kFlash, SdpaBackend::kFlash3,
                                       SdpaBackend::kEfficient, SdpaBackend::kCudnn};

std::mutex& Mu() {
  static std::mutex mu;
  return mu;
}
std::map<SdpaShape, SdpaBackend>& Cache() {
  static auto* cache = new std::map<SdpaShape, SdpaBackend>();
  return *cache;
}

// Seconds per causal forward + backward of random tensors of `shape` with only `backend`
// enabled; -1 when the backend refuses the shape. Waits for the device.
double TimeOnDevice(SdpaBackend backend, const SdpaShape& shape) {
  const int64_t b = shape.dims[0], h = shape.dims[1], g = shape.dims[2], tq = shape.dims[3],
                tk = shape.dims[4], e = shape.dims[5];
  torch::AutoGradMode grad(true);  // also when the caller runs without a graph (evaluation)
  const auto options = torch::TensorOptions().dtype(shape.dtype).device(shape.device);
  torch::Tensor q = torch::randn({b, h, tq, e}, options).requires_grad_(true);
  torch::Tensor k = torch::randn({b, g, tk, e}, options).requires_grad_(true);
  torch::Tensor v = torch::randn({b, g, tk, e}, options).requires_grad_(true);
  torch::Tensor dout = torch::randn({b, h, tq, e}, options);
  auto pass = [&] {
    SdpaBackendGuard only(backend);
    torch::Tensor out = at::scaled_dot_product_attention(
        q, k, v, std::nullopt, /*dropout_p=*/0.0, /*is_causal=*/true,
        /*scale=*/1.0 / std::sqrt(static_cast<double>(e)), /*enable_gqa=*/g != h);
    out.backward(dout);
  };
  try {
    pass();  // the first call also sets the kernel up
    SynchronizeDevice(shape.device);
  } catch (const c10::Error&) {
    return -1;
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRepetitions; ++i) pass();
  SynchronizeDevice(shape.device);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
         kRepetitions;
}

std::string KeyText(const SdpaShape& shape) {
  return absl::StrCat(absl::StrJoin(shape.dims, ","), " ", c10::toString(shape.dtype));
}

}  // namespace

const char* SdpaBackendName(SdpaBackend backend) {
  switch (backend) {
    case SdpaBackend::kFlash:
      return "flash";
    case SdpaBackend::kFlash3:
      return "flash3";
    case SdpaBackend::kEfficient:
      return "efficient";
    case SdpaBackend::kCudnn:
      return "cudnn";
    case SdpaBackend::kDefault:
      break;
  }
  return "default";
}

bool SdpaShape::operator<(const SdpaShape& other) const {
  // c10::Device has no order: compare its type and index.
  return std::make_tuple(dims, dtype, device.type(), device.index()) <
         std::make_tuple(other.dims, other.dtype, other.device.type(), other.device.index());
}

SdpaBackend Fastest(const std::map<SdpaBackend, double>& seconds) {
  SdpaBackend best = SdpaBackend::kDefault;
  double best_seconds = 0;
  for (const auto& [backend, s] : seconds) {
    if (s < 0) continue;
    if (best == SdpaBackend::kDefault || s < best_seconds) {
      best = backend;
      best_seconds = s;
    }
  }
  return best;
}

SdpaBackend ChooseSdpaBackend(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, const SdpaTimer& measure) {
  if (!q.is_cuda()) return SdpaBackend::kDefault;
  // Measuring waits for the device: never inside a recording (the step's eager warm-up steps
  // meet every shape first); SDPA's own choice there, nothing cached.
  if (DeviceIsCapturing(q.device())) return SdpaBackend::kDefault;
  const SdpaShape shape{{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)},
                        q.scalar_type(),
                        q.device()};
  std::lock_guard<std::mutex> lock(Mu());
  auto it = Cache().find(shape);
  if (it != Cache().end()) return it->second;
  std::map<SdpaBackend, double> seconds;
  for (SdpaBackend backend : kCandidates) {
    seconds[backend] = measure ? measure(backend, shape) : TimeOnDevice(backend, shape);
  }
  const SdpaBackend best = Fastest(seconds);
  Cache()[shape] = best;
  return best;
}

std::map<std::string, std::string> SdpaChoices() {
  std::lock_guard<std::mutex> lock(Mu());
  std::map<std::string, std::string> out;
  for (const auto& [shape, backend] : Cache()) out[KeyText(shape)] = SdpaBackendName(backend);
  return out;
}

SdpaBackendGuard::SdpaBackendGuard(SdpaBackend backend)
    : active_(backend != SdpaBackend::kDefault) {
  if (!active_) return;
  at::Context& ctx = at::globalContext();
  flash_ = ctx.userEnabledFlashSDP();
  flash3_ = ctx.userEnabledFA3SDP();
  efficient_ = ctx.userEnabledMemEfficientSDP();
  cudnn_ = ctx.userEnabledCuDNNSDP();
  math_ = ctx.userEnabledMathSDP();
  ctx.setSDPUseFlash(backend == SdpaBackend::kFlash);
  ctx.setSDPUseFA3(backend == SdpaBackend::kFlash3);
  ctx.setSDPUseMemEfficient(backend == SdpaBackend::kEfficient);
  ctx.setSDPUseCuDNN(backend == SdpaBackend::kCudnn);
  ctx.setSDPUseMath(false);
}

SdpaBackendGuard::~SdpaBackendGuard() {
  if (!active_) return;
  at::Context& ctx = at::globalContext();
  ctx.setSDPUseFlash(flash_);
  ctx.setSDPUseFA3(flash3_);
  ctx.setSDPUseMemEfficient(efficient_);
  ctx.setSDPUseCuDNN(cudnn_);
  ctx.setSDPUseMath(math_);
}

}  // namespace xmod
