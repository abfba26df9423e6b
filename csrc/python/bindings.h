// One binding function per core layer; module.cpp calls them all.
#pragma once

#include <pybind11/pybind11.h>

namespace flagos::python {
void bindRuntime(pybind11::module_& m);   // runtime_bindings.cpp
void bindDispatch(pybind11::module_& m);  // dispatch_bindings.cpp
void bindComm(pybind11::module_& m);      // comm/bindings.cpp
void bindInterop(pybind11::module_& m);   // interop_bindings.cpp
// extension/bindings.cpp; with the catalog only (it shares the generated
// tier's kernel cache).
void bindExtension(pybind11::module_& m);
void bindFused(pybind11::module_& m);  // extension/fused_bindings.cpp, the same
}  // namespace flagos::python
