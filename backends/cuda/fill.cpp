// Fills the copy engine cannot do (memory.cpp): 8-byte patterns, and 2- or
// 4-byte ones at addresses not aligned to their size, with a kernel built
// once per device through the plugin's own compiler table.
#include <cstring>

#include "cuda_plugin.h"

namespace flagos_cuda {
namespace {

const char* kSource = R"(
extern "C" __global__ void flagos_cuda_fill(unsigned char* dst, unsigned long long pattern,
                                            unsigned size, unsigned long long count) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (size == 8 && ((unsigned long long)dst & 7) == 0) {
    for (; i < count; i += stride) ((unsigned long long*)dst)[i] = pattern;
    return;
  }
  for (; i < count; i += stride)
    for (unsigned b = 0; b < size; ++b) dst[i * size + b] = (unsigned char)(pattern >> (8 * b));
}
)";

struct Fill {
  std::mutex mu;
  std::vector<flagosProgram_t> programs;  // per physical device, built on first use
};

Fill& fills() {
  static Fill* f = new Fill;  // never destroyed: used until exit
  return *f;
}

}  // namespace

flagosStatus_t fillKernel(flagosStream_t stream, void* dst, uint64_t pattern, uint32_t size,
                          uint64_t count) {
  const flagosCompilerTable* compiler = compilerTable();
  Device* device = stream->device;
  flagosProgram_t program = nullptr;
  {
    Fill& f = fills();
    std::lock_guard<std::mutex> lock(f.mu);
    if (f.programs.size() <= static_cast<size_t>(device->index))
      f.programs.resize(static_cast<size_t>(device->index) + 1, nullptr);
    flagosProgram_t& slot = f.programs[static_cast<size_t>(device->index)];
    if (slot == nullptr) {
      const flagosStatus_t st = compiler->programBuild(device->index, kSource, "", &slot);
      if (st != FLAGOS_SUCCESS) return st;
    }
    program = slot;
  }
  // A grid of at most 64 blocks a multiprocessor; the kernel strides over the rest.
  const uint64_t local = 256;
  const uint64_t most =
      static_cast<uint64_t>(device->sm_count > 0 ? device->sm_count : 1) * 64 * local;
  const uint64_t global = count < most ? count : most;
  const flagosKernelArg args[] = {
      {FLAGOS_ARG_DEVICE_PTR, sizeof(void*), &dst},
      {FLAGOS_ARG_BYTES, sizeof(pattern), &pattern},
      {FLAGOS_ARG_BYTES, sizeof(size), &size},
      {FLAGOS_ARG_BYTES, sizeof(count), &count},
  };
  flagos_kit::trace::threadName() = "Memset";
  const flagosStatus_t st =
      compiler->kernelLaunch(program, "flagos_cuda_fill", args, 4, 1, &global, &local, stream);
  flagos_kit::trace::threadName() = nullptr;
  return st;
}

}  // namespace flagos_cuda
