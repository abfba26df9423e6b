// Note [Parameter identity across .to()]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// nn.Module._apply keeps each Parameter object (and swaps its .data) only
// when torch._has_compatible_shallow_copy_type(cpu_tensor, device_tensor)
// holds; otherwise it makes new Parameters, which unties tied weights
// (GPT-2's lm_head and its embedding) and leaves an optimizer built before
// .to() holding the old tensors. TensorImpl::has_compatible_shallow_copy_type
// (c10/core/TensorImpl.h) accepts CPU <-> CUDA/XPU/... but not PrivateUse1,
// and says a PrivateUse1 backend registers this operator itself. Dense
// strided tensors of CPU and flagos may replace each other's data, exactly
// as CPU and CUDA may; anything else keeps TensorImpl's own answer. A type
// query, not a kernel: not counted in op_stats().
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace flagos {
namespace {

bool denseCpuOrFlagos(const at::Tensor& t) {
  const c10::DeviceType type = t.device().type();
  return t.layout() == c10::Layout::Strided && !t.is_quantized() && !t.is_nested() &&
         (type == c10::DeviceType::CPU || type == c10::DeviceType::PrivateUse1);
}

bool hasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  if (self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set())) return true;
  return denseCpuOrFlagos(self) && denseCpuOrFlagos(from);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(hasCompatibleShallowCopyType));
}

}  // namespace
}  // namespace flagos
