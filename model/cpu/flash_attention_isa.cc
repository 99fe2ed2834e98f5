// The loops of flash_attention.h for one instruction set, compiled once per variant like
// kernels_isa.cc (CPU_CAPABILITY names the namespace and sets at::vec::Vectorized's width);
// exports xmod::cpu::internal::<CPU_CAPABILITY>::kFlashAttentionTable.
//
// Tiles: kTile queries x kTile keys. Query tile [i0, i0 + rows) needs key tiles up to its last
// row; inside the diagonal tile, query i keeps keys j <= i (Visible). Every product of a tile
// is one call of Gemm, an outer-product kernel holding a kRows x (kVecs vectors) block of C in
// registers while it walks the depth. The operands it streams (B) are packed tile by tile into
// contiguous blocks first: rows of q, k, v and dout lie H*E or (H+2G)*E elements apart, a
// multiple of 1 KB, so the 32-64 rows of one tile would share a handful of L1 sets and evict
// each other on every pass. Transposed operands of A are read through strides.
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "model/cpu/flash_attention.h"
#include "model/cpu/flash_attention_tiles.h"

namespace xmod::cpu::internal {
inline namespace CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;
using tiles::kTile;
using tiles::RoundUp;

#if defined(CPU_CAPABILITY_AVX512)
constexpr int kRegisters = 32, kMaxVecs = 4;  // vector registers; widest block in vectors
#else
constexpr int kRegisters = 16, kMaxVecs = 2;
#endif

// Rows of C a register block of kVecs vectors a row holds: its accumulators, the kVecs of a
// row of B and one broadcast of A fit the registers (AVX512: 6 rows of 4 vectors, 12 of 2).
constexpr int RowsFor(int vecs) { return std::min(12, (kRegisters - 1 - vecs) / vecs); }

// C (kRows x kVecs vectors, row stride ldc) = [C +] A B over `depth`, with A(r, d) =
// a[r * a_row + d * a_depth] and B row-major (row stride ldb).
template <typename T, int kRows, int kVecs, bool kAccumulate>
void GemmBlock(const T* a, int64_t a_row, int64_t a_depth, const T* b, int64_t ldb, T* c,
               int64_t ldc, int64_t depth) {
  using V = Vectorized<T>;
  constexpr int64_t w = V::size();
  V acc[kRows][kVecs];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) {
      acc[r][v] = kAccumulate ? V::loadu(c + r * ldc + v * w) : V(T(0));
    }
  }
  for (int64_t d = 0; d < depth; ++d) {
    V bv[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) bv[v] = V::loadu(b + d * ldb + v * w);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const V av(a[r * a_row + d * a_depth]);
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[r][v] = at::vec::fmadd(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) acc[r][v].store(c + r * ldc + v * w);
  }
}

template <typename T>
using GemmBlockFn = void (*)(const T*, int64_t, int64_t, const T*, int64_t, T*, int64_t, int64_t);

// The block of the most rows, up to `rows`, for kVecs vectors a row.
template <typename T, bool kAccumulate, int kVecs, int kRows = RowsFor(kVecs)>
GemmBlockFn<T> PickBlock(int64_t rows) {
  if constexpr (kRows == 1) {
    return &GemmBlock<T, 1, kVecs, kAccumulate>;
  } else {
    if (rows >= kRows) return &GemmBlock<T, kRows, kVecs, kAccumulate>;
    return PickBlock<T, kAccumulate, kVecs, kRows - 1>(rows);
  }
}

template <typename T, bool kAccumulate>
GemmBlockFn<T> PickBlock(int64_t rows, int64_t vecs) {
  if constexpr (kMaxVecs > 2) {
    if (vecs == 4) return PickBlock<T, kAccumulate, 4>(rows);
    if (vecs == 3) return PickBlock<T, kAccumulate, 3>(rows);
  }
  return vecs == 2 ? PickBlock<T, kAccumulate, 2>(rows) : PickBlock<T, kAccumulate, 1>(rows);
}

// The entries of a tile's product that the causal mask makes zero, for the tile of queries
// i0 + r and keys j0 + c, offset = i0 - j0 apart: key c is visible to query r iff c <= r +
// offset. Gemm skips them a register block at a time (only the diagonal tile has any).
struct CausalLimit {
  enum class Axis {
    kNone,
    kColumnsAreKeys,  // C's rows are queries, its columns keys (q k^T, dout v^T): C is left
                      // unwritten where hidden, so readers mask those entries themselves
    kDepthIsKeys,     // A's rows queries, the depth keys, A zero where hidden (P v, dS k)
    kDepthIsQueries,  // C's rows keys, the depth queries, A zero where hidden (P^T dout,
                      // dS^T q); with accumulation only
  } axis = Axis::kNone;
  int64_t offset = 0;
};

