// Causal attention on bfloat16 operands whose products run as AMX tiles, through the
// batch-reduce GEMM oneDNN builds for ATen (at::native::cpublas::brgemm): the kernel bf16
// autocast takes on processors with AMX. Same tiles, online softmax and recomputed backward as
// flash_attention_isa.cc; the softmax, its statistics (the log-sum-exp is float32) and every
// sum stay float32, and P and dS are rounded to bfloat16 for their products, as FlashAttention
// does on GPUs. Built in the AVX512 variant only (flash_attention_tiles.h).
//
// brgemm computes C [+]= A B with A row-major and B in VNNI pairs: B(d, n) at
// b[(d / 2) * 2N + 2n + d % 2], so that one 32-bit lane holds two consecutive depths. Every
// operand is laid out so once: per kv group, the tiles of K^T, V^T (depth E) and of K, V
// (depth keys); per query tile, q and dout as rows (A) and transposed (A of the key-side
// products). The key-side gradients are built transposed, dK^T += q^T dS and dV^T += dout^T P,
// so that P and dS enter as VNNI row pairs of the tile just computed rather than as its
// transpose; each group's dK^T, dV^T (float32) is transposed into dk, dv once at its end.
// Every product runs on whole 64 x 64 tiles (the padding is zero), so the diagonal tile
// computes its hidden half: at AMX speed that costs less than cutting it would.
#include "model/cpu/flash_attention_tiles.h"

#if defined(CPU_CAPABILITY_AVX512)

#include <ATen/Parallel.h>
#include <ATen/native/CPUBlas.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace xmod::cpu::internal {
inline namespace CPU_CAPABILITY {
namespace {

using at::BFloat16;
using at::vec::Vectorized;
using tiles::kTile;
using V = Vectorized<float>;
constexpr int64_t kWidth = V::size();  // 16 floats

// The conversions use AVX512-BF16's vcvtne2ps2bf16 (32 floats, rounded to nearest even, in one
// instruction); every processor with AMX bfloat16 tiles has it (FlashAttentionHasBf16Products
// checks both).
#define XMOD_BF16_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl")))

// n floats (a multiple of 16) -> n bfloat16.
XMOD_BF16_TARGET void ToBf16(const float* src, int64_t n, BFloat16* dst) {
  int64_t c = 0;
  for (; c + 2 * kWidth <= n; c += 2 * kWidth) {
    const __m512bh both =
        _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + c + kWidth), _mm512_loadu_ps(src + c));
    _mm512_storeu_si512(dst + c, reinterpret_cast<const __m512i&>(both));
  }
  if (c < n) {
    const __m256bh half = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + c));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + c),
                        reinterpret_cast<const __m256i&>(half));
  }
}

// 16 + 16 bfloat16 (row 0's in the low half) -> their VNNI pairs: out[2c + p] = row_p[c].
__m512i PairLanes(__m512i rows) {
  alignas(64) static constexpr uint16_t kPairs[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                      21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                      11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_permutexvar_epi16(_mm512_load_si512(kPairs), rows);
}

// Two rows of n floats (a multiple of 16) -> their VNNI pair, dst[2c + p] = row_p[c].
XMOD_BF16_TARGET void InterleaveRows(const float* row0, const float* row1, int64_t n,
                                     BFloat16* dst) {
  for (int64_t c = 0; c < n; c += kWidth) {
    const __m512bh both = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row1 + c), _mm512_loadu_ps(row0 + c));
    _mm512_storeu_si512(dst + 2 * c, PairLanes(reinterpret_cast<const __m512i&>(both)));
  }
}

// The same for two rows of n bfloat16; a null row reads as zeros.
void InterleaveRows(const BFloat16* row0, const BFloat16* row1, int64_t n, BFloat16* dst) {
  const auto load = [](const BFloat16* row, int64_t c) {
    return row ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + c))
               : _mm256_setzero_si256();
  };
  for (int64_t c = 0; c < n; c += kWidth) {
    const __m512i both =
        _mm512_inserti64x4(_mm512_castsi256_si512(load(row0, c)), load(row1, c), 1);
    _mm512_storeu_si512(dst + 2 * c, PairLanes(both));
  }
}

