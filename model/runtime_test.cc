// How the model computes, checked against the plain path: the hand-written autograd nodes
// (RMSNorm, RoPE, router scores through the norm with the gather of the selected rows,
// next-token loss, the SwiGLU gate, the routed rows' scatter-add) against the composite formulas
// they replace, forward and gradients in float64; fused scaled_dot_product_attention against the
// batched-matmul kernel (dense causal, routed top-k and threshold-padded masks), activation
// checkpointing against keeping activations (losses and every gradient), bf16 autocast against fp32
// (close losses, fp32 parameters and gradients), and which precision "auto" picks.
#include <ATen/cpu/Utils.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "model/accounting/accounting.h"
#include "model/attention.h"
#include "model/autocast.h"
#include "model/cpu/kernels.h"
#include "model/device.h"
#include "model/ffn.h"
#include "model/rms_norm.h"
#include "model/rope.h"
#include "model/routed_rows.h"
#include "model/router.h"
#include "model/test_specs.h"
#include "model/transformer.h"

namespace xmod {
namespace {

Transformer Build(const xmod::v1::ModelSpec& spec, int seq_len, ModelRuntimeOptions runtime) {
  absl::StatusOr<Accounting> acc = Account(spec, seq_len);
  EXPECT_TRUE(acc.ok()) << acc.status();
  torch::manual_seed(7);  // the same initial parameters for every runtime
  return Transformer(spec, *acc, seq_len, runtime);
}

// Loss and the gradients of every parameter after one forward/backward.
struct Pass {
  double loss = 0;
  std::vector<torch::Tensor> grads;
};

Pass ForwardBackward(Transformer& model, const torch::Tensor& tokens, RoutingMode mode) {
  model->zero_grad();
  torch::Tensor inputs = tokens.narrow(1, 0, tokens.size(1) - 1);
  torch::Tensor targets = tokens.narrow(1, 1, tokens.size(1) - 1);
  ModelOutput out = model->forward(inputs, targets, mode);
  (out.loss + out.aux_loss).backward();
  Pass pass;
  pass.loss = out.loss.item<double>();
  for (const torch::Tensor& p : model->parameters()) {
    pass.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  }
  return pass;
}

void ExpectSamePass(const Pass& a, const Pass& b, double tolerance) {
  EXPECT_NEAR(a.loss, b.loss, tolerance);
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a.grads[i], b.grads[i], tolerance, tolerance))
        << "gradient " << i << " differs by "
        << (a.grads[i] - b.grads[i]).abs().max().item<double>();
  }
}

constexpr double kTight = 1e-12;
const auto kF64 = torch::TensorOptions().dtype(torch::kFloat64);

// d outputs / d inputs, contracted with `probes` (one per output): the gradients one backward
// pass delivers. Keeps the graph, so each side can be asked again.
std::vector<torch::Tensor> Grads(const std::vector<torch::Tensor>& outputs,
                                 const std::vector<torch::Tensor>& probes,
                                 const std::vector<torch::Tensor>& inputs) {
  torch::Tensor objective = torch::zeros({}, kF64);
  for (size_t i = 0; i < outputs.size(); ++i)
    objective = objective + (outputs[i] * probes[i]).sum();
  return torch::autograd::grad({objective}, inputs, /*grad_outputs=*/{}, /*retain_graph=*/true);
}

void ExpectAllClose(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a[i], b[i], kTight, kTight))
        << "tensor " << i << " differs by " << (a[i] - b[i]).abs().max().item<double>();
  }
}

// Rows of a width that is no multiple of any vector width, enough of them for several blocks
// of dg partial sums at 2 threads; float32 against the float64 composite too.
TEST(AutogradNodes, RmsNormMatchesTheCompositeFormula) {
  torch::manual_seed(11);
  const int previous_threads = at::get_num_threads();
  at::set_num_threads(2);
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{3, 5, 16}, {4, 300, 37}}) {
    const int64_t d = shape.back();
    RMSNorm norm(d);
    norm->to(torch::kFloat64);
    {
      torch::NoGradGuard no_grad;
      norm->weight.uniform_(0.5, 1.5);
    }
    torch::Tensor x = (torch::randn(shape, kF64) * 3).requires_grad_(true);
    torch::Tensor probe = torch::randn(shape, kF64);
    torch::Tensor fused = norm->forward(x);
    torch::Tensor plain = x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * norm->weight;
    ExpectAllClose({fused}, {plain});
    const std::vector<torch::Tensor> grads64 = Grads({plain}, {probe}, {x, norm->weight});
    ExpectAllClose(Grads({fused}, {probe}, {x, norm->weight}), grads64);

    RMSNorm norm32(d);
    {
      torch::NoGradGuard no_grad;
      norm32->weight.copy_(norm->weight);
    }
    torch::Tensor x32 = x.detach().to(torch::kFloat).requires_grad_(true);
    torch::Tensor fused32 = norm32->forward(x32);
    std::vector<torch::Tensor> grads32 =
        torch::autograd::grad({(fused32 * probe).sum()}, {x32, norm32->weight});
    EXPECT_TRUE(torch::allclose(fused32.to(torch::kDouble), plain, 1e-5, 1e-5));
    for (int i = 0; i < 2; ++i) {
      EXPECT_TRUE(torch::allclose(grads32[i].to(torch::kDouble), grads64[i], 1e-4, 1e-4))
          << "gradient " << i << " differs by "
          << (grads32[i].to(torch::kDouble) - grads64[i]).abs().max().item<double>();
    }
  }
  at::set_num_threads(previous_threads);
}

