// The CUDA driver API, opened at run time (libcuda.so.1 comes with the
// NVIDIA kernel driver, not with the SDK): no link-time dependency, so the
// plugin loads on a machine without a GPU and says why it cannot run.
//
// Note [Versioned driver entry points]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// cuda.h maps several names onto versioned symbols (`#define cuMemAlloc
// cuMemAlloc_v2`): the header's types and the library's symbol must agree,
// so each entry point is looked up under the name the macro expands to
// (FLAGOS_CUDA_SYMBOL stringizes after expansion), never the bare one, whose
// old ABI the library keeps for old binaries.
#include <dlfcn.h>

#include <cstdio>

#include "cuda_plugin.h"

namespace flagos_cuda {
namespace {

#define FLAGOS_CUDA_STR(x) #x
#define FLAGOS_CUDA_SYMBOL(x) FLAGOS_CUDA_STR(x)

struct Opened {
  Driver driver;
  std::string reason;  // "" when usable
};

Opened* open() {
  auto* o = new Opened();  // never freed: tables may run at process exit
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    o->reason = std::string("the NVIDIA driver library libcuda.so.1 is not installed (") +
                (why != nullptr ? why : "dlopen failed") + ")";
    return o;
  }
  Driver& d = o->driver;
#define FLAGOS_CUDA_RESOLVE(name)                                                              \
  d.name = reinterpret_cast<decltype(d.name)>(dlsym(lib, FLAGOS_CUDA_SYMBOL(name)));           \
  if (d.name == nullptr) {                                                                     \
    o->reason = std::string("libcuda.so.1 lacks ") + FLAGOS_CUDA_SYMBOL(name) +                \
                " (the driver is older than the CUDA " + std::to_string(CUDA_VERSION / 1000) + \
                " headers the plugin was built with)";                                         \
    return o;                                                                                  \
  }
  FLAGOS_CUDA_DRIVER_FUNCTIONS(FLAGOS_CUDA_RESOLVE)
#undef FLAGOS_CUDA_RESOLVE
  d.cuFuncGetParamInfo = reinterpret_cast<decltype(d.cuFuncGetParamInfo)>(
      dlsym(lib, FLAGOS_CUDA_SYMBOL(cuFuncGetParamInfo)));
  const CUresult init = d.cuInit(0);
  if (init != CUDA_SUCCESS) {
    o->reason = "cuInit failed: " + errorText(init);
    if (init == CUDA_ERROR_NO_DEVICE) o->reason = "no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)";
    return o;
  }
  d.cuDriverGetVersion(&d.version);
  return o;
}

Opened& opened() {
  static Opened* o = open();
  return *o;
}

}  // namespace

const Driver* driver(std::string* reason) {
  Opened& o = opened();
  if (reason != nullptr) *reason = o.reason;
  return o.reason.empty() ? &o.driver : nullptr;
}

const Driver& cu() {
  return opened().driver;
}

std::string errorText(CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  const Driver& d = opened().driver;
  if (d.cuGetErrorName != nullptr) d.cuGetErrorName(result, &name);
  if (d.cuGetErrorString != nullptr) d.cuGetErrorString(result, &text);
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer), "%s (%d): %s", name != nullptr ? name : "CUDA error",
                static_cast<int>(result), text != nullptr ? text : "unknown error");
  return buffer;
}

flagosStatus_t check(CUresult result, const char* call, const char* what) {
  if (result == CUDA_SUCCESS) return FLAGOS_SUCCESS;
  flagosStatus_t status = FLAGOS_ERROR_DEVICE;
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      status = FLAGOS_ERROR_OUT_OF_MEMORY;
      break;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
      status = FLAGOS_ERROR_INVALID_ARGUMENT;
      break;
    case CUDA_ERROR_NOT_READY:
      return FLAGOS_ERROR_NOT_READY;  // not an error: no message
    default:
      break;
  }
  return fail(status, "cuda %s: %s failed: %s", call, what, errorText(result).c_str());
}

}  // namespace flagos_cuda
