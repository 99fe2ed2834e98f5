// The choice of each fused operation's kernels: see kernel_choice.h.
#include "model/kernel_choice.h"

#include <array>
#include <atomic>
#include <optional>

#include "model/cpu/flash_attention.h"
#include "model/cpu/kernels.h"
#include "model/cpu/loss.h"
#ifdef XMOD_CUDA_KERNELS
#include "model/cuda/kernels.h"
#endif

namespace xmod {
namespace {

std::atomic<int> composite_scopes{0};

bool Composite() { return composite_scopes.load(std::memory_order_relaxed) > 0; }

bool OneOf(c10::ScalarType dtype, std::initializer_list<c10::ScalarType> allowed) {
  for (c10::ScalarType a : allowed) {
    if (dtype == a) return true;
  }
  return false;
}

// Whether every kind lies on `device`, with a dtype of `allowed` (all the same one when
// `same_dtype`), and contiguous where `contiguous` asks.
bool All(std::initializer_list<TensorKind> kinds, c10::DeviceType device,
         std::initializer_list<c10::ScalarType> allowed, bool same_dtype, bool contiguous) {
  for (const TensorKind& k : kinds) {
    if (k.device != device || !OneOf(k.dtype, allowed)) return false;
    if (same_dtype && k.dtype != kinds.begin()->dtype) return false;
    if (contiguous && !k.contiguous) return false;
  }
  return true;
}

using c10::ScalarType;
constexpr c10::DeviceType kCpu = c10::DeviceType::CPU, kCuda = c10::DeviceType::CUDA;

const SwiGluKernels kCpuSwiGlu{KernelPath::kCpu, &cpu::SwiGluForward, &cpu::SwiGluBackward};
const RmsNormKernels kCpuRmsNorm{KernelPath::kCpu, &cpu::RmsNormForward, &cpu::RmsNormBackward};
const NextTokenLossKernels kCpuLoss{KernelPath::kCpu, &cpu::NextTokenLossForward,
                                    &cpu::NextTokenLossBackward};
#ifdef XMOD_CUDA_KERNELS
const SwiGluKernels kCudaSwiGlu{KernelPath::kCuda, &cuda::SwiGluForward, &cuda::SwiGluBackward};
const RmsNormKernels kCudaRmsNorm{KernelPath::kCuda, &cuda::RmsNormForward, &cuda::RmsNormBackward};
const NextTokenLossKernels kCudaLoss{KernelPath::kCuda, &cuda::NextTokenLossForward,
                                     &cuda::NextTokenLossBackward};
const SwiGluKernels* const kCudaSwiGluTable = &kCudaSwiGlu;
const RmsNormKernels* const kCudaRmsNormTable = &kCudaRmsNorm;
const NextTokenLossKernels* const kCudaLossTable = &kCudaLoss;
#else  // a build without the CUDA kernels: PathFor never chooses them
const SwiGluKernels* const kCudaSwiGluTable = nullptr;
const RmsNormKernels* const kCudaRmsNormTable = nullptr;
const NextTokenLossKernels* const kCudaLossTable = nullptr;
#endif

// The dtypes each path's kernels take.
const std::initializer_list<ScalarType> kCpuFloat = {ScalarType::Float, ScalarType::Double};
const std::initializer_list<ScalarType> kWithBf16 = {ScalarType::Float, ScalarType::Double,
                                                     ScalarType::BFloat16};
const std::initializer_list<ScalarType> kGpu = {ScalarType::Float, ScalarType::BFloat16};

KernelPath SwiGluPath(std::initializer_list<TensorKind> t, bool cuda_kernels) {
  if (All(t, kCpu, kWithBf16, /*same_dtype=*/true, /*contiguous=*/false)) {
    return KernelPath::kCpu;
  }
  if (cuda_kernels && All(t, kCuda, kGpu, true, true)) return KernelPath::kCuda;
  return KernelPath::kComposite;
}

// t = (x, w).
KernelPath RmsNormPath(std::initializer_list<TensorKind> t, bool cuda_kernels) {
  const TensorKind* first = t.begin();
  if (All(t, kCpu, kCpuFloat, true, false)) return KernelPath::kCpu;
  if (cuda_kernels && t.size() == 2 && All({first[0]}, kCuda, kGpu, false, true) &&
      All({first[1]}, kCuda, {ScalarType::Float}, false, true)) {
    return KernelPath::kCuda;
  }
  return KernelPath::kComposite;
}

// t = (logits, targets).
KernelPath NextTokenLossPath(std::initializer_list<TensorKind> t, bool cuda_kernels) {
  const TensorKind* first = t.begin();
  if (t.size() != 2 || first[1].dtype != ScalarType::Long || !first[1].contiguous) {
    return KernelPath::kComposite;
  }
  if (All({first[0], first[1]}, kCpu, {first[0].dtype, ScalarType::Long}, false, true) &&
      OneOf(first[0].dtype, kWithBf16)) {
    return KernelPath::kCpu;
  }
  if (cuda_kernels && All({first[0]}, kCuda, kGpu, false, true) && first[1].device == kCuda) {
    return KernelPath::kCuda;
  }
  return KernelPath::kComposite;
}

// The table of `path`: the CPU's, the CUDA kernels' (in builds that have them), or null.
template <typename Table>
const Table* TableOf(KernelPath path, const Table& on_cpu, const Table* on_cuda) {
  if (path == KernelPath::kCpu) return &on_cpu;
  if (path == KernelPath::kCuda) return on_cuda;
  return nullptr;
}

}  // namespace

const char* KernelPathName(KernelPath path) {
  switch (path) {
    case KernelPath::kCpu:
      return "cpu";
    case KernelPath::kCuda:
      return "cuda";
    case KernelPath::kComposite:
      break;
  }
  return "composite";
}

TensorKind KindOf(const torch::Tensor& t) {
  return {t.device().type(), t.scalar_type(), t.is_contiguous()};
}

bool HasCudaKernels() {
#ifdef XMOD_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

KernelPath PathFor(FusedOp op, std::initializer_list<TensorKind> t, bool cuda_kernels) {
  switch (op) {
    case FusedOp::kSwiGlu:
      return SwiGluPath(t, cuda_kernels);
    case FusedOp::kRmsNorm:
      return RmsNormPath(t, cuda_kernels);
    case FusedOp::kNextTokenLoss:
      return NextTokenLossPath(t, cuda_kernels);
  }
  return KernelPath::kComposite;
}

const SwiGluKernels* SwiGluKernelsFor(const torch::Tensor& a, const torch::Tensor& b) {
  if (Composite() || !a.defined() || !b.defined()) return nullptr;
  const KernelPath path = PathFor(FusedOp::kSwiGlu, {KindOf(a), KindOf(b)}, HasCudaKernels());
  return TableOf(path, kCpuSwiGlu, kCudaSwiGluTable);
}

const RmsNormKernels* RmsNormKernelsFor(const torch::Tensor& x, const torch::Tensor& w) {
  if (Composite() || !x.defined() || !w.defined() || w.dim() != 1 || x.size(-1) != w.size(0)) {
    return nullptr;
  }
  const KernelPath path = PathFor(FusedOp::kRmsNorm, {KindOf(x), KindOf(w)}, HasCudaKernels());
  return TableOf(path, kCpuRmsNorm, kCudaRmsNormTable);
}

const NextTokenLossKernels* NextTokenLossKernelsFor(const torch::Tensor& logits,
                                                    const torch::Tensor& targets) {
  if (Composite() || !logits.defined() || !targets.defined() || logits.dim() != 2 ||
      logits.size(1) == 0 || targets.dim() != 1 || targets.size(0) != logits.size(0)) {
    return nullptr;
  }
  const KernelPath path =
      PathFor(FusedOp::kNextTokenLoss, {KindOf(logits), KindOf(targets)}, HasCudaKernels());
  return TableOf(path, kCpuLoss, kCudaLossTable);
}

bool RopeOnCpu(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  return !Composite() && cpu::RopeSupports(x, cos, sin);
}

bool RouterOnCpu(const torch::Tensor& x, const torch::Tensor& gain, const torch::Tensor& w) {
  return !Composite() && cpu::SupportsFused({x, gain, w});
}

bool RoutedRowsOnCpu(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& u1,
                     const torch::Tensor& u2, const torch::Tensor& p) {
  return !Composite() && cpu::SupportsFused({x, r, u1}) && x.dim() == 2 &&
         (!u2.defined() || cpu::SupportsFused({x, u2})) &&
         (!p.defined() || cpu::SupportsFused({x, p}));
}

std::optional<std::array<torch::Tensor, 3>> CpuCausalAttentionInputs(const torch::Tensor& q,
                                                                     const torch::Tensor& k,
                                                                     const torch::Tensor& v) {
  if (Composite() || !q.device().is_cpu()) return std::nullopt;
  // bf16 autocast leaves q, k (RoPE) and v (the projection) in bfloat16: processors with AMX
  // take them as they are, products in bfloat16 tiles.
  if (cpu::FlashAttentionSupports(q, k, v)) return std::array<torch::Tensor, 3>{q, k, v};
  // Elsewhere the kernel in float32 on converted copies, which still outruns SDPA's bfloat16
  // CPU kernel (docs/gpu-training.md).
  const auto is_bf16 = [](const torch::Tensor& t) { return t.scalar_type() == torch::kBFloat16; };
  if (!is_bf16(q) && !is_bf16(k) && !is_bf16(v)) return std::nullopt;
  std::array<torch::Tensor, 3> f32 = {q.to(torch::kFloat), k.to(torch::kFloat),
                                      v.to(torch::kFloat)};
  if (!cpu::FlashAttentionSupports(f32[0], f32[1], f32[2])) return std::nullopt;
  return f32;
}

ScopedCompositeKernels::ScopedCompositeKernels() { composite_scopes.fetch_add(1); }
ScopedCompositeKernels::~ScopedCompositeKernels() { composite_scopes.fetch_sub(1); }

}  // namespace xmod