// C (m x n, row stride ldc) = [C +] A (m x depth) B (depth x n): A(r, d) = a[r * a_row + d *
// a_depth], B row-major with row stride ldb; n a multiple of the vector width.
template <typename T, bool kAccumulate>
void Gemm(int64_t m, int64_t n, int64_t depth, const T* a, int64_t a_row, int64_t a_depth,
          const T* b, int64_t ldb, T* c, int64_t ldc, CausalLimit limit = {}) {
  using Axis = CausalLimit::Axis;
  constexpr int64_t w = Vectorized<T>::size();
  for (int64_t n0 = 0; n0 < n; n0 += kMaxVecs * w) {
    const int64_t vecs = std::min<int64_t>(kMaxVecs, (n - n0) / w), most = RowsFor(vecs);
    for (int64_t m0 = 0; m0 < m; m0 += most) {
      const int64_t rows = std::min<int64_t>(most, m - m0);
      int64_t n_end = n, d_begin = 0, d_end = depth;  // what rows m0..m0+rows-1 need
      if (limit.axis == Axis::kColumnsAreKeys) {
        n_end = std::min(n, RoundUp(std::max<int64_t>(0, m0 + rows + limit.offset), w));
      } else if (limit.axis == Axis::kDepthIsKeys) {
        d_end = std::clamp<int64_t>(m0 + rows + limit.offset, 0, depth);
      } else if (limit.axis == Axis::kDepthIsQueries) {
        d_begin = std::clamp<int64_t>(m0 - limit.offset, 0, depth);
      }
      if (n0 >= n_end || d_begin >= d_end) continue;
      PickBlock<T, kAccumulate>(rows, std::min(vecs, (n_end - n0) / w))(
          a + m0 * a_row + d_begin * a_depth, a_row, a_depth, b + d_begin * ldb + n0, ldb,
          c + m0 * ldc + n0, ldc, d_end - d_begin);
    }
  }
}

// The tiles of x (B, T, G, E) (batch and row strides given), for every (b, g) and tile of kTile
// tokens: rows (kTile, E) contiguous, or transposed (E, kTile); zero beyond T.
// -> (B*G, tiles, kTile * E), allocated without a fill: every entry is written once.
template <typename T>
std::unique_ptr<T[]> PackTiles(const FlashGeometry& s, const T* x, int64_t batch, int64_t row,
                               bool transposed) {
  const int64_t tiles = (s.t + kTile - 1) / kTile, tile_size = kTile * s.e;
  return tiles::PackPerKvGroup(s, x, batch, [&](const T* src, T* dst) {
    if (s.t % kTile != 0) {  // the last tile's rows beyond T
      T* last = dst + (tiles - 1) * tile_size;
      for (int64_t j = s.t % kTile; j < kTile; ++j) {
        for (int64_t e = 0; e < s.e; ++e) last[transposed ? e * kTile + j : j * s.e + e] = T(0);
      }
    }
    for (int64_t t = 0; t < s.t; ++t) {
      T* tile = dst + t / kTile * tile_size;
      const int64_t j = t % kTile;
      if (transposed) {
        for (int64_t e = 0; e < s.e; ++e) tile[e * kTile + j] = src[t * row + e];
      } else {
        std::copy(src + t * row, src + t * row + s.e, tile + j * s.e);
      }
    }
  });
}

// rows rows of x (row stride `row`, E values each) -> dst (rows, E) contiguous.
template <typename T>
void PackRows(const T* x, int64_t row, int64_t rows, int64_t e, T* dst) {
  for (int64_t r = 0; r < rows; ++r) std::copy(x + r * row, x + r * row + e, dst + r * e);
}

