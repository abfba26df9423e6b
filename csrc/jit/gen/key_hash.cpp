// KernelKey's stable string form and hash (generator.h).
#include <cinttypes>
#include <cstdio>
#include <string>

#include "flagos_kit/fnv1a.h"
#include "jit/gen/generator.h"

namespace flagos::kernels {

// Hex words joined by '.': stable across processes, compilers and runs
// (part of on-disk file keys).
std::string KernelKey::toString() const {
  std::string out;
  out.reserve(words.size() * 6);
  char buf[24];
  for (size_t i = 0; i < words.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%" PRIx64, i ? "." : "", static_cast<uint64_t>(words[i]));
    out += buf;
  }
  return out;
}

// FNV-1a over the words.
size_t KernelKeyHash::operator()(const KernelKey& k) const noexcept {
  return static_cast<size_t>(flagos_kit::fnv1aWords(k.words));
}

}  // namespace flagos::kernels
