// The plugin's one exported symbol, flagosVendorGetTables_v1 (vendor.h),
// written by the kit over makeTables(). Everything else is hidden
// (-fvisibility=hidden and ../exports.map).
#include "flagos_kit/entry.h"
#include "skeleton.h"

// The name users select (FLAGOS_BACKEND=skeleton) and messages start with.
const char* const flagos_kit::kPluginName = "skeleton";

namespace flagos_skeleton {
namespace {

flagosVendorTables makeTables() {
  flagosVendorTables t = flagos_kit::vendorTablesHeader();
  t.version = kVersion;
  // The lowest rank: "auto" picks the skeleton only where no other plugin
  // works (a real plugin says FLAGOS_PRIORITY_ACCELERATOR).
  t.priority = 1;
  t.host_addressable = 1;  // device memory is host memory
  t.device = deviceTable();
  t.memory = memoryTable();
  t.stream = streamTable();
  // Optional tables: NULL means every operator runs in the decomposition or
  // host tier, and collectives are staged through the host.
  t.kernels = nullptr;
  t.compiler = nullptr;
  t.collectives = nullptr;
  return t;
}

}  // namespace
}  // namespace flagos_skeleton

FLAGOS_KIT_DEFINE_ENTRY(flagos_skeleton::makeTables)
