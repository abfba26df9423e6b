// flagos_torchfl._C: the core's Python face. Kept thin: each layer binds its
// own functions (see README.md in this folder for the contract).
#include "python/bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "flagos-torchfl core (runtime, dispatch, kernels, comm)";
  flagos::python::bindRuntime(m);
  flagos::python::bindDispatch(m);
  flagos::python::bindComm(m);
  flagos::python::bindInterop(m);
#ifdef FLAGOS_ENABLE_CATALOG
  flagos::python::bindExtension(m);
  flagos::python::bindFused(m);
#endif
}
