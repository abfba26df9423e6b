// Sizes in bytes as users write them in the environment: an integer with an
// optional binary suffix, any case: "1073741824", "512M", "2GiB", "64kb".
// One parser for FLAGOS_HOST_MEMORY_LIMIT, FLAGOS_OPENCL_MEMORY_LIMIT and
// FLAGOS_CACHE_MAX_BYTES.
//
// Part of the kit (kit/flagos_kit/): header-only helpers compiled into each
// plugin and into the core; never passed across the vendor ABI.
#pragma once

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace flagos_kit {

inline std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\n");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\n") - first + 1);
}

// Parses the leading decimal digits of @p s into @p value; returns the
// number of characters used (0 on no digits or overflow).
inline size_t parseDigits(const std::string& s, uint64_t* value) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return 0;
  errno = 0;
  char* end = nullptr;
  *value = std::strtoull(s.c_str(), &end, 10);
  if (errno == ERANGE) return 0;
  return static_cast<size_t>(end - s.c_str());
}

// Binary multiplier of a size suffix ("", "k", "KiB", "mb", ...), 0 if unknown.
inline uint64_t suffixMultiplier(std::string suffix) {
  for (char& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (suffix.empty() || suffix == "b") return 1;
  const std::string units = "kmgt";
  const auto unit = units.find(suffix[0]);
  const std::string rest = suffix.substr(1);
  if (unit == std::string::npos || !(rest.empty() || rest == "b" || rest == "ib")) return 0;
  return uint64_t{1} << (10 * (unit + 1));
}

// False for anything but "<digits>[suffix]" (surrounding blanks allowed) or
// a value that overflows 64 bits.
inline bool parseByteSize(const std::string& text, uint64_t* bytes) {
  const std::string s = trimmed(text);
  uint64_t value = 0;
  const size_t digits = parseDigits(s, &value);
  const uint64_t multiplier = digits > 0 ? suffixMultiplier(trimmed(s.substr(digits))) : 0;
  if (multiplier == 0 || value > UINT64_MAX / multiplier) return false;
  *bytes = value * multiplier;
  return true;
}

}  // namespace flagos_kit
