// The loops of kernels.h for one instruction set: this file is compiled once per variant with
// CPU_CAPABILITY (DEFAULT, AVX2, AVX512) and the matching -m flags, which select
// at::vec::Vectorized's width, and exports that variant's table as
// xmod::cpu::internal::<CPU_CAPABILITY>::kTable.
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>

#include "model/cpu/kernels.h"
#include "model/cpu/vec_util.h"

namespace xmod::cpu::internal {
inline namespace CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;
using vec_util::LoadAs;
using vec_util::StoreAs;

// Elements per parallel_for task: large enough that a task's start costs nothing beside its
// work (a few passes of ~100 KB), small enough that two threads split a routed layer's
// 256-token rows.
constexpr int64_t kGrain = 16384;

// The gate's formulas on vectors of T (float for bfloat16 tensors, computed in float32).
template <typename T>
struct SwiGluMath {
  using V = Vectorized<T>;
  static V Gate(const V& a, const V& b) {
    const V one(T(1));
    return a * (one / (one + a.neg().exp())) * b;
  }
  static void Grads(const V& g, const V& a, const V& b, V* da, V* db) {
    const V one(T(1)), s = one / (one + a.neg().exp()), silu = a * s;
    *db = g * silu;
    *da = g * b * (s + silu * (one - s));  // s (1 + a (1 - s))
  }
};

template <typename T>
void SwiGluForwardLoop(const T* a, const T* b, T* out, int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    using V = Vectorized<T>;
    int64_t i = begin;
    for (; i + V::size() <= end; i += V::size()) {
      SwiGluMath<T>::Gate(V::loadu(a + i), V::loadu(b + i)).store(out + i);
    }
    for (; i < end; ++i) {
      const T s = T(1) / (T(1) + std::exp(-a[i]));
      out[i] = a[i] * s * b[i];
    }
  });
}

template <typename T>
void SwiGluBackwardLoop(const T* g, const T* a, const T* b, T* da, T* db, int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    using V = Vectorized<T>;
    int64_t i = begin;
    for (; i + V::size() <= end; i += V::size()) {
      V vda, vdb;
      SwiGluMath<T>::Grads(V::loadu(g + i), V::loadu(a + i), V::loadu(b + i), &vda, &vdb);
      vdb.store(db + i);
      vda.store(da + i);
    }
    for (; i < end; ++i) {
      const T s = T(1) / (T(1) + std::exp(-a[i])), silu = a[i] * s;
      db[i] = g[i] * silu;
      da[i] = g[i] * b[i] * (s + silu * (T(1) - s));
    }
  });
}

// bfloat16 in and out, computed in float32: one rounding of each result, where the composite
// rounds silu(a) and the product apiece.
void SwiGluForwardBf16(const c10::BFloat16* a, const c10::BFloat16* b, c10::BFloat16* out,
                       int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    using B = Vectorized<c10::BFloat16>;
    int64_t i = begin;
    for (; i + B::size() <= end; i += B::size()) {
      auto [a0, a1] = at::vec::convert_bfloat16_float(B::loadu(a + i));
      auto [b0, b1] = at::vec::convert_bfloat16_float(B::loadu(b + i));
      at::vec::convert_float_bfloat16(SwiGluMath<float>::Gate(a0, b0),
                                      SwiGluMath<float>::Gate(a1, b1))
          .store(out + i);
    }
    for (; i < end; ++i) {
      const float va = a[i];
      out[i] = va / (1.f + std::exp(-va)) * static_cast<float>(b[i]);
    }
  });
}

