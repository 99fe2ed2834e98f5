// The batched routed layer (gather -> attention/FFN -> index_add) against a slow,
// obviously-correct per-token loop written straight from paper §2.2-2.3: forward outputs and
// gradients, in float64, for X-MoD (top-k and threshold rule), MoD, Selected-Q/full-KV and
// Routed-FFN. RoPE in the reference is computed per token from its original position with
// std::cos / std::sin, independently of model/rope.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "model/blocks.h"

namespace xmod {
namespace {

using AttentionKind = RoutedBlockOptions::AttentionKind;
using Update = RoutedBlockOptions::Update;

constexpr int64_t kB = 2, kT = 12, kD = 16, kH = 4, kG = 2, kE = 8, kF = 24;
constexpr double kTheta = 10000.0;

torch::Tensor Norm(const torch::Tensor& v, const torch::Tensor& g) {  // v: (D)
  return v / torch::sqrt((v * v).mean() + 1e-6) * g;
}

// Rotates one head vector v (E) to position p.
torch::Tensor RotateAt(const torch::Tensor& v, int64_t p) {
  const int64_t half = kE / 2;
  std::vector<torch::Tensor> out(kE);
  for (int64_t m = 0; m < half; ++m) {
    const double angle = p * std::pow(kTheta, -2.0 * m / kE);
    out[m] = v[m] * std::cos(angle) - v[m + half] * std::sin(angle);
    out[m + half] = v[m + half] * std::cos(angle) + v[m] * std::sin(angle);
  }
  return torch::stack(out);
}

// The routed layer for one sequence, token by token. x: (T, D), bias: (T).
torch::Tensor ReferenceSequence(RoutedBlockImpl& blk, const RoutedBlockOptions& o,
                                const torch::Tensor& x, const torch::Tensor& bias, RoutingMode mode,
                                int64_t k) {
  std::vector<torch::Tensor> h(kT), z(kT);
  std::vector<double> zval(kT);
  for (int64_t i = 0; i < kT; ++i) {
    h[i] = Norm(x[i], blk.norm1->weight);
    z[i] = torch::dot(h[i], blk.router->weight) - o.tau * bias[i];
    zval[i] = z[i].item<double>();
  }
  std::vector<int64_t> selected;
  if (mode == RoutingMode::kTopK) {
    std::vector<int64_t> order(kT);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return zval[a] > zval[b]; });
    selected.assign(order.begin(), order.begin() + k);
    std::sort(selected.begin(), selected.end());
  } else {
    for (int64_t i = 0; i < kT; ++i) {
      if (1.0 / (1.0 + std::exp(-zval[i])) > 0.5) selected.push_back(i);
    }
  }
  // Keys and values: the selected tokens, or every token for Selected-Q/full-KV.
  std::vector<int64_t> kv_tokens = selected;
  if (o.attention_kind == AttentionKind::kFullKv) {
    kv_tokens.resize(kT);
    std::iota(kv_tokens.begin(), kv_tokens.end(), 0);
  }
  auto& attn = blk.attention;
  std::vector<torch::Tensor> rows;
  for (int64_t i = 0; i < kT; ++i) rows.push_back(x[i]);
  for (int64_t i : selected) {
    torch::Tensor a;
    if (o.attention_kind != AttentionKind::kNone) {
      torch::Tensor q = torch::mv(attn->wq->weight, h[i]).view({kH, kE});
      std::vector<torch::Tensor> heads;
      for (int64_t hh = 0; hh < kH; ++hh) {
        const int64_t g = hh / (kH / kG);
        torch::Tensor qh = RotateAt(q[hh], i) / std::sqrt(static_cast<double>(kE));
        std::vector<torch::Tensor> scores, values;
        for (int64_t j : kv_tokens) {
          if (j > i) continue;  // causal by original position
          torch::Tensor kj = torch::mv(attn->wk->weight, h[j]).view({kG, kE})[g];
          torch::Tensor vj = torch::mv(attn->wv->weight, h[j]).view({kG, kE})[g];
          scores.push_back(torch::dot(qh, RotateAt(kj, j)));
          values.push_back(vj);
        }
        torch::Tensor p = torch::softmax(torch::stack(scores), 0);
        heads.push_back(torch::matmul(p, torch::stack(values)));
      }
      a = torch::mv(attn->wo->weight, torch::cat(heads));
    }
    torch::Tensor u = a.defined() ? Norm(x[i] + a, blk.norm2->weight) : h[i];
    torch::Tensor f =
        torch::mv(blk.ffn->w2->weight, torch::silu(torch::mv(blk.ffn->w1->weight, u)) *
                                           torch::mv(blk.ffn->w3->weight, u));
    torch::Tensor r = torch::sigmoid(z[i]);
    if (o.update == Update::kMoD) {
      rows[i] = x[i] + (a.defined() ? a : torch::zeros_like(f)) + r * f;
    } else {
      torch::Tensor scale =
          blk.gate_scale.defined() ? blk.gate_scale : torch::ones({}, x.options());
      rows[i] = x[i] + scale * r * (a.defined() ? a + f : f);
    }
  }
  return torch::stack(rows);
}

