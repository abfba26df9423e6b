// The SDK warm-up thread: Note [SDK warm-up].
//
// Note [SDK warm-up]
// ~~~~~~~~~~~~~~~~~~
// A fresh process pays for the OpenCL stack's first use on its first
// iteration even when every generated kernel comes from the disk cache
// (FLAGOS_CACHE_DIR): PoCL starts clang/LLVM on the first program build and
// compiles each kernel's work-group function on its first launch (both from
// PoCL's own disk cache when warm, but still tens of ms), the helper program
// (kernels/helpers.cpp) is built from source, and CLBlast builds its GEMM
// program once per context and precision. None of that depends on the
// caller's model, so init() starts one thread that does it in the
// background, device by device, on a queue of its own:
//
//   1. a tiny OpenCL C program, built and launched once (LLVM up);
//   2. with CLBlast (kernels/warmup.cpp): the helper program and one launch
//      of its float kernels; SGEMM in the four transposes the core issues
//      (NN, NT, TN, TT: CLBlast's direct kernels, one PoCL work-group
//      function each); SGEMV (N, T); strided-batched SGEMM; the nll_loss
//      program (kernels/loss.cpp) and one launch of its float kernels;
//      then, with fp64, DGEMM in the four transposes and the double helpers.
//
// Every step is a few 8x8 operations on buffers of its own (outside the
// memory accounting; a few KiB) under the compile lock as a *background*
// holder (Note [Serialized compiles on PoCL]): a step starts only while no
// caller waits for the lock, so the caller's own compile or launch is at
// most one step late, and a step the caller would have run anyway is never
// repeated (CLBlast and PoCL find it built). init() never waits for it.
//
// Stopping: shutdown() and the exit hooks set the stop flag and join; the
// step in flight finishes first (tens of ms with PoCL's cache warm; the
// very first build on a machine can take seconds). The step must not be
// inside LLVM while exit() destroys LLVM's statics: exit() runs handlers
// in reverse order of registration, and LLVM registers function-local
// statics lazily, during a compile (a cold DGEMM build at exit crashed
// with SIGSEGV). So the hook is registered with atexit again after every
// step (it then runs before the statics that step created), and, inside
// CPython, also with Py_AtExit (found with dlsym; no link to Python),
// which runs at the end of interpreter finalization, before exit()'s
// handlers. A process that exits right after initialize() therefore exits
// normally (rc 0). A child forked while the thread runs forgets it
// (pthread_atfork): it is not the child's to join. FLAGOS_OPENCL_WARMUP=off
// disables it, =verbose prints each step's time on stderr.
//
// CLBlast 1.5 (the installed one) keeps compiled programs in memory only:
// its API has ClearCache and FillCache (which compiles every routine, far
// too much here) but no way to save or load its binaries, so it cannot use
// FLAGOS_CACHE_DIR; PoCL's disk cache is what makes its rebuild cheap.
#include <dlfcn.h>
#include <pthread.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "opencl.h"

