// Writing results into the core's structs: fixed-size strings, and structs
// that start with struct_size (flagosProbeInfo, flagosDeviceProperties), of
// which a core built against an older minor holds fewer members.
//
// Part of the kit (kit/flagos_kit/): header-only, never crosses the ABI.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "flagos/status.h"
#include "flagos_kit/error.h"

namespace flagos_kit {

// Copies at most N-1 bytes of @p src and a NUL into @p dst.
template <size_t N>
void copyString(char (&dst)[N], const std::string& src) {
  const size_t n = std::min(src.size(), N - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

// Writes @p value into a caller's struct that starts with struct_size: only
// the first struct_size bytes, so an older core's smaller struct is never
// overrun; struct_size keeps the caller's value.
template <typename T>
flagosStatus_t writeSized(const char* call, T* out, const T& value) {
  if (out == nullptr) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s %s: out is NULL", kPluginName, call);
  }
  const uint32_t caller_size = out->struct_size;
  if (caller_size < sizeof(uint32_t)) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s %s: struct_size %u is too small", kPluginName,
                call, caller_size);
  }
  std::memcpy(out, &value, std::min<size_t>(caller_size, sizeof(T)));
  out->struct_size = caller_size;
  return FLAGOS_SUCCESS;
}

// The size/copy protocol of calls that return a variable-length blob
// (compiler.h programGetBinary): buffer NULL asks for the size; otherwise
// *size is the buffer's capacity, and it must hold all @p bytes.
inline flagosStatus_t copyOut(const char* call, const void* data, uint64_t bytes, void* buffer,
                              uint64_t* size) {
  if (size == nullptr) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s %s: size is NULL", kPluginName, call);
  }
  if (buffer != nullptr) {
    if (*size < bytes) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s %s: buffer of %llu bytes, the result has %llu",
                  kPluginName, call, static_cast<unsigned long long>(*size),
                  static_cast<unsigned long long>(bytes));
    }
    if (bytes > 0) std::memcpy(buffer, data, bytes);
  }
  *size = bytes;
  return FLAGOS_SUCCESS;
}

}  // namespace flagos_kit