struct Case {
  const char* name;
  AttentionKind attention;
  Update update;
  RoutingMode mode;
  double tau;
  bool learn_gate_scale;
};

class RoutedBlockTest : public ::testing::TestWithParam<Case> {};

TEST_P(RoutedBlockTest, MatchesPerTokenReferenceForwardAndBackward) {
  const Case& c = GetParam();
  torch::manual_seed(7);
  torch::set_num_threads(1);
  RoutedBlockOptions o;
  o.attention = AttentionOptions{kD, kH, kG, kE, /*query_chunk=*/5};
  o.attention_kind = c.attention;
  o.update = c.update;
  o.ffn_dim = kF;
  o.sparsity = 3;  // k = 4 of 12
  o.tau = c.tau;
  o.learn_gate_scale = c.learn_gate_scale;
  o.gate_scale_init = 0.7;
  o.router_init_std = 1.0;  // wide scores so the threshold rule selects varying counts
  auto blk = std::make_shared<RoutedBlockImpl>(o);
  blk->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : blk->parameters()) {
      if (p.dim() == 2) p.normal_(0, 0.3);
    }
    blk->norm1->weight.uniform_(0.5, 1.5);
    if (blk->norm2) blk->norm2->weight.uniform_(0.5, 1.5);
  }
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  torch::Tensor x = torch::randn({kB, kT, kD}, f64).requires_grad_(true);
  torch::Tensor bias = torch::randint(0, 3, {kB, kT}, f64);
  torch::Tensor probe = torch::randn({kB, kT, kD}, f64);  // random output weights
  const int64_t k = kT / o.sparsity;

  Rope rope(kE, kT, kTheta, torch::kCPU, torch::kFloat64);
  LayerContext ctx;
  ctx.mode = c.mode;
  ctx.rope = &rope;
  ctx.bias = bias;
  torch::Tensor out = blk->forward(x, &ctx);
  (out * probe).sum().backward();
  std::vector<torch::Tensor> grads;
  for (auto& p : blk->parameters()) grads.push_back(p.grad().clone());
  torch::Tensor x_grad = x.grad().clone();
  // The layer's choice was added to the bias: b += mask.
  EXPECT_TRUE(torch::equal(ctx.bias - bias, (ctx.bias - bias).clamp(0, 1)));
  if (c.mode == RoutingMode::kTopK) {
    EXPECT_TRUE(torch::allclose((ctx.bias - bias).sum(1), torch::full({kB}, double(k), f64)));
  }

  blk->zero_grad();
  x.grad().zero_();
  std::vector<torch::Tensor> ref_rows;
  for (int64_t b = 0; b < kB; ++b) {
    ref_rows.push_back(ReferenceSequence(*blk, o, x[b], bias[b], c.mode, k));
  }
  torch::Tensor ref = torch::stack(ref_rows);
  (ref * probe).sum().backward();

  EXPECT_TRUE(torch::allclose(out, ref, 1e-9, 1e-9)) << (out - ref).abs().max();
  EXPECT_TRUE(torch::allclose(x_grad, x.grad(), 1e-9, 1e-9)) << (x_grad - x.grad()).abs().max();
  auto params = blk->named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(grads[i], params[i].value().grad(), 1e-9, 1e-9))
        << params[i].key() << " " << (grads[i] - params[i].value().grad()).abs().max();
  }
  // The routed rows differ from x, the others are untouched.
  EXPECT_FALSE(torch::allclose(out, x));
}

