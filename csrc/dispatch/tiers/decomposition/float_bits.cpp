// Operators on a float's representation, from device operators (Note
// [Composite kernels]): frexp and nextafter, float32 and float64 (half
// types take the host tier: their neighbours are not float's).
//
// frexp(x) = (m, e) with x = m * 2^e, |m| in [0.5, 1): e from log2(|x|),
// corrected by one where log2 rounded across a power of two, and m scaled
// in two halves so that the scale of a subnormal (2^1074) never overflows;
// 0, infinities and NaN give (x, 0), as C's frexp. nextafter(x, y) steps
// x's bit pattern by one toward y (up in magnitude when y lies beyond x
// from zero); x == y gives y, a NaN gives NaN, and from zero the smallest
// subnormal with y's direction, as C's nextafter.
#include <ATen/ATen.h>

#include <limits>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

// frexp.Tensor(self) -> (mantissa, exponent).
bool frexp(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 1;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !usableFirst(a[0].toTensor(), /*allow_empty=*/true)) return false;
  const at::Tensor x = a[0].toTensor();
  const at::Tensor regular = at::logical_and(at::isfinite(x), at::ne(x, 0));
  const at::Tensor safe = at::where(regular, x.abs(), at::ones_like(x));
  at::Tensor e = at::floor(at::log2(safe)).add_(1);
  // 2^-e in two halves: 2^1074 (a double subnormal's) is past the range.
  auto scaled = [&](const at::Tensor& exponent) {
    const at::Tensor half = at::floor(exponent / 2);
    return x * at::exp2(-half) * at::exp2(half - exponent);
  };
  at::Tensor m = scaled(e);
  const at::Tensor low = at::lt(m.abs(), 0.5), high = at::ge(m.abs(), 1.0);
  e = e - low.to(e.scalar_type()) + high.to(e.scalar_type());
  m = scaled(e);
  m = at::where(regular, m, x);
  const at::Tensor exponent = at::where(regular, e, at::zeros_like(e)).to(at::kInt);
  replaceArgs(stack, kArgs, {m, exponent});
  return true;
}

// nextafter(self, other), one dtype (float32 or float64), broadcast.
bool nextafter(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor()) return false;
  const at::Tensor x0 = a[0].toTensor(), y0 = a[1].toTensor();
  if (!usableFirst(x0, /*allow_empty=*/true) || !usableLike(y0, x0)) return false;
  const auto both = at::broadcast_tensors({x0, y0});
  const at::Tensor x = both[0].contiguous(), y = both[1].contiguous();
  const bool single = x.scalar_type() == at::kFloat;
  const at::ScalarType bits_type = single ? at::kInt : at::kLong;
  const at::Tensor bits = x.view(bits_type);
  // Away from zero when y lies beyond x on x's side of zero.
  const at::Tensor away = at::eq(at::gt(y, x), at::gt(x, 0));
  const at::Tensor stepped = at::where(away, bits + 1, bits - 1).view(x.scalar_type());
  const double tiny = single ? static_cast<double>(std::numeric_limits<float>::denorm_min())
                             : std::numeric_limits<double>::denorm_min();
  const at::Tensor from_zero =
      at::where(at::gt(y, 0), at::full_like(x, tiny), at::full_like(x, -tiny));
  at::Tensor out = at::where(at::eq(x, 0), from_zero, stepped);
  out = at::where(at::eq(x, y), y, out);
  out = at::where(at::logical_or(at::isnan(x), at::isnan(y)), x + y, out);
  replaceArgs(stack, kArgs, {out});
  return true;
}

}  // namespace

void addFloatBitsComposites(Register add) {
  add("frexp", frexp, 0);
  add("nextafter", nextafter, kInPlace);
}

}  // namespace flagos::composite
