// The plugin's one exported symbol, flagosVendorGetTables_v1 (vendor.h):
// the kit's entry point over the tables below. Everything else in this
// library is hidden (-fvisibility=hidden and ../exports.map).
#include "flagos_kit/entry.h"
#include "cuda_plugin.h"

const char* const flagos_kit::kPluginName = "cuda";

namespace flagos_cuda {
namespace {

flagosVendorTables makeTables() {
  flagosVendorTables t = flagos_kit::vendorTablesHeader();
  t.version = kVersion;
  t.priority = FLAGOS_PRIORITY_ACCELERATOR;
  t.host_addressable = 0;  // device memory is on the other side of the bus
  t.device = deviceTable();
  t.memory = memoryTable();
  t.stream = streamTable();
#ifdef FLAGOS_CUDA_HAVE_CUBLASLT
  t.kernels = kernelTable();  // GEMMs on cuBLASLt; every other op takes a later tier
#else
  t.kernels = nullptr;  // built without cublasLt.h: every op takes a later tier
#endif
  t.compiler = compilerTable();  // CUDA C through NVRTC
  t.collectives = nullptr;       // collectives go through the host (gloo)
  t.trace = traceTable();        // CUDA event times (trace.cpp)
  return t;
}

}  // namespace
}  // namespace flagos_cuda

FLAGOS_KIT_DEFINE_ENTRY(flagos_cuda::makeTables)
