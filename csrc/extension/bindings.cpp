// _C bindings of the extension interface (python/flagos_torchfl/extension.py).
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <string>
#include <vector>

#include "extension/custom_kernel.h"
#include "python/bindings.h"
#include "runtime/backend.h"

namespace py = pybind11;

namespace flagos::python {
namespace {

// Python's arguments as launch arguments: flagos tensors of @p device (by
// address) and bytes (by value).
std::vector<extension::Arg> toArgs(const py::list& items, c10::DeviceIndex device,
                                   const std::string& name) {
  std::vector<extension::Arg> args(items.size());
  for (size_t k = 0; k < items.size(); ++k) {
    py::handle item = items[k];
    if (THPVariable_Check(item.ptr())) {
      const at::Tensor& t = THPVariable_Unpack(item.ptr());
      if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1 ||
          t.device().index() != device) {
        throw py::value_error("custom kernel '" + name + "': argument " + std::to_string(k) +
                              " is a tensor on " +
                              (t.defined() ? t.device().str() : std::string("(undefined)")) +
                              ", not on the launch's device flagos:" + std::to_string(device));
      }
      args[k].address = t.data_ptr();  // includes the storage offset
    } else if (py::isinstance<py::bytes>(item)) {
      args[k].bytes = item.cast<std::string>();
      args[k].by_value = true;
      if (args[k].bytes.empty())
        throw py::value_error("custom kernel '" + name + "': argument " + std::to_string(k) +
                              " is empty bytes");
    } else {
      throw py::type_error("custom kernel '" + name + "': argument " + std::to_string(k) +
                           " must be a flagos tensor or a scalar, got " +
                           std::string(py::str(py::type::handle_of(item).attr("__name__"))));
    }
  }
  return args;
}

}  // namespace

void bindExtension(py::module_& m) {
  m.def("_custom_kernel_language", [] { return extension::language(); });
  m.def("_custom_kernel_prelude",
        [](const std::string& language) { return extension::preludeFor(language); });
  m.def("_custom_kernel_launches", [] { return extension::launches(); });
  // The handle is the cache's CompiledKernel, valid until exit.
  m.def(
      "_custom_kernel_build",
      [](int device, const std::string& name, const std::string& source,
         const std::string& options) {
        const kernels::CompiledKernel* k;
        {
          py::gil_scoped_release release;  // a compile can take seconds
          k = extension::build(static_cast<c10::DeviceIndex>(device), name, source, options);
        }
        return reinterpret_cast<uintptr_t>(k);
      },
      py::arg("device"), py::arg("name"), py::arg("source"), py::arg("options"));
  m.def(
      "_custom_kernel_launch",
      [](uintptr_t handle, int device, const py::list& items, const std::vector<uint64_t>& global,
         const std::vector<uint64_t>& local, bool custom) {
        const auto* k = reinterpret_cast<const kernels::CompiledKernel*>(handle);
        const auto index = static_cast<c10::DeviceIndex>(device);
        const std::vector<extension::Arg> args = toArgs(items, index, k->kernel_name);
        extension::launch(*k, index, args, global, local, custom);
      },
      py::arg("handle"), py::arg("device"), py::arg("args"), py::arg("global_size"),
      py::arg("local_size"), py::arg("custom") = true);
}

}  // namespace flagos::python
