// Factories whose out= call names the device only through its out tensor
// (Composite::sees_out): eye from zero_ and a diagonal fill_, linspace and
// logspace from arange and pointwise operators, with CPU's formula.
//
// Note [Linspace from both ends]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// CPU computes element i of linspace(start, end, steps) as start + step * i
// for the first half and end - step * (steps - 1 - i) for the second, with
// step = (end - start) / (steps - 1) in the out dtype (in double for
// integer outs, then truncated), so both ends are exact. The composite does
// the same in the same type; logspace raises base to those exponents in
// double, as CPU's std::pow(double, ...) does. 16-bit float and complex
// outs take the host tier (CPU rounds every step in the 16-bit type), and
// so do integer logspace outs.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

// Drops the @p n arguments and returns @p out.
void returnOut(torch::jit::Stack* stack, size_t n, const at::Tensor& out) {
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, out);
}

// eye.out(n, out) and eye.m_out(n, m, out).
bool eye(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t num_args = op.schema().arguments().size();
  const c10::IValue* a = argsOf(*stack, num_args);
  if (!a || !a[0].isInt() || (num_args == 3 && !a[1].isInt()) || !a[num_args - 1].isTensor())
    return false;
  at::Tensor out = a[num_args - 1].toTensor();
  const int64_t n = a[0].toInt(), m = num_args == 3 ? a[1].toInt() : n;
  if (n < 0 || m < 0 || !out.device().is_privateuseone() || out.is_complex()) return false;
  out.resize_({n, m});
  out.zero_();
  if (n > 0 && m > 0) out.diagonal().fill_(1);
  returnOut(stack, num_args, out);
  return true;
}

// The points of Note [Linspace from both ends] in @p type (float, double).
at::Tensor linearPoints(double start, double end, int64_t steps, const at::Tensor& like,
                        at::ScalarType type) {
  const at::TensorOptions options = like.options().dtype(type);
  const at::Tensor i = at::arange(steps, options);
  // The step in the type itself, as CPU computes it.
  const double step =
      type == at::kFloat
          ? static_cast<double>((static_cast<float>(end) - static_cast<float>(start)) /
                                static_cast<float>(steps - 1))
          : (end - start) / static_cast<double>(steps - 1);
  const at::Tensor from_start = i * step + start;
  const at::Tensor from_end = (i.neg() + static_cast<double>(steps - 1)) * step;
  return at::where(i < static_cast<double>(steps / 2), from_start, from_end.neg() + end);
}

// linspace.out(start, end, steps, out) and logspace.out(start, end, steps,
// base, out) (kLog).
template <bool kLog>
bool spaced(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = kLog ? 5 : 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isScalar() || !a[1].isScalar() || !a[2].isInt() || !a[kArgs - 1].isTensor() ||
      (kLog && !a[3].isDouble() && !a[3].isInt()))
    return false;
  at::Tensor out = a[kArgs - 1].toTensor();
  const at::ScalarType dtype = out.scalar_type();
  const bool integral = at::isIntegralType(dtype, /*includeBool=*/false);
  if (!out.device().is_privateuseone() || a[0].toScalar().isComplex() ||
      a[1].toScalar().isComplex() || (kLog && integral) ||
      !(integral || dtype == at::kFloat || dtype == at::kDouble))
    return false;
  const int64_t steps = a[2].toInt();
  if (steps < 0) return false;  // CPU's error
  // An integer out converts the ends to its type first, as CPU does.
  const auto end_value = [&](const c10::Scalar& v) {
    return integral ? static_cast<double>(v.to<int64_t>()) : v.toDouble();
  };
  const double start = end_value(a[0].toScalar()), end = end_value(a[1].toScalar());
  // CPU keeps an out that already holds `steps` elements as it is (a strided
  // view too, written in row-major order) and refuses one that overlaps itself.
  if (out.numel() != steps) out.resize_({steps});
  at::assert_no_internal_overlap(out);
  if (steps > 0) {
    at::Tensor points = steps == 1
                            ? at::full({1}, start, out.options().dtype(at::kDouble))
                            : linearPoints(start, end, steps, out, integral ? at::kDouble : dtype);
    if (kLog) points = at::pow(a[3].toScalar().toDouble(), points.to(at::kDouble));
    out.copy_(points.view(out.sizes()));
  }
  returnOut(stack, kArgs, out);
  return true;
}

}  // namespace

void addFactoryComposites(Register add) {
  add("eye", eye, kSeesOut);
  add("linspace", spaced<false>, kSeesOut);
  add("logspace", spaced<true>, kSeesOut);
}

}  // namespace flagos::composite
