// Internal header of the opencl plugin. Nothing here crosses the ABI: the
// core sees only the C tables that entry.cpp hands out.
//
// Files, one per table section (see README.md):
//   entry.cpp          the exported entry point, the priority, getLastError
//   error.cpp          OpenCL error names
//   config.cpp         FLAGOS_OPENCL_DEVICE_TYPE / FLAGOS_OPENCL_MEMORY_LIMIT
//   discovery.cpp      platforms and devices: which ones the plugin uses
//   device.cpp         device table: probe, init, current device, synchronize
//   address_space.cpp  virtual device addresses (address_space.h)
//   memory.cpp         memory table: malloc/free, copies, fill
//   stream.cpp         streams: in-order command queues
//   event.cpp          events: marker commands
//   compiler.cpp       compiler table: OpenCL C programs and their binaries
//   launch.cpp         compiler table: kernel launches
//   kernels/           kernel table: CLBlast GEMM/GEMV, nll losses (kernels/blas.h)
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120  // also set by CMakeLists.txt
#endif
#include <CL/cl.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "address_space.h"
#include "flagos/vendor.h"
#include "flagos_kit/calls.h"
#include "flagos_kit/devices.h"
#include "flagos_kit/error.h"
#include "flagos_kit/events.h"
#include "flagos_kit/handle.h"
#include "flagos_kit/out_struct.h"
#include "flagos_kit/program_binary.h"
#include "flagos_kit/streams.h"
#include "flagos_kit/tables.h"
#include "flagos_kit/trace.h"

namespace flagos_opencl {

// Reported as flagosVendorTables.version.
constexpr const char* kVersion = "1.0.0";

// ---------------------------------------------------------------- errors ---

// The kit's last error and boundary guard (kit/flagos_kit/error.h: Note
// [Last error lifetime], Note [ABI boundary]).
using flagos_kit::fail;
using flagos_kit::guard;
using flagos_kit::lastError;

// "CL_OUT_OF_RESOURCES (-5)": the code's name and number, for messages.
std::string clErrorName(cl_int error);

// Is @p error one of the codes an OpenCL runtime uses for "no memory left"?
bool isOutOfMemory(cl_int error);

// ---------------------------------------------------------------- config ---

enum class DeviceType { kAll, kGpu, kCpu, kAccelerator };
// FLAGOS_OPENCL_WARMUP: the SDK warm-up thread (warmup.cpp).
enum class Warmup { kOn, kOff, kVerbose };

// What the environment asks for; see config.cpp for the accepted syntax.
struct Config {
  DeviceType device_type = DeviceType::kAll;
  uint64_t memory_limit = 0;  // bytes per device; 0: the device's global memory
  Warmup warmup = Warmup::kOn;
  // FLAGOS_OPENCL_SMALL_GEMM: GEMMs of at most this many multiply-adds run
  // on the plugin's own kernel, not CLBlast (Note [Small GEMMs]).
  uint64_t small_gemm_macs = uint64_t{1} << 18;
};

// Fills @p config from the environment. On garbage returns false and writes
// a message naming the variable and the value to @p error.
bool loadConfig(Config* config, std::string* error);

// ------------------------------------------------------------- discovery ---

// One OpenCL device the plugin will use, as enumerated (no context yet).
struct DeviceInfo {
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  bool accelerator = false;  // GPU or accelerator (or custom), not a CPU
  std::string name, vendor, driver_version, platform_version;
  int32_t cl_major = 0, cl_minor = 0;  // from CL_DEVICE_VERSION
  uint64_t global_memory = 0;
  uint64_t max_alloc = 0;
  int32_t compute_units = 0;
  uint64_t max_work_group_size = 0;  // CL_DEVICE_MAX_WORK_GROUP_SIZE
  bool fp64 = false;                 // CL_DEVICE_DOUBLE_FP_CONFIG != 0
  bool pocl = false;                 // the platform is PoCL (Note [Serialized compiles on PoCL])
};

// The devices chosen under @p config: every available OpenCL 1.2+ device of
// the requested type on every platform, GPUs/accelerators only when there
// are any (then the CPU devices are left out). Returns false with
// @p reason set when there is none (no platform, no ICD, no such device).
bool discoverDevices(const Config& config, std::vector<DeviceInfo>* devices, std::string* reason);

// Note [Serialized compiles on PoCL]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PoCL 3.1 runs LLVM in clBuildProgram, in CL_PROGRAM_BINARIES and lazily
// for a kernel's first launch with a work-group size; two threads inside
// LLVM at once crashed it (llvm::EVT::isExtendedVector under SelectionDAG,
// when the core's background specialization overlapped a launch on the
// main thread; "Unknown mismatch in getCopyFromParts" seen once at exit).
// With a PoCL device, every call that may compile (program build, binary
// and load, kernel launch, the CLBlast and helper kernels) holds one
// plugin-wide lock. The lazy compile does not run in the enqueueing thread:
// with a cold PoCL cache clEnqueueNDRangeKernel returns at once and the
// work-group build, far longer, happens when the command runs, on PoCL's
// thread.
// So a launch that may compile (a work size its kernel has not run with)
// keeps the lock until its command has finished (waitIfFirst). Not covered:
// CLBlast's own launches, whose kernels PoCL builds the same lazy way; the
// SDK warm-up runs (and waits for) the small-size GEMM/GEMV kernels under
// the lock, but a larger GEMM's first call (CLBlast's indirect kernels)
// still builds outside it. Other drivers are not serialized.
//
// The SDK warm-up thread (warmup.cpp) takes the lock as a background
// holder: one step at a time, and only while no foreground caller is
// waiting for it (compileWaiters()), so the caller's own compiles and
// launches go first.
//
// Note [Launches without the compile lock]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Program builds and loads yield the same way (kYield): the core's kernel
// pool loads a whole manifest of binaries in the background at initialize
// (each a slow bitcode parse on PoCL), and holding the lock back to back it
// starved the caller's launches (first calls came late by many times their
// own cost with 182 kernels queued).
// And a launch needs the lock only for a work size its kernel has not been
// launched with: PoCL compiles a work-group function once per kernel and
// work-group size, so a launch repeating an earlier (global, local) enters
// no LLVM and takes no lock; with an explicit local size (what the core
// gives generated kernels, Note [Launch geometry]) any global size repeats
// it. The core repeats the manifest's launches right
// after loading (Note [First launch]), so the first iteration's launches
// are mostly lock-free.
void setSerializeCompiles(bool on);
class CompileLock {
 public:
  enum Priority { kCaller, kYield, kBackground };
  CompileLock() : CompileLock(kCaller) {}
  explicit CompileLock(bool background) : CompileLock(background ? kBackground : kCaller) {}
  explicit CompileLock(Priority priority);
  ~CompileLock();
  CompileLock(const CompileLock&) = delete;
  CompileLock& operator=(const CompileLock&) = delete;
  bool held() const { return held_; }

