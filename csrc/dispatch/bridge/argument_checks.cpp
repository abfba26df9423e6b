// Note [Argument checks the meta kernels skip]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The bridge learns shapes and dtypes from the meta kernels, which check
// most bad arguments (Note [Argument errors come from the CPU]). A few of
// CPU's checks live in its compute kernels instead, so a call that the CPU
// refuses ran on the device and returned a value (PyTorch's device-generic
// tests: test_binary_ufuncs, test_reductions):
//   - pow of an integer tensor to a negative integer scalar (CPU: "Integers
//     to negative integer powers are not allowed.", where we returned 0);
//   - all/any into an out= tensor that is neither bool nor uint8;
//   - var/std with a correction >= the sample size: CPU warns "degrees of
//     freedom is <= 0" (and returns inf/NaN, as we do);
//   - sub/rsub with a bool operand: PyTorch's meta kernel checks two bool
//     tensors, but not a bool tensor against a Python scalar (x - True),
//     nor one bool operand; CPU's sub_check refuses every such call;
//   - add/sub with an alpha the result type cannot hold (a float alpha for
//     integer or bool operands, a complex one for real operands, a bool
//     one for non-bool): CPU's alpha_check, which the meta kernels skip
//     for some operand types (bool + bool, alpha=1.1);
//   - neg, round and bitwise_not into an out= of another dtype: CPU's
//     unary TensorIterator requires all dtypes equal ("Found dtype Double
//     but expected Float"); their Python meta kernels do not check;
//   - index_put_ with values on another device (CPU values into a flagos
//     tensor): indexing operators skip the common-device check (their
//     indices may be CPU tensors), and the values were copied silently;
//     CUDA refuses them unless they are a 0-dim CPU scalar;
//   - uniform_ with from > to, to - from beyond the dtype's max, or a
//     bound outside the dtype (CPU's uniform_impl_ checks; the generated
//     kernel drew numbers from the reversed range).
// These run before every tier, so each tier behaves as the CPU does. Only
// checks that need no tensor data: pow with a tensor exponent and integer
// division by zero would need a device read.
#include "dispatch/bridge/argument_checks.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/core/op_registration/adaption.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <limits>

