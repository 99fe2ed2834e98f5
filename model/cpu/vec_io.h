// Loads and stores of at::vec::Vectorized<T> from arrays of T, or of bfloat16 widened to float32
// (exact) and rounded back (to nearest even): the per-instruction-set loops that take bfloat16
// tensors compute in float32 through these. Included only by the *_isa.cc files; everything
// here lives in the CPU_CAPABILITY namespace of the variant that includes it.
#ifndef XMOD_MODEL_CPU_VEC_IO_H_
#define XMOD_MODEL_CPU_VEC_IO_H_

#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>

#include <tuple>

namespace xmod::cpu::internal {
inline namespace CPU_CAPABILITY {
namespace vec_io {

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

}  // namespace vec_io
}  // namespace CPU_CAPABILITY
}  // namespace xmod::cpu::internal

#endif  // XMOD_MODEL_CPU_VEC_IO_H_
