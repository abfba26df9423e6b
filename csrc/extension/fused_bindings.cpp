// _C bindings of fused kernels (Note [Fused kernels], jit/gen/fused.h):
// torch.compile's flagos backend (python/flagos_torchfl/inductor/) emits a
// body, the active language's Dialect frames it, the compiler slot builds it
// into the kernel cache; launches share _custom_kernel_launch.
#include <pybind11/stl.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "extension/custom_kernel.h"
#include "jit/gen/fused.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace flagos::python {
namespace {

// (kind, name, dtype, read_only): kind "ptr" (dtype: a flagosDtype_t) or
// "int64".
using ParamSpec = std::tuple<std::string, std::string, int64_t, bool>;

kernels::FusedMode modeOf(const std::string& mode) {
  if (mode == "pointwise") return kernels::FusedMode::Pointwise;
  if (mode == "item") return kernels::FusedMode::ItemReduction;
  if (mode == "group") return kernels::FusedMode::GroupReduction;
  throw py::value_error("fused kernel mode must be pointwise, item or group, got '" + mode + "'");
}

std::string source(const std::string& language, const std::string& name,
                   const std::vector<ParamSpec>& specs, const std::string& body,
                   const std::string& mode, int group, int rows, bool fp64) {
  const kernels::Dialect* dl = kernels::dialectFor(language);
  if (dl == nullptr)
    throw py::value_error("no fused-kernel emitter for language '" + language + "'");
  kernels::FusedKernel k;
  k.name = name;
  k.body = body;
  k.mode = modeOf(mode);
  k.group = group;
  k.rows = rows;
  k.fp64 = fp64;
  for (const auto& [kind, pname, dtype, read_only] : specs) {
    if (kind == "ptr") {
      k.params.push_back(
          {kernels::Param::Pointer, pname, static_cast<flagosDtype_t>(dtype), "", read_only});
    } else if (kind == "int64") {
      k.params.push_back({kernels::Param::Scalar, pname, 0, dl->int64Type(), false});
    } else {
      throw py::value_error("fused kernel parameter kind must be ptr or int64, got '" + kind + "'");
    }
  }
  try {
    return kernels::emitFused(k, *dl).text;
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
}

}  // namespace

void bindFused(py::module_& m) {
  m.def("_fused_kernel_source", &source, py::arg("language"), py::arg("name"), py::arg("params"),
        py::arg("body"), py::arg("mode"), py::arg("group"), py::arg("rows"), py::arg("fp64"));
  // The handle is the cache's CompiledKernel, valid until exit; launch it
  // with _custom_kernel_launch.
  m.def(
      "_fused_kernel_build",
      [](int device, const std::string& name, const std::string& text) {
        const kernels::Dialect* dl = kernels::dialectFor(extension::language());
        const kernels::Source src{text, name, dl != nullptr ? dl->buildOptions(true) : ""};
        const kernels::CompiledKernel* k;
        {
          py::gil_scoped_release release;  // a compile can take seconds
          k = extension::buildFused(static_cast<c10::DeviceIndex>(device), src);
        }
        return reinterpret_cast<uintptr_t>(k);
      },
      py::arg("device"), py::arg("name"), py::arg("source"));
}

}  // namespace flagos::python
