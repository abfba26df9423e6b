// The cuda plugin's flagosKernelTable: every kernel of this folder under its
// semantic ID. Built once; plain data with static lifetime (kernel.h).
#include <vector>

#include "flagos_kit/trace.h"
#include "kernels.h"

namespace flagos_cuda {
namespace {

std::vector<flagosKernelEntry>& entries() {
  static std::vector<flagosKernelEntry> e;
  return e;
}

// Each entry names its launches in trace records (Note [Named kernel
// entries], kit/flagos_kit/trace.h).
void add(const char* id, flagosKernelFn fn) {
  entries().push_back({id, flagos_kit::namedKernel(id, fn)});
}

}  // namespace

const flagosKernelTable* kernelTable() {
  static const flagosKernelTable table = [] {
    kernels::addGemmKernels(add);
    flagosKernelTable t{};
    t.struct_size = sizeof(t);
    t.num_entries = static_cast<int32_t>(entries().size());
    t.entries = entries().data();
    return t;
  }();
  return &table;
}

}  // namespace flagos_cuda
