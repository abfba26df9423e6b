// Note [Generated copies]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Device-to-device copies that change layout or dtype (x.t().contiguous(),
// .to(dtype), broadcasting copy_) would otherwise be staged through the host
// (copy_ops.cpp, Note [Staging through the host]). A generated pointwise
// kernel with the expression `self` does them on the device: the source is
// described with dst's shape (broadcast dims get stride 0) and the
// generator casts on load. copy_ops.cpp counts such a copy on the generated
// tier of aten::_copy_from.
#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "dispatch/core/device_copy.h"
#include "dispatch/tiers/generated/launch.h"
#include "jit/target.h"
#include "runtime/dtype.h"
#include "runtime/stream.h"

namespace flagos::semantic {
namespace {

const kernels::Recipe* copyRecipe() {
  static const std::shared_ptr<const kernels::Recipe> recipe = [] {
    kernels::OpInfo info;
    info.id = "copy";
    info.family = "pointwise";
    info.expr = "self";
    info.inputs = {"self"};
    std::string why;
    return kernels::makeRecipe(info, &why);
  }();
  return recipe.get();
}

bool describeForCopy(const at::Tensor& t, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                     flagosTensor& d) {
  const auto dtype = toVendorDtype(t.scalar_type());
  if (!dtype || sizes.size() > FLAGOS_MAX_DIMS) return false;
  d.data = const_cast<void*>(t.const_data_ptr());
  d.dtype = *dtype;
  d.ndim = static_cast<int32_t>(sizes.size());
  d.shape = sizes.empty() ? nullptr : sizes.data();
  d.strides = strides.empty() ? nullptr : strides.data();
  return true;
}

bool generatedCopy(const at::Tensor& dst, const at::Tensor& src) {
  if (!hasCompiler() || !copyRecipe() || src.is_conj() || src.is_neg() ||
      src.device() != dst.device() || dst.numel() == 0)
    return false;
  const at::Tensor source = src.expand(dst.sizes());
  flagosTensor out{}, in{};
  if (!describeForCopy(dst, dst.sizes(), dst.strides(), out) ||
      !describeForCopy(source, source.sizes(), source.strides(), in))
    return false;
  const kernels::Call call{&out, 1, &in, 1, nullptr, 0};
  const c10::DeviceIndex device = dst.device().index();
  return launchGenerated("copy", copyRecipe(), device, currentVendorStream(device), call);
}

const bool kCopyRegistered = (setDeviceCopyKernel(&generatedCopy), true);

}  // namespace
}  // namespace flagos::semantic
