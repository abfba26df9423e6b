// Tier 4 for catalog overloads. The generic path is ATen's boxed
// cpu_fallback (the same one the core registers for every other operator);
// the redirects below cover ops whose own CPU kernel does not exist.
#include "dispatch/tiers/host/host_tier.h"

#include "dispatch/tiers/host/host_fallback.h"

#include <ATen/ATen.h>
#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <utility>
#include <vector>

namespace flagos::semantic {
namespace {

c10::OperatorHandle atenOp(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

// convolution_backward_overrideable lacks convolution_backward's
// `bias_sizes`; insert it (the bias has one element per output channel).
void convolutionBackward(torch::jit::Stack* stack) {
  // grad_output, input, weight, stride, padding, dilation, transposed,
  // output_padding, groups, output_mask
  constexpr size_t kArgs = 10;
  TORCH_INTERNAL_ASSERT(stack->size() >= kArgs);
  const size_t base = stack->size() - kArgs;
  const at::Tensor& weight = (*stack)[base + 2].toTensor();
  const bool transposed = (*stack)[base + 6].toBool();
  const int64_t groups = (*stack)[base + 8].toInt();
  const int64_t channels = transposed ? weight.size(1) * groups : weight.size(0);
  stack->insert(stack->begin() + base + 3, c10::IValue(std::vector<int64_t>{channels}));
  at::native::cpu_fallback(atenOp("aten::convolution_backward", ""), stack);
}

}  // namespace

void runOnHost(const c10::OperatorHandle& op, const char* host_op, c10::ArrayRef<int> mutated,
               torch::jit::Stack* stack) {
  if (host_op == nullptr) {
    flagos::runOnHost(op, stack, mutated);  // the core's tier 4, uncounted
    return;
  }
  if (std::strcmp(host_op, "convolution_backward") == 0) {
    convolutionBackward(stack);
    return;
  }
  // Same arguments under another name (convolution_overrideable ->
  // convolution).
  at::native::cpu_fallback(atenOp((std::string("aten::") + host_op).c_str(), ""), stack,
                           /*error_on_views=*/true);
}

}  // namespace flagos::semantic