void SwiGluBackwardBf16(const c10::BFloat16* g, const c10::BFloat16* a, const c10::BFloat16* b,
                        c10::BFloat16* da, c10::BFloat16* db, int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    using B = Vectorized<c10::BFloat16>;
    using F = Vectorized<float>;
    int64_t i = begin;
    for (; i + B::size() <= end; i += B::size()) {
      auto [g0, g1] = at::vec::convert_bfloat16_float(B::loadu(g + i));
      auto [a0, a1] = at::vec::convert_bfloat16_float(B::loadu(a + i));
      auto [b0, b1] = at::vec::convert_bfloat16_float(B::loadu(b + i));
      F da0, db0, da1, db1;
      SwiGluMath<float>::Grads(g0, a0, b0, &da0, &db0);
      SwiGluMath<float>::Grads(g1, a1, b1, &da1, &db1);
      at::vec::convert_float_bfloat16(da0, da1).store(da + i);
      at::vec::convert_float_bfloat16(db0, db1).store(db + i);
    }
    for (; i < end; ++i) {
      const float vg = g[i], va = a[i], vb = b[i];
      const float sig = 1.f / (1.f + std::exp(-va)), silu = va * sig;
      db[i] = vg * silu;
      da[i] = vg * vb * (sig + silu * (1.f - sig));
    }
  });
}

// Sum of a vector's lanes, in lane order (deterministic).
template <typename T>
T LaneSum(const Vectorized<T>& v) {
  T lanes[Vectorized<T>::size()];
  v.store(lanes);
  T sum = 0;
  for (T lane : lanes) sum += lane;
  return sum;
}

// Row by row (rows in parallel): ss = sum x^2; inv = (ss / D + eps)^(-1/2); y = x * inv * w.
template <typename T>
void RmsNormForwardLoop(const T* x, const T* w, double eps, T* y, T* inv, int64_t rows, int64_t d) {
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / d), [&](int64_t begin, int64_t end) {
    using V = Vectorized<T>;
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * d;
      T* yr = y + r * d;
      V acc(T(0));
      int64_t j = 0;
      for (; j + V::size() <= d; j += V::size()) {
        const V vx = V::loadu(xr + j);
        acc = at::vec::fmadd(vx, vx, acc);
      }
      T ss = LaneSum(acc);
      for (; j < d; ++j) ss += xr[j] * xr[j];
      const T ir = T(1) / std::sqrt(ss / static_cast<T>(d) + static_cast<T>(eps));
      inv[r] = ir;
      const V vi(ir);
      for (j = 0; j + V::size() <= d; j += V::size()) {
        (V::loadu(xr + j) * vi * V::loadu(w + j)).store(yr + j);
      }
      for (; j < d; ++j) yr[j] = xr[j] * ir * w[j];
    }
  });
}

// One row's gradients: with xhat = x * inv and m = sum(dy * w * xhat) / D,
// dx = inv * (dy * w - xhat * m); adds dy * xhat into dw_acc.
template <typename T>
void RmsNormBackwardRow(const T* dy, const T* x, T inv, const T* w, int64_t d, T* dx, T* dw_acc) {
  using V = Vectorized<T>;
  const V vi(inv);
  V acc(T(0));
  int64_t j = 0;
  for (; j + V::size() <= d; j += V::size()) {
    const V vdy = V::loadu(dy + j), xhat = V::loadu(x + j) * vi;
    acc = at::vec::fmadd(vdy * V::loadu(w + j), xhat, acc);
    at::vec::fmadd(vdy, xhat, V::loadu(dw_acc + j)).store(dw_acc + j);
  }
  T m = LaneSum(acc);
  for (int64_t t = j; t < d; ++t) {
    const T xhat = x[t] * inv;
    m += dy[t] * w[t] * xhat;
    dw_acc[t] += dy[t] * xhat;
  }
  m /= static_cast<T>(d);
  const V vm(m);
  for (j = 0; j + V::size() <= d; j += V::size()) {
    const V xhat = V::loadu(x + j) * vi;
    (vi * (V::loadu(dy + j) * V::loadu(w + j) - xhat * vm)).store(dx + j);
  }
  for (; j < d; ++j) dx[j] = inv * (dy[j] * w[j] - x[j] * inv * m);
}

