// Test helpers: ModelSpec builders shared by the accounting tests.
#ifndef XMOD_MODEL_ACCOUNTING_TEST_SPECS_H_
#define XMOD_MODEL_ACCOUNTING_TEST_SPECS_H_

#include <string>

#include "xmod/v1/spec.pb.h"

namespace xmod {
namespace testing_specs {

// A model on preset `backbone`; k and a are left unset (0) when passed as 0.
inline xmod::v1::ModelSpec Spec(xmod::v1::Architecture arch, const std::string& backbone, int k = 0,
                                double a = 0) {
  xmod::v1::ModelSpec model;
  model.set_arch(arch);
  model.mutable_backbone()->set_name(backbone);
  model.set_k(k);
  model.set_a(a);
  return model;
}

inline xmod::v1::ModelSpec MoE(const std::string& backbone, int active, int total, int shared) {
  xmod::v1::ModelSpec model = Spec(xmod::v1::MOE, backbone);
  model.mutable_moe()->set_active_experts(active);
  model.mutable_moe()->set_total_experts(total);
  model.mutable_moe()->set_shared_experts(shared);
  return model;
}

}  // namespace testing_specs
}  // namespace xmod

#endif  // XMOD_MODEL_ACCOUNTING_TEST_SPECS_H_
