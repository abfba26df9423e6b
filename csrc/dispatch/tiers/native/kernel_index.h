// Tier 1's lookup: the active plugin's native kernels by semantic ID.
#pragma once

#include <string>
#include <unordered_map>

#include "flagos/vendor.h"

namespace flagos::semantic {

// Semantic ID -> the active plugin's kernel, built once after initialize():
// its kernel table, then the library slots (fft_library.h) for the ids the
// table leaves out.
class KernelIndex {
 public:
  // nullptr until a backend is initialized.
  static const KernelIndex* get();
  flagosKernelFn find(const char* id) const {
    auto it = fns_.find(id);
    return it == fns_.end() ? nullptr : it->second;
  }

 private:
  explicit KernelIndex(const flagosVendorTables& tables);
  std::unordered_map<std::string, flagosKernelFn> fns_;
};

}  // namespace flagos::semantic
