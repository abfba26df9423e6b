// When specialized kernels are built (FLAGOS_SPECIALIZE) and by how many
// background threads (FLAGOS_COMPILE_THREADS); Note [The generated tier].
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "jit/gen/generator.h"

namespace flagos::semantic {

struct Policy {
  enum Kind { Off, Eager, After } kind = After;
  int64_t after = 3;
  std::string text = "after:3";
};

// FLAGOS_SPECIALIZE, parsed once; a malformed value raises naming it.
const Policy& policy();

// FLAGOS_COMPILE_THREADS when set (1..64; a bad value raises), else
// @p fallback.
int compileThreads(int fallback);

// FLAGOS_BACKGROUND_NICE when set (0..19; 0 keeps the pool at the process's
// priority), else @p fallback: Note [Background priority] (kernel_cache.cpp).
int backgroundNice(int fallback);

// One device's calls seen per specialized key (FLAGOS_SPECIALIZE=after:N).
class SpecializationCounts {
 public:
  // Whether a specialized kernel should be requested now for @p key.
  bool due(const kernels::KernelKey& key);

 private:
  std::mutex mu_;
  std::unordered_map<kernels::KernelKey, int64_t, kernels::KernelKeyHash> seen_;  // bounded
};

}  // namespace flagos::semantic
