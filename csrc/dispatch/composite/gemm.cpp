// addbmm as one addmm (Note [Composite kernels]): the batch sum of
// b1[i] @ b2[i] is [b1[0] b1[1] ...] @ [b2[0]; b2[1]; ...], a single GEMM
// of inner size batch * k that the backend's BLAS takes.
#include <ATen/ATen.h>

#include "dispatch/composite/composite.h"
#include "dispatch/composite/stack_args.h"

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
  if (!usableFirst(b1) || !usableLike(b2, b1) || !usableLike(self, b1) || b1.dim() != 3 ||
      b2.dim() != 3 || b1.size(0) != b2.size(0) || b1.size(2) != b2.size(1) || b2.numel() == 0)
    return false;
  const int64_t n = b1.size(1), p = b2.size(2);
  const at::Tensor lhs = b1.transpose(0, 1).reshape({n, -1});
  const at::Tensor rhs = b2.reshape({-1, p});
  replaceArgs(stack, kArgs, {at::addmm(self, lhs, rhs, a[3].toScalar(), a[4].toScalar())});
  return true;
}

}  // namespace

void addGemmComposites(Register add) {
  add("addbmm", addbmm, /*in_place=*/true);  // addbmm_ too: it calls addmm
}

}  // namespace flagos::composite
