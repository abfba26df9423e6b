// The body of a plugin's one exported symbol, flagosVendorGetTables_v1
// (vendor.h): check the core's request, then copy the plugin's tables into
// the core's (possibly older, smaller) struct. A plugin writes
//
//   FLAGOS_KIT_DEFINE_ENTRY(mychip::makeTables)
//
// once, where makeTables() returns vendorTablesHeader() with the plugin's
// members filled in.
//
// Part of the kit (kit/flagos_kit/): header-only, never crosses the ABI.
#pragma once

#include <algorithm>
#include <cstring>

#include "flagos/vendor.h"
#include "flagos_kit/error.h"

namespace flagos_kit {

// A flagosVendorTables with the header fields set from the headers this
// plugin is built with; the plugin fills the rest.
inline flagosVendorTables vendorTablesHeader() {
  flagosVendorTables t{};
  t.struct_size = sizeof(t);
  t.abi_major = FLAGOS_ABI_VERSION_MAJOR;
  t.abi_minor = FLAGOS_ABI_VERSION_MINOR;
  t.name = kPluginName;
  t.getLastError = lastError;
  return t;
}

// Writes only what the core's struct holds; the struct_size left there says
// how large ours is, so the core knows which members we filled. Any minor of
// our major works (vendor.h: tables are append-only).
inline flagosStatus_t fillVendorTables(const flagosVendorTables& ours, uint16_t core_abi_major,
                                       uint16_t core_abi_minor, flagosVendorTables* tables) {
  if (tables == nullptr || tables->struct_size < sizeof(uint32_t)) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                "%s: flagosVendorGetTables_v1 needs a tables struct with struct_size set",
                kPluginName);
  }
  if (core_abi_major != FLAGOS_ABI_VERSION_MAJOR) {
    return fail(FLAGOS_ERROR_ABI_MISMATCH,
                "%s plugin speaks flagos ABI %d.%d, the core speaks %u.%u", kPluginName,
                FLAGOS_ABI_VERSION_MAJOR, FLAGOS_ABI_VERSION_MINOR,
                static_cast<unsigned>(core_abi_major), static_cast<unsigned>(core_abi_minor));
  }
  std::memcpy(tables, &ours, std::min<size_t>(tables->struct_size, sizeof(ours)));
  return FLAGOS_SUCCESS;
}

}  // namespace flagos_kit

// Defines the exported entry point over @p make_tables (called once, on the
// first request, inside the guard: building tables may throw).
#define FLAGOS_KIT_DEFINE_ENTRY(make_tables)                                             \
  extern "C" FLAGOS_EXPORT flagosStatus_t flagosVendorGetTables_v1(                      \
      uint16_t core_abi_major, uint16_t core_abi_minor, flagosVendorTables* tables) {    \
    return flagos_kit::guard("flagosVendorGetTables_v1", [&] {                           \
      static const flagosVendorTables ours = make_tables();                              \
      return flagos_kit::fillVendorTables(ours, core_abi_major, core_abi_minor, tables); \
    });                                                                                  \
  }