namespace flagos_opencl {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct WarmupThread {
  std::mutex mu;  // start / stop
  std::thread thread;
  std::atomic<bool> stop{false};
  std::atomic<int> exit_hooks{0};  // atexit registrations so far
};

// Never destroyed (the exit hooks use it). A forked child gets a fresh one:
// the parent's thread does not exist there, so it must never be joined (the
// core refuses the device in a forked child anyway).
std::atomic<WarmupThread*> g_warmup{new WarmupThread()};

WarmupThread& warmupThread() {
  return *g_warmup.load();
}

void forgetInChild() {
  g_warmup.store(new WarmupThread());  // the old one is leaked on purpose
}

void stopAtExit() {
  stopWarmup();
}

// (Re-)registers the exit hook: see Note [SDK warm-up]. Bounded, since each
// registration stays until exit.
void registerExitHook() {
  constexpr int kMaxHooks = 256;
  if (warmupThread().exit_hooks.fetch_add(1) < kMaxHooks) std::atexit(stopAtExit);
}

constexpr const char* kTinySource =
    "__kernel void flagos_warmup(__global float* x) { x[get_global_id(0)] += 1.0f; }";

// Builds and launches a tiny program: PoCL's front end and code generator.
void tinyProgram(Device* device, cl_command_queue queue) {
  cl_int error = CL_SUCCESS;
  const char* source = kTinySource;
  cl_program program = clCreateProgramWithSource(device->context, 1, &source, nullptr, &error);
  if (program == nullptr) return;
  if (clBuildProgram(program, 1, &device->info.id, "", nullptr, nullptr) == CL_SUCCESS) {
    cl_kernel kernel = clCreateKernel(program, "flagos_warmup", &error);
    cl_mem buffer =
        clCreateBuffer(device->context, CL_MEM_READ_WRITE, 64 * sizeof(float), nullptr, &error);
    if (kernel != nullptr && buffer != nullptr &&
        clSetKernelArg(kernel, 0, sizeof(cl_mem), &buffer) == CL_SUCCESS) {
      // An explicit local size, as every launch (Note [Launch geometry]): a
      // power of two that divides the 64 items and fits the device.
      const size_t global = 64;
      size_t local = 64;
      while (local > 1 && local > device->info.max_work_group_size) local /= 2;
      if (clEnqueueNDRangeKernel(queue, kernel, 1, nullptr, &global, &local, 0, nullptr, nullptr) ==
          CL_SUCCESS) {
        clFinish(queue);
      }
    }
    if (buffer != nullptr) clReleaseMemObject(buffer);
    if (kernel != nullptr) clReleaseKernel(kernel);
  }
  clReleaseProgram(program);
}

void run(std::vector<Device*> devices, Warmup mode) noexcept {
  try {
    WarmupThread& w = warmupThread();
    const bool verbose = mode == Warmup::kVerbose;
    const auto started = Clock::now();
    int steps = 0;
    int32_t index = 0;
    const WarmupStep step = [&](const char* what, const std::function<void()>& body) {
      // The caller first: wait while a foreground thread waits for the lock.
      while (compileWaiters() > 0 && !w.stop.load()) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      if (w.stop.load()) return false;
      const auto t0 = Clock::now();
      {
        const CompileLock lock(/*background=*/true);
        if (w.stop.load()) return false;
        body();
      }
      ++steps;
      registerExitHook();
      if (verbose) {
        std::fprintf(stderr, "flagos opencl warm-up: device %d: %s: %.1f ms\n", index, what,
                     msSince(t0));
      }
      return !w.stop.load();
    };
    for (Device* device : devices) {
      index = device->index;
      cl_int error = CL_SUCCESS;
      cl_command_queue queue = clCreateCommandQueue(device->context, device->info.id, 0, &error);
      if (queue == nullptr) continue;
      const bool go =
          step("OpenCL C compiler (tiny program, one launch)", [&] { tinyProgram(device, queue); });
#ifdef FLAGOS_OPENCL_HAVE_CLBLAST
      if (go) kernels::warmUpKernels(device, queue, step);
#else
      (void)go;
#endif
      clFinish(queue);
      clReleaseCommandQueue(queue);
      if (w.stop.load()) break;
    }
    if (verbose) {
      std::fprintf(stderr, "flagos opencl warm-up: %s after %d steps in %.1f ms\n",
                   w.stop.load() ? "stopped" : "done", steps, msSince(started));
    }
  } catch (...) {
    // A warm-up that fails leaves the first real calls to do the work.
  }
}

}  // namespace

void startWarmup(const std::vector<Device*>& devices, Warmup mode) {
  WarmupThread& w = warmupThread();
  std::lock_guard<std::mutex> lock(w.mu);
  if (w.thread.joinable() || devices.empty()) return;
  static std::once_flag hooks;
  std::call_once(hooks, [] {
    pthread_atfork(nullptr, nullptr, forgetInChild);
    using AtExit = int (*)(void (*)());
    if (auto py_at_exit = reinterpret_cast<AtExit>(dlsym(RTLD_DEFAULT, "Py_AtExit"))) {
      py_at_exit(stopAtExit);
    }
  });
  registerExitHook();
  w.stop.store(false);
  try {
    w.thread = std::thread(run, devices, mode);
  } catch (...) {
    // No thread: nothing is warmed up, everything still works.
  }
}

void stopWarmup() {
  WarmupThread& w = warmupThread();
  std::lock_guard<std::mutex> lock(w.mu);
  w.stop.store(true);
  if (w.thread.joinable()) w.thread.join();
}

}  // namespace flagos_opencl
