// The generated tier's Python-visible ops: kernel cache statistics, waiting
// for background builds, and the recipe report.
#include <torch/library.h>

#include <sstream>
#include <string>

#include "dispatch/bridge/catalog.h"
#include "dispatch/tiers/generated/launch.h"
#include "dispatch/tiers/generated/recipes.h"
#include "dispatch/tiers/generated/tier.h"
#include "jit/devices.h"
#include "jit/first_launches.h"
#include "jit/specialization.h"
#include "jit/target.h"
#include "runtime/backend.h"

namespace flagos::semantic {

std::string kernelCacheStatsJson() {
  std::ostringstream out;
  out << "{\"policy\": \"" << policy().text << "\", \"compiler\": ";
  if (hasCompiler()) {
    out << "\"" << backend().tables.compiler->language << "\"";
  } else {
    out << "null";
  }
  out << ", \"launches\": " << g_launches.load()
      << ", \"specialized_launches\": " << g_specialized_launches.load()
      << ", \"declined\": " << g_declined.load() << ", \"failed_calls\": " << g_failed.load()
      << ", \"first_launches\": " << g_first_launches.load()
      << ", \"warm_launches\": " << g_warm_launches.load()
      << ", \"reduce_launches\": {\"rows\": " << g_strategy_launches[1].load()
      << ", \"columns\": " << g_strategy_launches[2].load()
      << ", \"group\": " << g_strategy_launches[3].load() << "}, \"devices\": [";
  bool first = true;
  for (DeviceGenerator* d : Generators::get().all()) {
    const kernels::CacheStats s = d->cache->stats();
    out << (first ? "" : ", ") << "{\"memory_hits\": " << s.memory_hits
        << ", \"memory_misses\": " << s.memory_misses << ", \"disk_hits\": " << s.disk_hits
        << ", \"disk_writes\": " << s.disk_writes << ", \"disk_corrupt\": " << s.disk_corrupt
        << ", \"disk_evictions\": " << s.disk_evictions << ", \"sync_builds\": " << s.sync_builds
        << ", \"async_builds\": " << s.async_builds << ", \"build_failures\": " << s.build_failures
        << ", \"async_pending\": " << s.async_pending << ", \"build_seconds\": " << s.build_seconds
        << ", \"entries\": " << s.entries << ", \"preloaded\": " << s.preloaded
        << ", \"fp64\": " << (d->target.fp64 ? "true" : "false")
        << ", \"local_size\": " << d->target.local_size << "}";
    first = false;
  }
  out << "]}";
  return out.str();
}

void waitForSpecializations() {
  for (DeviceGenerator* d : Generators::get().all()) d->cache->waitIdle();
}

std::string generatedRecipeReport() {
  std::ostringstream out;
  for (int i = 0; i < kNumOps; ++i) {
    const bool has = Recipes::get().find(i) != nullptr;
    out << kOps[i].id << "\t" << (has ? "recipe" : Recipes::get().whyNot(i)) << "\n";
  }
  return out.str();
}

}  // namespace flagos::semantic

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  m.def("_kernel_cache_stats() -> str", [] { return flagos::semantic::kernelCacheStatsJson(); });
  m.def("_kernel_cache_wait() -> ()", [] { flagos::semantic::waitForSpecializations(); });
  m.def("_generated_recipes() -> str", [] { return flagos::semantic::generatedRecipeReport(); });
}
