// A plugin as one built against ABI 1.0 behaves: the skeleton's tables
// (backends/skeleton), reporting abi_minor 0, and a getProperties that
// writes only the members 1.0 had (a 1.0 struct ends before .fp64). The
// core must load and run it, reading the 1.1 members as "unknown".
#include <cstddef>
#include <cstring>

#include "../../backends/skeleton/skeleton.h"
#include "flagos_kit/entry.h"

const char* const flagos_kit::kPluginName = "test_abi_1_0";

namespace {

constexpr size_t kPropertiesSize10 = offsetof(flagosDeviceProperties, fp64);

flagosDeviceTable g_device{};

flagosStatus_t getProperties10(int32_t index, flagosDeviceProperties* props) noexcept {
  if (props == nullptr) return flagos_kit::fail(FLAGOS_ERROR_INVALID_ARGUMENT, "props is NULL");
  flagosDeviceProperties full{};
  full.struct_size = sizeof(full);
  const flagosStatus_t status = flagos_skeleton::deviceTable()->getProperties(index, &full);
  if (status != FLAGOS_SUCCESS) return status;
  const uint32_t caller_size = props->struct_size;
  std::memcpy(props, &full, std::min<size_t>(caller_size, kPropertiesSize10));
  props->struct_size = caller_size;
  return FLAGOS_SUCCESS;
}

flagosVendorTables makeTables() {
  flagosVendorTables t = flagos_kit::vendorTablesHeader();
  t.abi_minor = 0;
  t.version = "1.0-test";
  t.priority = 1;
  t.host_addressable = 1;
  g_device = *flagos_skeleton::deviceTable();
  g_device.getProperties = getProperties10;
  t.device = &g_device;
  t.memory = flagos_skeleton::memoryTable();
  t.stream = flagos_skeleton::streamTable();
  return t;
}

}  // namespace

FLAGOS_KIT_DEFINE_ENTRY(makeTables)
