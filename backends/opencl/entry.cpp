// The plugin's one exported symbol, flagosVendorGetTables_v1 (vendor.h):
// the kit's entry point over the tables below. Everything else in this library is hidden
// (-fvisibility=hidden and ../exports.map); the core reaches it only through
// the tables below.
//
// Note [OpenCL plugin priority]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// One OpenCL plugin serves real GPUs and PoCL's CPU device alike, so its
// rank under FLAGOS_BACKEND=auto depends on the machine:
//  - FLAGOS_PRIORITY_ACCELERATOR when the devices it would use are GPUs or
//    accelerators (it then beats the host plugin, as a GPU should);
//  - FLAGOS_PRIORITY_CPU_HOSTED - 5 when they are CPU devices (PoCL): both
//    plugins then run on the same cores, and the host plugin's native
//    kernels (OpenBLAS, oneDNN) are faster than untuned OpenCL on a CPU
//    (CLBlast SGEMM far slower than OpenBLAS here), so "auto" should prefer
//    the host plugin; FLAGOS_BACKEND=opencl still selects this one.
// The entry point must not touch the SDK (vendor.h), so the tables claim
// ACCELERATOR and probe(), which has enumerated the devices, lowers the rank
// through flagosProbeInfo.priority when they are CPU devices.
#include "flagos_kit/entry.h"
#include "opencl.h"

const char* const flagos_kit::kPluginName = "opencl";

namespace flagos_opencl {
namespace {

flagosVendorTables makeTables() {
  flagosVendorTables t = flagos_kit::vendorTablesHeader();
  t.version = kVersion;
  // See Note [OpenCL plugin priority].
  t.priority = FLAGOS_PRIORITY_ACCELERATOR;
  t.host_addressable = 0;  // virtual addresses: Note [Virtual device addresses]
  t.device = deviceTable();
  t.memory = memoryTable();
  t.stream = streamTable();
#ifdef FLAGOS_OPENCL_HAVE_CLBLAST
  t.kernels = kernelTable();  // GEMM/GEMV; every other op takes a later tier
#else
  t.kernels = nullptr;  // built without CLBlast: every op takes a later tier
#endif
  t.compiler = compilerTable();
  t.collectives = nullptr;  // collectives go through the host (gloo)
  t.trace = traceTable();   // CL event profiling times (trace.cpp)
  return t;
}

}  // namespace
}  // namespace flagos_opencl

FLAGOS_KIT_DEFINE_ENTRY(flagos_opencl::makeTables)