// Head widths below and above the vector width (with a tail), x contiguous and x a view of
// a wider product's rows (as q and k are of the fused q/k/v product).
TEST(AutogradNodes, RopeMatchesTheCompositeFormula) {
  torch::manual_seed(12);
  for (const int64_t e : {8, 40}) {
    Rope rope(e, 32, 10000.0, torch::kCPU, torch::kFloat64);
    for (const bool strided : {false, true}) {
      torch::Tensor leaf =
          torch::randn({2, 6, strided ? 3 * e + 16 : 3 * e}, kF64).requires_grad_(true);
      torch::Tensor x = leaf.narrow(-1, 0, 3 * e).view({2, 6, 3, e});  // (B, T, H, E)
      torch::Tensor probe = torch::randn({2, 6, 3, e}, kF64);
      // Table layouts of both call shapes: 0..T-1 scaled (queries), gathered positions.
      torch::Tensor positions = torch::tensor({{0, 3, 4, 9, 20, 31}, {1, 2, 5, 6, 7, 30}});
      for (const auto& tables : {rope.Tables({}, 6, 0.25), rope.Tables(positions, 6, 1.0)}) {
        torch::Tensor fused = Rope::Apply(x, tables);
        torch::Tensor x1 = x.narrow(-1, 0, e / 2), x2 = x.narrow(-1, e / 2, e / 2);
        const torch::Tensor &cos = tables.first, &sin = tables.second;
        torch::Tensor plain = torch::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
        EXPECT_TRUE(fused.is_contiguous());
        ExpectAllClose({fused}, {plain});
        ExpectAllClose(Grads({fused}, {probe}, {leaf}), Grads({plain}, {probe}, {leaf}));

        // bf16 autocast: bfloat16 x, float32 tables -> bfloat16, computed in float32 and
        // rounded once: within bfloat16's half ulp (2^-8 relative; 1e-6 for float32's own
        // rounding) of the float64 formula on the same values, and the gradient of the
        // bfloat16 incoming gradient likewise.
        torch::Tensor leaf16 = leaf.detach().to(torch::kBFloat16).requires_grad_(true);
        torch::Tensor x16 = leaf16.narrow(-1, 0, 3 * e).view({2, 6, 3, e});
        const auto tables32 = std::make_pair(cos.to(torch::kFloat), sin.to(torch::kFloat));
        torch::Tensor fused16 = Rope::Apply(x16, tables32);
        ASSERT_EQ(fused16.scalar_type(), torch::kBFloat16);
        torch::Tensor leaf_exact = leaf16.detach().to(kF64).requires_grad_(true);
        torch::Tensor xe = leaf_exact.narrow(-1, 0, 3 * e).view({2, 6, 3, e});
        torch::Tensor xe1 = xe.narrow(-1, 0, e / 2), xe2 = xe.narrow(-1, e / 2, e / 2);
        const torch::Tensor c32 = tables32.first.to(kF64), s32 = tables32.second.to(kF64);
        torch::Tensor exact = torch::cat({xe1 * c32 - xe2 * s32, xe2 * c32 + xe1 * s32}, -1);
        const auto within_half_ulp = [](const torch::Tensor& got, const torch::Tensor& want) {
          return ((got.to(kF64) - want).abs() <= want.abs() * std::ldexp(1.0, -8) + 1e-6)
              .all()
              .item<bool>();
        };
        EXPECT_TRUE(within_half_ulp(fused16, exact)) << "e " << e;
        const torch::Tensor probe16 = probe.to(torch::kBFloat16).to(kF64);
        torch::Tensor grad16 =
            torch::autograd::grad({(fused16.to(kF64) * probe16).sum()}, {leaf16})[0];
        ASSERT_EQ(grad16.scalar_type(), torch::kBFloat16);
        EXPECT_TRUE(within_half_ulp(grad16, Grads({exact}, {probe16}, {leaf_exact})[0]))
            << "e " << e;
      }
    }
  }
}

