// Note [Kernel preload] for the generated tier (preload.h): the
// manifests' paths, the write at exit, and the devices whose generator is
// created at initialize so their kernels load in the background.
#include "jit/preload.h"

#include <cstdio>
#include <fstream>

#include "flagos_kit/fnv1a.h"
#include "jit/cache_dir.h"
#include "jit/target.h"
#include "runtime/backend.h"

namespace flagos::semantic {
namespace {

bool preloadEnabledNoThrow() {
  try {
    return preloadEnabled();
  } catch (...) {
    return false;
  }
}

}  // namespace

// Note [Kernel preload]: at initialize, each device with a manifest from an
// earlier process gets its generator now, which queues the manifest's
// kernels as background loads; others are created on first use as before.
void preloadKernels() {
  if (!hasCompiler() || !preloadEnabled()) return;
  const std::string root = defaultCacheDir();
  if (root.empty()) return;
  const char* language = backend().tables.compiler->language;
  for (c10::DeviceIndex i = 0; i < deviceCount(); ++i) {
    const std::string device = deviceIdentity(physicalDevice(i));
    if (std::ifstream(manifestPath(root + "/kernels", language, device)))
      Generators::get().device(i);
  }
}

std::string manifestPath(const std::string& kernel_dir, const std::string& language,
                         const std::string& device) {
  if (kernel_dir.empty()) return "";
  const std::string id = language + "|" + device;
  char name[40];
  std::snprintf(name, sizeof name, "manifest-%016llx.txt",
                static_cast<unsigned long long>(flagos_kit::fnv1a(id.data(), id.size())));
  return kernel_dir + "/" + name;
}

void writeManifest(const DeviceGenerator& d) {
  if (d.manifest_path.empty() || !preloadEnabledNoThrow()) return;
  try {
    kernels::Manifest m;
    m.fp64 = d.target.fp64;
    m.kernels = d.cache->usedKernels();
    if (m.kernels.empty()) return;  // nothing new: the file stays as it is
    kernels::writeManifest(d.manifest_path, kernels::mergeManifests(std::move(m), d.earlier));
  } catch (...) {  // bad_alloc at exit: the next process just preloads less
  }
}

}  // namespace flagos::semantic
