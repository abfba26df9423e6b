// kernelLaunch (compiler.h) for "cuda-c": one kernel parameter per
// argument, a device pointer passed as the address itself, so each
// flagosKernelArg's value is already what cuLaunchKernel wants a pointer to.
// The grid is the global size rounded up to whole blocks of `local` (256
// when the core gives none); the kernels skip the items past the end (Note
// [Launch geometry]).
#include <cinttypes>

#include "cuda_plugin.h"

namespace flagos_cuda {
namespace {

constexpr uint64_t kDefaultBlock = 256;
constexpr int kMaxArgs = 256;

// The kernel @p name of @p program, looked up (and its parameters counted)
// on first use; nullptr with a message when the module has none.
const flagosProgram_st::Kernel* kernelOf(flagosProgram_t program, const char* name) {
  std::lock_guard<std::mutex> lock(program->mu);
  for (const auto& k : program->kernels)
    if (k.name == name) return &k;
  CUfunction function = nullptr;
  const CUresult r = cu().cuModuleGetFunction(&function, program->module, name);
  if (r != CUDA_SUCCESS) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "cuda kernelLaunch: no kernel '%s' in the program (%s)",
         name, errorText(r).c_str());
    return nullptr;
  }
  flagosProgram_st::Kernel k;
  k.name = name;
  k.function = function;
  if (cu().cuFuncGetParamInfo != nullptr) {
    size_t offset = 0, size = 0;
    int32_t n = 0;
    while (n < kMaxArgs && cu().cuFuncGetParamInfo(function, n, &offset, &size) == CUDA_SUCCESS)
      ++n;
    k.num_params = n;
  }
  program->kernels.push_back(k);
  return &program->kernels.back();
}

}  // namespace

flagosStatus_t kernelLaunch(flagosProgram_t program, const char* name, const flagosKernelArg* args,
                            int32_t num_args, int32_t work_dim, const uint64_t* global,
                            const uint64_t* local, flagosStream_t stream) noexcept {
  return guard("kernelLaunch", [&] {
    flagosStatus_t st =
        flagos_kit::checkLaunch(program, stream, name, args, num_args, work_dim, global, local);
    if (st != FLAGOS_SUCCESS) return st;
    Device* device = stream->device;
    if (program->device != device) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "cuda kernelLaunch: a program of device %d launched on a stream of device %d",
                  program->device->index, device->index);
    }
    if (num_args > kMaxArgs) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "cuda kernelLaunch: %d arguments (at most %d)",
                  num_args, kMaxArgs);
    }
    void* params[kMaxArgs];
    const bool several_devices = state().devices.size() > 1;
    for (int32_t i = 0; i < num_args; ++i) {
      const void* address = nullptr;
      st = flagos_kit::checkKernelArg(name, i, args[i], &address);
      if (st != FLAGOS_SUCCESS) return st;
      // Another device's memory (compiler.h): only where there is another device.
      if (several_devices && address != nullptr &&
          !isDeviceRange("kernelLaunch", address, 0, device)) {
        return FLAGOS_ERROR_INVALID_ARGUMENT;
      }
      params[i] = const_cast<void*>(args[i].value);
    }
    unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
    uint64_t threads = 1;
    for (int32_t d = 0; d < work_dim; ++d) {
      if (global[d] == 0) return FLAGOS_SUCCESS;  // compiler.h: nothing to launch
      const uint64_t l = local != nullptr ? local[d] : (d == 0 ? kDefaultBlock : 1);
      const uint64_t g = (global[d] + l - 1) / l;
      const uint64_t grid_limit = d == 0 ? 0x7fffffffu : 65535u;
      threads *= l;
      if (g > grid_limit || threads > static_cast<uint64_t>(device->max_threads)) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                    "cuda kernelLaunch: '%s': %" PRIu64 " blocks of %" PRIu64
                    " in dimension %d exceed the device's limits",
                    name, g, l, d);
      }
      grid[d] = static_cast<unsigned>(g);
      block[d] = static_cast<unsigned>(l);
    }
    st = useContext(*device, "kernelLaunch");
    if (st != FLAGOS_SUCCESS) return st;
    const flagosProgram_st::Kernel* kernel = kernelOf(program, name);
    if (kernel == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
    if (kernel->num_params >= 0 && kernel->num_params != num_args) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "cuda kernelLaunch: '%s' takes %d arguments, the launch passed %d", name,
                  kernel->num_params, num_args);
    }
    TraceMark mark = traceBegin(stream, FLAGOS_TRACE_KERNEL, name);
    st = check(cu().cuLaunchKernel(kernel->function, grid[0], grid[1], grid[2], block[0], block[1],
                                   block[2], 0, stream->stream, params, nullptr),
               "kernelLaunch", name);
    traceEnd(stream, mark);
    return st;
  });
}

}  // namespace flagos_cuda
