// The loops of loss.h for one instruction set, compiled once per variant like kernels_isa.cc;
// exports xmod::cpu::internal::<CPU_CAPABILITY>::kLossTable. Rows are independent: each is read
// twice from L1 (its max, then its sum of exponentials), and the backward writes each row once.
// X is the logits' type, T the arithmetic's (float for bfloat16).
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/cpu/loss.h"
#include "model/cpu/vec_util.h"

namespace xmod::cpu::internal {
inline namespace CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;
using vec_util::LaneMax;
using vec_util::LaneSum;
using vec_util::LoadAs;
using vec_util::StoreAs;

// Rows per parallel_for task: a task's start costs nothing beside rows of a vocabulary.
int64_t RowGrain(int64_t v) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, v)); }

// log sum_j exp(x_j) over one row of v values, shifted by the row's max.
template <typename X, typename T>
T RowLogSumExp(const X* x, int64_t v) {
  using V = Vectorized<T>;
  constexpr int64_t w = V::size();
  V top(-std::numeric_limits<T>::infinity());
  int64_t j = 0;
  for (; j + w <= v; j += w) top = at::vec::maximum(top, LoadAs(x + j));
  T m = LaneMax(top);
  for (int64_t k = j; k < v; ++k) m = std::max(m, static_cast<T>(x[k]));
  V sum(T(0));
  const V shift(m);
  for (j = 0; j + w <= v; j += w) sum = sum + (LoadAs(x + j) - shift).exp();
  T total = LaneSum(sum);
  for (int64_t k = j; k < v; ++k) total += std::exp(static_cast<T>(x[k]) - m);
  return m + std::log(total);
}

template <typename X, typename T>
void ForwardLoop(const X* logits, const int64_t* targets, int64_t n, int64_t v, T* lse,
                 double* row_loss) {
  at::parallel_for(0, n, RowGrain(v), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const X* x = logits + r * v;
      lse[r] = RowLogSumExp<X, T>(x, v);
      row_loss[r] = static_cast<double>(lse[r]) - static_cast<double>(x[targets[r]]);
    }
  });
}

template <typename X, typename T>
void BackwardLoop(const X* logits, const int64_t* targets, const T* lse, double scale_value,
                  int64_t n, int64_t v, X* dlogits) {
  at::parallel_for(0, n, RowGrain(v), [&](int64_t begin, int64_t end) {
    using V = Vectorized<T>;
    constexpr int64_t w = V::size();
    const T scale = static_cast<T>(scale_value);
    for (int64_t r = begin; r < end; ++r) {
      const X* x = logits + r * v;
      X* d = dlogits + r * v;
      const V shift(lse[r]), factor(scale);
      int64_t j = 0;
      for (; j + w <= v; j += w) StoreAs((LoadAs(x + j) - shift).exp() * factor, d + j);
      for (; j < v; ++j) d[j] = static_cast<X>(std::exp(static_cast<T>(x[j]) - lse[r]) * scale);
      const int64_t t = targets[r];  // softmax - 1 at the target, rounded once
      d[t] = static_cast<X>((std::exp(static_cast<T>(x[t]) - lse[r]) - T(1)) * scale);
    }
  });
}

}  // namespace

#define XMOD_STRINGIFY_ISA(x) #x
#define XMOD_ISA_NAME(x) XMOD_STRINGIFY_ISA(x)

extern const LossTable kLossTable = {
    .isa = XMOD_ISA_NAME(CPU_CAPABILITY),
    .forward_f = &ForwardLoop<float, float>,
    .forward_d = &ForwardLoop<double, double>,
    .forward_bf16 = &ForwardLoop<c10::BFloat16, float>,
    .backward_f = &BackwardLoop<float, float>,
    .backward_d = &BackwardLoop<double, double>,
    .backward_bf16 = &BackwardLoop<c10::BFloat16, float>,
};

}  // namespace CPU_CAPABILITY
}  // namespace xmod::cpu::internal
