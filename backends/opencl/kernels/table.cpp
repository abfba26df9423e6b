// The opencl plugin's kernel table: CLBlast-backed GEMM/GEMV and the nll
// losses (blas.h).
// Every other semantic ID is absent, so the core's later tiers serve it.
#include <vector>

#include "blas.h"
#include "flagos_kit/trace.h"

namespace flagos_opencl {
namespace {

std::vector<flagosKernelEntry>& rows() {
  static std::vector<flagosKernelEntry> r;
  return r;
}

// Each entry names its launches in trace records (Note [Named kernel
// entries], kit/flagos_kit/trace.h).
void add(const char* id, flagosKernelFn fn) {
  rows().push_back({id, flagos_kit::namedKernel(id, fn)});
}

}  // namespace

const flagosKernelTable* kernelTable() {
  static const flagosKernelTable table = [] {
    kernels::addGemmKernels(add);
    kernels::addGemvKernels(add);
    kernels::addLossKernels(add);
    flagosKernelTable t{};
    t.struct_size = sizeof(t);
    t.num_entries = static_cast<int32_t>(rows().size());
    t.entries = rows().data();
    return t;
  }();
  return &table;
}

}  // namespace flagos_opencl