// One query tile of one head: rows queries from q_rows (row stride q_row) over the keys
// 0..i0+rows-1, whose tiles kt (E, kTile) and vt (kTile, E) lie kTile * E apart; writes the
// normalised output rows (row stride out_row) and their log-sum-exp. The running sum of each
// row stays a vector until the end: one lane reduction per row, not one per tile.
template <typename T>
void ForwardTile(const FlashGeometry& s, int64_t i0, int64_t rows, const T* q_rows, int64_t q_row,
                 const T* kt, const T* vt, T* out_rows, int64_t out_row, T* lse_rows, T* scores,
                 T* acc) {
  const int64_t tile_size = kTile * s.e;
  tiles::OnlineSoftmax<T> softmax(rows);
  std::fill(acc, acc + rows * s.e, T(0));
  for (int64_t j0 = 0; j0 < i0 + rows; j0 += kTile) {
    const int64_t keys = std::min(kTile, i0 + rows - j0);
    const int64_t cols = RoundUp(keys, Vectorized<T>::size()), tile = j0 / kTile;
    Gemm<T, false>(rows, cols, s.e, q_rows, q_row, 1, kt + tile * tile_size, kTile, scores, kTile,
                   {CausalLimit::Axis::kColumnsAreKeys, i0 - j0});  // q k^T
    softmax.Update(i0, j0, rows, keys, static_cast<T>(s.scale), scores, acc, s.e);
    Gemm<T, true>(rows, s.e, keys, scores, kTile, 1, vt + tile * tile_size, s.e, acc, s.e,
                  {CausalLimit::Axis::kDepthIsKeys, i0 - j0});  // P v
  }
  softmax.Finish(rows, acc, s.e, out_rows, out_row, lse_rows);
}

template <typename T>
void ForwardLoop(const FlashGeometry& s, const T* q, const T* k, const T* v, T* out, T* lse) {
  const int64_t tiles = (s.t + kTile - 1) / kTile, group_size = tiles * kTile * s.e;
  const std::unique_ptr<T[]> kt = PackTiles(s, k, s.k_batch, s.k_row, /*transposed=*/true);
  const std::unique_ptr<T[]> vt = PackTiles(s, v, s.v_batch, s.v_row, /*transposed=*/false);
  const int64_t out_row = s.h * s.e, per_group = s.h / s.g;
  // Items (b, h, query tile): contiguous ranges of them give each thread whole heads.
  at::parallel_for(0, s.b * s.h * tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> scores(kTile * kTile), acc(kTile * s.e);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t bi = item / (s.h * tiles), hi = item / tiles % s.h;
      const int64_t bg = bi * s.g + hi / per_group;
      const int64_t i0 = item % tiles * kTile, rows = std::min(kTile, s.t - i0);
      ForwardTile(s, i0, rows, q + bi * s.q_batch + i0 * s.q_row + hi * s.e, s.q_row,
                  kt.get() + bg * group_size, vt.get() + bg * group_size,
                  out + (bi * s.t + i0) * out_row + hi * s.e, out_row,
                  lse + (bi * s.h + hi) * s.t + i0, scores.data(), acc.data());
    }
  });
}

// The packed operands of the backward: per (b, g), tiles of K^T and V^T (E, kTile) and of
// K (kTile, E); per thread, one query tile's q and dout rows (kTile, E) and the tile's P, dS.
template <typename T>
struct BackwardOperands {
  std::unique_ptr<T[]> kt, vt, k_rows;
  int64_t group_size = 0;
};

template <typename T>
struct BackwardScratch {
  std::vector<T> q, dout, probs, dprobs;
  explicit BackwardScratch(int64_t e)
      : q(kTile * e), dout(kTile * e), probs(kTile * kTile), dprobs(kTile * kTile) {}
};