 private:
  bool held_;
};
// Note [Serialized compiles on PoCL]: with @p lock held (a launch that may
// compile), waits for @p event (retained by the caller; released here) so
// that PoCL's lazy work-group build is over before the lock goes. NULL
// event or no lock: only releases.
void waitIfFirst(const std::optional<CompileLock>& lock, cl_event event);
// Foreground threads blocked in CompileLock's constructor right now.
int compileWaiters();

// ---------------------------------------------------------------- warm-up ---
// Note [SDK warm-up] in warmup.cpp. startWarmup() runs at the end of a
// successful init() and returns at once; stopWarmup() (shutdown(), and an
// atexit handler) asks the thread to stop after the step in flight and
// joins it.
struct Device;
void startWarmup(const std::vector<Device*>& devices, Warmup mode);
void stopWarmup();
// One warm-up step: runs @p body under the background compile lock and
// returns true, or returns false without running it once the warm-up is
// asked to stop. @p what names the step for FLAGOS_OPENCL_WARMUP=verbose.
using WarmupStep = std::function<bool(const char* what, const std::function<void()>& body)>;
#ifdef FLAGOS_OPENCL_HAVE_CLBLAST
namespace kernels {
// The native kernels' part (kernels/warmup.cpp): helper program, CLBlast,
// the nll loss program.
void warmUpKernels(Device* device, cl_command_queue queue, const WarmupStep& step);
}  // namespace kernels
#endif

// The build log of @p program on @p device ("(no build log)" when none).
std::string buildLog(cl_program program, cl_device_id device);

// The full identity of a device's compiler target: "opencl:<vendor>:<name>:
// <driver version>". getProperties reports it as arch (shortened with a
// hash when long); programGetBinary stamps binaries with its hash.
std::string deviceKey(const DeviceInfo& info);

// ------------------------------------------------------- devices, state ---

struct Device {
  int32_t index = 0;
  DeviceInfo info;
  uint64_t total_memory = 0;  // min(limit, global memory): what malloc hands out
  cl_context context = nullptr;
  // In-order queue for the synchronous copies and allocation first touch:
  // memory.h's memcpy is not ordered after stream work, so it has its own.
  cl_command_queue sync_queue = nullptr;
  std::unique_ptr<AddressSpace> addresses;
  std::atomic<uint64_t> allocated{0};  // bytes handed out by malloc
  uint64_t small_gemm_macs = 0;        // Config::small_gemm_macs

