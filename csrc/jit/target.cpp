// Compiler and target discovery for the generated tier (target.h).
#include "jit/target.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "jit/gen/emit.h"
#include "runtime/backend.h"
#include "runtime/env.h"

namespace flagos::semantic {

bool hasCompiler() {
  // Kept only once a backend is loaded: asked before initialize() (the
  // cache stats, a tool listing the generated ops), the answer is "not yet".
  static std::atomic<int> known{0};  // 0: not yet, 1: no compiler, 2: a compiler
  const int k = known.load(std::memory_order_acquire);
  if (k != 0) return k == 2;
  if (!isInitialized()) return false;
  const bool has = backend().tables.compiler != nullptr;
  known.store(has ? 2 : 1, std::memory_order_release);
  return has;
}

std::string deviceIdentity(int32_t physical) {
  const Backend& b = backend();
  flagosDeviceProperties props{};
  props.struct_size = sizeof(props);
  check(b.tables.device->getProperties(physical, &props), "getProperties");
  return b.name + "|" + b.probe.sdk_version + "|" + b.probe.driver_version + "|" +
         std::string(props.arch, strnlen(props.arch, sizeof(props.arch))) + "|" +
         std::string(props.name, strnlen(props.name, sizeof(props.name)));
}

uint64_t localSize(int32_t physical) {
  flagosDeviceProperties props{};
  props.struct_size = sizeof(props);
  check(backend().tables.device->getProperties(physical, &props), "getProperties");
  const uint64_t max = props.max_work_group_size != 0 ? props.max_work_group_size : UINT32_MAX;
  uint64_t local = props.preferred_work_group_size != 0 ? props.preferred_work_group_size
                                                        : std::min<uint64_t>(256, max);
  // The device's limit bounds the override.
  const auto limit = static_cast<int64_t>(std::min<uint64_t>(max, INT64_MAX));
  local = static_cast<uint64_t>(env::integer("FLAGOS_WORK_GROUP_SIZE", 1, limit,
                                             static_cast<int64_t>(std::min<uint64_t>(local, max)),
                                             "a work-group size"));
  return std::min(local, max);
}

int32_t reportedFp64(int32_t physical) {
  flagosDeviceProperties props{};
  props.struct_size = sizeof(props);
  check(backend().tables.device->getProperties(physical, &props), "getProperties");
  return props.fp64;
}

bool probeFp64(const flagosCompilerTable* c, int32_t physical) {
  const kernels::Dialect* dialect = kernels::dialectFor(c->language);
  const std::string src = dialect ? dialect->fp64Probe() : "";
  if (src.empty()) return true;
  flagosProgram_t program = nullptr;
  if (c->programBuild(physical, src.c_str(), "", &program) != FLAGOS_SUCCESS) return false;
  c->programDestroy(program);
  return true;
}

}  // namespace flagos::semantic