namespace flagos::semantic {
namespace {

// pow.Tensor_Scalar(self, exponent) and its in-place/out forms.
void powScalar(const OverloadSchema&, const c10::IValue* args) {
  if (!args[0].isTensor() || !args[1].isScalar()) return;
  const at::Scalar exponent = args[1].toScalar();
  TORCH_CHECK(!(at::isIntegralType(args[0].toTensor().scalar_type(), /*includeBool=*/true) &&
                exponent.isIntegral(/*includeBool=*/true) && exponent.toLong() < 0),
              "Integers to negative integer powers are not allowed.");
}

// add/sub .Tensor/.Scalar, rsub.Tensor (self, other, alpha): CPU's alpha_check
// against the common dtype of self and other.
void alphaCheck(const c10::IValue* args) {
  if (!args[0].isTensor() || !args[2].isScalar()) return;
  const at::Scalar alpha = args[2].toScalar();
  if (alpha.isIntegral(/*includeBool=*/false)) return;  // alpha=1: every dtype takes it
  const at::Tensor& self = args[0].toTensor();
  at::ScalarType dtype;
  if (args[1].isTensor())
    dtype = at::result_type(self, args[1].toTensor());
  else if (args[1].isScalar())
    dtype = at::result_type(self, args[1].toScalar());
  else
    return;
  TORCH_CHECK(!alpha.isBoolean() || dtype == at::kBool,
              "Boolean alpha only supported for Boolean results.");
  TORCH_CHECK(at::isFloatingType(dtype) || at::isComplexType(dtype) ||
                  alpha.isIntegral(/*includeBool=*/true),
              "For integral input tensors, argument alpha must not be a floating point number.");
  TORCH_CHECK(at::isComplexType(dtype) || !alpha.isComplex(),
              "For non-complex input tensors, argument alpha must not be a complex number.");
}

void addCheck(const OverloadSchema&, const c10::IValue* args) {
  alphaCheck(args);
}

// sub.Tensor / sub.Scalar / rsub.Tensor (self, other, alpha): CPU's sub_check.
void subCheck(const OverloadSchema&, const c10::IValue* args) {
  if (!args[0].isTensor()) return;
  const bool self_bool = args[0].toTensor().scalar_type() == at::kBool;
  bool other_bool = false;
  if (args[1].isTensor())
    other_bool = args[1].toTensor().scalar_type() == at::kBool;
  else if (args[1].isScalar())
    other_bool = args[1].toScalar().isBoolean();
  else
    return;
  TORCH_CHECK(!self_bool || !other_bool,
              "Subtraction, the `-` operator, with two bool tensors is not supported. "
              "Use the `^` or `logical_xor()` operator instead.");
  TORCH_CHECK(!self_bool && !other_bool,
              "Subtraction, the `-` operator, with a bool tensor is not supported. "
              "If you are trying to invert a mask, use the `~` or `logical_not()` operator "
              "instead.");
  alphaCheck(args);
}

// Unary operators CPU builds with check_all_same_dtype: out= of self's dtype.
void sameDtypeOut(const OverloadSchema& schema, const c10::IValue* args) {
  if (schema.kind != OutKind::Out || schema.outputs.empty() || !args[0].isTensor()) return;
  const c10::IValue& out = args[schema.outputs.front()];
  if (!out.isTensor()) return;
  const at::ScalarType want = args[0].toTensor().scalar_type();
  const at::ScalarType got = out.toTensor().scalar_type();
  TORCH_CHECK(got == want, "Found dtype ", got, " but expected ", want);
}

// nonzero and nonzero_static: CPU's out= must be int64, checked before any
// tier (a composite's result would be cast into any out). The missing space
// is CPU's.
constexpr char kNonzero[] = "nonzero", kNonzeroStatic[] = "nonzero_static";
template <const char* kName>
void longOut(const OverloadSchema& schema, const c10::IValue* args) {
  if (schema.kind != OutKind::Out || schema.outputs.empty()) return;
  const c10::IValue& out = args[schema.outputs.front()];
  if (!out.isTensor()) return;
  const at::ScalarType got = out.toTensor().scalar_type();
  TORCH_CHECK(got == at::kLong, kName,
              ": Expected out tensor to have scalar type Long but got scalar type", got);
}

// complex and polar: CPU's out= must be the complex type of the parts
// (the composite's result would be cast into any out).
void complexOut(const OverloadSchema& schema, const c10::IValue* args) {
  if (schema.kind != OutKind::Out || schema.outputs.empty() || !args[0].isTensor()) return;
  const c10::IValue& out = args[schema.outputs.front()];
  if (!out.isTensor()) return;
  const at::ScalarType parts = args[0].toTensor().scalar_type();
  if (parts != at::kFloat && parts != at::kDouble && parts != at::kHalf) return;  // host's errors
  const at::ScalarType want = c10::toComplexType(parts), got = out.toTensor().scalar_type();
  TORCH_CHECK(got == want, "Expected object of scalar type ", want, " but got scalar type ", got,
              " for argument 'out'");
}

// searchsorted and bucketize (out_int32 is argument 2 of both): CPU's out=
// is int32 or int64 as out_int32 says.
void searchOut(const OverloadSchema& schema, const c10::IValue* args) {
  if (schema.kind != OutKind::Out || schema.outputs.empty() || !args[2].isBool()) return;
  const c10::IValue& out = args[schema.outputs.front()];
  if (!out.isTensor()) return;
  const bool int32 = args[2].toBool();
  const at::ScalarType got = out.toTensor().scalar_type();
  TORCH_CHECK(got == (int32 ? at::kInt : at::kLong),
              "torch.searchsorted(): output tensor's dtype is wrong, it can only be Int(int32) or "
              "Long(int64) depending on whether out_int32 flag is True, but we got output "
              "tensor's dtype ",
              got, " and out_int32 flag is ", int32 ? "True" : "False");
}

// _index_put_impl_(self, indices, values, accumulate, unsafe).
void indexPutValues(const OverloadSchema&, const c10::IValue* args) {
  if (!args[0].isTensor() || !args[2].isTensor()) return;
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& values = args[2].toTensor();
  if (!values.defined() || values.device() == self.device() ||
      (values.dim() == 0 && values.is_cpu()))
    return;
  // The error every common-device check raises (device_check.cpp's too).
  c10::impl::common_device_check_failure(self.device(), values, "index_put_", "values");
}

template <bool kAll>
void allAny(const OverloadSchema& schema, const c10::IValue* args) {
  if (schema.kind != OutKind::Out || schema.outputs.empty()) return;
  const c10::IValue& out = args[schema.outputs.front()];
  if (!out.isTensor()) return;
  const at::ScalarType dtype = out.toTensor().scalar_type();
  TORCH_CHECK(dtype == at::kBool || dtype == at::kByte, kAll ? "all" : "any",
              " only supports bool tensor for result, got: ", dtype);
}

// var.correction / std.correction(self, dim, *, correction, keepdim), their
// _mean forms and out=; @p kName is the operator CPU's warning names.
constexpr char kVar[] = "var", kStd[] = "std", kVarMean[] = "var_mean", kStdMean[] = "std_mean";
template <const char* kName>
void varianceWarning(const OverloadSchema&, const c10::IValue* args) {
  if (!args[0].isTensor()) return;
  const at::Tensor& self = args[0].toTensor();
  const double correction =
      args[2].isScalar() ? args[2].toScalar().toDouble() : 1.0;  // None: Bessel's 1
  int64_t n = 1;
  if (args[1].isIntList() && !args[1].toIntList().empty()) {
    for (int64_t d : args[1].toIntList()) {
      const int64_t rank = std::max<int64_t>(self.dim(), 1);
      if (d < -rank || d >= rank) return;  // the meta kernel raises
      if (self.dim() > 0) n *= self.size(d < 0 ? d + rank : d);
    }
  } else {
    n = self.numel();
  }
  if (static_cast<double>(n) - correction <= 0) {
    TORCH_WARN(kName,
               "(): degrees of freedom is <= 0. Correction should be strictly less than the "
               "reduction factor (input numel divided by output numel).");
  }
}

// uniform_(self, from, to, generator): ATen's uniform_impl_ checks the
// bounds against self's dtype before any kernel runs.
void uniformBounds(const OverloadSchema&, const c10::IValue* args) {
  if (!args[0].isTensor() || !args[1].isDouble() || !args[2].isDouble()) return;
  const at::Tensor& self = args[0].toTensor();
  if (!at::isFloatingType(self.scalar_type())) return;
  const double from = args[1].toDouble(), to = args[2].toDouble();
  double lowest = 0, max = 0;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "uniform_", [&] {
    lowest = static_cast<double>(std::numeric_limits<scalar_t>::lowest());
    max = static_cast<double>(std::numeric_limits<scalar_t>::max());
  });
  TORCH_CHECK(from >= lowest && from <= max, "from is out of bounds for ", self.dtype());
  TORCH_CHECK(to >= lowest && to <= max, "to is out of bounds for ", self.dtype());
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  TORCH_CHECK(to - from <= max, "uniform_ expects to-from <= std::numeric_limits<",
              c10::toString(self.scalar_type()), ">::max(), but found to=", to, " and from=", from,
              " which result in to-from to exceed the limit");
}

// polygamma(n, self), polygamma_(self, n) and out=: CPU's meta kernel
// refuses a negative order.
void polygammaOrder(const OverloadSchema&, const c10::IValue* args) {
  const c10::IValue& n = args[0].isInt() ? args[0] : args[1];
  TORCH_CHECK(!n.isInt() || n.toInt() >= 0, "polygamma(n, x) does not support negative n.");
}

// Operators whose CPU kernel takes floating (and complex) types only,
// named @p kKernel in CPU's error: the generated tier would compute an
// integer tensor (in its integer type), which CPU refuses.
constexpr char kRoundCpu[] = "round_cpu", kLogaddexpCpu[] = "logaddexp_cpu",
               kLogaddexp2Cpu[] = "logaddexp2_cpu";
template <const char* kKernel>
void floatingOnly(const OverloadSchema&, const c10::IValue* args) {
  if (!args[0].isTensor()) return;
  at::ScalarType dtype = args[0].toTensor().scalar_type();
  if (args[1].isTensor()) dtype = at::promote_types(dtype, args[1].toTensor().scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(dtype) || at::isComplexType(dtype), "\"", kKernel,
                              "\" not implemented for '", c10::toString(dtype), "'");
}

// heaviside(self, values): CPU's kernel takes one real dtype for both (the
// generated tier would promote), and no complex out= either.
void heavisideTypes(const OverloadSchema& schema, const c10::IValue* args) {
  if (!args[0].isTensor() || !args[1].isTensor()) return;
  const at::Tensor &self = args[0].toTensor(), &values = args[1].toTensor();
  const bool complex_out = schema.kind == OutKind::Out && !schema.outputs.empty() &&
                           args[schema.outputs[0]].isTensor() &&
                           args[schema.outputs[0]].toTensor().is_complex();
  TORCH_CHECK(!self.is_complex() && !values.is_complex() && !complex_out,
              "heaviside is not yet implemented for complex tensors.");
  TORCH_CHECK(self.scalar_type() == values.scalar_type(),
              "heaviside is not yet implemented for tensors with different dtypes.");
}

// torch.special's orthogonal polynomials and Bessel functions of the
// modified_bessel family: CPU's kernels take float and
// double (integers are promoted to the default float type first); the
// generated tier would compute 16-bit floats too.
constexpr char kChebyshevPolynomialTCpu[] = "chebyshev_polynomial_t_cpu",
               kChebyshevPolynomialUCpu[] = "chebyshev_polynomial_u_cpu",
               kChebyshevPolynomialVCpu[] = "chebyshev_polynomial_v_cpu",
               kChebyshevPolynomialWCpu[] = "chebyshev_polynomial_w_cpu",
               kShiftedChebyshevPolynomialTCpu[] = "shifted_chebyshev_polynomial_t_cpu",
               kShiftedChebyshevPolynomialUCpu[] = "shifted_chebyshev_polynomial_u_cpu",
               kShiftedChebyshevPolynomialVCpu[] = "shifted_chebyshev_polynomial_v_cpu",
               kShiftedChebyshevPolynomialWCpu[] = "shifted_chebyshev_polynomial_w_cpu",
               kHermitePolynomialHCpu[] = "hermite_polynomial_h_cpu",
               kHermitePolynomialHeCpu[] = "hermite_polynomial_he_cpu",
               kLaguerrePolynomialLCpu[] = "laguerre_polynomial_l_cpu",
               kLegendrePolynomialPCpu[] = "legendre_polynomial_p_cpu";
constexpr char kModifiedBesselI0Cpu[] = "modified_bessel_i0_cpu",
               kModifiedBesselI1Cpu[] = "modified_bessel_i1_cpu",
               kSphericalBesselJ0Cpu[] = "spherical_bessel_j0_cpu";
template <const char* kKernel, int kInputs = 2>
void floatOrDoubleOnly(const OverloadSchema&, const c10::IValue* args) {
  for (int i = 0; i < kInputs; ++i)
    if (!args[i].isTensor()) return;
  const at::ScalarType dtype = kInputs == 1
                                   ? args[0].toTensor().scalar_type()
                                   : at::result_type(args[0].toTensor(), args[1].toTensor());
  if (at::isIntegralType(dtype, /*includeBool=*/true)) return;
  TORCH_CHECK_NOT_IMPLEMENTED(dtype == at::kFloat || dtype == at::kDouble, "\"", kKernel,
                              "\" not implemented for '", c10::toString(dtype), "'");
}

}  // namespace

