// What the semantic layer does when a backend is initialized, in this order:
// the stored shape results into the bridge's caches (shape_preload.cpp),
// then the kernel preload of the devices with a manifest (jit/preload.cpp).
// One place, so the order is not the link order of two files.
#include "dispatch/shapes/shape_preload.h"
#include "jit/preload.h"
#include "runtime/backend.h"

namespace flagos::semantic {
namespace {

const bool kHooked = (onInitialized(loadShapeStore), onInitialized(preloadKernels), true);

}  // namespace
}  // namespace flagos::semantic