// Rows in fixed blocks of `block_rows` (chunks[c] accumulates block c's dw), so that the sum
// over blocks does not depend on the thread count.
template <typename T>
void RmsNormBackwardLoop(const T* dy, const T* x, const T* inv, const T* w, T* dx, T* dw_blocks,
                         int64_t rows, int64_t d, int64_t block_rows) {
  const int64_t blocks = (rows + block_rows - 1) / block_rows;
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      T* dw_acc = dw_blocks + c * d;
      std::fill(dw_acc, dw_acc + d, T(0));
      for (int64_t r = c * block_rows; r < std::min(rows, (c + 1) * block_rows); ++r) {
        RmsNormBackwardRow(dy + r * d, x + r * d, inv[r], w, d, dx + r * d, dw_acc);
      }
    }
  });
}

// Rows r of x (B*T of them, `x_row_stride` apart, each H heads of E contiguous values) rotated
// by table row r (per_batch_tables) or r % T: out = (x1 c - sign x2 s, x2 c + sign x1 s) of
// each head's halves x1, x2 with the row's c, s (E/2). out is contiguous (B*T, H*E). X is x's
// and out's type, T the tables' and the arithmetic's (float for bfloat16 x: one rounding).
template <typename X, typename T>
void RopeLoop(const X* x, int64_t x_row_stride, const T* cos, const T* sin, bool per_batch_tables,
              T sin_sign, X* out, int64_t rows, int64_t t, int64_t heads, int64_t e) {
  const int64_t half = e / 2;
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / (heads * e)),
                   [&](int64_t begin, int64_t end) {
                     using V = Vectorized<T>;
                     for (int64_t r = begin; r < end; ++r) {
                       const int64_t tr = per_batch_tables ? r : r % t;
                       const T *c = cos + tr * half, *s = sin + tr * half;
                       for (int64_t h = 0; h < heads; ++h) {
                         const X* xi = x + r * x_row_stride + h * e;
                         X* o = out + (r * heads + h) * e;
                         int64_t j = 0;
                         for (; j + V::size() <= half; j += V::size()) {
                           const V x1 = LoadAs(xi + j), x2 = LoadAs(xi + half + j);
                           const V vc = V::loadu(c + j), vs = V::loadu(s + j) * V(sin_sign);
                           StoreAs(x1 * vc - x2 * vs, o + j);
                           StoreAs(x2 * vc + x1 * vs, o + half + j);
                         }
                         for (; j < half; ++j) {
                           const T x1 = xi[j], x2 = xi[half + j], vs = s[j] * sin_sign;
                           o[j] = static_cast<X>(x1 * c[j] - x2 * vs);
                           o[half + j] = static_cast<X>(x2 * c[j] + x1 * vs);
                         }
                       }
                     }
                   });
}

// Router scores (kernels.h), row by row in one pass: ss = x . x and dot = x . c, then
// inv = (ss / D + eps)^(-1/2), s = dot * inv.
template <typename T>
void RouterScoresLoop(const T* x, const T* c, double eps, T* inv, T* s, int64_t rows, int64_t d) {
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / d), [&](int64_t begin, int64_t end) {
    using V = Vectorized<T>;
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * d;
      V acc_ss(T(0)), acc_dot(T(0));
      int64_t j = 0;
      for (; j + V::size() <= d; j += V::size()) {
        const V vx = V::loadu(xr + j);
        acc_ss = at::vec::fmadd(vx, vx, acc_ss);
        acc_dot = at::vec::fmadd(vx, V::loadu(c + j), acc_dot);
      }
      T ss = LaneSum(acc_ss), dot = LaneSum(acc_dot);
      for (; j < d; ++j) {
        ss += xr[j] * xr[j];
        dot += xr[j] * c[j];
      }
      inv[r] = T(1) / std::sqrt(ss / static_cast<T>(d) + static_cast<T>(eps));
      s[r] = dot * inv[r];
    }
  });
}

