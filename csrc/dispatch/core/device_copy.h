// A hook for device-to-device copies that change layout or dtype: the
// generated tier (csrc/dispatch/tiers/generated/copy.cpp, Note [Generated
// copies]) registers a kernel here at start-up; copy_ops.cpp tries it before
// staging the copy through the host. A core built without the catalog has
// none.
#pragma once

#include <ATen/core/Tensor.h>

namespace flagos {

// Copies @p src into @p dst (same device, broadcastable, any dtypes) on the
// current stream; false when it cannot (the caller stages through the host).
using DeviceCopyKernel = bool (*)(const at::Tensor& dst, const at::Tensor& src);

void setDeviceCopyKernel(DeviceCopyKernel kernel);
DeviceCopyKernel deviceCopyKernel();

}  // namespace flagos
