// Note [Stopping background work]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The core runs work on threads of its own (the kernel cache's background
// specialization pool) that may be inside the vendor's compiler at any
// moment. At process exit that compiler's library tears down: with PoCL,
// LLVM's static objects are destroyed by exit() in the reverse order of
// their registration, and LLVM registers them after our first atexit hook,
// so a build still running then crashed inside LLVM (SIGSEGV, "LLVM ERROR:
// Unknown mismatch in getCopyFromParts") while the main thread joined it.
// The same pattern (a vendor compiler on a background thread at exit) is
// the classic CUDA/NVRTC teardown crash, so the order is the core's job:
//
//   1. stop accepting background work;  2. drop what has not started;
//   3. wait, with a bound, for what is running;  4. only then may the SDK
//      and the plugin tear down.
//
// stopBackgroundWork() does 1-3 for every registered stopper, once. It runs
// first thing at interpreter exit (flagos_torchfl registers it with
// Python's atexit at initialize(), before any C exit handler and before the
// SDK's statics die) and again, as a no-op by then, from a C atexit hook for
// programs without Python. A build that outlives the bound is detached and
// not written to the disk cache, and the stop reports it.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace flagos {

// A piece of background work's stop: steps 1-3 above within @p bound;
// returns false when something was still running at the bound.
using BackgroundStopper = std::function<bool(std::chrono::milliseconds bound)>;

// Adds @p stop (named @p what in reports); stoppers run newest first. A
// stopper registered after stopBackgroundWork() ran is run at once.
void registerBackgroundStopper(std::string what, BackgroundStopper stop);

// Runs every stopper once (later calls return the first call's result):
// true when all background work ended within @p bound. Never throws.
bool stopBackgroundWork(std::chrono::milliseconds bound);

// The bound of the C atexit hook (Python passes FLAGOS_EXIT_TIMEOUT's).
constexpr std::chrono::milliseconds kDefaultExitBound{30000};

// Note [Forked children]
// ~~~~~~~~~~~~~~~~~~~~~~
// fork() copies the process but only the forking thread: the plugin's
// worker threads, the SDK's threads (PoCL's, OpenMP's), the background
// pool and any lock one of them held at that moment stay behind in the
// parent. A child that calls into the plugin waits forever on them (an
// opencl launch blocked in the compile lock or clWaitForEvents). CUDA
// refuses the device in such a child, and so do we: after
// watchForks() (called once the backend is up), every path into the plugin
// (backend()) raises kForkedChildError in a forked child; frees of
// inherited memory are leaked (the memory is the parent's), the
// background stop has nothing to join, and the child's exit() skips the
// C++ static destructors (an SDK's would wait on the parent's threads; the
// status and the C stdio buffers are kept), as os._exit does in
// multiprocessing's children. A child forked before initialize()
// brings the device up itself, as usual.
void watchForks();
// True in a child forked after watchForks(). Never throws.
bool inForkedChild() noexcept;
extern const char* const kForkedChildError;

}  // namespace flagos