TEST(AutogradNodes, RouterScoresMatchTheCompositeFormula) {
  torch::manual_seed(13);
  constexpr int64_t kB = 2, kT = 10, kD = 16, kK = 3;
  const double tau = 0.7;
  Router router(kD, tau, /*init_std=*/1.0);
  RMSNorm norm(kD);
  router->to(torch::kFloat64);
  norm->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    norm->weight.uniform_(0.5, 1.5);
  }
  torch::Tensor x = (torch::randn({kB, kT, kD}, kF64) * 2).requires_grad_(true);
  torch::Tensor bias = torch::randint(0, 3, {kB, kT}, kF64);
  torch::Tensor probe = torch::randn({kB, kK}, kF64);
  const std::vector<torch::Tensor> inputs = {x, norm->weight, router->weight};
  Selection sel = router->forward(x, *norm, bias, kK, RoutingMode::kTopK);
  // Plain: the gate trains x, g and w; the loss reads h.detach() and trains w only (B.7).
  torch::Tensor h = x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * norm->weight;
  torch::Tensor z = (h * router->weight).sum(-1) - tau * bias;
  torch::Tensor gate = torch::sigmoid(z).gather(1, sel.index);
  torch::Tensor logit_p = (h.detach() * router->weight).sum(-1) - tau * bias;
  torch::Tensor aux = torch::binary_cross_entropy_with_logits(logit_p, sel.topk_mask.to(kF64));
  EXPECT_TRUE(torch::equal(sel.topk_mask.sum(1), torch::full({kB}, kK, torch::kLong)));
  EXPECT_TRUE(torch::equal(std::get<0>(std::get<1>(z.topk(kK, 1)).sort(1)), sel.index));
  ExpectAllClose({sel.gate, sel.aux_loss}, {gate, aux});
  const torch::Tensor one = torch::ones({}, kF64);
  ExpectAllClose(Grads({sel.gate, sel.aux_loss}, {probe, one}, inputs),
                 Grads({gate, aux}, {probe, one}, inputs));
  // The loss alone: its gradient reaches w, and neither x nor g.
  ExpectAllClose(Grads({sel.aux_loss}, {one}, {router->weight}),
                 Grads({aux}, {one}, {router->weight}));
  for (const torch::Tensor& input : {x, norm->weight}) {
    torch::Tensor grad = torch::autograd::grad({sel.aux_loss}, {input}, {}, true, false,
                                               /*allow_unused=*/true)[0];
    EXPECT_TRUE(!grad.defined() || torch::equal(grad, torch::zeros_like(input)));
  }
  // The gathered rows b*T + index and x passed on: x's gradient from all four outputs at once
  // (one pass in the fused node), and from the rows alone.
  EXPECT_TRUE(torch::equal(sel.rows, (sel.index + torch::arange(kB).unsqueeze(1) * kT).view(-1)));
  const torch::Tensor x_flat = x.reshape({kB * kT, kD});
  const torch::Tensor plain_rows = x_flat.index_select(0, sel.rows);
  const torch::Tensor rows_probe = torch::randn({kB * kK, kD}, kF64);
  const torch::Tensor pass_probe = torch::randn({kB * kT, kD}, kF64);
  ExpectAllClose({sel.x_rows, sel.x_pass}, {plain_rows, x_flat});
  ExpectAllClose(
      Grads({sel.gate, sel.aux_loss, sel.x_rows, sel.x_pass}, {probe, one, rows_probe, pass_probe},
            inputs),
      Grads({gate, aux, plain_rows, x_flat}, {probe, one, rows_probe, pass_probe}, inputs));
  ExpectAllClose(Grads({sel.x_rows}, {rows_probe}, {x}), Grads({plain_rows}, {rows_probe}, {x}));
  // The scores' one-pass kernel over rows of a width that is no multiple of any vector width,
  // in several parallel tasks at 2 threads, in float64 and float32.
  const int previous_threads = at::get_num_threads();
  at::set_num_threads(2);
  for (const torch::Dtype dtype : {torch::kFloat64, torch::kFloat32}) {
    torch::Tensor xl = torch::randn({3, 700, 37}, kF64) * 2, c = torch::randn({37}, kF64);
    auto [inv, s] = cpu::RouterScores(xl.to(dtype), c.to(dtype), 1e-6);
    torch::Tensor plain_inv = torch::rsqrt(xl.pow(2).mean(-1) + 1e-6);
    const double tolerance = dtype == torch::kFloat64 ? kTight : 1e-5;
    EXPECT_TRUE(torch::allclose(inv.to(torch::kDouble), plain_inv, tolerance, tolerance));
    EXPECT_TRUE(
        torch::allclose(s.to(torch::kDouble), (xl * c).sum(-1) * plain_inv, tolerance, tolerance));
  }
  at::set_num_threads(previous_threads);
  // Under bf16 autocast the scores stay in float32, as the residual stream.
  AutocastGuard autocast(torch::kCPU, {true, torch::kBFloat16});
  Router router32(kD, tau, 1.0);
  RMSNorm norm32(kD);
  Selection sel32 = router32->forward(torch::randn({kB, kT, kD}), *norm32, torch::zeros({kB, kT}),
                                      kK, RoutingMode::kTopK);
  EXPECT_EQ(sel32.gate.scalar_type(), torch::kFloat);
}