// C (m x n, row stride ldc) [+]= A (m x depth, row stride lda) B (depth x n, VNNI pairs).
void Product(int64_t m, int64_t n, int64_t depth, const BFloat16* a, int64_t lda, const BFloat16* b,
             float* c, int64_t ldc, bool accumulate) {
  at::native::cpublas::brgemm(m, n, depth, lda, n, ldc, accumulate, a, b, c, /*is_vnni=*/true);
}

// x (B, T, G, E) (batch and row strides given) as tiles of kTile tokens per (b, g), zero
// beyond T: keys_as_columns gives each tile as B of a product of depth E over kTile columns
// (K^T, V^T: VNNI pairs of E), otherwise as B of depth kTile over E columns (K, V: VNNI pairs
// of tokens). -> (B*G, tiles, kTile * E).
std::unique_ptr<BFloat16[]> PackKvTiles(const FlashGeometry& s, const BFloat16* x, int64_t batch,
                                        int64_t row, bool keys_as_columns) {
  const int64_t tiles = (s.t + kTile - 1) / kTile, tile_size = kTile * s.e;
  return tiles::PackPerKvGroup(s, x, batch, [&](const BFloat16* src, BFloat16* dst) {
    const auto token_row = [&](int64_t t) { return t < s.t ? src + t * row : nullptr; };
    for (int64_t tile = 0; tile < tiles; ++tile) {
      BFloat16* out = dst + tile * tile_size;
      for (int64_t j = 0; j < kTile; j += keys_as_columns ? 1 : 2) {
        const int64_t t = tile * kTile + j;
        if (!keys_as_columns) {
          InterleaveRows(token_row(t), token_row(t + 1), s.e, out + j * s.e);
          continue;
        }
        // Column j of each depth pair e2: the 32-bit pair (x[t][2 e2], x[t][2 e2 + 1]).
        for (int64_t e2 = 0; e2 < s.e / 2; ++e2) {
          BFloat16* pair = out + (e2 * kTile + j) * 2;
          if (t < s.t) {
            std::memcpy(pair, token_row(t) + 2 * e2, 2 * sizeof(BFloat16));
          } else {
            pair[0] = pair[1] = BFloat16(0.f);
          }
        }
      }
    }
  });
}

// rows rows of x (row stride `row`, E values each) -> dst (kTile, E), zero rows after, and its
// transpose (E, kTile) when transposed is given.
void PackQueryRows(const BFloat16* x, int64_t row, int64_t rows, int64_t e, BFloat16* dst,
                   BFloat16* transposed = nullptr) {
  for (int64_t r = 0; r < rows; ++r) std::copy(x + r * row, x + r * row + e, dst + r * e);
  std::fill(dst + rows * e, dst + kTile * e, BFloat16(0.f));
  if (transposed == nullptr) return;
  for (int64_t r = 0; r < kTile; ++r) {
    for (int64_t c = 0; c < e; ++c) transposed[c * kTile + r] = dst[r * e + c];
  }
}

// The kTile x kTile float tile -> its VNNI row pairs, the B of a product whose depth is the
// tile's rows.
void TileRowPairs(const float* tile, BFloat16* dst) {
  for (int64_t r = 0; r < kTile; r += 2) {
    InterleaveRows(tile + r * kTile, tile + (r + 1) * kTile, kTile, dst + r * kTile);
  }
}

// rows rows of E floats (contiguous) -> bfloat16 rows `row` apart.
void StoreRows(const float* src, int64_t rows, int64_t e, BFloat16* dst, int64_t row) {
  for (int64_t r = 0; r < rows; ++r) ToBf16(src + r * e, e, dst + r * row);
}

// One thread's buffers of the backward pass.
struct BackwardScratch {
  BackwardScratch(int64_t e, int64_t padded_t)
      : q_a(kTile * e),
        q_t(kTile * e),
        do_a(kTile * e),
        do_t(kTile * e),
        ds_a(kTile * kTile),
        p_pairs(kTile * kTile),
        ds_pairs(kTile * kTile),
        probs(kTile * kTile),
        dprobs(kTile * kTile),
        dq_f(kTile * e),
        dk_t(e * padded_t),
        dv_t(e * padded_t),
        dk_token(e),
        dv_token(e) {}
  std::vector<BFloat16> q_a, q_t, do_a, do_t;
  std::vector<BFloat16> ds_a, p_pairs, ds_pairs;
  std::vector<float> probs, dprobs, dq_f;
  std::vector<float> dk_t, dv_t;  // (E, T) of the group
  std::vector<float> dk_token, dv_token;
  float delta[kTile];
};

