// CPython's seeding of MT19937 and its random(): see python_random.h.
#include "model/eval/python_random.h"

#include <algorithm>
#include <array>
#include <sstream>
#include <vector>

namespace xmod {
namespace {

constexpr size_t kN = std::mt19937::state_size;  // 624

// MT19937's init_by_array (Matsumoto and Nishimura, mt19937ar.c), as CPython calls it.
std::array<uint32_t, kN> InitByArray(const std::vector<uint32_t>& key) {
  std::array<uint32_t, kN> mt;
  mt[0] = 19650218u;  // init_genrand(19650218)
  for (size_t i = 1; i < kN; ++i) {
    mt[i] = 1812433253u * (mt[i - 1] ^ (mt[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
  size_t i = 1, j = 0;
  for (size_t k = std::max(kN, key.size()); k > 0; --k) {
    mt[i] =
        (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525u)) + key[j] + static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt[0] = mt[kN - 1];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (size_t k = kN - 1; k > 0; --k) {
    mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt[0] = mt[kN - 1];
      i = 1;
    }
  }
  mt[0] = 0x80000000u;  // a non-zero initial state
  return mt;
}

}  // namespace

PythonRandom::PythonRandom(uint64_t seed) {
  std::vector<uint32_t> key = {static_cast<uint32_t>(seed)};
  if (seed >> 32 != 0) key.push_back(static_cast<uint32_t>(seed >> 32));
  // A mersenne_twister_engine's text form is its n state words, oldest first, and reading
  // it back leaves the engine about to twist them: CPython's state after seeding (mti = N).
  std::ostringstream state;
  for (uint32_t word : InitByArray(key)) state << word << ' ';
  std::istringstream(state.str()) >> engine_;
}

double PythonRandom::Random() {
  const uint32_t a = static_cast<uint32_t>(engine_()) >> 5;
  const uint32_t b = static_cast<uint32_t>(engine_()) >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

}  // namespace xmod
