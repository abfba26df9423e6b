// Tier 1's lookup: the active plugin's native kernels by semantic ID.
#pragma once

#include <string>
#include <unordered_map>

#include "flagos/kernel.h"

namespace flagos::semantic {

// Semantic ID -> the active plugin's kernel, built once after initialize().
class KernelIndex {
 public:
  // nullptr until a backend is initialized.
  static const KernelIndex* get();
  flagosKernelFn find(const char* id) const {
    auto it = fns_.find(id);
    return it == fns_.end() ? nullptr : it->second;
  }

 private:
  explicit KernelIndex(const flagosKernelTable* table);
  std::unordered_map<std::string, flagosKernelFn> fns_;
};

}  // namespace flagos::semantic