ArgumentCheck argumentCheckFor(const OpSpec& spec) {
  static const struct {
    const char* id;
    ArgumentCheck check;
  } kChecks[] = {
      {"pow_scalar", powScalar},
      {"all", allAny<true>},
      {"any", allAny<false>},
      {"var", varianceWarning<kVar>},
      {"std", varianceWarning<kStd>},
      {"var_mean", varianceWarning<kVarMean>},
      {"std_mean", varianceWarning<kStdMean>},
      {"polygamma", polygammaOrder},
      {"round_decimals", floatingOnly<kRoundCpu>},
      {"logaddexp", floatingOnly<kLogaddexpCpu>},
      {"logaddexp2", floatingOnly<kLogaddexp2Cpu>},
      {"sub", subCheck},
      {"sub_scalar", subCheck},
      {"rsub", subCheck},
      {"add", addCheck},
      {"add_scalar", addCheck},
      {"neg", sameDtypeOut},
      {"round", sameDtypeOut},
      {"bitwise_not", sameDtypeOut},
      {"index_put", indexPutValues},
      {"nonzero", longOut<kNonzero>},
      {"complex", complexOut},
      {"searchsorted", searchOut},
      {"bucketize", searchOut},
      {"polar", complexOut},
      {"nonzero_static", longOut<kNonzeroStatic>},
      {"uniform", uniformBounds},
      {"heaviside", heavisideTypes},
      {"modified_bessel_i0", floatOrDoubleOnly<kModifiedBesselI0Cpu, 1>},
      {"modified_bessel_i1", floatOrDoubleOnly<kModifiedBesselI1Cpu, 1>},
      {"spherical_bessel_j0", floatOrDoubleOnly<kSphericalBesselJ0Cpu, 1>},
      {"chebyshev_polynomial_t", floatOrDoubleOnly<kChebyshevPolynomialTCpu>},
      {"chebyshev_polynomial_u", floatOrDoubleOnly<kChebyshevPolynomialUCpu>},
      {"chebyshev_polynomial_v", floatOrDoubleOnly<kChebyshevPolynomialVCpu>},
      {"chebyshev_polynomial_w", floatOrDoubleOnly<kChebyshevPolynomialWCpu>},
      {"shifted_chebyshev_polynomial_t", floatOrDoubleOnly<kShiftedChebyshevPolynomialTCpu>},
      {"shifted_chebyshev_polynomial_u", floatOrDoubleOnly<kShiftedChebyshevPolynomialUCpu>},
      {"shifted_chebyshev_polynomial_v", floatOrDoubleOnly<kShiftedChebyshevPolynomialVCpu>},
      {"shifted_chebyshev_polynomial_w", floatOrDoubleOnly<kShiftedChebyshevPolynomialWCpu>},
      {"hermite_polynomial_h", floatOrDoubleOnly<kHermitePolynomialHCpu>},
      {"hermite_polynomial_he", floatOrDoubleOnly<kHermitePolynomialHeCpu>},
      {"laguerre_polynomial_l", floatOrDoubleOnly<kLaguerrePolynomialLCpu>},
      {"legendre_polynomial_p", floatOrDoubleOnly<kLegendrePolynomialPCpu>},
  };
  for (const auto& c : kChecks)
    if (std::strcmp(c.id, spec.id) == 0) return c.check;
  return nullptr;
}

}  // namespace flagos::semantic