TEST(RoutedBlockThreshold, VariableCountsPerSequenceAreExercised) {
  // The threshold case above is only meaningful if counts differ between sequences.
  torch::manual_seed(7);
  RoutedBlockOptions o;
  o.attention = AttentionOptions{kD, kH, kG, kE};
  o.ffn_dim = kF;
  o.sparsity = 3;
  o.router_init_std = 1.0;
  RoutedBlockImpl blk(o);
  torch::Tensor x = torch::randn({8, kT, kD});
  Rope rope(kE, kT, kTheta, torch::kCPU);
  LayerContext ctx;
  ctx.mode = RoutingMode::kThreshold;
  ctx.rope = &rope;
  RoutingTrace trace;
  ctx.trace = &trace;
  blk.forward(x, &ctx);
  torch::Tensor counts = trace.selected[0].sum(1);
  EXPECT_GT(counts.max().item<int64_t>(), counts.min().item<int64_t>());
  EXPECT_TRUE(torch::equal(trace.selected[0], trace.threshold_mask[0]));
}

TEST(Attention, ChunkedCausalEqualsMaskedFullProduct) {
  // The block-skipping causal path (several chunk sizes) equals one masked T x T product
  // (forced by passing an all-valid key mask).
  torch::manual_seed(3);
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  torch::Tensor h = torch::randn({kB, kT, kD}, f64);
  Rope rope(kE, kT, kTheta, torch::kCPU, torch::kFloat64);
  torch::Tensor positions = torch::arange(kT, f64.dtype(torch::kLong)).expand({kB, kT});
  torch::Tensor all_valid = torch::ones({kB, kT}, f64.dtype(torch::kBool));
  std::vector<torch::Tensor> outs;
  for (int64_t chunk : {1, 5, 12, 64}) {
    torch::manual_seed(4);
    Attention attn(AttentionOptions{kD, kH, kG, kE, chunk});
    attn->to(torch::kFloat64);
    outs.push_back(attn->forward(h, torch::Tensor(), torch::Tensor(), rope));
    if (chunk == 64) outs.push_back(attn->forward(h, positions, all_valid, rope));
  }
  for (size_t i = 1; i < outs.size(); ++i) {
    EXPECT_TRUE(torch::allclose(outs[0], outs[i], 1e-12, 1e-12)) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, RoutedBlockTest,
    ::testing::Values(
        Case{"XModTopK", AttentionKind::kSelected, Update::kXMoD, RoutingMode::kTopK, 1.0, true},
        Case{"XModThreshold", AttentionKind::kSelected, Update::kXMoD, RoutingMode::kThreshold, 1.0,
             true},
        Case{"XModFixedScaleNoBias", AttentionKind::kSelected, Update::kXMoD, RoutingMode::kTopK,
             0.0, false},
        Case{"MoD", AttentionKind::kSelected, Update::kMoD, RoutingMode::kTopK, 0.0, true},
        Case{"MoDThreshold", AttentionKind::kSelected, Update::kMoD, RoutingMode::kThreshold, 0.0,
             true},
        Case{"FullKvTopK", AttentionKind::kFullKv, Update::kXMoD, RoutingMode::kTopK, 1.0, true},
        Case{"FullKvThreshold", AttentionKind::kFullKv, Update::kXMoD, RoutingMode::kThreshold, 1.0,
             true},
        Case{"RoutedFfn", AttentionKind::kNone, Update::kXMoD, RoutingMode::kTopK, 1.0, true}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace xmod
