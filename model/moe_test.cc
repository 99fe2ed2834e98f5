// MoE dispatch (sort by expert, one call per expert on its slice, index_add back) against a
// dense loop that runs every expert on every token and weights by a (N, E) gate matrix;
// load counting and the aux-loss-free bias update.
#include "model/moe.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace xmod {
namespace {

MoEOptions Options() {
  MoEOptions o;
  o.d_model = 16;
  o.expert_dim = 8;
  o.total_experts = 6;
  o.active_experts = 2;
  o.shared_experts = 1;
  o.bias_update_rate = 0.01;
  return o;
}

TEST(MoE, DispatchMatchesDenseLoopOverExperts) {
  torch::manual_seed(11);
  torch::set_num_threads(1);
  MoE moe(Options());
  moe->to(torch::kFloat64);
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  torch::Tensor x = torch::randn({3, 10, 16}, f64).requires_grad_(true);
  torch::Tensor probe = torch::randn({3, 10, 16}, f64);
  torch::Tensor balance;
  torch::Tensor out = moe->forward(x, &balance);
  (out * probe).sum().backward();
  torch::Tensor x_grad = x.grad().clone();
  torch::Tensor w1_grad = moe->experts[2]->w1->weight.grad().clone();
  torch::Tensor router_grad = moe->router->weight.grad().clone();

  moe->zero_grad();
  x.grad().zero_();
  torch::Tensor flat = x.reshape({30, 16});
  MoERouting routing = moe->Route(flat);
  // Dense gate matrix: gates scattered into (N, E).
  torch::Tensor dense_gates = torch::zeros({30, 6}, f64).scatter(1, routing.experts, routing.gates);
  torch::Tensor ref = moe->shared->forward(flat);
  for (int e = 0; e < 6; ++e) {
    ref = ref + dense_gates.select(1, e).unsqueeze(1) * moe->experts[e]->forward(flat);
  }
  ref = ref.view({3, 10, 16});
  (ref * probe).sum().backward();

  EXPECT_TRUE(torch::allclose(out, ref, 1e-10, 1e-10));
  EXPECT_TRUE(torch::allclose(x_grad, x.grad(), 1e-10, 1e-10));
  EXPECT_TRUE(torch::allclose(w1_grad, moe->experts[2]->w1->weight.grad(), 1e-10, 1e-10));
  EXPECT_TRUE(torch::allclose(router_grad, moe->router->weight.grad(), 1e-10, 1e-10));
  // Every token reaches exactly `active` distinct experts; gates sum to one.
  EXPECT_TRUE(torch::equal(dense_gates.gt(0).sum(1), torch::full({30}, 2L)));
  EXPECT_TRUE(torch::allclose(routing.gates.sum(1), torch::ones({30}, f64)));
  // Balance loss E * sum f_e P_e is 1 for a perfectly uniform router, positive otherwise.
  EXPECT_GT(balance.item<double>(), 0.0);
}

TEST(MoE, BiasSteersSelectionAndUpdatesTowardBalance) {
  torch::manual_seed(12);
  MoE moe(Options());
  moe->train();
  torch::Tensor x = torch::randn({2, 16, 16});
  {
    torch::NoGradGuard no_grad;
    moe->expert_bias.zero_();
    moe->expert_bias[4] = 10.0;  // dominates every softmax probability
  }
  MoERouting routing = moe->Route(x.reshape({32, 16}));
  EXPECT_TRUE(routing.experts.eq(4).any(1).all().item<bool>());
  moe->forward(x);
  EXPECT_EQ(moe->load.sum().item<double>(), 64.0);  // 32 tokens x 2 experts
  EXPECT_EQ(moe->load[4].item<double>(), 32.0);
  moe->UpdateBias();
  // The overloaded expert's bias goes down by the rate, an underloaded one's up.
  EXPECT_NEAR(moe->expert_bias[4].item<double>(), 10.0 - 0.01, 1e-6);
  EXPECT_EQ(moe->load.sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace xmod
