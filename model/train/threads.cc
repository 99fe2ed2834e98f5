// Thread budget: torch's intra-op threads and the OpenMP/MKL environment set to one count.
#include "model/train/threads.h"

#include <torch/torch.h>

#include <cstdlib>
#include <string>

#include "trainer_contract/trainer_env.h"

namespace xmod {

void ApplyThreadBudget(int threads) {
  const std::string count = std::to_string(threads);
  for (const char* name : {kEnvOmpNumThreads, kEnvMklNumThreads}) {
    ::setenv(name, count.c_str(), /*overwrite=*/1);
  }
  torch::set_num_threads(threads);
}

}  // namespace xmod
