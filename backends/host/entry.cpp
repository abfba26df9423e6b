// The plugin's one exported symbol, flagosVendorGetTables_v1 (vendor.h), and
// the getLastError member. Everything else in this library is hidden
// (-fvisibility=hidden); the core reaches it only through the tables below.
#include <algorithm>
#include <cstring>

#include "collectives.h"
#include "host.h"
#include "kernels/kernels.h"

namespace flagos_host {
namespace {

const char* getLastError() noexcept {
  return lastError();
}

flagosVendorTables makeTables() {
  flagosVendorTables t{};
  t.struct_size = sizeof(t);
  t.abi_major = FLAGOS_ABI_VERSION_MAJOR;
  t.abi_minor = FLAGOS_ABI_VERSION_MINOR;
  t.name = "host";
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
  t.getLastError = getLastError;
  return t;
}

}  // namespace
}  // namespace flagos_host

extern "C" FLAGOS_EXPORT flagosStatus_t flagosVendorGetTables_v1(uint16_t core_abi_major,
                                                                 uint16_t core_abi_minor,
                                                                 flagosVendorTables* tables) {
  using namespace flagos_host;
  (void)core_abi_minor;  // any minor of our major works (vendor.h: append-only)
  return guard("flagosVendorGetTables_v1", [&] {
    if (tables == nullptr || tables->struct_size < sizeof(uint32_t)) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "host: flagosVendorGetTables_v1 needs a tables struct with struct_size set");
    }
    if (core_abi_major != FLAGOS_ABI_VERSION_MAJOR) {
      return fail(FLAGOS_ERROR_ABI_MISMATCH,
                  "host plugin speaks flagos ABI %d.%d, the core speaks %u.%u",
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
