// CPU flash attention: see flash_attention.h. This file picks the instruction-set variant (the
// one kernels.cc runs) and checks the operands; both entry points record themselves in profiles.
#include "model/cpu/flash_attention.h"

#include <ATen/native/CPUBlas.h>
#include <ATen/record_function.h>

#include <string>
#include <vector>

#include "model/cpu/kernels.h"

namespace xmod::cpu {
namespace internal {
namespace DEFAULT {
extern const FlashAttentionTable kFlashAttentionTable;
}
#if defined(__x86_64__)  // the variants model/torch_targets.cmake builds on x86-64
namespace AVX2 {
extern const FlashAttentionTable kFlashAttentionTable;
}
namespace AVX512 {
extern const FlashAttentionTable kFlashAttentionTable;
}
#endif
}  // namespace internal

namespace {

const internal::FlashAttentionTable& Table() {
  static const internal::FlashAttentionTable* const table = [] {
#if defined(__x86_64__)
    const std::string isa = KernelIsa();
    if (isa == "AVX512") return &internal::AVX512::kFlashAttentionTable;
    if (isa == "AVX2") return &internal::AVX2::kFlashAttentionTable;
#endif
    return &internal::DEFAULT::kFlashAttentionTable;
  }();
  return *table;
}

// (B, T, heads, E) with each head's E values contiguous and the heads E apart.
bool HeadsContiguous(const torch::Tensor& x) {
  return x.dim() == 4 && x.stride(3) == 1 && x.stride(2) == x.size(3);
}

internal::FlashGeometry Geometry(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, double scale) {
  internal::FlashGeometry s;
  s.b = q.size(0);
  s.t = q.size(1);
  s.h = q.size(2);
  s.g = k.size(2);
  s.e = q.size(3);
  s.q_batch = q.stride(0);
  s.q_row = q.stride(1);
  s.k_batch = k.stride(0);
  s.k_row = k.stride(1);
  s.v_batch = v.stride(0);
  s.v_row = v.stride(1);
  s.scale = scale;
  return s;
}

// CPU tensors all of q's dtype, which the kernel takes: float, double, or bfloat16 where the
// processor has its AMX kernel.
bool KernelDtype(std::initializer_list<torch::Tensor> tensors) {
  const torch::Tensor& first = *tensors.begin();
  if (!first.defined() || first.scalar_type() != torch::kBFloat16) return SupportsFused(tensors);
  return SupportsBf16(tensors) && FlashAttentionHasBf16Products();
}

// The log-sum-exp's dtype for operands of `dtype`: float32 for bfloat16.
torch::Dtype LseDtype(torch::Dtype dtype) {
  return dtype == torch::kBFloat16 ? torch::kFloat32 : dtype;
}

}  // namespace

bool FlashAttentionHasBf16Products() {
  static const bool has =
#if defined(__x86_64__)
      __builtin_cpu_supports("avx512bf16") &&
#endif
      Table().forward_bf16 != nullptr && at::native::cpublas::could_pack(torch::kBFloat16);
  return has;
}

bool FlashAttentionSupports(const torch::Tensor& q, const torch::Tensor& k,
                            const torch::Tensor& v) {
  if (!KernelDtype({q, k, v}) || !HeadsContiguous(q) || !HeadsContiguous(k) ||
      !HeadsContiguous(v)) {
    return false;
  }
  const int64_t width =
      q.scalar_type() == torch::kFloat64 ? Table().double_width : Table().float_width;
  return k.sizes() == v.sizes() && q.size(0) == k.size(0) && q.size(1) == k.size(1) &&
         q.size(3) == k.size(3) && q.size(2) % k.size(2) == 0 && q.size(3) % width == 0 &&
         q.size(1) > 0;
}

std::pair<torch::Tensor, torch::Tensor> FlashAttentionForward(const torch::Tensor& q,
                                                              const torch::Tensor& k,
                                                              const torch::Tensor& v,
                                                              double scale) {
  TORCH_CHECK(FlashAttentionSupports(q, k, v), "FlashAttentionForward: q ", q.sizes(), ", k ",
              k.sizes(), ", v ", v.sizes(), " (", q.scalar_type(), ") do not fit the kernel");
  RECORD_FUNCTION("xmod::cpu::FlashAttentionForward", std::vector<c10::IValue>());
  const internal::FlashGeometry s = Geometry(q, k, v, scale);
  torch::Tensor out = torch::empty(q.sizes(), q.options());  // (B, T, H, E)
  torch::Tensor lse = torch::empty({s.b, s.h, s.t}, q.options().dtype(LseDtype(q.scalar_type())));
  if (q.scalar_type() == torch::kBFloat16) {
    Table().forward_bf16(s, q.data_ptr<c10::BFloat16>(), k.data_ptr<c10::BFloat16>(),
                         v.data_ptr<c10::BFloat16>(), out.data_ptr<c10::BFloat16>(),
                         lse.data_ptr<float>());
  } else if (q.scalar_type() == torch::kFloat32) {
    Table().forward_f(s, q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                      out.data_ptr<float>(), lse.data_ptr<float>());
  } else {
    Table().forward_d(s, q.data_ptr<double>(), k.data_ptr<double>(), v.data_ptr<double>(),
                      out.data_ptr<double>(), lse.data_ptr<double>());
  }
  return {out, lse};
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> FlashAttentionBackward(
    const torch::Tensor& dout_in, const torch::Tensor& q, const torch::Tensor& k,
    const torch::Tensor& v, const torch::Tensor& out, const torch::Tensor& lse, double scale) {
  TORCH_CHECK(FlashAttentionSupports(q, k, v), "FlashAttentionBackward: q ", q.sizes(), ", k ",
              k.sizes(), ", v ", v.sizes(), " do not fit the kernel");
  TORCH_CHECK(dout_in.sizes() == q.sizes() && out.sizes() == q.sizes() && out.is_contiguous() &&
                  lse.is_contiguous() && lse.dim() == 3 && lse.size(0) == q.size(0) &&
                  lse.size(1) == q.size(2) && lse.size(2) == q.size(1) &&
                  KernelDtype({q, dout_in, out}) && lse.device().is_cpu() &&
                  lse.scalar_type() == LseDtype(q.scalar_type()),
              "FlashAttentionBackward: dout ", dout_in.sizes(), ", out ", out.sizes(), ", lse ",
              lse.sizes(), " do not match q ", q.sizes());
  RECORD_FUNCTION("xmod::cpu::FlashAttentionBackward", std::vector<c10::IValue>());
  const torch::Tensor dout = HeadsContiguous(dout_in) ? dout_in : dout_in.contiguous();
  internal::FlashGeometry s = Geometry(q, k, v, scale);
  s.dout_batch = dout.stride(0);
  s.dout_row = dout.stride(1);
  torch::Tensor dq = torch::empty(q.sizes(), q.options());  // every entry written
  torch::Tensor dk = torch::empty(k.sizes(), k.options());
  torch::Tensor dv = torch::empty(v.sizes(), v.options());
  if (q.scalar_type() == torch::kBFloat16) {
    Table().backward_bf16(
        s, q.data_ptr<c10::BFloat16>(), k.data_ptr<c10::BFloat16>(), v.data_ptr<c10::BFloat16>(),
        out.data_ptr<c10::BFloat16>(), dout.data_ptr<c10::BFloat16>(), lse.data_ptr<float>(),
        dq.data_ptr<c10::BFloat16>(), dk.data_ptr<c10::BFloat16>(), dv.data_ptr<c10::BFloat16>());
  } else if (q.scalar_type() == torch::kFloat32) {
    Table().backward_f(s, q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                       out.data_ptr<float>(), dout.data_ptr<float>(), lse.data_ptr<float>(),
                       dq.data_ptr<float>(), dk.data_ptr<float>(), dv.data_ptr<float>());
  } else {
    Table().backward_d(s, q.data_ptr<double>(), k.data_ptr<double>(), v.data_ptr<double>(),
                       out.data_ptr<double>(), dout.data_ptr<double>(), lse.data_ptr<double>(),
                       dq.data_ptr<double>(), dk.data_ptr<double>(), dv.data_ptr<double>());
  }
  return {dq, dk, dv};
}

}  // namespace xmod::cpu
