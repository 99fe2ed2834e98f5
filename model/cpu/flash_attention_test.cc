// model/cpu/flash_attention.h against the textbook formula: softmax(scale q k^T + causal mask) v
// with the key/value heads repeated per query head, its log-sum-exp, and the gradients autograd
// takes through it, in float64 (and float32 against float64) over shapes that cover one tile,
// several with a partial last one, a width that is no multiple of any tile, and rows that lie
// a fused q/k/v product apart; one and two threads agree bit for bit. The bfloat16 kernel
// (AMX) is held to the formula in float64 on its operands' values.
#include "model/cpu/flash_attention.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <tuple>
#include <vector>

#include "model/cpu/kernels.h"

namespace xmod::cpu {
namespace {

struct Shape {
  int64_t b, t, h, g, e;
};

// q (B, T, H, E), k, v (B, T, G, E) -> {out (B, T, H, E), lse (B, H, T)}.
std::pair<torch::Tensor, torch::Tensor> Reference(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v, double scale) {
  const int64_t t = q.size(1), per_group = q.size(2) / k.size(2);
  torch::Tensor qh = q.permute({0, 2, 1, 3});                                  // (B, H, T, E)
  torch::Tensor kh = k.repeat_interleave(per_group, 2).permute({0, 2, 1, 3});  // (B, H, T, E)
  torch::Tensor vh = v.repeat_interleave(per_group, 2).permute({0, 2, 1, 3});
  torch::Tensor blocked = torch::ones({t, t}, torch::kBool).triu(1);
  torch::Tensor scores =
      (torch::matmul(qh, kh.transpose(-1, -2)) * scale).masked_fill(blocked, -INFINITY);
  torch::Tensor out = torch::matmul(torch::softmax(scores, -1), vh).permute({0, 2, 1, 3});
  return {out, scores.logsumexp(-1)};
}

// q, k, v as views of one fused (B, T, (H + 2G) E) product, as the model's projections are.
std::vector<torch::Tensor> FusedViews(const Shape& s, torch::Dtype dtype) {
  torch::Tensor fused = torch::randn({s.b, s.t, (s.h + 2 * s.g) * s.e}, torch::dtype(dtype));
  std::vector<torch::Tensor> parts = fused.split_with_sizes({s.h * s.e, s.g * s.e, s.g * s.e}, -1);
  return {parts[0].view({s.b, s.t, s.h, s.e}), parts[1].view({s.b, s.t, s.g, s.e}),
          parts[2].view({s.b, s.t, s.g, s.e})};
}

struct Result {
  torch::Tensor out, lse, dq, dk, dv;
};

Result Flash(const std::vector<torch::Tensor>& qkv, const torch::Tensor& dout, double scale) {
  Result r;
  std::tie(r.out, r.lse) = FlashAttentionForward(qkv[0], qkv[1], qkv[2], scale);
  std::tie(r.dq, r.dk, r.dv) =
      FlashAttentionBackward(dout, qkv[0], qkv[1], qkv[2], r.out, r.lse, scale);
  return r;
}

Result Textbook(const std::vector<torch::Tensor>& qkv, const torch::Tensor& dout, double scale) {
  std::vector<torch::Tensor> inputs;
  for (const torch::Tensor& x : qkv) inputs.push_back(x.detach().clone().requires_grad_(true));
  Result r;
  std::tie(r.out, r.lse) = Reference(inputs[0], inputs[1], inputs[2], scale);
  std::vector<torch::Tensor> grads = torch::autograd::grad({(r.out * dout).sum()}, inputs);
  r.dq = grads[0];
  r.dk = grads[1];
  r.dv = grads[2];
  r.out = r.out.detach();
  r.lse = r.lse.detach();
  return r;
}

// Every result of got against want's, in float64 and of equal shape: check(name, a, b).
template <typename Check>
void CompareResults(const Result& got, const Result& want, Check check) {
  const std::vector<std::pair<const char*, std::pair<torch::Tensor, torch::Tensor>>> pairs = {
      {"out", {got.out, want.out}},
      {"lse", {got.lse, want.lse}},
      {"dq", {got.dq, want.dq}},
      {"dk", {got.dk, want.dk}},
      {"dv", {got.dv, want.dv}}};
  for (const auto& [name, p] : pairs) {
    const torch::Tensor a = p.first.to(torch::kDouble), b = p.second.to(torch::kDouble);
    ASSERT_EQ(a.sizes(), b.sizes()) << name;
    check(name, a, b);
  }
}

void ExpectClose(const Result& got, const Result& want, double tolerance) {
  CompareResults(got, want, [&](const char* name, const torch::Tensor& a, const torch::Tensor& b) {
    EXPECT_TRUE(torch::allclose(a, b, tolerance, tolerance))
        << name << " differs by " << (a - b).abs().max().item<double>() << " (kernels "
        << KernelIsa() << ")";
  });
}

// Each of got's tensors within `fraction` of the largest entry of want's (bfloat16 products
// round every operand to 8 significant bits, so the bound is relative to the tensor's scale).
void ExpectWithinFractionOfScale(const Result& got, const Result& want, double fraction) {
  CompareResults(got, want, [&](const char* name, const torch::Tensor& a, const torch::Tensor& b) {
    const double error = (a - b).abs().max().item<double>(), scale = b.abs().max().item<double>();
    EXPECT_LE(error, fraction * scale) << name << ": largest entry " << scale;
  });
}

class FlashAttentionTest : public ::testing::TestWithParam<Shape> {};

TEST_P(FlashAttentionTest, MatchesTheTextbookFormulaInFloat64AndFloat32) {
  const Shape s = GetParam();
  torch::manual_seed(11);
  const std::vector<torch::Tensor> qkv = FusedViews(s, torch::kDouble);
  ASSERT_TRUE(FlashAttentionSupports(qkv[0], qkv[1], qkv[2]));
  const torch::Tensor dout = torch::randn({s.b, s.t, s.h, s.e}, torch::kDouble);
  const double scale = 0.37;
  const Result want = Textbook(qkv, dout, scale);
  ExpectClose(Flash(qkv, dout, scale), want, 1e-10);

  std::vector<torch::Tensor> qkv32;
  for (const torch::Tensor& x : qkv) qkv32.push_back(x.to(torch::kFloat));
  if (FlashAttentionSupports(qkv32[0], qkv32[1], qkv32[2])) {
    ExpectClose(Flash(qkv32, dout.to(torch::kFloat), scale), want, 2e-5);
  }
}

// The bf16 autocast kernel: bfloat16 operands, products in AMX tiles. Against the textbook
// formula in float64 on the same values, what is left is the rounding of P and dS for their
// products and of the results to bfloat16 (2^-8 relative each), summed over at most T keys:
// within 1% of each result's largest entry (the largest error seen is 0.5%).
TEST_P(FlashAttentionTest, Bf16MatchesTheTextbookFormulaToBfloat16Rounding) {
  if (!FlashAttentionHasBf16Products())
    GTEST_SKIP() << "no AMX bfloat16 tiles (" << KernelIsa() << ")";
  const Shape s = GetParam();
  torch::manual_seed(13);
  const std::vector<torch::Tensor> qkv = FusedViews(s, torch::kBFloat16);
  ASSERT_TRUE(FlashAttentionSupports(qkv[0], qkv[1], qkv[2]));
  const torch::Tensor dout = torch::randn({s.b, s.t, s.h, s.e}, torch::kBFloat16);
  std::vector<torch::Tensor> exact;
  for (const torch::Tensor& x : qkv) exact.push_back(x.to(torch::kDouble));
  const double scale = 0.37;
  const Result got = Flash(qkv, dout, scale);
  for (const torch::Tensor& x : {got.out, got.dq, got.dk, got.dv}) {
    EXPECT_EQ(x.scalar_type(), torch::kBFloat16);
  }
  EXPECT_EQ(got.lse.scalar_type(), torch::kFloat32);
  ExpectWithinFractionOfScale(got, Textbook(exact, dout.to(torch::kDouble), scale), 1e-2);
}

// Flash's results with 1 thread and with 2.
std::pair<Result, Result> OnOneAndTwoThreads(const std::vector<torch::Tensor>& qkv,
                                             const torch::Tensor& dout) {
  const int previous = at::get_num_threads();
  at::set_num_threads(1);
  Result one = Flash(qkv, dout, 1.0);
  at::set_num_threads(2);
  Result two = Flash(qkv, dout, 1.0);
  at::set_num_threads(previous);
  return {one, two};
}

TEST_P(FlashAttentionTest, OneAndTwoThreadsAgreeExactly) {
  const Shape s = GetParam();
  torch::manual_seed(12);
  const std::vector<torch::Tensor> qkv = FusedViews(s, torch::kDouble);
  const torch::Tensor dout = torch::randn({s.b, s.t, s.h, s.e}, torch::kDouble);
  const auto [one, two] = OnOneAndTwoThreads(qkv, dout);
  ExpectClose(one, two, 0.0);
  if (FlashAttentionHasBf16Products()) {
    std::vector<torch::Tensor> qkv16;
    for (const torch::Tensor& x : qkv) qkv16.push_back(x.to(torch::kBFloat16));
    const auto [one16, two16] = OnOneAndTwoThreads(qkv16, dout.to(torch::kBFloat16));
    ExpectClose(one16, two16, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttentionTest,
                         ::testing::Values(Shape{1, 64, 2, 2, 32},    // one tile, no GQA
                                           Shape{2, 150, 4, 2, 16},   // 3 tiles, the last partial
                                           Shape{3, 7, 6, 3, 16},     // fewer rows than a vector
                                           Shape{2, 200, 8, 4, 32}),  // the bench's head layout
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           const Shape& s = info.param;
                           return "B" + std::to_string(s.b) + "T" + std::to_string(s.t) + "H" +
                                  std::to_string(s.h) + "G" + std::to_string(s.g) + "E" +
                                  std::to_string(s.e);
                         });

TEST(FlashAttention, RefusesWhatItCannotTake) {
  const torch::Tensor q = torch::randn({1, 8, 2, 16}), k = torch::randn({1, 8, 1, 16});
  EXPECT_TRUE(FlashAttentionSupports(q, k, k));
  const torch::Tensor q16 = q.to(torch::kBFloat16), k16 = k.to(torch::kBFloat16);
  EXPECT_EQ(FlashAttentionSupports(q16, k16, k16), FlashAttentionHasBf16Products());  // AMX
  EXPECT_FALSE(FlashAttentionSupports(q16, k, k16));                 // bfloat16 with float
  EXPECT_FALSE(FlashAttentionSupports(q, k.to(torch::kDouble), k));  // mixed dtypes
  EXPECT_FALSE(FlashAttentionSupports(q, torch::randn({1, 9, 1, 16}), torch::randn({1, 9, 1, 16})));
  const torch::Tensor k2 = torch::randn({1, 8, 2, 16});
  EXPECT_FALSE(FlashAttentionSupports(torch::randn({1, 8, 3, 16}), k2, k2));  // 2 kv heads for 3
  EXPECT_FALSE(FlashAttentionSupports(torch::randn({1, 8, 2, 2}), torch::randn({1, 8, 1, 2}),
                                      torch::randn({1, 8, 1, 2})));  // E below a vector
  EXPECT_FALSE(FlashAttentionSupports(q.transpose(1, 2), k, k));     // heads not contiguous
  EXPECT_THROW(FlashAttentionForward(q, k.to(torch::kDouble), k, 1.0), c10::Error);
  if (FlashAttentionHasBf16Products()) {  // the log-sum-exp of bfloat16 operands is float32
    auto [out16, lse16] = FlashAttentionForward(q16, k16, k16, 1.0);
    EXPECT_THROW(
        FlashAttentionBackward(out16, q16, k16, k16, out16, lse16.to(torch::kBFloat16), 1.0),
        c10::Error);
  }
}

}  // namespace
}  // namespace xmod::cpu
