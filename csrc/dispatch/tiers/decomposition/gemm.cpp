// addbmm as one addmm (Note [Composite kernels]): the batch sum of
// b1[i] @ b2[i] is [b1[0] b1[1] ...] @ [b2[0]; b2[1]; ...], a single GEMM
// of inner size batch * k that the backend's BLAS takes.
// Half GEMMs (mm, addmm, bmm, baddbmm, addmv, dot in float16/bfloat16) on a backend
// whose GEMM takes float only (opencl's CLBlast SGEMM): the operands cast
// to float on the device, the float GEMM, the result rounded once -- CPU's
// semantics (float multiply-adds, one rounding), and no host round trip.
// vdot of real vectors is dot; linalg_cross is three differences of
// products, one per component.
#include <ATen/ATen.h>

#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

// addbmm(self, batch1, batch2, beta, alpha) -> Tensor
bool addbmm(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isTensor() || !a[3].isScalar() ||
      !a[4].isScalar())
    return false;
  const at::Tensor self = a[0].toTensor(), b1 = a[1].toTensor(), b2 = a[2].toTensor();
  const bool half = b1.scalar_type() == at::kHalf || b1.scalar_type() == at::kBFloat16;
  if (!(usableFirst(b1) || (half && b1.device().is_privateuseone() && b1.numel() > 0)) ||
      !usableLike(b2, b1) || !usableLike(self, b1) || b1.dim() != 3 || b2.dim() != 3 ||
      b1.size(0) != b2.size(0) || b1.size(2) != b2.size(1) || b2.numel() == 0)
    return false;
  const int64_t n = b1.size(1), p = b2.size(2);
  const at::Tensor lhs = b1.transpose(0, 1).reshape({n, -1});
  const at::Tensor rhs = b2.reshape({-1, p});
  replaceArgs(stack, kArgs, {at::addmm(self, lhs, rhs, a[3].toScalar(), a[4].toScalar())});
  return true;
}

bool isHalf(const at::Tensor& t) {
  return t.defined() && t.device().is_privateuseone() &&
         (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
}

// dot(self, tensor) and addmv(self, mat, vec, beta, alpha) of half types,
// through the float ones (the BLAS-1/2 siblings of halfGemm below).
bool halfDot(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor()) return false;
  const at::Tensor x = a[0].toTensor(), y = a[1].toTensor();
  if (!isHalf(x) || !usableLike(y, x)) return false;
  replaceArgs(stack, kArgs, {at::dot(x.to(at::kFloat), y.to(at::kFloat)).to(x.scalar_type())});
  return true;
}

bool halfAddmv(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isTensor() || !a[3].isScalar() ||
      !a[4].isScalar())
    return false;
  const at::Tensor self = a[0].toTensor(), mat = a[1].toTensor(), vec = a[2].toTensor();
  if (!isHalf(self) || !usableLike(mat, self) || !usableLike(vec, self)) return false;
  const at::Tensor out = at::addmv(self.to(at::kFloat), mat.to(at::kFloat), vec.to(at::kFloat),
                                   a[3].toScalar(), a[4].toScalar());
  replaceArgs(stack, kArgs, {out.to(self.scalar_type())});
  return true;
}

// mm/bmm(self, mat2) and addmm/baddbmm(self, m1, m2, beta, alpha) of half
// types, through the float GEMM (@p kWithSelf: the add forms).
template <bool kWithSelf>
bool halfGemm(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = kWithSelf ? 5 : 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a) return false;
  for (int i = 0; i < (kWithSelf ? 3 : 2); ++i)
    if (!a[i].isTensor()) return false;
  if (kWithSelf && (!a[3].isScalar() || !a[4].isScalar())) return false;
  const at::Tensor first = a[0].toTensor();
  if (!first.defined() || !first.device().is_privateuseone() ||
      (first.scalar_type() != at::kHalf && first.scalar_type() != at::kBFloat16))
    return false;
  for (int i = 1; i < (kWithSelf ? 3 : 2); ++i)
    if (!usableLike(a[i].toTensor(), first)) return false;  // CPU raises for mixed types
  auto wide = [&](int i) { return a[i].toTensor().to(at::kFloat); };
  at::Tensor out;
  if (kWithSelf) {
    const at::Tensor m1 = a[1].toTensor();
    out = m1.dim() == 3 ? at::baddbmm(wide(0), wide(1), wide(2), a[3].toScalar(), a[4].toScalar())
                        : at::addmm(wide(0), wide(1), wide(2), a[3].toScalar(), a[4].toScalar());
  } else {
    out = first.dim() == 3 ? at::bmm(wide(0), wide(1)) : at::mm(wide(0), wide(1));
  }
  replaceArgs(stack, kArgs, {out.to(first.scalar_type())});
  return true;
}

// vdot(self, other) of real vectors: dot (no conjugate to take).
bool vdot(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor()) return false;
  const at::Tensor x = a[0].toTensor(), y = a[1].toTensor();
  if (!x.defined() || !x.device().is_privateuseone() || x.is_complex() || !usableLike(y, x))
    return false;
  replaceArgs(stack, kArgs, {at::dot(x, y)});
  return true;
}

// linalg_cross(self, other, dim): the operands broadcast, dim of size 3;
// component i is a[j] * b[k] - a[k] * b[j] for (i, j, k) a rotation of
// (0, 1, 2). Mixed dtypes and other sizes are CPU's error.
bool linalgCross(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isInt()) return false;
  const at::Tensor self = a[0].toTensor(), other = a[1].toTensor();
  if (!self.defined() || !self.device().is_privateuseone() || self.is_complex() ||
      self.scalar_type() == at::kBool || !usableLike(other, self) || self.dim() != other.dim())
    return false;
  std::vector<at::Tensor> both;
  try {
    both = at::broadcast_tensors({self, other});
  } catch (const c10::Error&) {
    return false;
  }
  const int64_t rank = both[0].dim();
  const int64_t dim = wrapDim(a[2].toInt(), rank);
  if (rank == 0 || dim < 0) return false;
  if (both[0].size(dim) != 3) return false;
  auto part = [&](int which, int64_t i) { return both[which].select(dim, i); };
  std::vector<at::Tensor> components;
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t j = (i + 1) % 3, k = (i + 2) % 3;
    components.push_back(part(0, j) * part(1, k) - part(0, k) * part(1, j));
  }
  replaceArgs(stack, kArgs, {at::stack(components, dim)});
  return true;
}

}  // namespace

void addGemmComposites(Register add) {
  add("addbmm", addbmm, /*in_place=*/true);  // addbmm_ too: it calls addmm
  add("mm", halfGemm<false>, false);
  add("bmm", halfGemm<false>, false);
  add("addmm", halfGemm<true>, /*in_place=*/true);
  add("baddbmm", halfGemm<true>, /*in_place=*/true);
  add("dot", halfDot, false);
  add("addmv", halfAddmv, /*in_place=*/true);
  add("vdot", vdot, false);
  add("linalg_cross", linalgCross, false);
}

}  // namespace flagos::composite
