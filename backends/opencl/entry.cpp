// The plugin's one exported symbol, flagosVendorGetTables_v1 (vendor.h), and
// the getLastError member. Everything else in this library is hidden
// (-fvisibility=hidden and ../exports.map); the core reaches it only through
// the tables below.
//
// Note [OpenCL plugin priority]
// One OpenCL plugin serves real GPUs and PoCL's CPU device alike, so its
// rank under FLAGOS_BACKEND=auto depends on the machine:
//  - FLAGOS_PRIORITY_ACCELERATOR when the devices it would use are GPUs or
//    accelerators (it then beats the host plugin, as a GPU should);
//  - FLAGOS_PRIORITY_CPU_HOSTED - 5 when they are CPU devices (PoCL): both
//    plugins then run on the same cores, and the host plugin's native
//    kernels (OpenBLAS, oneDNN) are faster than untuned OpenCL on a CPU
//    (CLBlast SGEMM ~6x slower than OpenBLAS here), so "auto" should prefer
//    the host plugin; FLAGOS_BACKEND=opencl still selects this one.
// The entry point must not touch the SDK (vendor.h), so the tables claim
// ACCELERATOR and probe(), which has enumerated the devices, lowers the rank
// through flagosProbeInfo.priority when they are CPU devices.
#include <algorithm>
#include <cstring>

#include "opencl.h"

namespace flagos_opencl {
namespace {

const char* getLastError() noexcept {
  return lastError();
}

flagosVendorTables makeTables() {
  flagosVendorTables t{};
  t.struct_size = sizeof(t);
  t.abi_major = FLAGOS_ABI_VERSION_MAJOR;
  t.abi_minor = FLAGOS_ABI_VERSION_MINOR;
  t.name = "opencl";
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
  t.getLastError = getLastError;
  return t;
}

}  // namespace
}  // namespace flagos_opencl

extern "C" FLAGOS_EXPORT flagosStatus_t flagosVendorGetTables_v1(uint16_t core_abi_major,
                                                                 uint16_t core_abi_minor,
                                                                 flagosVendorTables* tables) {
  using namespace flagos_opencl;
  (void)core_abi_minor;  // any minor of our major works (vendor.h: append-only)
  return guard("flagosVendorGetTables_v1", [&] {
    if (tables == nullptr || tables->struct_size < sizeof(uint32_t)) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "opencl: flagosVendorGetTables_v1 needs a tables struct with struct_size set");
    }
    if (core_abi_major != FLAGOS_ABI_VERSION_MAJOR) {
      return fail(FLAGOS_ERROR_ABI_MISMATCH,
                  "opencl plugin speaks flagos ABI %d.%d, the core speaks %u.%u",
                  FLAGOS_ABI_VERSION_MAJOR, FLAGOS_ABI_VERSION_MINOR,
                  static_cast<unsigned>(core_abi_major), static_cast<unsigned>(core_abi_minor));
    }
    // Write only what the core's (possibly older, smaller) struct holds; the
    // struct_size we leave says how large ours is, so the core knows which
    // members we filled.
    static const flagosVendorTables ours = makeTables();
    const size_t n = std::min<size_t>(tables->struct_size, sizeof(ours));
    std::memcpy(tables, &ours, n);
    return FLAGOS_SUCCESS;
  });
}
