// Checks of opaque handles (streams, events, programs) passed by the core.
// Plugins give each handle struct a `uint32_t magic` set at creation and
// cleared at destruction, so a destroyed or foreign handle is caught as
// INVALID_ARGUMENT in the common cases (a debugging aid, not a guarantee:
// freed memory may be reused).
//
// Part of the kit (kit/flagos_kit/): header-only, never crosses the ABI.
#pragma once

#include <cstdint>

#include "flagos/status.h"
#include "flagos_kit/error.h"

namespace flagos_kit {

// Is @p handle non-NULL and live? Otherwise records "<plugin> <call>:
// <what> is NULL" or "... is not a live <what>" and returns false.
template <typename Handle>
bool validHandle(const char* call, const char* what, const Handle* handle,
                 uint32_t magic) noexcept {
  if (handle == nullptr) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s %s: %s is NULL", kPluginName, call, what);
    return false;
  }
  if (handle->magic != magic) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s %s: %p is not a live %s", kPluginName, call,
         static_cast<const void*>(handle), what);
    return false;
  }
  return true;
}

// Four-character magic words, readable in a debugger.
constexpr uint32_t magicOf(const char (&tag)[5]) {
  return (uint32_t(uint8_t(tag[0])) << 24) | (uint32_t(uint8_t(tag[1])) << 16) |
         (uint32_t(uint8_t(tag[2])) << 8) | uint32_t(uint8_t(tag[3]));
}

}  // namespace flagos_kit
