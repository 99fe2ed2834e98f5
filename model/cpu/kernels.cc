// CPU kernels: see kernels.h. This file picks the instruction-set variant and checks shapes.
// The router's and the routed rows' entry points record themselves (RECORD_FUNCTION), so that
// a profile names them where no ATen op stands for their work.
#include "model/cpu/kernels.h"

#include <ATen/Version.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <tuple>
#include <vector>

#if defined(__x86_64__)  // the variants model/torch_targets.cmake builds on x86-64
#define XMOD_CPU_KERNELS_X86 1
#endif

namespace xmod::cpu {
namespace internal {
namespace DEFAULT {
extern const KernelTable kTable;
}
#ifdef XMOD_CPU_KERNELS_X86
namespace AVX2 {
extern const KernelTable kTable;
}
namespace AVX512 {
extern const KernelTable kTable;
}
#endif
}  // namespace internal

namespace {

const internal::KernelTable& Table() {
  static const internal::KernelTable* const table = [] {
#ifdef XMOD_CPU_KERNELS_X86
    const std::string isa = at::get_cpu_capability();  // what ATen's own kernels run
    if (isa == "AVX512") return &internal::AVX512::kTable;
    if (isa == "AVX2") return &internal::AVX2::kTable;
#endif
    return &internal::DEFAULT::kTable;
  }();
  return *table;
}

void CheckSameShape(const torch::Tensor& x, const torch::Tensor& y) {
  TORCH_CHECK(x.sizes() == y.sizes(), "cpu kernel: shapes ", x.sizes(), " and ", y.sizes(),
              " differ");
}

// Contiguous, or undefined when t is.
torch::Tensor ContiguousOrNone(const torch::Tensor& t) {
  return t.defined() ? t.contiguous() : torch::Tensor();
}

template <typename T>
const T* PtrOrNull(const torch::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

template <typename T>
T* MutablePtrOrNull(torch::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// Checks the (M, D) operands of the routed-row kernels against r (M) and d.
void CheckRowOperands(const torch::Tensor& r, std::initializer_list<torch::Tensor> rows_of_d,
                      int64_t d) {
  for (const torch::Tensor& u : rows_of_d) {
    if (!u.defined()) continue;
    TORCH_CHECK(u.dim() == 2 && u.size(0) == r.numel() && u.size(1) == d, "routed rows: operand ",
                u.sizes(), " for ", r.numel(), " rows of ", d);
  }
}

}  // namespace

bool SupportsFused(std::initializer_list<torch::Tensor> tensors) {
  for (const torch::Tensor& t : tensors) {
    if (!t.defined() || !t.device().is_cpu()) return false;
    const torch::Dtype dtype = t.scalar_type();
    if (dtype != torch::kFloat32 && dtype != torch::kFloat64) return false;
    if (dtype != tensors.begin()->scalar_type()) return false;
  }
  return true;
}

bool SupportsBf16(std::initializer_list<torch::Tensor> tensors) {
  for (const torch::Tensor& t : tensors) {
    if (!t.defined() || !t.device().is_cpu() || t.scalar_type() != torch::kBFloat16) return false;
  }
  return true;
}

bool SupportsSwiGlu(std::initializer_list<torch::Tensor> tensors) {
  return SupportsFused(tensors) || SupportsBf16(tensors);
}

std::string KernelIsa() { return Table().isa; }

torch::Tensor SwiGluForward(const torch::Tensor& a_in, const torch::Tensor& b_in) {
  TORCH_CHECK(SupportsSwiGlu({a_in, b_in}), "SwiGluForward: float, double or bf16 CPU tensors");
  CheckSameShape(a_in, b_in);
  const torch::Tensor a = a_in.contiguous(), b = b_in.contiguous();
  torch::Tensor out = torch::empty_like(a);
  if (a.scalar_type() == torch::kBFloat16) {
    Table().swiglu_forward_bf16(a.data_ptr<c10::BFloat16>(), b.data_ptr<c10::BFloat16>(),
                                out.data_ptr<c10::BFloat16>(), a.numel());
  } else if (a.scalar_type() == torch::kFloat32) {
    Table().swiglu_forward_f(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(),
                             a.numel());
  } else {
    Table().swiglu_forward_d(a.data_ptr<double>(), b.data_ptr<double>(), out.data_ptr<double>(),
                             a.numel());
  }
  return out;
}

std::pair<torch::Tensor, torch::Tensor> SwiGluBackward(const torch::Tensor& g_in,
                                                       const torch::Tensor& a_in,
                                                       const torch::Tensor& b_in) {
  TORCH_CHECK(SupportsSwiGlu({g_in, a_in, b_in}),
              "SwiGluBackward: float, double or bf16 CPU tensors");
  CheckSameShape(a_in, b_in);
  CheckSameShape(g_in, a_in);
  const torch::Tensor g = g_in.contiguous(), a = a_in.contiguous(), b = b_in.contiguous();
  torch::Tensor da = torch::empty_like(a), db = torch::empty_like(b);
  if (a.scalar_type() == torch::kBFloat16) {
    Table().swiglu_backward_bf16(g.data_ptr<c10::BFloat16>(), a.data_ptr<c10::BFloat16>(),
                                 b.data_ptr<c10::BFloat16>(), da.data_ptr<c10::BFloat16>(),
                                 db.data_ptr<c10::BFloat16>(), a.numel());
  } else if (a.scalar_type() == torch::kFloat32) {
    Table().swiglu_backward_f(g.data_ptr<float>(), a.data_ptr<float>(), b.data_ptr<float>(),
                              da.data_ptr<float>(), db.data_ptr<float>(), a.numel());
  } else {
    Table().swiglu_backward_d(g.data_ptr<double>(), a.data_ptr<double>(), b.data_ptr<double>(),
                              da.data_ptr<double>(), db.data_ptr<double>(), a.numel());
  }
  return {da, db};
}

std::pair<torch::Tensor, torch::Tensor> RmsNormForward(const torch::Tensor& x_in,
                                                       const torch::Tensor& w_in, double eps) {
  TORCH_CHECK(SupportsFused({x_in, w_in}), "RmsNormForward: float or double CPU tensors");
  const int64_t d = x_in.size(-1);
  TORCH_CHECK(w_in.dim() == 1 && w_in.size(0) == d, "RmsNormForward: weight ", w_in.sizes(),
              " for rows of ", d);
  const torch::Tensor x = x_in.contiguous(), w = w_in.contiguous();
  const int64_t rows = x.numel() / std::max<int64_t>(1, d);
  torch::Tensor y = torch::empty_like(x);
  std::vector<int64_t> inv_sizes = x.sizes().vec();
  inv_sizes.pop_back();
  torch::Tensor inv = torch::empty(inv_sizes, x.options());
  if (x.scalar_type() == torch::kFloat32) {
    Table().rms_norm_forward_f(x.data_ptr<float>(), w.data_ptr<float>(), eps, y.data_ptr<float>(),
                               inv.data_ptr<float>(), rows, d);
  } else {
    Table().rms_norm_forward_d(x.data_ptr<double>(), w.data_ptr<double>(), eps,
                               y.data_ptr<double>(), inv.data_ptr<double>(), rows, d);
  }
  return {y, inv};
}

std::pair<torch::Tensor, torch::Tensor> RmsNormBackward(const torch::Tensor& dy_in,
                                                        const torch::Tensor& x_in,
                                                        const torch::Tensor& inv_in,
                                                        const torch::Tensor& w_in) {
  TORCH_CHECK(SupportsFused({dy_in, x_in, inv_in, w_in}),
              "RmsNormBackward: float or double CPU tensors");
  CheckSameShape(dy_in, x_in);
  const torch::Tensor dy = dy_in.contiguous(), x = x_in.contiguous(), inv = inv_in.contiguous(),
                      w = w_in.contiguous();
  const int64_t d = x.size(-1), rows = x.numel() / std::max<int64_t>(1, d);
  TORCH_CHECK(inv.numel() == rows && w.numel() == d, "RmsNormBackward: inv ", inv.sizes(),
              " and weight ", w.sizes(), " for ", rows, " rows of ", d);
  // Blocks of rows of about 64 KB each: the partial sums of dw cost one (D) row per block.
  const int64_t block_rows = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d));
  torch::Tensor dx = torch::empty_like(x);
  torch::Tensor dw_blocks = torch::empty({(rows + block_rows - 1) / block_rows, d}, x.options());
  if (x.scalar_type() == torch::kFloat32) {
    Table().rms_norm_backward_f(dy.data_ptr<float>(), x.data_ptr<float>(), inv.data_ptr<float>(),
                                w.data_ptr<float>(), dx.data_ptr<float>(),
                                dw_blocks.data_ptr<float>(), rows, d, block_rows);
  } else {
    Table().rms_norm_backward_d(dy.data_ptr<double>(), x.data_ptr<double>(), inv.data_ptr<double>(),
                                w.data_ptr<double>(), dx.data_ptr<double>(),
                                dw_blocks.data_ptr<double>(), rows, d, block_rows);
  }
  return {dx, dw_blocks.sum(/*dim=*/0)};
}

bool RopeSupports(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const bool bf16 =
      SupportsBf16({x}) && SupportsFused({cos, sin}) && cos.scalar_type() == torch::kFloat32;
  return (bf16 || SupportsFused({x, cos, sin})) && x.dim() == 4 && x.size(3) % 2 == 0 &&
         x.stride(3) == 1 && x.stride(2) == x.size(3) && x.stride(1) >= x.size(2) * x.size(3) &&
         x.stride(0) == x.size(1) * x.stride(1);
}

torch::Tensor Rope(const torch::Tensor& x, const torch::Tensor& cos_in, const torch::Tensor& sin_in,
                   double sin_sign) {
  TORCH_CHECK(RopeSupports(x, cos_in, sin_in),
              "Rope: float or double CPU tensors (or bfloat16 x, float32 tables), heads "
              "contiguous");
  const int64_t b = x.size(0), t = x.size(1), heads = x.size(2), e = x.size(3);
  TORCH_CHECK(cos_in.dim() == 4 && (cos_in.size(0) == 1 || cos_in.size(0) == b) &&
                  cos_in.size(1) == t && cos_in.size(3) == e / 2 &&
                  cos_in.sizes() == sin_in.sizes(),
              "Rope: tables ", cos_in.sizes(), " for x ", x.sizes());
  const torch::Tensor cos = cos_in.contiguous(), sin = sin_in.contiguous();
  const bool per_batch = cos.size(0) == b && b > 1;
  torch::Tensor out = torch::empty(x.sizes(), x.options());
  if (x.scalar_type() == torch::kBFloat16) {
    Table().rope_bf16(x.data_ptr<c10::BFloat16>(), x.stride(1), cos.data_ptr<float>(),
                      sin.data_ptr<float>(), per_batch, static_cast<float>(sin_sign),
                      out.data_ptr<c10::BFloat16>(), b * t, t, heads, e);
  } else if (x.scalar_type() == torch::kFloat32) {
    Table().rope_f(x.data_ptr<float>(), x.stride(1), cos.data_ptr<float>(), sin.data_ptr<float>(),
                   per_batch, static_cast<float>(sin_sign), out.data_ptr<float>(), b * t, t, heads,
                   e);
  } else {
    Table().rope_d(x.data_ptr<double>(), x.stride(1), cos.data_ptr<double>(),
                   sin.data_ptr<double>(), per_batch, sin_sign, out.data_ptr<double>(), b * t, t,
                   heads, e);
  }
  return out;
}

std::pair<torch::Tensor, torch::Tensor> RouterScores(const torch::Tensor& x_in,
                                                     const torch::Tensor& c_in, double eps) {
  RECORD_FUNCTION("xmod::cpu::RouterScores", std::vector<c10::IValue>());
  TORCH_CHECK(SupportsFused({x_in, c_in}), "RouterScores: float or double CPU tensors");
  const int64_t d = x_in.size(-1);
  TORCH_CHECK(c_in.dim() == 1 && c_in.size(0) == d, "RouterScores: vector ", c_in.sizes(),
              " for rows of ", d);
  const torch::Tensor x = x_in.contiguous(), c = c_in.contiguous();
  const int64_t rows = x.numel() / std::max<int64_t>(1, d);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.pop_back();
  torch::Tensor inv = torch::empty(sizes, x.options()), s = torch::empty(sizes, x.options());
  if (x.scalar_type() == torch::kFloat32) {
    Table().router_scores_f(x.data_ptr<float>(), c.data_ptr<float>(), eps, inv.data_ptr<float>(),
                            s.data_ptr<float>(), rows, d);
  } else {
    Table().router_scores_d(x.data_ptr<double>(), c.data_ptr<double>(), eps, inv.data_ptr<double>(),
                            s.data_ptr<double>(), rows, d);
  }
  return {inv, s};
}

torch::Tensor RowPositions(const torch::Tensor& rows_in, int64_t n) {
  TORCH_CHECK(rows_in.dim() == 1 && rows_in.scalar_type() == torch::kLong && rows_in.is_cpu(),
              "RowPositions: rows must be a CPU int64 vector, got ", rows_in.sizes());
  const torch::Tensor rows = rows_in.contiguous();
  torch::Tensor pos = torch::full({n}, -1, rows.options());
  const int64_t* r = rows.data_ptr<int64_t>();
  int64_t* p = pos.data_ptr<int64_t>();
  for (int64_t m = 0; m < rows.numel(); ++m) {
    TORCH_CHECK(r[m] >= 0 && r[m] < n, "RowPositions: row ", r[m], " outside [0, ", n, ")");
    if (p[r[m]] >= 0) return torch::Tensor();  // repeated: only index_add's sum is right
    p[r[m]] = m;
  }
  return pos;
}

torch::Tensor ScatterScaledAdd(const torch::Tensor& x_in, const torch::Tensor& pos,
                               const torch::Tensor& r_in, const torch::Tensor& u1_in,
                               const torch::Tensor& u2_in, const torch::Tensor& p_in) {
  RECORD_FUNCTION("xmod::cpu::ScatterScaledAdd", std::vector<c10::IValue>());
  TORCH_CHECK(SupportsFused({x_in, r_in, u1_in}) &&
                  (!u2_in.defined() || SupportsFused({x_in, u2_in})) &&
                  (!p_in.defined() || SupportsFused({x_in, p_in})),
              "ScatterScaledAdd: float or double CPU tensors of one dtype");
  TORCH_CHECK(x_in.dim() == 2 && pos.numel() == x_in.size(0), "ScatterScaledAdd: x ", x_in.sizes(),
              " and ", pos.numel(), " row positions");
  const int64_t n = x_in.size(0), d = x_in.size(1);
  CheckRowOperands(r_in, {u1_in, u2_in, p_in}, d);
  const torch::Tensor x = x_in.contiguous(), r = r_in.contiguous(), u1 = u1_in.contiguous(),
                      u2 = ContiguousOrNone(u2_in), p = ContiguousOrNone(p_in),
                      positions = pos.contiguous();
  torch::Tensor out = torch::empty_like(x);
  if (x.scalar_type() == torch::kFloat32) {
    Table().scatter_scaled_add_f(x.data_ptr<float>(), positions.data_ptr<int64_t>(),
                                 r.data_ptr<float>(), u1.data_ptr<float>(), PtrOrNull<float>(u2),
                                 PtrOrNull<float>(p), out.data_ptr<float>(), n, d);
  } else {
    Table().scatter_scaled_add_d(x.data_ptr<double>(), positions.data_ptr<int64_t>(),
                                 r.data_ptr<double>(), u1.data_ptr<double>(), PtrOrNull<double>(u2),
                                 PtrOrNull<double>(p), out.data_ptr<double>(), n, d);
  }
  return out;
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> ScatterScaledAddBackward(
    const torch::Tensor& g_in, const torch::Tensor& rows_in, const torch::Tensor& r_in,
    const torch::Tensor& u1_in, const torch::Tensor& u2_in, bool want_dp) {
  RECORD_FUNCTION("xmod::cpu::ScatterScaledAddBackward", std::vector<c10::IValue>());
  TORCH_CHECK(
      SupportsFused({g_in, r_in, u1_in}) && (!u2_in.defined() || SupportsFused({g_in, u2_in})),
      "ScatterScaledAddBackward: float or double CPU tensors of one dtype");
  TORCH_CHECK(g_in.dim() == 2 && rows_in.numel() == r_in.numel(), "ScatterScaledAddBackward: g ",
              g_in.sizes(), ", ", rows_in.numel(), " rows and ", r_in.numel(), " weights");
  const int64_t m = r_in.numel(), d = g_in.size(1);
  CheckRowOperands(r_in, {u1_in, u2_in}, d);
  const torch::Tensor g = g_in.contiguous(), rows = rows_in.contiguous(), r = r_in.contiguous(),
                      u1 = u1_in.contiguous(), u2 = ContiguousOrNone(u2_in);
  torch::Tensor du = torch::empty({m, d}, g.options()), dr = torch::empty({m}, g.options());
  torch::Tensor dp = want_dp ? torch::empty({m, d}, g.options()) : torch::Tensor();
  if (g.scalar_type() == torch::kFloat32) {
    Table().scatter_scaled_add_backward_f(g.data_ptr<float>(), rows.data_ptr<int64_t>(),
                                          r.data_ptr<float>(), u1.data_ptr<float>(),
                                          PtrOrNull<float>(u2), du.data_ptr<float>(),
                                          dr.data_ptr<float>(), MutablePtrOrNull<float>(dp), m, d);
  } else {
    Table().scatter_scaled_add_backward_d(
        g.data_ptr<double>(), rows.data_ptr<int64_t>(), r.data_ptr<double>(), u1.data_ptr<double>(),
        PtrOrNull<double>(u2), du.data_ptr<double>(), dr.data_ptr<double>(),
        MutablePtrOrNull<double>(dp), m, d);
  }
  return {du, dr, dp};
}

torch::Tensor GatherRowsBackward(const torch::Tensor& g_pass_in, const torch::Tensor& g_rows_in,
                                 const torch::Tensor& pos, const RowAffine& router, int64_t d,
                                 torch::Dtype dtype) {
  RECORD_FUNCTION("xmod::cpu::GatherRowsBackward", std::vector<c10::IValue>());
  const torch::Tensor like = torch::empty({0}, pos.options().dtype(dtype));
  auto supported = [&](const torch::Tensor& t) { return !t.defined() || SupportsFused({like, t}); };
  TORCH_CHECK(
      SupportsFused({like}) && supported(g_pass_in) && supported(g_rows_in) &&
          supported(router.alpha) &&
          (!router.alpha.defined() || SupportsFused({like, router.beta, router.c, router.x})),
      "GatherRowsBackward: float or double CPU tensors of one dtype");
  const int64_t n = pos.numel();
  TORCH_CHECK(!g_pass_in.defined() || g_pass_in.numel() == n * d, "GatherRowsBackward: g_pass ",
              g_pass_in.sizes(), " for ", n, " rows of ", d);
  TORCH_CHECK(!g_rows_in.defined() || (g_rows_in.dim() == 2 && g_rows_in.size(1) == d),
              "GatherRowsBackward: g_rows ", g_rows_in.sizes(), " for rows of ", d);
  TORCH_CHECK(!router.alpha.defined() || (router.alpha.numel() == n && router.beta.numel() == n &&
                                          router.c.numel() == d && router.x.numel() == n * d),
              "GatherRowsBackward: router term for ", n, " rows of ", d);
  const torch::Tensor g_pass = ContiguousOrNone(g_pass_in), g_rows = ContiguousOrNone(g_rows_in),
                      alpha = ContiguousOrNone(router.alpha), beta = ContiguousOrNone(router.beta),
                      c = ContiguousOrNone(router.c), x = ContiguousOrNone(router.x),
                      positions = pos.contiguous();
  torch::Tensor dx = torch::empty({n, d}, like.options());
  if (dtype == torch::kFloat32) {
    Table().gather_rows_backward_f(PtrOrNull<float>(g_pass), PtrOrNull<float>(g_rows),
                                   positions.data_ptr<int64_t>(), PtrOrNull<float>(alpha),
                                   PtrOrNull<float>(beta), PtrOrNull<float>(c), PtrOrNull<float>(x),
                                   dx.data_ptr<float>(), n, d);
  } else {
    Table().gather_rows_backward_d(PtrOrNull<double>(g_pass), PtrOrNull<double>(g_rows),
                                   positions.data_ptr<int64_t>(), PtrOrNull<double>(alpha),
                                   PtrOrNull<double>(beta), PtrOrNull<double>(c),
                                   PtrOrNull<double>(x), dx.data_ptr<double>(), n, d);
  }
  return dx;
}

}  // namespace xmod::cpu