TEST(AutogradNodes, NextTokenLossMatchesCrossEntropy) {
  torch::manual_seed(14);
  torch::Tensor logits = (torch::randn({12, 7}, kF64) * 3).requires_grad_(true);
  torch::Tensor targets = torch::randint(0, 7, {12}, torch::kLong);
  torch::Tensor fused = NextTokenLoss(logits, targets);
  torch::Tensor plain = torch::cross_entropy_loss(logits, targets);
  const torch::Tensor scale = torch::full({}, 0.3, kF64);  // a dloss other than 1
  ExpectAllClose({fused}, {plain});
  ExpectAllClose(Grads({fused}, {scale}, {logits}), Grads({plain}, {scale}, {logits}));
}

// silu(a) * b with its single-pass kernels: float64 against the composite, over a length that
// is no multiple of any vector width and splits into several parallel tasks at 2 threads;
// float32 against the float64 composite.
TEST(AutogradNodes, SwiGluGateMatchesTheCompositeFormula) {
  torch::manual_seed(15);
  const int previous_threads = at::get_num_threads();
  at::set_num_threads(2);
  torch::Tensor a = (torch::randn({3, 7001}, kF64) * 4).requires_grad_(true);  // (N, F)
  torch::Tensor b = (torch::randn({3, 7001}, kF64) * 2).requires_grad_(true);
  torch::Tensor probe = torch::randn({3, 7001}, kF64);
  torch::Tensor fused = SwiGluGate(a, b);
  torch::Tensor plain = torch::silu(a) * b;
  ExpectAllClose({fused}, {plain});
  ExpectAllClose(Grads({fused}, {probe}, {a, b}), Grads({plain}, {probe}, {a, b}));

  torch::Tensor a32 = a.detach().to(torch::kFloat).requires_grad_(true);
  torch::Tensor b32 = b.detach().to(torch::kFloat).requires_grad_(true);
  torch::Tensor fused32 = SwiGluGate(a32, b32);
  std::vector<torch::Tensor> grads32 = torch::autograd::grad({(fused32 * probe).sum()}, {a32, b32});
  std::vector<torch::Tensor> grads64 = Grads({plain}, {probe}, {a, b});
  EXPECT_TRUE(torch::allclose(fused32.to(torch::kDouble), plain, 1e-5, 1e-5));
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(torch::allclose(grads32[i].to(torch::kDouble), grads64[i], 1e-5, 1e-5))
        << "gradient " << i << " (kernels: " << cpu::KernelIsa() << ")";
  }

  // bfloat16 (bf16 autocast's products): computed in float32 and rounded once, so within
  // bfloat16's half ulp (at most 2^-8 relative) of the float64 formula on the same bf16
  // inputs; the gradients also take in the product's gradient rounded to bfloat16.
  torch::Tensor a16 = a.detach().to(torch::kBFloat16).requires_grad_(true);
  torch::Tensor b16 = b.detach().to(torch::kBFloat16).requires_grad_(true);
  torch::Tensor probe16 = probe.to(torch::kBFloat16);
  torch::Tensor fused16 = SwiGluGate(a16, b16);
  ASSERT_EQ(fused16.scalar_type(), torch::kBFloat16);
  torch::Tensor a64 = a16.detach().to(torch::kDouble).requires_grad_(true);
  torch::Tensor b64 = b16.detach().to(torch::kDouble).requires_grad_(true);
  torch::Tensor plain64 = torch::silu(a64) * b64;
  const double half_ulp = 1.0 / 256;
  EXPECT_TRUE(torch::allclose(fused16.to(torch::kDouble), plain64, half_ulp * 1.01, 1e-30))
      << ((fused16.to(torch::kDouble) - plain64).abs() / plain64.abs()).max().item<double>();
  std::vector<torch::Tensor> grads16 =
      torch::autograd::grad({(fused16 * probe16).sum()}, {a16, b16});
  std::vector<torch::Tensor> want16 =
      torch::autograd::grad({(plain64 * probe16.to(torch::kDouble)).sum()}, {a64, b64});
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(torch::allclose(grads16[i].to(torch::kDouble), want16[i], 2 * half_ulp, 1e-30))
        << "bf16 gradient " << i << " differs by "
        << (grads16[i].to(torch::kDouble) - want16[i]).abs().max().item<double>();
  }
  at::set_num_threads(previous_threads);
}

