#include "runtime/env.h"

#include <c10/util/Exception.h>

namespace flagos::env {

bool flag(const char* name, bool fallback) {
  std::string error;
  const bool result = flagos_kit::envFlag(name, fallback, &error);
  TORCH_CHECK_VALUE(error.empty(), error);
  return result;
}

}  // namespace flagos::env
