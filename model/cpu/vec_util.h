// Helpers on at::vec::Vectorized<T> that the per-instruction-set loops share: loads and stores
// from arrays of T, or of bfloat16 widened to float32 (exact) and rounded back (to nearest
// even), through which the loops that take bfloat16 tensors compute in float32; and the max and
// sum of a vector's lanes. Included only by the *_isa.cc files; everything here lives in the
// CPU_CAPABILITY namespace of the variant that includes it.
#ifndef XMOD_MODEL_CPU_VEC_UTIL_H_
#define XMOD_MODEL_CPU_VEC_UTIL_H_

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>

#include <tuple>

namespace xmod::cpu::internal {
inline namespace CPU_CAPABILITY {
namespace vec_util {

template <typename T>
at::vec::Vectorized<T> LoadAs(const T* p) {
  return at::vec::Vectorized<T>::loadu(p);
}
inline at::vec::Vectorized<float> LoadAs(const c10::BFloat16* p) {
  return std::get<0>(at::vec::convert_bfloat16_float(
      at::vec::Vectorized<c10::BFloat16>::loadu(p, at::vec::Vectorized<float>::size())));
}

template <typename T>
void StoreAs(const at::vec::Vectorized<T>& v, T* p) {
  v.store(p);
}
inline void StoreAs(const at::vec::Vectorized<float>& v, c10::BFloat16* p) {
  at::vec::convert_float_bfloat16(v, v).store(p, at::vec::Vectorized<float>::size());
}

template <typename T>
T LaneMax(const at::vec::Vectorized<T>& v) {
  return at::vec::vec_reduce_all<T>(
      [](const at::vec::Vectorized<T>& a, const at::vec::Vectorized<T>& b) {
        return at::vec::maximum(a, b);
      },
      v);
}

template <typename T>
T LaneSum(const at::vec::Vectorized<T>& v) {
  return at::vec::vec_reduce_all<T>(
      [](const at::vec::Vectorized<T>& a, const at::vec::Vectorized<T>& b) { return a + b; }, v);
}

}  // namespace vec_util
}  // namespace CPU_CAPABILITY
}  // namespace xmod::cpu::internal

#endif  // XMOD_MODEL_CPU_VEC_UTIL_H_