// The routed layer's scaled scatter-add (routed_rows.h): the single-pass node against
// index_add of r (u1 + u2) + p, forward and every gradient, in float64 over rows of a width that
// is no multiple of any vector width and enough of them for several parallel tasks at 2
// threads, with and without the optional terms; float32 against float64; bfloat16 updates of a
// float32 x (bf16 autocast); and repeated rows, which take the composite path and sum.
TEST(AutogradNodes, ScatterScaledAddMatchesTheCompositeFormula) {
  torch::manual_seed(16);
  const int previous_threads = at::get_num_threads();
  at::set_num_threads(2);
  constexpr int64_t kN = 3000, kM = 1100, kD = 19;
  const torch::Tensor distinct = torch::randperm(kN, torch::kLong).narrow(0, 0, kM);
  const torch::Tensor repeated = torch::randint(0, kN / 10, {kM}, torch::kLong);
  for (const torch::Tensor& rows : {distinct, repeated}) {
    for (const bool full : {false, true}) {  // u2 and p present or not
      std::vector<torch::Tensor> inputs = {torch::randn({kN, kD}, kF64), torch::rand({kM}, kF64),
                                           torch::randn({kM, kD}, kF64)};
      if (full)
        inputs.insert(inputs.end(), {torch::randn({kM, kD}, kF64), torch::randn({kM, kD}, kF64)});
      for (torch::Tensor& t : inputs) t.requires_grad_(true);
      auto fused_of = [&](const std::vector<torch::Tensor>& in) {
        return ScatterScaledAdd(in[0], rows, in[1], in[2], full ? in[3] : torch::Tensor(),
                                full ? in[4] : torch::Tensor());
      };
      auto composite_of = [&](const std::vector<torch::Tensor>& in) {
        const torch::Tensor delta = in[1].unsqueeze(-1) * (full ? in[2] + in[3] : in[2]);
        return in[0].index_add(0, rows, full ? delta + in[4] : delta);
      };
      torch::Tensor plain = composite_of(inputs);
      torch::Tensor fused = fused_of(inputs);
      EXPECT_EQ(fused.grad_fn()->name().find("ScatterScaledAdd") != std::string::npos,
                rows.data_ptr() == distinct.data_ptr());  // repeats take index_add
      const torch::Tensor probe = torch::randn({kN, kD}, kF64);
      ExpectAllClose({fused}, {plain});
      const std::vector<torch::Tensor> grads64 = Grads({plain}, {probe}, inputs);
      ExpectAllClose(Grads({fused}, {probe}, inputs), grads64);

      std::vector<torch::Tensor> inputs32;
      for (const torch::Tensor& t : inputs) {
        inputs32.push_back(t.detach().to(torch::kFloat).requires_grad_(true));
      }
      torch::Tensor fused32 = fused_of(inputs32);
      std::vector<torch::Tensor> grads32 =
          torch::autograd::grad({(fused32 * probe.to(torch::kFloat)).sum()}, inputs32);
      EXPECT_TRUE(torch::allclose(fused32.to(torch::kDouble), plain, 1e-5, 1e-5));
      for (size_t i = 0; i < grads32.size(); ++i) {
        EXPECT_TRUE(torch::allclose(grads32[i].to(torch::kDouble), grads64[i], 1e-4, 1e-4))
            << "gradient " << i << " (kernels: " << cpu::KernelIsa() << ")";
      }
      if (rows.data_ptr() != distinct.data_ptr()) continue;
      // bf16 autocast: bfloat16 updates of a float32 x (and gate) take the node too, and
      // agree with the float64 sum of the same values, each gradient in its input's dtype.
      std::vector<torch::Tensor> mixed, composite_inputs;
      for (size_t i = 0; i < inputs.size(); ++i) {
        const torch::Dtype dtype = i < 2 ? torch::kFloat : torch::kBFloat16;
        mixed.push_back(inputs[i].detach().to(dtype).requires_grad_(true));
        composite_inputs.push_back(mixed.back().detach().to(kF64).requires_grad_(true));
      }
      torch::Tensor fused_mixed = fused_of(mixed);
      EXPECT_NE(fused_mixed.grad_fn()->name().find("ScatterScaledAdd"), std::string::npos);
      torch::Tensor composite_mixed = composite_of(composite_inputs);
      ASSERT_EQ(fused_mixed.scalar_type(), torch::kFloat);
      EXPECT_TRUE(torch::allclose(fused_mixed.to(kF64), composite_mixed, 1e-5, 1e-5));
      std::vector<torch::Tensor> grads_mixed =
          torch::autograd::grad({(fused_mixed * probe.to(torch::kFloat)).sum()}, mixed);
      std::vector<torch::Tensor> grads_composite =
          torch::autograd::grad({(composite_mixed * probe).sum()}, composite_inputs);
      for (size_t i = 0; i < grads_mixed.size(); ++i) {
        ASSERT_EQ(grads_mixed[i].scalar_type(), mixed[i].scalar_type()) << "gradient " << i;
        const double tolerance = i < 2 ? 1e-4 : 1e-2;  // bfloat16: 8 significant bits
        EXPECT_TRUE(torch::allclose(grads_mixed[i].to(torch::kDouble),
                                    grads_composite[i].to(torch::kDouble), tolerance, tolerance))
            << "bf16 updates, gradient " << i;
      }
    }
  }
  at::set_num_threads(previous_threads);
}

