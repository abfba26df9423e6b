// Environment variables: one reader and one boolean grammar for every
// plugin and the core (the Python layer, flagos_torchfl/config.py, accepts
// the same words). Values are read as the user wrote them, trimmed, any
// case:
//   true:  1, true, yes, on
//   false: 0, false, no, off
// Anything else is garbage: the caller reports it naming the variable.
//
// Part of the kit (kit/flagos_kit/): header-only helpers compiled into each
// plugin and into the core; never passed across the vendor ABI.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <string>

#include "flagos_kit/byte_size.h"

namespace flagos_kit {

// The trimmed value of @p name; nullopt when unset or blank (a blank value
// means "default", as in the Python layer).
inline std::optional<std::string> envValue(const char* name) {
  const char* raw = std::getenv(name);
  if (raw == nullptr) return std::nullopt;
  std::string value = trimmed(raw);
  if (value.empty()) return std::nullopt;
  return value;
}

inline std::string lowered(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The boolean grammar above; nullopt for anything else.
inline std::optional<bool> parseFlag(const std::string& text) {
  const std::string s = lowered(trimmed(text));
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  return std::nullopt;
}

// @p name as a flag: @p fallback when unset; on garbage, @p fallback and a
// message naming the variable in @p error (when given).
inline bool envFlag(const char* name, bool fallback, std::string* error = nullptr) {
  const auto value = envValue(name);
  if (!value) return fallback;
  if (const auto flag = parseFlag(*value)) return *flag;
  if (error != nullptr) {
    *error =
        std::string(name) + "='" + *value + "' is not on or off (1/true/yes/on, 0/false/no/off)";
  }
  return fallback;
}

// @p name as a byte size of at least @p minimum (byte_size.h syntax): @p
// fallback when unset; false with a message naming the variable on garbage.
inline bool envByteSize(const char* name, uint64_t minimum, uint64_t fallback, uint64_t* bytes,
                        std::string* error) {
  const auto value = envValue(name);
  *bytes = fallback;
  if (!value) return true;
  uint64_t parsed = 0;
  if (!parseByteSize(*value, &parsed) || parsed < minimum) {
    *error = std::string(name) + "='" + *value + "' is not a size in bytes of at least " +
             std::to_string(minimum) + " (examples: 1073741824, 512M, 2GiB)";
    return false;
  }
  *bytes = parsed;
  return true;
}

}  // namespace flagos_kit