  // Live streams, for device-wide synchronize and shutdown. Held while
  // synchronizing so that a stream cannot be destroyed under it.
  std::mutex streams_mutex;
  std::vector<flagosStream_t> streams;

  // State of the native kernels (kernels/helpers.cpp), made on first use.
  std::mutex kernels_mutex;
  std::shared_ptr<void> kernels_state;

  ~Device();  // releases what init() created
};

// The plugin's global state, created on first use and never destroyed (an
// OpenCL runtime may still run callbacks at process exit). devices is
// written only by init() and shutdown(), which the core calls before and
// after every other member.
using State = flagos_kit::DeviceList<Device>;  // kit/flagos_kit/devices.h
State& state();

// The device with physical index @p index, or nullptr after recording an
// INVALID_ARGUMENT message naming @p call (also before init()).
Device* findDevice(const char* call, int32_t index) noexcept;

// Tracing (trace.cpp, Note [Traced commands]): keeps @p event (retained) of a
// command just queued on @p stream while tracing is on.
void traceCommand(flagosStream_t stream, cl_event event);
const flagosTraceTable* traceTable();
// A fresh flagosTraceRecord.stream_id.
uint64_t nextStreamId();

// A device address resolved to its buffer: see Note [Virtual device
// addresses] in address_space.h.
struct DevicePtr {
  Device* device = nullptr;
  cl_mem buffer = nullptr;
  uint64_t offset = 0;  // bytes from the start of buffer
};

// Resolves [address, address + bytes) to the allocation holding it; records
// an INVALID_ARGUMENT message naming @p call and returns false when it is not
// (entirely) inside one live allocation. One past the end is accepted.
bool resolve(const char* call, const void* address, uint64_t bytes, DevicePtr* out) noexcept;

// Waits for every stream of @p device and its synchronous queue; the first
// asynchronous error, if any.
flagosStatus_t synchronizeDevice(Device* device);

// 64-bit FNV-1a (the plugin kit's): device keys (device.cpp) and binary
// checksums (compiler.cpp). Not cryptographic; detects accidents, not attacks.
using flagos_kit::fnv1a;

// --------------------------------------------------------------- tables ---

const flagosDeviceTable* deviceTable();
const flagosMemoryTable* memoryTable();
const flagosStreamTable* streamTable();
const flagosCompilerTable* compilerTable();
// CLBlast GEMM/GEMV and nll loss kernels (kernels/); only with
// FLAGOS_OPENCL_HAVE_CLBLAST.
const flagosKernelTable* kernelTable();

// The stream-table members over OpenCL markers, defined in event.cpp; the
// stream table's StreamCalls (stream.cpp) adds the rest.
struct EventCalls {
  static flagosStatus_t eventRecord(flagosEvent_t event, flagosStream_t stream) noexcept;
  static flagosStatus_t eventQuery(flagosEvent_t event) noexcept;
  static flagosStatus_t eventSynchronize(flagosEvent_t event) noexcept;
  static flagosStatus_t eventElapsedTime(float* ms, flagosEvent_t start,
                                         flagosEvent_t end) noexcept;
  static flagosStatus_t streamWaitEvent(flagosStream_t stream, flagosEvent_t event) noexcept;
};

// The launch member of the compiler table, defined in launch.cpp.
flagosStatus_t kernelLaunch(flagosProgram_t program, const char* name, const flagosKernelArg* args,
                            int32_t num_args, int32_t work_dim, const uint64_t* global,
                            const uint64_t* local, flagosStream_t stream) noexcept;

// Handles carry a magic word so that a destroyed or foreign handle is caught
// as INVALID_ARGUMENT in the common cases (a debugging aid, not a guarantee).
// (flagosStream_st::kMagic and flagosEvent_st::kMagic are the others.)
constexpr uint32_t kProgramMagic = 0x434c5052u;  // "CLPR"

// Checks a stream handle passed to @p call; records the message on failure.
using flagos_kit::validStream;
// The same for a program handle (compiler.cpp).
bool validProgram(const char* call, flagosProgram_t program) noexcept;

}  // namespace flagos_opencl

