// Internal header of the cuda plugin: NVIDIA GPUs through the CUDA driver
// API. Nothing here crosses the ABI: the core sees only the C tables that
// entry.cpp hands out.
//
// Files (README.md has the picture):
//   entry.cpp      the exported entry point and the table list
//   driver.cpp     libcuda.so.1 opened at run time: the driver API entry points
//   libraries.cpp  finding the SDK's other libraries (NVRTC, cuBLASLt, cuDNN, NCCL)
//   device.cpp     device table: probe, init (primary contexts), properties
//   memory.cpp     memory table: device and pinned memory, copies, fills
//   fill.cpp       fills the copy engine cannot do (8-byte, unaligned patterns)
//   stream.cpp     stream table: streams and events
//   trace.cpp      tracing table: device times from CUDA events
//   nvrtc.cpp      NVRTC opened at run time
//   compiler.cpp   compiler table: CUDA C through NVRTC to cubin, modules
//   launch.cpp     compiler table: kernel launches
//   kernels/       kernel table: GEMMs on cuBLASLt
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flagos/vendor.h"
#include "flagos_kit/calls.h"
#include "flagos_kit/devices.h"
#include "flagos_kit/error.h"
#include "flagos_kit/events.h"
#include "flagos_kit/handle.h"
#include "flagos_kit/out_struct.h"
#include "flagos_kit/streams.h"
#include "flagos_kit/tables.h"
#include "flagos_kit/trace.h"

namespace flagos_cuda {

// Reported as flagosVendorTables.version.
constexpr const char* kVersion = "0.1.0";

using flagos_kit::fail;
using flagos_kit::guard;

// ---------------------------------------------------------------- driver ---

// The driver API entry points the plugin uses, resolved from libcuda.so.1
// (driver.cpp). Each member is the function of the same name in cuda.h,
// at the version cuda.h maps that name to (cuMemAlloc is cuMemAlloc_v2).
struct Driver {
// clang-format off
#define FLAGOS_CUDA_DRIVER_FUNCTIONS(X) \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount) \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceTotalMem) X(cuDeviceGetAttribute) \
  X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxSynchronize) \
  X(cuMemAlloc) X(cuMemFree) X(cuMemGetInfo) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemcpy) \
  X(cuMemcpyAsync) X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async) \
  X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery) \
  X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery) \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuModuleLoadData) X(cuModuleUnload) \
  X(cuModuleGetFunction) X(cuLaunchKernel) X(cuPointerGetAttribute) X(cuMemGetAddressRange)
// clang-format on
#define FLAGOS_CUDA_DECLARE(name) decltype(&::name) name = nullptr;
  FLAGOS_CUDA_DRIVER_FUNCTIONS(FLAGOS_CUDA_DECLARE)
#undef FLAGOS_CUDA_DECLARE
  // Optional (CUDA 12.4+; nullptr before): a kernel parameter's offset and
  // size, so kernelLaunch can check the argument count.
  decltype(&::cuFuncGetParamInfo) cuFuncGetParamInfo = nullptr;
  int version = 0;  // cuDriverGetVersion: 13000 is CUDA 13.0
};

// The driver, opened and cuInit()ed once; nullptr with @p reason set when
// libcuda.so.1 is missing, lacks an entry point or cuInit fails (no GPU, no
// kernel module). Thread-safe; the answer does not change.
const Driver* driver(std::string* reason = nullptr);
// After a successful init(): the driver (never nullptr then).
const Driver& cu();

// "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", for messages.
std::string errorText(CUresult result);
// Records "cuda <call>: <what> failed: <errorText>" and returns the flagos
// status for @p result: OUT_OF_MEMORY, INVALID_ARGUMENT (invalid value or
// handle), NOT_READY, else DEVICE.
flagosStatus_t check(CUresult result, const char* call, const char* what);

// ------------------------------------------------------------- libraries ---

// dlopen()s the first of @p sonames found: as already loaded or on the
// loader's path, then in each folder of FLAGOS_CUDA_LIBRARY_PATH (colon
// separated: the Python package sets it to the `nvidia` wheels' lib folders
// when unset). nullptr with @p tried listing what was tried.
void* openLibrary(const std::vector<std::string>& sonames, std::string* tried);
// dlsym of @p name in @p lib (nullptr when missing).
void* symbolOf(void* lib, const char* name);
// symbolOf into @p fn; false when missing.
template <typename Fn>
bool bind(void* lib, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(symbolOf(lib, name));
  return *fn != nullptr;
}

// ------------------------------------------------------- devices, state ---

struct Device {
  int32_t index = 0;
  CUdevice device = 0;
  CUcontext context = nullptr;  // the primary context (shared with the CUDA runtime)
  std::string name;
  int32_t sm_count = 0, cc_major = 0, cc_minor = 0, warp = 32, max_threads = 1024;
  uint64_t total_memory = 0;

  // Live allocations (start -> bytes), so that copies and frees can reject
  // addresses that are not device memory (memory.h).
  std::mutex memory_mutex;
  std::map<uintptr_t, uint64_t> live;

  // Live streams, for device-wide synchronize.
  std::mutex streams_mutex;
  std::vector<flagosStream_t> streams;

  // State of the native kernels (kernels/), made on first use.
  std::mutex kernels_mutex;
  std::shared_ptr<void> kernels_state;
};

