#include "runtime/known_kernel_ids.h"

#include <atomic>

namespace flagos::detail {
namespace {

// Constant-initialized, so a registration from another file's static
// initializer cannot run before it.
std::atomic<KernelIdCheck> g_check{nullptr};

}  // namespace

void setKernelIdCheck(KernelIdCheck check) {
  g_check.store(check);
}

KernelIdCheck kernelIdCheck() {
  return g_check.load();
}

}  // namespace flagos::detail
