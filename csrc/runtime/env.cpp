#include "runtime/env.h"

#include <c10/util/Exception.h>

#include <cerrno>
#include <cstdlib>

namespace flagos::env {

bool flag(const char* name, bool fallback) {
  std::string error;
  const bool result = flagos_kit::envFlag(name, fallback, &error);
  TORCH_CHECK_VALUE(error.empty(), error);
  return result;
}

int64_t integer(const char* name, int64_t lo, int64_t hi, int64_t fallback, const char* what) {
  const auto v = value(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v->c_str(), &end, 10);
  TORCH_CHECK(errno == 0 && end && *end == '\0' && n >= lo && n <= hi, name, "='", *v,
              "': expected ", what, " from ", lo, " to ", hi);
  return n;
}

}  // namespace flagos::env