using State = flagos_kit::DeviceList<Device>;  // kit/flagos_kit/devices.h
State& state();
// The device of @p index, or nullptr after recording a message naming @p call.
Device* findDevice(const char* call, int32_t index) noexcept;
// Makes @p device's primary context current on the calling thread (the
// driver's calls act on it); cheap when it already is.
flagosStatus_t useContext(const Device& device, const char* call);
// Is [ptr, ptr + bytes) inside one live allocation of @p device (any device
// when nullptr)? The device found goes to @p owner. Records a message
// naming @p call when not. One past the end is accepted. Memory another
// library allocated in the same context (torch's own CUDA allocator, behind a
// zero-copy view: flagos_torchfl/interop.py) counts too: Note [Foreign
// device memory].
bool isDeviceRange(const char* call, const void* ptr, uint64_t bytes, Device* device = nullptr,
                   Device** owner = nullptr) noexcept;
flagosStatus_t synchronizeDevice(Device* device);

// The architecture NVRTC compiles for ("sm_90"), and the plugin's
// description of the compiler target, part of binary keys.
std::string archOf(const Device& device);

// ------------------------------------------------------------------ NVRTC ---

// NVRTC's version ("13.0"), or "" with @p reason when it is not found.
std::string nvrtcVersion(std::string* reason = nullptr);

// What a device's programs are compiled to (Note [NVRTC targets]).
struct CompileTarget {
  std::string arch;  // "sm_90" (a cubin) or "compute_120" (PTX)
  bool ptx = false;
  std::string key;  // "cuda:sm_90:nvrtc13.0": binaries carry its hash
};
CompileTarget compileTarget(int cc_major, int cc_minor);
// Compiles @p source (named @p name in messages) with NVRTC for @p target
// into @p image (a cubin, or NUL-terminated PTX). FLAGOS_ERROR_COMPILE with
// the log when NVRTC rejects it or is missing.
flagosStatus_t compileCuda(const CompileTarget& target, const char* source, const char* options,
                           const char* name, std::vector<unsigned char>* image);

// ---------------------------------------------------------------- tracing ---

// Trace records of work a stream queues (trace.cpp): begin() before the
// work (records a start event when tracing is on), end() after it.
struct TraceMark {
  bool on = false;
  CUevent start = nullptr;
  flagosTraceRecord record{};
};
TraceMark traceBegin(flagosStream_t stream, flagosTraceKind_t kind, const char* name);
void traceEnd(flagosStream_t stream, TraceMark& mark);
uint64_t nextStreamId();

// ------------------------------------------------------------------ fills ---

// Fills @p count elements of @p size bytes with @p pattern on @p stream,
// with a kernel (fill.cpp): 8-byte patterns and addresses the copy engine's
// memset cannot take (a 4-byte pattern at an address not 4-byte aligned).
flagosStatus_t fillKernel(flagosStream_t stream, void* dst, uint64_t pattern, uint32_t size,
                          uint64_t count);

// --------------------------------------------------------------- tables ---

const flagosDeviceTable* deviceTable();
const flagosMemoryTable* memoryTable();
const flagosStreamTable* streamTable();
const flagosCompilerTable* compilerTable();
const flagosTraceTable* traceTable();
// GEMMs on cuBLASLt (kernels/); nullptr when built without cublasLt.h.
const flagosKernelTable* kernelTable();

// The launch member of the compiler table (launch.cpp).
flagosStatus_t kernelLaunch(flagosProgram_t program, const char* name, const flagosKernelArg* args,
                            int32_t num_args, int32_t work_dim, const uint64_t* global,
                            const uint64_t* local, flagosStream_t stream) noexcept;

}  // namespace flagos_cuda

// ------------------------------------------------------ opaque handles ---

// A stream: one CUDA stream of the device (non-blocking: no implicit order
// with the legacy default stream, so torch's own CUDA work beside ours is
// not serialized with it).
struct flagosStream_st {
  static constexpr uint32_t kMagic = flagos_kit::magicOf("CUSQ");
  uint32_t magic = kMagic;
  flagos_cuda::Device* device = nullptr;
  CUstream stream = nullptr;
  const uint64_t trace_id = flagos_cuda::nextStreamId();  // flagosTraceRecord.stream_id
  // Scratch the native kernels keep per stream (cuBLASLt's workspace), so
  // that work on two streams never shares it; freed with the stream.
  std::mutex scratch_mutex;
  void* scratch = nullptr;
  uint64_t scratch_bytes = 0;

  ~flagosStream_st();  // drains the stream, frees the scratch and the CUDA stream
  flagosStatus_t synchronize();
  flagosStatus_t query();
};

struct flagosEvent_st : flagos_kit::EventHandle<flagos_kit::magicOf("CUEV")> {
  CUevent event = nullptr;
  std::atomic<bool> recorded{false};
};

// A module loaded from a cubin, and the kernels looked up in it.
struct flagosProgram_st {
  struct Kernel {
    std::string name;
    CUfunction function = nullptr;
    int32_t num_params = -1;  // -1: unknown (driver without cuFuncGetParamInfo)
  };
  static constexpr uint32_t kMagic = flagos_kit::magicOf("CUPR");
  uint32_t magic = kMagic;
  flagos_cuda::Device* device = nullptr;
  CUmodule module = nullptr;
  std::vector<unsigned char> binary;  // the envelope around the cubin
  std::mutex mu;                      // kernels
  std::deque<Kernel> kernels;         // a deque: launches keep pointers to its elements
};
