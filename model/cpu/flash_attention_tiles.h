// The tile arithmetic both CPU attention kernels share (flash_attention_isa.cc, whose products
// run in float32/float64 registers, and flash_attention_bf16_isa.cc, whose products run as
// bfloat16 AMX tiles): the tile size, the causal visibility of a key, the online softmax of a
// score tile and the probabilities and score gradients of the backward. Included only by the
// per-instruction-set files: everything here lives in the CPU_CAPABILITY namespace of the
// variant that includes it.
#ifndef XMOD_MODEL_CPU_FLASH_ATTENTION_TILES_H_
#define XMOD_MODEL_CPU_FLASH_ATTENTION_TILES_H_

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "model/cpu/flash_attention.h"
#include "model/cpu/vec_util.h"

namespace xmod::cpu::internal {
inline namespace CPU_CAPABILITY {
namespace tiles {

using at::vec::Vectorized;
using vec_util::LaneMax;
using vec_util::LaneSum;

constexpr int64_t kTile = 64;  // queries and keys per tile: 64 x 64 scores, 16 KB in fp32

inline int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Keys of the tile [j0, j0 + keys) that query i sees: j <= i.
inline int64_t Visible(int64_t i, int64_t j0, int64_t keys) {
  return std::clamp<int64_t>(i - j0 + 1, 0, keys);
}

// exp for the softmax: ATen's fast float exp (20 ulp, as ATen's own flash kernel uses) and
// the accurate one for double, which serves the reference tests.
template <typename T>
Vectorized<T> SoftmaxExp(const Vectorized<T>& x) {
  if constexpr (std::is_same_v<T, float>) {
    return x.exp_u20();
  } else {
    return x.exp();
  }
}

// The running softmax of one query tile's rows (FlashAttention-2): each row's max so far and
// its sum of exponentials, kept as a vector until the end (one lane reduction per row, not
// one per tile).
template <typename T>
struct OnlineSoftmax {
  T row_max[kTile];
  Vectorized<T> row_sum[kTile];

  explicit OnlineSoftmax(int64_t rows) {
    std::fill(row_max, row_max + rows, -std::numeric_limits<T>::infinity());
    std::fill(row_sum, row_sum + rows, Vectorized<T>(T(0)));
  }

  // One key tile [j0, j0 + keys) of the query rows [i0, i0 + rows): scores (row stride kTile)
  // holds q k^T unscaled; turns it in place into exp(scale q k^T - new max), zero where the
  // mask hides a key (up to the vector-rounded width), and rescales the rows of acc (row
  // stride e) that the new max lowers. The rows' maxima come first, so that their rescaling
  // factors are one vector exp per w rows rather than a scalar exp per row.
  void Update(int64_t i0, int64_t j0, int64_t rows, int64_t keys, T scale_value, T* scores, T* acc,
              int64_t e) {
    using V = Vectorized<T>;
    constexpr int64_t w = V::size();
    const T neg_inf = -std::numeric_limits<T>::infinity();
    const int64_t cols = RoundUp(keys, w);
    const V scale(scale_value);
    alignas(64) T new_max[kTile], alpha[kTile];
    for (int64_t r = 0; r < rows; ++r) {
      const T* p = scores + r * kTile;
      const int64_t seen = Visible(i0 + r, j0, keys);
      V top(neg_inf);
      for (int64_t j = 0; j < seen; j += w) {
        const V x = V::loadu(p + j) * scale;
        top = at::vec::maximum(top, seen - j < w ? V::set(V(neg_inf), x, seen - j) : x);
      }
      new_max[r] = seen == 0 ? row_max[r] : std::max(row_max[r], LaneMax(top));
    }
    // alpha = exp(old max - new max): 0 for a row's first keys (old max -inf), 1 while a row
    // has seen none (both -inf).
    for (int64_t r = 0; r < rows; r += w) {
      const int64_t n = std::min(w, rows - r);
      const V old_max = V::loadu(row_max + r, n), top = V::loadu(new_max + r, n);
      const V factor = SoftmaxExp(old_max - top);
      V::blendv(factor, V(T(1)), top == V(neg_inf)).store(alpha + r, n);
    }
    for (int64_t r = 0; r < rows; ++r) {
      T* p = scores + r * kTile;
      const int64_t seen = Visible(i0 + r, j0, keys);
      if (seen == 0) {
        std::fill(p, p + cols, T(0));
        continue;
      }
      V sum = row_sum[r] * V(alpha[r]);
      for (int64_t j = 0; j < cols; j += w) {
        V x =
            j < seen ? SoftmaxExp(at::vec::fmsub(V::loadu(p + j), scale, V(new_max[r]))) : V(T(0));
        if (j < seen && seen - j < w) x = V::set(V(T(0)), x, seen - j);
        sum = sum + x;
        x.store(p + j);
      }
      row_sum[r] = sum;
      row_max[r] = new_max[r];
      if (alpha[r] != T(1)) {
        T* a = acc + r * e;
        for (int64_t c = 0; c < e; c += w) (V::loadu(a + c) * V(alpha[r])).store(a + c);
      }
    }
  }

  // The normalised output rows (row stride out_row) from acc (row stride e) and each row's
  // log-sum-exp.
  void Finish(int64_t rows, const T* acc, int64_t e, T* out_rows, int64_t out_row,
              T* lse_rows) const {
    using V = Vectorized<T>;
    constexpr int64_t w = V::size();
    for (int64_t r = 0; r < rows; ++r) {
      const T sum = LaneSum(row_sum[r]);
      const V inv(T(1) / sum);
      for (int64_t c = 0; c < e; c += w) {
        (V::loadu(acc + r * e + c) * inv).store(out_rows + r * out_row + c);
      }
      lse_rows[r] = row_max[r] + std::log(sum);
    }
  }
};

// delta_r = dout_r . out_r for rows rows of E values (rows dout_row and out_row apart; X the
// operands' type, T the arithmetic's): the backward's correction term of the softmax.
template <typename X, typename T>
void RowDots(int64_t rows, int64_t e, const X* dout, int64_t dout_row, const X* out,
             int64_t out_row, T* delta) {
  using V = Vectorized<T>;
  constexpr int64_t w = V::size();
  for (int64_t r = 0; r < rows; ++r) {
    V dot(T(0));
    for (int64_t c = 0; c < e; c += w) {
      dot = at::vec::fmadd(vec_util::LoadAs(dout + r * dout_row + c),
                           vec_util::LoadAs(out + r * out_row + c), dot);
    }
    delta[r] = LaneSum(dot);
  }
}

// For a tile pair of the backward, in place: probs (q k^T) -> P = exp(scale q k^T - lse), and
// dprobs (dout v^T) -> dS = scale P (dout v^T - delta); both zero where the mask hides a key.
template <typename T>
void ProbsAndScoreGrads(const FlashGeometry& s, int64_t i0, int64_t j0, int64_t rows, int64_t keys,
                        const T* lse_i, const T* delta, T* probs, T* dprobs) {
  using V = Vectorized<T>;
  constexpr int64_t w = V::size();
  const V scale(static_cast<T>(s.scale));
  const int64_t cols = RoundUp(keys, w);
  for (int64_t r = 0; r < rows; ++r) {
    T* p = probs + r * kTile;
    T* dp = dprobs + r * kTile;
    const int64_t seen = Visible(i0 + r, j0, keys);
    const V row_lse(lse_i[r]), row_delta(delta[r]);
    for (int64_t j = 0; j < cols; j += w) {
      if (j >= seen) {  // hidden: P = dS = 0
        V(T(0)).store(p + j);
        V(T(0)).store(dp + j);
        continue;
      }
      V pj = SoftmaxExp(at::vec::fmsub(V::loadu(p + j), scale, row_lse));
      V ds = pj * (V::loadu(dp + j) - row_delta) * scale;
      if (seen - j < w) {
        pj = V::set(V(T(0)), pj, seen - j);
        ds = V::set(V(T(0)), ds, seen - j);
      }
      pj.store(p + j);
      ds.store(dp + j);
    }
  }
}

// One packed copy of a key/value operand x (B, T, G, E), batch rows `batch` apart: for every kv
// group (b, g), in parallel, pack(src, dst) writes its kTile-token tiles into dst, (tiles,
// kTile * E), from src, the group's first token. -> (B*G, tiles, kTile * E), allocated without
// a fill.
template <typename T, typename PackGroup>
std::unique_ptr<T[]> PackPerKvGroup(const FlashGeometry& s, const T* x, int64_t batch,
                                    PackGroup pack) {
  const int64_t group_size = (s.t + kTile - 1) / kTile * kTile * s.e;
  std::unique_ptr<T[]> packed(new T[s.b * s.g * group_size]);
  at::parallel_for(0, s.b * s.g, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bg = begin; bg < end; ++bg) {
      pack(x + (bg / s.g) * batch + (bg % s.g) * s.e, packed.get() + bg * group_size);
    }
  });
  return packed;
}

}  // namespace tiles

// The bfloat16 loops (flash_attention_bf16_isa.cc), built in the AVX512 variant only: the
// machines with AMX, where they run, all have it.
#if defined(CPU_CAPABILITY_AVX512)
void ForwardBf16Products(const FlashGeometry& s, const c10::BFloat16* q, const c10::BFloat16* k,
                         const c10::BFloat16* v, c10::BFloat16* out, float* lse);
void BackwardBf16Products(const FlashGeometry& s, const c10::BFloat16* q, const c10::BFloat16* k,
                          const c10::BFloat16* v, const c10::BFloat16* out,
                          const c10::BFloat16* dout, const float* lse, c10::BFloat16* dq,
                          c10::BFloat16* dk, c10::BFloat16* dv);
#endif

}  // namespace CPU_CAPABILITY
}  // namespace xmod::cpu::internal

#endif  // XMOD_MODEL_CPU_FLASH_ATTENTION_TILES_H_