// One kv group's packed tiles: K^T, V^T (VNNI pairs of E) and K (VNNI pairs of tokens).
struct GroupTiles {
  const BFloat16* kt;
  const BFloat16* vt;
  const BFloat16* k;
  int64_t tile_size, padded_t;
};

// The products of query tile i0 (packed in w) with key tile j0: recomputed P and dS, then
// dV^T, dK^T and dq's share.
inline void BackwardKeyTile(const FlashGeometry& s, const GroupTiles& g, int64_t i0, int64_t j0,
                            int64_t rows, const float* lse_i, BackwardScratch& w) {
  const int64_t keys = std::min(kTile, i0 + rows - j0), tile = j0 / kTile;
  Product(kTile, kTile, s.e, w.q_a.data(), s.e, g.kt + tile * g.tile_size, w.probs.data(), kTile,
          false);  // q k^T
  Product(kTile, kTile, s.e, w.do_a.data(), s.e, g.vt + tile * g.tile_size, w.dprobs.data(), kTile,
          false);  // dP = dout v^T
  tiles::ProbsAndScoreGrads(s, i0, j0, rows, keys, lse_i, w.delta, w.probs.data(), w.dprobs.data());
  ToBf16(w.dprobs.data(), kTile * kTile, w.ds_a.data());
  TileRowPairs(w.probs.data(), w.p_pairs.data());
  TileRowPairs(w.dprobs.data(), w.ds_pairs.data());
  Product(s.e, kTile, kTile, w.do_t.data(), kTile, w.p_pairs.data(), w.dv_t.data() + j0, g.padded_t,
          true);  // dv^T += dout^T P
  Product(s.e, kTile, kTile, w.q_t.data(), kTile, w.ds_pairs.data(), w.dk_t.data() + j0, g.padded_t,
          true);  // dk^T += q^T dS
  Product(rows, s.e, kTile, w.ds_a.data(), kTile, g.k + tile * g.tile_size, w.dq_f.data(), s.e,
          j0 != 0);  // dq (+)= dS k
}

// Group (bi, gi)'s dK^T, dV^T in w -> its rows of dk, dv.
inline void StoreKvGrads(const FlashGeometry& s, int64_t bi, int64_t gi, int64_t padded_t,
                         BackwardScratch& w, BFloat16* dk, BFloat16* dv) {
  const int64_t kv_row = s.g * s.e;
  for (int64_t t = 0; t < s.t; ++t) {  // (E, T) float32 -> rows of (B, T, G, E)
    for (int64_t c = 0; c < s.e; ++c) {
      w.dk_token[c] = w.dk_t[c * padded_t + t];
      w.dv_token[c] = w.dv_t[c * padded_t + t];
    }
    ToBf16(w.dk_token.data(), s.e, dk + (bi * s.t + t) * kv_row + gi * s.e);
    ToBf16(w.dv_token.data(), s.e, dv + (bi * s.t + t) * kv_row + gi * s.e);
  }
}

}  // namespace

