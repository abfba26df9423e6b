// The specialization policy and the background build settings
// (specialization.h).
#include "jit/specialization.h"

#include <c10/util/Exception.h>

#include <cstdlib>

#include "runtime/env.h"

namespace flagos::semantic {

const Policy& policy() {
  static const Policy p = [] {
    Policy out;
    const auto value = env::value("FLAGOS_SPECIALIZE");
    if (!value) return out;
    const std::string& v = *value;
    out.text = v;
    if (v == "off") {
      out.kind = Policy::Off;
    } else if (v == "eager") {
      out.kind = Policy::Eager;
    } else if (v.rfind("after:", 0) == 0) {
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str() + 6, &end, 10);
      TORCH_CHECK(end && *end == '\0' && n >= 1, "FLAGOS_SPECIALIZE='", v,
                  "': expected off, eager or after:N with N >= 1");
      out.kind = Policy::After;
      out.after = n;
    } else {
      TORCH_CHECK(false, "FLAGOS_SPECIALIZE='", v, "': expected off, eager or after:N with N >= 1");
    }
    return out;
  }();
  return p;
}

int compileThreads(int fallback) {
  return static_cast<int>(
      env::integer("FLAGOS_COMPILE_THREADS", 1, 64, fallback, "a number of threads"));
}

int backgroundNice(int fallback) {
  return static_cast<int>(env::integer("FLAGOS_BACKGROUND_NICE", 0, 19, fallback, "a nice value"));
}

bool SpecializationCounts::due(const kernels::KernelKey& key) {
  const Policy& p = policy();
  if (p.kind == Policy::Eager) return true;
  std::lock_guard<std::mutex> lock(mu_);
  if (seen_.size() > 65536) seen_.clear();  // bounded; worst case a late request
  return ++seen_[key] == p.after;
}

}  // namespace flagos::semantic
