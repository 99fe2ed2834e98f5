// CPU next-token loss: see loss.h. This file picks the instruction-set variant (the one
// kernels.cc runs), checks the operands and sums the rows' losses in order.
#include "model/cpu/loss.h"

#include <ATen/record_function.h>

#include <string>
#include <vector>

#include "model/cpu/kernels.h"

namespace xmod::cpu {
namespace internal {
namespace DEFAULT {
extern const LossTable kLossTable;
}
#if defined(__x86_64__)  // the variants model/torch_targets.cmake builds on x86-64
namespace AVX2 {
extern const LossTable kLossTable;
}
namespace AVX512 {
extern const LossTable kLossTable;
}
#endif
}  // namespace internal

namespace {

const internal::LossTable& Table() {
  static const internal::LossTable* const table = [] {
#if defined(__x86_64__)
    const std::string isa = KernelIsa();
    if (isa == "AVX512") return &internal::AVX512::kLossTable;
    if (isa == "AVX2") return &internal::AVX2::kLossTable;
#endif
    return &internal::DEFAULT::kLossTable;
  }();
  return *table;
}

// float32 statistics for float32 and bfloat16 logits, double for double.
torch::Dtype StatDtype(const torch::Tensor& logits) {
  return logits.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
}

}  // namespace

bool NextTokenLossSupports(const torch::Tensor& logits, const torch::Tensor& targets) {
  const bool dtype = logits.scalar_type() == torch::kFloat32 ||
                     logits.scalar_type() == torch::kFloat64 ||
                     logits.scalar_type() == torch::kBFloat16;
  return logits.defined() && targets.defined() && logits.device().is_cpu() &&
         targets.device().is_cpu() && dtype && logits.dim() == 2 && logits.is_contiguous() &&
         logits.size(1) > 0 && targets.scalar_type() == torch::kLong && targets.dim() == 1 &&
         targets.size(0) == logits.size(0) && targets.is_contiguous();
}

std::pair<torch::Tensor, torch::Tensor> NextTokenLossForward(const torch::Tensor& logits,
                                                             const torch::Tensor& targets) {
  TORCH_CHECK(NextTokenLossSupports(logits, targets), "NextTokenLossForward: logits ",
              logits.sizes(), " (", logits.scalar_type(), "), targets ", targets.sizes(), " (",
              targets.scalar_type(), ") do not fit the kernel");
  RECORD_FUNCTION("xmod::cpu::NextTokenLossForward", std::vector<c10::IValue>());
  const int64_t n = logits.size(0), v = logits.size(1);
  if (n > 0) {
    const int64_t lowest = targets.min().item<int64_t>(), highest = targets.max().item<int64_t>();
    TORCH_CHECK(lowest >= 0 && highest < v, "NextTokenLoss: target ", lowest < 0 ? lowest : highest,
                " outside the vocabulary [0, ", v, ")");
  }
  torch::Tensor lse = torch::empty({n}, logits.options().dtype(StatDtype(logits)));
  std::vector<double> row_loss(n);
  const int64_t* t = targets.data_ptr<int64_t>();
  if (logits.scalar_type() == torch::kBFloat16) {
    Table().forward_bf16(logits.data_ptr<c10::BFloat16>(), t, n, v, lse.data_ptr<float>(),
                         row_loss.data());
  } else if (logits.scalar_type() == torch::kFloat32) {
    Table().forward_f(logits.data_ptr<float>(), t, n, v, lse.data_ptr<float>(), row_loss.data());
  } else {
    Table().forward_d(logits.data_ptr<double>(), t, n, v, lse.data_ptr<double>(), row_loss.data());
  }
  double total = 0;
  for (double x : row_loss) total += x;
  const double mean = n > 0 ? total / static_cast<double>(n) : std::nan("");
  return {torch::full({}, mean, lse.options()), lse};
}

torch::Tensor NextTokenLossBackward(const torch::Tensor& grad, const torch::Tensor& logits,
                                    const torch::Tensor& targets, const torch::Tensor& lse) {
  TORCH_CHECK(NextTokenLossSupports(logits, targets) && grad.numel() == 1 && lse.dim() == 1 &&
                  lse.size(0) == logits.size(0) && lse.is_contiguous() && lse.device().is_cpu() &&
                  lse.scalar_type() == StatDtype(logits),
              "NextTokenLossBackward: grad ", grad.sizes(), ", logits ", logits.sizes(), ", lse ",
              lse.sizes(), " do not match");
  RECORD_FUNCTION("xmod::cpu::NextTokenLossBackward", std::vector<c10::IValue>());
  const int64_t n = logits.size(0), v = logits.size(1);
  const double scale = grad.item<double>() / static_cast<double>(std::max<int64_t>(1, n));
  torch::Tensor dlogits = torch::empty_like(logits);
  const int64_t* t = targets.data_ptr<int64_t>();
  if (logits.scalar_type() == torch::kBFloat16) {
    Table().backward_bf16(logits.data_ptr<c10::BFloat16>(), t, lse.data_ptr<float>(), scale, n, v,
                          dlogits.data_ptr<c10::BFloat16>());
  } else if (logits.scalar_type() == torch::kFloat32) {
    Table().backward_f(logits.data_ptr<float>(), t, lse.data_ptr<float>(), scale, n, v,
                       dlogits.data_ptr<float>());
  } else {
    Table().backward_d(logits.data_ptr<double>(), t, lse.data_ptr<double>(), scale, n, v,
                       dlogits.data_ptr<double>());
  }
  return dlogits;
}

}  // namespace xmod::cpu