void ForwardBf16Products(const FlashGeometry& s, const BFloat16* q, const BFloat16* k,
                         const BFloat16* v, BFloat16* out, float* lse) {
  const int64_t tiles = (s.t + kTile - 1) / kTile, tile_size = kTile * s.e;
  const int64_t group_size = tiles * tile_size, out_row = s.h * s.e, per_group = s.h / s.g;
  const std::unique_ptr<BFloat16[]> kt = PackKvTiles(s, k, s.k_batch, s.k_row, true);
  const std::unique_ptr<BFloat16[]> vv = PackKvTiles(s, v, s.v_batch, s.v_row, false);
  at::parallel_for(0, s.b * s.h * tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<BFloat16> q_a(tile_size), p_a(kTile * kTile);
    std::vector<float> scores(kTile * kTile), acc(tile_size), out_f(tile_size);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t bi = item / (s.h * tiles), hi = item / tiles % s.h;
      const int64_t bg = bi * s.g + hi / per_group;
      const int64_t i0 = item % tiles * kTile, rows = std::min(kTile, s.t - i0);
      PackQueryRows(q + bi * s.q_batch + i0 * s.q_row + hi * s.e, s.q_row, rows, s.e, q_a.data());
      tiles::OnlineSoftmax<float> softmax(rows);
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t j0 = 0; j0 < i0 + rows; j0 += kTile) {
        const int64_t keys = std::min(kTile, i0 + rows - j0), tile = j0 / kTile;
        Product(kTile, kTile, s.e, q_a.data(), s.e, kt.get() + bg * group_size + tile * tile_size,
                scores.data(), kTile, false);  // q k^T
        softmax.Update(i0, j0, rows, keys, static_cast<float>(s.scale), scores.data(), acc.data(),
                       s.e);
        ToBf16(scores.data(), kTile * kTile, p_a.data());
        Product(kTile, s.e, kTile, p_a.data(), kTile, vv.get() + bg * group_size + tile * tile_size,
                acc.data(), s.e, true);  // P v
      }
      softmax.Finish(rows, acc.data(), s.e, out_f.data(), s.e, lse + (bi * s.h + hi) * s.t + i0);
      StoreRows(out_f.data(), rows, s.e, out + (bi * s.t + i0) * out_row + hi * s.e, out_row);
    }
    at::native::cpublas::brgemm_release();
  });
}

void BackwardBf16Products(const FlashGeometry& s, const BFloat16* q, const BFloat16* k,
                          const BFloat16* v, const BFloat16* out, const BFloat16* dout,
                          const float* lse, BFloat16* dq, BFloat16* dk, BFloat16* dv) {
  const int64_t tiles = (s.t + kTile - 1) / kTile, tile_size = kTile * s.e;
  const int64_t group_size = tiles * tile_size, padded_t = tiles * kTile;
  const int64_t per_group = s.h / s.g, q_out_row = s.h * s.e;
  const std::unique_ptr<BFloat16[]> kt = PackKvTiles(s, k, s.k_batch, s.k_row, true);
  const std::unique_ptr<BFloat16[]> vt = PackKvTiles(s, v, s.v_batch, s.v_row, true);
  const std::unique_ptr<BFloat16[]> k_pairs = PackKvTiles(s, k, s.k_batch, s.k_row, false);
  at::parallel_for(0, s.b * s.g, 1, [&](int64_t begin, int64_t end) {
    BackwardScratch w(s.e, padded_t);
    for (int64_t bg = begin; bg < end; ++bg) {
      const int64_t bi = bg / s.g, gi = bg % s.g;
      const GroupTiles group{kt.get() + bg * group_size, vt.get() + bg * group_size,
                             k_pairs.get() + bg * group_size, tile_size, padded_t};
      std::fill(w.dk_t.begin(), w.dk_t.end(), 0.f);
      std::fill(w.dv_t.begin(), w.dv_t.end(), 0.f);
      for (int64_t hi = gi * per_group; hi < (gi + 1) * per_group; ++hi) {
        for (int64_t i0 = 0; i0 < s.t; i0 += kTile) {
          const int64_t rows = std::min(kTile, s.t - i0);
          const float* lse_i = lse + (bi * s.h + hi) * s.t + i0;
          PackQueryRows(q + bi * s.q_batch + i0 * s.q_row + hi * s.e, s.q_row, rows, s.e,
                        w.q_a.data(), w.q_t.data());
          PackQueryRows(dout + bi * s.dout_batch + i0 * s.dout_row + hi * s.e, s.dout_row, rows,
                        s.e, w.do_a.data(), w.do_t.data());
          tiles::RowDots(rows, s.e, w.do_a.data(), s.e,
                         out + (bi * s.t + i0) * q_out_row + hi * s.e, q_out_row, w.delta);
          for (int64_t j0 = 0; j0 < i0 + rows; j0 += kTile) {
            BackwardKeyTile(s, group, i0, j0, rows, lse_i, w);
          }
          StoreRows(w.dq_f.data(), rows, s.e, dq + (bi * s.t + i0) * q_out_row + hi * s.e,
                    q_out_row);
        }
      }
      StoreKvGrads(s, bi, gi, padded_t, w, dk, dv);
    }
    at::native::cpublas::brgemm_release();
  });
}

}  // namespace CPU_CAPABILITY
}  // namespace xmod::cpu::internal

#endif  // defined(CPU_CAPABILITY_AVX512)
