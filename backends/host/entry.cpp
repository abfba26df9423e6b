// The plugin's one exported symbol, flagosVendorGetTables_v1 (vendor.h):
// the kit's entry point over the tables below. Everything else in this
// library is hidden (-fvisibility=hidden and ../exports.map); the core
// reaches it only through these tables.
#include "flagos_kit/entry.h"
#include "collectives.h"
#include "host.h"
#include "kernels/kernels.h"

const char* const flagos_kit::kPluginName = "host";

namespace flagos_host {
namespace {

flagosVendorTables makeTables() {
  flagosVendorTables t = flagos_kit::vendorTablesHeader();
  t.version = kVersion;
  t.priority = FLAGOS_PRIORITY_CPU_HOSTED;
  t.host_addressable = 1;
  t.device = deviceTable();
  t.memory = memoryTable();
  t.stream = streamTable();
  t.kernels = flagos_host_kernel_table();  // OpenBLAS GEMM, pointwise, reductions
  t.compiler = compilerTable();            // "c": generated kernels via the system cc
  // host-shm: one rank per process of this machine (collectives.cpp)
  t.collectives = coll::collectiveTable();
  t.trace = traceTable();    // host clock around each task (trace.cpp)
  t.fft = fftTable();        // KISS FFT, if built with it (fft.cpp)
  t.linalg = linalgTable();  // OpenBLAS's LAPACK (linalg.cpp)
  return t;
}

}  // namespace
}  // namespace flagos_host

FLAGOS_KIT_DEFINE_ENTRY(flagos_host::makeTables)
