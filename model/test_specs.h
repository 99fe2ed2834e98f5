// Model specs on the tiny-test backbone (d 32, 6 layers, 4 heads, 2 KV heads, vocabulary
// 256), shared by the model's tests.
#ifndef XMOD_MODEL_TEST_SPECS_H_
#define XMOD_MODEL_TEST_SPECS_H_

#include "xmod/v1/spec.pb.h"

namespace xmod {

// `arch` at token sparsity k and anchor stride a; MoE: 2 of 8 routed experts + 1 shared.
inline xmod::v1::ModelSpec TinySpec(xmod::v1::Architecture arch, int k = 0, double a = 0) {
  xmod::v1::ModelSpec spec;
  spec.set_arch(arch);
  spec.mutable_backbone()->set_name("tiny-test");
  spec.set_k(k);
  spec.set_a(a);
  if (arch == xmod::v1::MOE) {
    spec.mutable_moe()->set_active_experts(2);
    spec.mutable_moe()->set_total_experts(8);
    spec.mutable_moe()->set_shared_experts(1);
  }
  return spec;
}

}  // namespace xmod

#endif  // XMOD_MODEL_TEST_SPECS_H_
