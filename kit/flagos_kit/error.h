// The per-thread last error and the ABI boundary guard: every plugin's
// first two needs (vendor.h: "on failure leaves a human-readable message
// for the calling thread"; "never throws").
//
// Note [Last error lifetime]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A failing call overwrites the calling thread's message; a successful call
// leaves it alone, so lastError() always describes the most recent failure
// on this thread. The core reads it right after a call returned an error.
// The pointer stays valid until this thread's next failing call into the
// plugin (at least as long as vendor.h asks).
//
// Note [ABI boundary]
// ~~~~~~~~~~~~~~~~~~~
// Every function in a table runs its body through guard(): C++ exceptions
// (std::bad_alloc from a container, std::system_error from std::thread, a
// bug) must never unwind into the C caller. They become
// FLAGOS_ERROR_INTERNAL with the exception's message. Work a plugin runs
// later (stream workers, SDK callbacks) is guarded the same way.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <exception>
#include <string>

#include "flagos/status.h"
#include "flagos_kit/plugin.h"

namespace flagos_kit {

inline std::string& lastErrorSlot() noexcept {
  thread_local std::string message;
  return message;
}

// Records a printf-style message as the calling thread's last error and
// returns @p status, so that failures read `return fail(STATUS, "...", ...)`.
// Never throws: out of memory while reporting keeps the old message (the
// status code still tells).
inline flagosStatus_t failv(flagosStatus_t status, const char* format, va_list args) noexcept {
  char buffer[512];
  va_list again;
  va_copy(again, args);
  const int length = std::vsnprintf(buffer, sizeof(buffer), format, args);
  try {
    if (length >= static_cast<int>(sizeof(buffer))) {  // rare: build logs, long paths
      std::string message(static_cast<size_t>(length) + 1, '\0');
      std::vsnprintf(&message[0], message.size(), format, again);
      message.resize(static_cast<size_t>(length));
      lastErrorSlot() = std::move(message);
    } else {
      lastErrorSlot().assign(buffer, length > 0 ? static_cast<size_t>(length) : 0);
    }
  } catch (...) {
  }
  va_end(again);
  return status;
}

__attribute__((format(printf, 2, 3))) inline flagosStatus_t fail(flagosStatus_t status,
                                                                 const char* format, ...) noexcept {
  va_list args;
  va_start(args, format);
  failv(status, format, args);
  va_end(args);
  return status;
}

// The calling thread's last error ("" if none): the plugin's
// flagosVendorTables.getLastError.
inline const char* lastError() noexcept {
  return lastErrorSlot().c_str();
}

// Runs @p body, turning any exception into FLAGOS_ERROR_INTERNAL that names
// the plugin and @p call (Note [ABI boundary]).
template <typename Body>
flagosStatus_t guard(const char* call, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return fail(FLAGOS_ERROR_INTERNAL, "%s %s: internal error: %s", kPluginName, call, e.what());
  } catch (...) {
    return fail(FLAGOS_ERROR_INTERNAL, "%s %s: internal error: unknown exception", kPluginName,
                call);
  }
}

}  // namespace flagos_kit