// One kv group (b, g) of the backward: it owns dk and dv of the group and dq of its heads, so
// groups run in parallel without sharing a write.
template <typename T>
void BackwardGroup(const FlashGeometry& s, int64_t bi, int64_t gi, const T* q, const T* out,
                   const T* dout, const T* lse, const BackwardOperands<T>& ops, T* dq, T* dk, T* dv,
                   BackwardScratch<T>* scratch) {
  constexpr int64_t w = Vectorized<T>::size();
  const int64_t per_group = s.h / s.g, kv_row = s.g * s.e, q_out_row = s.h * s.e;
  const int64_t tile_size = kTile * s.e, bg = bi * s.g + gi;
  const T* kt = ops.kt.get() + bg * ops.group_size;
  const T* vt = ops.vt.get() + bg * ops.group_size;
  const T* k_rows = ops.k_rows.get() + bg * ops.group_size;
  T* dk_rows = dk + bi * s.t * kv_row + gi * s.e;
  T* dv_rows = dv + bi * s.t * kv_row + gi * s.e;
  T *q_i = scratch->q.data(), *do_i = scratch->dout.data();
  T *probs = scratch->probs.data(), *dprobs = scratch->dprobs.data();
  T delta[kTile];
  for (int64_t hi = gi * per_group; hi < (gi + 1) * per_group; ++hi) {
    for (int64_t i0 = 0; i0 < s.t; i0 += kTile) {
      const int64_t rows = std::min(kTile, s.t - i0);
      PackRows(q + bi * s.q_batch + i0 * s.q_row + hi * s.e, s.q_row, rows, s.e, q_i);
      PackRows(dout + bi * s.dout_batch + i0 * s.dout_row + hi * s.e, s.dout_row, rows, s.e, do_i);
      const T* o_i = out + (bi * s.t + i0) * q_out_row + hi * s.e;
      const T* lse_i = lse + (bi * s.h + hi) * s.t + i0;
      T* dq_i = dq + (bi * s.t + i0) * q_out_row + hi * s.e;
      tiles::RowDots(rows, s.e, do_i, s.e, o_i, q_out_row, delta);
      for (int64_t j0 = 0; j0 < i0 + rows; j0 += kTile) {
        const int64_t keys = std::min(kTile, i0 + rows - j0), cols = RoundUp(keys, w);
        const int64_t tile = j0 / kTile;
        const CausalLimit by_columns{CausalLimit::Axis::kColumnsAreKeys, i0 - j0},
            by_key_depth{CausalLimit::Axis::kDepthIsKeys, i0 - j0},
            by_query_depth{CausalLimit::Axis::kDepthIsQueries, i0 - j0};
        Gemm<T, false>(rows, cols, s.e, q_i, s.e, 1, kt + tile * tile_size, kTile, probs, kTile,
                       by_columns);  // q k^T
        Gemm<T, false>(rows, cols, s.e, do_i, s.e, 1, vt + tile * tile_size, kTile, dprobs, kTile,
                       by_columns);  // dP = dout v^T
        tiles::ProbsAndScoreGrads(s, i0, j0, rows, keys, lse_i, delta, probs, dprobs);
        // dv_j += P^T dout_i; dq_i += dS k_j; dk_j += dS^T q_i.
        // The first contribution overwrites: dq_i's is key tile 0; key tile j's is the
        // group's first head at the diagonal tile, which reaches every key row of the tile.
        const auto dkv = hi == gi * per_group && j0 == i0 ? &Gemm<T, false> : &Gemm<T, true>;
        dkv(keys, s.e, rows, probs, 1, kTile, do_i, s.e, dv_rows + j0 * kv_row, kv_row,
            by_query_depth);
        (j0 == 0 ? &Gemm<T, false> : &Gemm<T, true>)(rows, s.e, keys, dprobs, kTile, 1,
                                                     k_rows + tile * tile_size, s.e, dq_i,
                                                     q_out_row, by_key_depth);
        dkv(keys, s.e, rows, dprobs, 1, kTile, q_i, s.e, dk_rows + j0 * kv_row, kv_row,
            by_query_depth);
      }
    }
  }
}

template <typename T>
void BackwardLoop(const FlashGeometry& s, const T* q, const T* k, const T* v, const T* out,
                  const T* dout, const T* lse, T* dq, T* dk, T* dv) {
  BackwardOperands<T> ops;
  ops.kt = PackTiles(s, k, s.k_batch, s.k_row, /*transposed=*/true);
  ops.vt = PackTiles(s, v, s.v_batch, s.v_row, /*transposed=*/true);
  ops.k_rows = PackTiles(s, k, s.k_batch, s.k_row, /*transposed=*/false);
  ops.group_size = (s.t + kTile - 1) / kTile * kTile * s.e;
  at::parallel_for(0, s.b * s.g, 1, [&](int64_t begin, int64_t end) {
    BackwardScratch<T> scratch(s.e);
    for (int64_t bg = begin; bg < end; ++bg) {
      BackwardGroup(s, bg / s.g, bg % s.g, q, out, dout, lse, ops, dq, dk, dv, &scratch);
    }
  });
}

}  // namespace

#define XMOD_STRINGIFY_ISA(x) #x
#define XMOD_ISA_NAME(x) XMOD_STRINGIFY_ISA(x)

extern const FlashAttentionTable kFlashAttentionTable = {
    .isa = XMOD_ISA_NAME(CPU_CAPABILITY),
    .float_width = Vectorized<float>::size(),
    .double_width = Vectorized<double>::size(),
    .forward_f = &ForwardLoop<float>,
    .forward_d = &ForwardLoop<double>,
    .backward_f = &BackwardLoop<float>,
    .backward_d = &BackwardLoop<double>,
#if defined(CPU_CAPABILITY_AVX512)
    .forward_bf16 = &ForwardBf16Products,
    .backward_bf16 = &BackwardBf16Products,
#else
    .forward_bf16 = nullptr,
    .backward_bf16 = nullptr,
#endif
};

}  // namespace CPU_CAPABILITY
}  // namespace xmod::cpu::internal
