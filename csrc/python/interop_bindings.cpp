// Zero-copy views of one device's tensor as another PyTorch device's tensor
// over the same memory (flagos_torchfl/interop.py): a flagos tensor of the
// cuda plugin as a native `cuda` tensor and back. The view keeps the source
// tensor (so its storage) alive until the view's storage dies. Stream
// ordering is the Python layer's (interop.py synchronizes the producer).
#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>

#include "python/bindings.h"
#include "runtime/backend.h"

namespace py = pybind11;

namespace flagos::python {
namespace {

at::Tensor viewOn(const at::Tensor& source, const std::string& device_type, int64_t index) {
  TORCH_CHECK(source.defined(), "interop: an undefined tensor");
  const c10::Device device(c10::Device(device_type).type(), static_cast<c10::DeviceIndex>(index));
  at::Tensor keep = source;  // released with the view's storage
  return at::for_blob(source.data_ptr(), source.sizes())
      .strides(source.strides())
      .deleter([keep](void*) mutable { keep.reset(); })
      .options(source.options().device(device))
      .target_device(device)
      .make_tensor();
}

}  // namespace

void bindInterop(py::module_& m) {
  m.def("_view_on_device", &viewOn, py::arg("tensor"), py::arg("device_type"), py::arg("index"));
  m.def("_physical_device", [](int logical) {
    return static_cast<int>(physicalDevice(static_cast<c10::DeviceIndex>(logical)));
  });
}

}  // namespace flagos::python