// The matmul kernel and the fused one with the same parameters.
std::pair<Attention, Attention> AttentionTwins(AttentionOptions options) {
  options.fused = false;
  Attention manual(options);
  options.fused = true;
  Attention fused(options);
  torch::NoGradGuard no_grad;
  auto source = manual->named_parameters();
  for (auto& item : fused->named_parameters()) item.value().copy_(source[item.key()]);
  return {manual, fused};
}

TEST(FusedAttention, MatchesTheMatmulKernelForEveryMaskShape) {
  torch::manual_seed(3);
  AttentionOptions options{32, 4, 2, 8};
  auto [manual, fused] = AttentionTwins(options);
  torch::Tensor h = torch::randn({2, 24, 32}, torch::kDouble);
  manual->to(torch::kDouble);
  fused->to(torch::kDouble);
  Rope rope(8, 64, 10000.0, torch::kCPU, torch::kDouble);
  // Dense causal over 0..T-1.
  EXPECT_TRUE(torch::allclose(fused->forward(h, {}, {}, rope), manual->forward(h, {}, {}, rope),
                              1e-10, 1e-10));
  // Routed: selected positions in order, the last rows padding (threshold rule).
  torch::Tensor positions = torch::arange(0, 48, 2, torch::kLong).repeat({2, 1});  // (2, 24)
  torch::Tensor valid = torch::ones({2, 24}, torch::kBool);
  valid.index_put_({1, torch::indexing::Slice(18, 24)}, false);
  EXPECT_TRUE(torch::allclose(fused->forward(h, positions, valid, rope),
                              manual->forward(h, positions, valid, rope), 1e-10, 1e-10));
  // Selected queries over the full sequence.
  torch::Tensor hkv = torch::randn({2, 48, 32}, torch::kDouble);
  EXPECT_TRUE(torch::allclose(fused->ForwardFullKv(h, positions, hkv, rope),
                              manual->ForwardFullKv(h, positions, hkv, rope), 1e-10, 1e-10));
}

// Counts the forward calls of xmod's CPU attention kernel while alive (the kernel records
// itself as "xmod::cpu::FlashAttentionForward").
class FlashForwardCounter {
 public:
  FlashForwardCounter() {
    calls_ = 0;
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&OnStart));
  }
  ~FlashForwardCounter() { at::removeCallback(handle_); }
  int calls() const { return calls_; }

 private:
  static std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
    if (std::strcmp(fn.name(), "xmod::cpu::FlashAttentionForward") == 0) ++calls_;
    return nullptr;
  }
  static inline std::atomic<int> calls_{0};
  at::CallbackHandle handle_;
};

// Plain causal attention takes xmod's kernel in float32 and under bf16 autocast (its bfloat16
// kernel where the processor has AMX, else on float32 copies; the output bfloat16, as SDPA's),
// and both stay close to the matmul kernel.
TEST(FusedAttention, PlainCausalTakesTheCpuKernelInFloat32AndUnderBf16Autocast) {
  torch::manual_seed(6);
  AttentionOptions options{64, 4, 2, 16};
  auto [manual, fused] = AttentionTwins(options);
  Rope rope(16, 128, 10000.0, torch::kCPU, torch::kFloat);
  const torch::Tensor h = torch::randn({2, 70, 64});
  const torch::Tensor want = manual->forward(h, {}, {}, rope);
  {
    FlashForwardCounter counter;
    EXPECT_TRUE(torch::allclose(fused->forward(h, {}, {}, rope), want, 1e-5, 1e-5));
    EXPECT_EQ(counter.calls(), 1);
  }
  FlashForwardCounter counter;
  AutocastGuard autocast(torch::kCPU, {true, torch::kBFloat16});
  const torch::Tensor bf16 = fused->forward(h, {}, {}, rope);
  EXPECT_EQ(counter.calls(), 1);
  EXPECT_EQ(bf16.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::allclose(bf16.to(torch::kFloat), want, 5e-2, 5e-2))
      << (bf16.to(torch::kFloat) - want).abs().max().item<double>();
  bf16.to(torch::kFloat).sum().backward();
  for (const torch::Tensor& p : fused->parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_GT(p.grad().abs().sum().item<double>(), 0);
  }
}