// Routed rows (kernels.h): pos[n] is the selected row that lands on row n, or -1.
// out[n] = x[n] + (pos[n] < 0 ? 0 : r[m] * (u1[m] + u2[m]) + p[m]) with m = pos[n]; u2 and p
// may be null. One pass over x and out, rows in parallel.
template <typename T>
void ScatterScaledAddLoop(const T* x, const int64_t* pos, const T* r, const T* u1, const T* u2,
                          const T* p, T* out, int64_t n, int64_t d) {
  at::parallel_for(0, n, std::max<int64_t>(1, kGrain / d), [&](int64_t begin, int64_t end) {
    using V = Vectorized<T>;
    for (int64_t row = begin; row < end; ++row) {
      const T* xr = x + row * d;
      T* o = out + row * d;
      const int64_t m = pos[row];
      if (m < 0) {
        std::copy(xr, xr + d, o);
        continue;
      }
      const T* a = u1 + m * d;
      const T* b = u2 == nullptr ? nullptr : u2 + m * d;
      const T* c = p == nullptr ? nullptr : p + m * d;
      const V vr(r[m]);
      int64_t j = 0;
      for (; j + V::size() <= d; j += V::size()) {
        V u = V::loadu(a + j);
        if (b != nullptr) u = u + V::loadu(b + j);
        V delta = u * vr;
        if (c != nullptr) delta = delta + V::loadu(c + j);
        (V::loadu(xr + j) + delta).store(o + j);
      }
      for (; j < d; ++j) {
        const T u = a[j] + (b == nullptr ? T(0) : b[j]);
        o[j] = xr[j] + r[m] * u + (c == nullptr ? T(0) : c[j]);
      }
    }
  });
}

// Its gradients for the incoming g (N, D), per selected row m with gm = g[rows[m]]:
// du[m] = r[m] * gm, dr[m] = gm . (u1[m] + u2[m]), dp[m] = gm (dp may be null). Rows in
// parallel, one pass over the selected rows.
template <typename T>
void ScatterScaledAddBackwardLoop(const T* g, const int64_t* rows, const T* r, const T* u1,
                                  const T* u2, T* du, T* dr, T* dp, int64_t m, int64_t d) {
  at::parallel_for(0, m, std::max<int64_t>(1, kGrain / d), [&](int64_t begin, int64_t end) {
    using V = Vectorized<T>;
    for (int64_t i = begin; i < end; ++i) {
      const T* gm = g + rows[i] * d;
      const T* a = u1 + i * d;
      const T* b = u2 == nullptr ? nullptr : u2 + i * d;
      T* dui = du + i * d;
      T* dpi = dp == nullptr ? nullptr : dp + i * d;
      const V vr(r[i]);
      V acc(T(0));
      int64_t j = 0;
      for (; j + V::size() <= d; j += V::size()) {
        const V vg = V::loadu(gm + j);
        V u = V::loadu(a + j);
        if (b != nullptr) u = u + V::loadu(b + j);
        acc = at::vec::fmadd(vg, u, acc);
        (vg * vr).store(dui + j);
        if (dpi != nullptr) vg.store(dpi + j);
      }
      T dot = LaneSum(acc);
      for (; j < d; ++j) {
        dot += gm[j] * (a[j] + (b == nullptr ? T(0) : b[j]));
        dui[j] = gm[j] * r[i];
        if (dpi != nullptr) dpi[j] = gm[j];
      }
      dr[i] = dot;
    }
  });
}

// The terms of one row of GatherRowsBackwardLoop; a null base, sel or xr reads as zero.
template <typename T>
struct GatherRowTerms {
  const T* base;  // g_pass's row
  const T* sel;   // g_rows's row
  const T* xr;    // x's row
  T va, vb;       // alpha's and beta's
};

