// The per-thread last-error message (vendor.h: "on failure leaves a
// human-readable message for the calling thread").
//
// Note [Last error lifetime]
// A failing call overwrites the calling thread's message; a successful call
// leaves it alone, so getLastError() always describes the most recent
// failure on this thread. The core reads it right after a call returned an
// error. The pointer getLastError() returns stays valid until this thread's
// next failing call into the plugin (at least as long as vendor.h asks).
#include <cstdarg>
#include <cstdio>
#include <string>

#include "host.h"

namespace flagos_host {
namespace {

thread_local std::string t_last_error;

}  // namespace

flagosStatus_t fail(flagosStatus_t status, const char* format, ...) noexcept {
  char buffer[512];
  va_list args;
  va_start(args, format);
  const int length = std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  try {
    if (length >= static_cast<int>(sizeof(buffer))) {  // rare: long paths or build logs
      std::string message(static_cast<size_t>(length) + 1, '\0');
      va_start(args, format);
      std::vsnprintf(&message[0], message.size(), format, args);
      va_end(args);
      message.resize(static_cast<size_t>(length));
      t_last_error = std::move(message);
    } else {
      t_last_error.assign(buffer, length > 0 ? static_cast<size_t>(length) : 0);
    }
  } catch (...) {
    // Out of host memory while reporting an error: keep the old message
    // rather than throw across the ABI; the status code still tells.
  }
  return status;
}

const char* lastError() noexcept {
  return t_last_error.c_str();
}

}  // namespace flagos_host
