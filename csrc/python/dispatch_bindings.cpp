// _C bindings of the dispatch layer (contract: README.md in this folder).
#include <pybind11/stl.h>

#include "dispatch/core/op_stats.h"
#include "dispatch/tiers/host/host_fallback.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace flagos::python {

void bindDispatch(py::module_& m) {
  m.def("_op_stats", []() { return opStatsSnapshot(); });
  m.def("_reset_op_stats", []() { resetOpStats(); });
  m.def(
      "_set_log_fallback", [](bool enabled) { setLogFallback(enabled); }, py::arg("enabled"));
}

}  // namespace flagos::python
