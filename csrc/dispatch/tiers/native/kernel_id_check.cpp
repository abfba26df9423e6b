// Gives the runtime's plugin loader the catalog's IDs, so a kernel-table
// entry naming an unknown ID (a typo) fails the load (kernel.h) instead of
// becoming a silent host fallback.
#include "dispatch/bridge/catalog.h"
#include "runtime/known_kernel_ids.h"

namespace flagos::semantic {
namespace {

const bool registered = [] {
  detail::setKernelIdCheck([](const char* id) { return findOp(id) >= 0; });
  return true;
}();

}  // namespace
}  // namespace flagos::semantic