// o = base + sel + va c + vb xr over d columns.
template <typename T>
inline void GatherRowBackward(const GatherRowTerms<T>& r, const T* c, T* o, int64_t d) {
  using V = Vectorized<T>;
  int64_t j = 0;
  for (; j + V::size() <= d; j += V::size()) {
    V sum(T(0));
    if (r.base != nullptr) sum = V::loadu(r.base + j);
    if (r.sel != nullptr) sum = sum + V::loadu(r.sel + j);
    if (r.xr != nullptr) {
      sum = at::vec::fmadd(V(r.va), V::loadu(c + j), sum);
      sum = at::vec::fmadd(V(r.vb), V::loadu(r.xr + j), sum);
    }
    sum.store(o + j);
  }
  for (; j < d; ++j) {
    o[j] = (r.base == nullptr ? T(0) : r.base[j]) + (r.sel == nullptr ? T(0) : r.sel[j]) +
           (r.xr == nullptr ? T(0) : r.va * c[j] + r.vb * r.xr[j]);
  }
}

// The gradient of a routed layer's input: dx[n] = g_pass[n] + (pos[n] < 0 ? 0 : g_rows[pos[n]])
// + alpha[n] c + beta[n] x[n]; g_pass, g_rows and alpha (with beta, c, x) may be null (zero).
// One pass over dx, rows in parallel.
template <typename T>
void GatherRowsBackwardLoop(const T* g_pass, const T* g_rows, const int64_t* pos, const T* alpha,
                            const T* beta, const T* c, const T* x, T* dx, int64_t n, int64_t d) {
  at::parallel_for(0, n, std::max<int64_t>(1, kGrain / d), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      GatherRowTerms<T> terms;
      terms.base = g_pass == nullptr ? nullptr : g_pass + row * d;
      terms.sel = g_rows == nullptr || pos[row] < 0 ? nullptr : g_rows + pos[row] * d;
      terms.xr = alpha == nullptr ? nullptr : x + row * d;
      terms.va = alpha == nullptr ? T(0) : alpha[row];
      terms.vb = alpha == nullptr ? T(0) : beta[row];
      GatherRowBackward(terms, c, dx + row * d, d);
    }
  });
}

}  // namespace

#define XMOD_STRINGIFY_ISA(x) #x
#define XMOD_ISA_NAME(x) XMOD_STRINGIFY_ISA(x)

extern const KernelTable kTable = {
    .isa = XMOD_ISA_NAME(CPU_CAPABILITY),
    .swiglu_forward_f = &SwiGluForwardLoop<float>,
    .swiglu_forward_d = &SwiGluForwardLoop<double>,
    .swiglu_backward_f = &SwiGluBackwardLoop<float>,
    .swiglu_backward_d = &SwiGluBackwardLoop<double>,
    .swiglu_forward_bf16 = &SwiGluForwardBf16,
    .swiglu_backward_bf16 = &SwiGluBackwardBf16,
    .rms_norm_forward_f = &RmsNormForwardLoop<float>,
    .rms_norm_forward_d = &RmsNormForwardLoop<double>,
    .rms_norm_backward_f = &RmsNormBackwardLoop<float>,
    .rms_norm_backward_d = &RmsNormBackwardLoop<double>,
    .rope_f = &RopeLoop<float, float>,
    .rope_d = &RopeLoop<double, double>,
    .rope_bf16 = &RopeLoop<c10::BFloat16, float>,
    .router_scores_f = &RouterScoresLoop<float>,
    .router_scores_d = &RouterScoresLoop<double>,
    .scatter_scaled_add_f = &ScatterScaledAddLoop<float>,
    .scatter_scaled_add_d = &ScatterScaledAddLoop<double>,
    .scatter_scaled_add_backward_f = &ScatterScaledAddBackwardLoop<float>,
    .scatter_scaled_add_backward_d = &ScatterScaledAddBackwardLoop<double>,
    .gather_rows_backward_f = &GatherRowsBackwardLoop<float>,
    .gather_rows_backward_d = &GatherRowsBackwardLoop<double>,
};

}  // namespace CPU_CAPABILITY
}  // namespace xmod::cpu::internal
