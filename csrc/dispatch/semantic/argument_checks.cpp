// Note [Argument checks the meta kernels skip]
// The bridge learns shapes and dtypes from the meta kernels, which check
// most bad arguments (Note [Argument errors come from the CPU]). A few of
// CPU's checks live in its compute kernels instead, so a call that the CPU
// refuses ran on the device and returned a value (PyTorch's device-generic
// tests: test_binary_ufuncs, test_reductions):
//   - pow of an integer tensor to a negative integer scalar (CPU: "Integers
//     to negative integer powers are not allowed.", where we returned 0);
//   - all/any into an out= tensor that is neither bool nor uint8;
//   - var/std with a correction >= the sample size: CPU warns "degrees of
//     freedom is <= 0" (and returns inf/NaN, as we do).
// These run before every tier, so each tier behaves as the CPU does. Only
// checks that need no tensor data: pow with a tensor exponent and integer
// division by zero would need a device read.
#include "dispatch/semantic/argument_checks.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>

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

template <bool kAll>
void allAny(const OverloadSchema& schema, const c10::IValue* args) {
  if (schema.kind != OutKind::Out || schema.outputs.empty()) return;
  const c10::IValue& out = args[schema.outputs.front()];
  if (!out.isTensor()) return;
  const at::ScalarType dtype = out.toTensor().scalar_type();
  TORCH_CHECK(dtype == at::kBool || dtype == at::kByte, kAll ? "all" : "any",
              " only supports bool tensor for result, got: ", dtype);
}

// var.correction / std.correction(self, dim, *, correction, keepdim) and out=.
template <bool kStd>
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
    TORCH_WARN(kStd ? "std" : "var",
               "(): degrees of freedom is <= 0. Correction should be strictly less than the "
               "reduction factor (input numel divided by output numel).");
  }
}

}  // namespace

ArgumentCheck argumentCheckFor(const OpSpec& spec) {
  static const struct {
    const char* id;
    ArgumentCheck check;
  } kChecks[] = {
      {"pow_scalar", powScalar},       {"all", allAny<true>},          {"any", allAny<false>},
      {"var", varianceWarning<false>}, {"std", varianceWarning<true>},
  };
  for (const auto& c : kChecks)
    if (std::strcmp(c.id, spec.id) == 0) return c.check;
  return nullptr;
}

}  // namespace flagos::semantic