// Qwen3's QK-Norm: each query and key head is RMS-normalised before RoPE, so scaling W_q and
// W_k leaves the attention unchanged (it would sharpen the softmax without the norm), in
// both forward paths; the gains are one (E) vector each.
TEST(QkNorm, NormalisesQueryAndKeyHeadsBeforeRope) {
  torch::manual_seed(4);
  torch::Tensor h = torch::randn({2, 12, 32}, torch::kDouble);
  torch::Tensor hkv = torch::randn({2, 24, 32}, torch::kDouble);
  torch::Tensor positions = torch::arange(0, 24, 2, torch::kLong).repeat({2, 1});  // (2, 12)
  Rope rope(8, 64, 1e6, torch::kCPU, torch::kDouble);
  for (bool qk_norm : {true, false}) {
    SCOPED_TRACE(qk_norm);
    AttentionOptions options{32, 4, 2, 8};
    options.qk_norm = qk_norm;
    Attention attn(options);
    attn->to(torch::kDouble);
    EXPECT_EQ(attn->named_parameters().contains("q_norm.weight"), qk_norm);
    if (qk_norm) EXPECT_EQ(attn->k_norm->weight.numel(), 8);
    const torch::Tensor before = attn->forward(h, {}, {}, rope);
    const torch::Tensor before_kv = attn->ForwardFullKv(h, positions, hkv, rope);
    {
      torch::NoGradGuard no_grad;
      attn->wq->weight.mul_(3.0);
      attn->wk->weight.mul_(0.5);
    }
    // RMSNorm's eps (1e-6) makes the invariance hold to ~1e-5, not exactly.
    EXPECT_EQ(torch::allclose(attn->forward(h, {}, {}, rope), before, 1e-4, 1e-4), qk_norm);
    EXPECT_EQ(torch::allclose(attn->ForwardFullKv(h, positions, hkv, rope), before_kv, 1e-4, 1e-4),
              qk_norm);
  }
}

TEST(FusedAttention, WholeModelLossesAndGradientsMatch) {
  torch::set_num_threads(1);
  torch::Tensor tokens = torch::randint(0, 256, {2, 33}, torch::kLong);
  for (auto arch : {xmod::v1::DENSE, xmod::v1::XMOD, xmod::v1::MOD}) {
    Transformer manual = Build(TinySpec(arch, 4, 1), 32, {});
    Transformer fused = Build(TinySpec(arch, 4, 1), 32, {/*fused_attention=*/true, false});
    ExpectSamePass(ForwardBackward(manual, tokens, RoutingMode::kTopK),
                   ForwardBackward(fused, tokens, RoutingMode::kTopK), 1e-5);
  }
}

class CheckpointingTest : public ::testing::TestWithParam<xmod::v1::Architecture> {};

TEST_P(CheckpointingTest, SameLossesAndGradientsAsKeepingActivations) {
  torch::set_num_threads(1);
  torch::manual_seed(5);
  torch::Tensor tokens = torch::randint(0, 256, {3, 33}, torch::kLong);
  const double stride = GetParam() == xmod::v1::XMOD ? 2 : 1;
  Transformer kept = Build(TinySpec(GetParam(), 4, stride), 32, {});
  Transformer recomputed =
      Build(TinySpec(GetParam(), 4, stride), 32, {false, /*checkpointing=*/true});
  const Pass a = ForwardBackward(kept, tokens, RoutingMode::kTopK);
  const Pass b = ForwardBackward(recomputed, tokens, RoutingMode::kTopK);
  ExpectSamePass(a, b, 1e-6);
  // Not vacuous: the router and ς got gradients through the recomputation.
  double router_grad = 0;
  for (const auto& item : recomputed->named_parameters()) {
    if (item.key().find("router") != std::string::npos) {
      router_grad += item.value().grad().abs().sum().item<double>();
    }
  }
  if (GetParam() != xmod::v1::DENSE) EXPECT_GT(router_grad, 0);
  // Evaluation (no grad, routing trace) takes the plain path.
  torch::NoGradGuard no_grad;
  RoutingTrace trace;
  recomputed->Logits(tokens.narrow(1, 0, 32), RoutingMode::kThreshold, &trace);
}