// ------------------------------------------------------ opaque handles ---
// The C headers declare these structs; only the plugin defines them.

// A stream: one in-order command queue (with profiling, for timing events).
//
// Note [Asynchronous errors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A command that fails while running leaves a negative execution status on
// its event. The stream keeps the event of the last command it enqueued
// (`last_`); in an in-order queue a failure of an earlier command fails the
// later ones that depend on it, so the last event tells. synchronize() and
// query() report a failed last event once (FLAGOS_ERROR_DEVICE with the
// OpenCL code), then forget it, as vendor.h asks. Errors an enqueue call
// returns at once are returned by that call.
struct flagosStream_st {
  flagosStream_st(flagos_opencl::Device* device, cl_command_queue queue)
      : device(device), queue(queue) {}
  ~flagosStream_st();  // finishes the queue and releases it

  // Runs @p enqueue(queue, &event) under the stream's lock; on success the
  // event becomes the stream's last command. @p enqueue returns a cl_int.
  template <typename Enqueue>
  cl_int enqueue(Enqueue&& enqueue) {
    std::lock_guard<std::mutex> lock(mu_);
    cl_event event = nullptr;
    const cl_int error = enqueue(queue, &event);
    if (error == CL_SUCCESS && event != nullptr) {
      if (flagos_kit::trace::enabled()) flagos_opencl::traceCommand(this, event);
      replaceLast(event);
    }
    return error;
  }
  // Blocks until the work queued before this call is done.
  flagosStatus_t synchronize();
  // SUCCESS when idle, NOT_READY while work is pending.
  flagosStatus_t query();

  static constexpr uint32_t kMagic = flagos_kit::magicOf("CLSQ");
  uint32_t magic = kMagic;
  flagos_opencl::Device* const device;
  const cl_command_queue queue;
  const uint64_t trace_id = flagos_opencl::nextStreamId();  // flagosTraceRecord.stream_id

 private:
  void replaceLast(cl_event event);  // takes ownership; mu_ held
  // Reports a failed last command once; mu_ held.
  flagosStatus_t takeError(const char* call, cl_int status);

  std::mutex mu_;
  cl_event last_ = nullptr;  // the last command enqueued (owned), or nullptr
};

// A program built for one device, and the kernel objects made from it
// (launch.cpp, Note [Device pointer arguments]).
struct flagosProgram_st {
  struct Kernel {
    cl_kernel kernel = nullptr;
    cl_uint num_args = 0;
    // Work sizes launched so far (global, then local or 0s for NULL), at
    // most kLaunchShapes: Note [Launches without the compile lock].
    static constexpr size_t kLaunchShapes = 16;
    std::vector<std::array<size_t, 6>> launched;
  };

  flagosProgram_st(flagos_opencl::Device* device, cl_program program)
      : device(device), program(program) {}
  ~flagosProgram_st() {
    for (auto& entry : kernels) clReleaseKernel(entry.second.kernel);
    clReleaseProgram(program);  // enqueued launches keep their own references
  }

  static constexpr uint32_t kMagic = flagos_opencl::kProgramMagic;
  uint32_t magic = kMagic;
  flagos_opencl::Device* const device;
  const cl_program program;
  std::mutex mu;  // kernels, binary, and setting arguments + enqueueing
  std::map<std::string, Kernel> kernels;
  std::vector<unsigned char> binary;  // header + payload, once asked for
};

struct flagosEvent_st : flagos_kit::EventHandle<flagos_kit::magicOf("CLEV")> {
  std::mutex mu;
  cl_event marker = nullptr;  // owned; nullptr: never recorded
  ~flagosEvent_st();
};
