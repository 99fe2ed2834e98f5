// Thread budget: torch, OpenMP and OpenBLAS set to the same count.
#include "model/train/threads.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>

#include "trainer_contract/trainer_env.h"

namespace xmod {

bool ApplyThreadBudget(int threads) {
  const std::string count = std::to_string(threads);
  for (const char* name : {kEnvOmpNumThreads, kEnvOpenblasNumThreads, kEnvMklNumThreads}) {
    ::setenv(name, count.c_str(), /*overwrite=*/1);
  }
  torch::set_num_threads(threads);
  // OpenBLAS reads its environment when it is loaded, before main; set it directly.
  using SetThreads = void (*)(int);
  auto set_openblas =
      reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set_openblas != nullptr) set_openblas(threads);
  return set_openblas != nullptr;
}

}  // namespace xmod