INSTANTIATE_TEST_SUITE_P(Archs, CheckpointingTest,
                         ::testing::Values(xmod::v1::DENSE, xmod::v1::XMOD, xmod::v1::MOD));

// Every layer kind under bf16 autocast (the MoE layer sums bf16 expert outputs into the fp32
// stream).
class Bf16AutocastTest : public ::testing::TestWithParam<xmod::v1::Architecture> {};

TEST_P(Bf16AutocastTest, LossCloseToFp32AndMasterWeightsStayFp32) {
  torch::set_num_threads(1);
  torch::Tensor tokens = torch::randint(0, 256, {2, 33}, torch::kLong);
  const xmod::v1::Architecture arch = GetParam();
  const bool routed = arch == xmod::v1::XMOD || arch == xmod::v1::MOD;
  Transformer model = Build(TinySpec(arch, routed ? 4 : 0, arch == xmod::v1::XMOD ? 1 : 0), 32, {});
  const Pass fp32 = ForwardBackward(model, tokens, RoutingMode::kTopK);
  Pass bf16;
  {
    AutocastGuard autocast(torch::kCPU, {true, torch::kBFloat16});
    EXPECT_TRUE(CurrentAutocast(torch::kCPU).enabled);
    model->zero_grad();
    ModelOutput out =
        model->forward(tokens.narrow(1, 0, 32), tokens.narrow(1, 1, 32), RoutingMode::kTopK);
    EXPECT_EQ(out.loss.scalar_type(), torch::kFloat);  // cross-entropy runs in fp32
    (out.loss + out.aux_loss).backward();
    bf16.loss = out.loss.item<double>();
  }
  EXPECT_FALSE(CurrentAutocast(torch::kCPU).enabled);
  EXPECT_NEAR(bf16.loss, fp32.loss, 0.05);
  EXPECT_NE(bf16.loss, fp32.loss);  // the products really ran in bfloat16
  for (const torch::Tensor& p : model->parameters()) {
    EXPECT_EQ(p.scalar_type(), torch::kFloat);
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().scalar_type(), torch::kFloat);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, Bf16AutocastTest,
                         ::testing::Values(xmod::v1::DENSE, xmod::v1::XMOD, xmod::v1::MOD,
                                           xmod::v1::MOE));

// training.precision "auto" follows the device: bf16 on a GPU with bfloat16 tensor cores (sm_80
// and newer) at any width, on a CPU that multiplies bfloat16 natively for d_model >=
// kMinBf16AutoWidth, fp32 otherwise; "fp32" and "bf16" are what they say on every device and
// width.
TEST(Bf16Autocast, PrecisionAutoFollowsTheDevice) {
  const torch::Device cpu(torch::kCPU), cuda(torch::kCUDA, 0);
  const auto caps = at::cpu::get_cpu_capabilities();
  const bool native = caps.at("avx512_bf16").toBool() || caps.at("amx_bf16").toBool();
  EXPECT_EQ(CpuHasNativeBf16(), native);
  const int64_t wide = kMinBf16AutoWidth, narrow = kMinBf16AutoWidth / 2;
  EXPECT_EQ(AutocastForPrecision("auto", cpu, wide).enabled, native);
  EXPECT_FALSE(AutocastForPrecision("auto", cpu, narrow).enabled);
  // The GPU's generation decides, not the width: Ampere and Hopper yes, Volta and Turing no.
  for (int64_t width : {narrow, wide}) {
    EXPECT_TRUE(AutocastForPrecision("auto", cuda, Bf16Support{false, 8}, width).enabled);
    EXPECT_TRUE(AutocastForPrecision("auto", cuda, Bf16Support{false, 9}, width).enabled);
    EXPECT_FALSE(AutocastForPrecision("auto", cuda, Bf16Support{false, 7}, width).enabled);
  }
  EXPECT_FALSE(AutocastForPrecision("auto", cpu, Bf16Support{false, 9}, wide).enabled);
  // This machine's GPU, if any, as the runtime reports it (none: fp32).
  EXPECT_EQ(AutocastForPrecision("auto", cuda, wide).enabled,
            CudaComputeCapabilityMajor(cuda) >= kMinBf16CudaCapability);
  for (const torch::Device& device : {cpu, cuda}) {
    for (int64_t width : {narrow, wide}) {
      EXPECT_FALSE(AutocastForPrecision("fp32", device, width).enabled);
      EXPECT_TRUE(AutocastForPrecision("bf16", device, width).enabled);
      EXPECT_EQ(AutocastForPrecision("bf16", device, width).dtype, torch::kBFloat16);
    }
  }
}

}  // namespace
}  // namespace xmod
