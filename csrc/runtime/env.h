// The core's environment variables: every read goes through here, with one
// grammar (the kit's, flagos_kit/env.h, which the plugins and the Python
// layer share): values are trimmed, blank means unset, flags accept
// 1/true/yes/on and 0/false/no/off in any case. docs/env.md lists the
// variables (generated from python/flagos_torchfl/config.py).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "flagos_kit/env.h"

namespace flagos::env {

// The trimmed value of @p name; nullopt when unset or blank.
inline std::optional<std::string> value(const char* name) {
  return flagos_kit::envValue(name);
}

// The value, or @p fallback when unset or blank.
inline std::string text(const char* name, const std::string& fallback = "") {
  return flagos_kit::envValue(name).value_or(fallback);
}

// @p name as a flag; garbage raises a ValueError naming the variable
// (defined in env.cpp: it needs torch's error macros).
bool flag(const char* name, bool fallback);

// @p name as a whole number from @p lo to @p hi, @p fallback when unset;
// anything else raises "NAME='v': expected @p what from lo to hi".
int64_t integer(const char* name, int64_t lo, int64_t hi, int64_t fallback, const char* what);

}  // namespace flagos::env
