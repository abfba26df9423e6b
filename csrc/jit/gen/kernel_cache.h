// The kernel cache: compiled generated kernels by KernelKey, in memory and on
// disk, with a background compiler pool for specialization.
//
// Note [Kernel cache]
// ~~~~~~~~~~~~~~~~~~~
//  - memory: KernelKey -> compiled program; a hit is one hash lookup under a
//    shared lock (find()).
//  - disk (DiskStore, disk_store.h): the program's binary
//    (compiler->programGetBinary) and its entry point's name (a disk hit
//    does not run the generator) under a file named by a hash of the key
//    string, the target, the device architecture and kGeneratorVersion.
//    Written atomically (temporary file + rename), checked by magic, key and
//    checksum on read; a bad file is counted, removed and rebuilt. Bounded:
//    least recently used files go first. Several processes may share it.
//  - builds: getOrBuild() compiles on the calling thread (the generic kernel
//    of a first call must run now); buildAsync() queues a build on the
//    background pool (specialization) and returns at once; find() sees the
//    result once it is ready, so the next call swaps it in.
//  - failures: a source the compiler rejects is remembered per key (never
//    retried in this process), counted, and reported by getOrBuild() as a
//    BuildError carrying the build log. Other failures (a device error, an
//    exception from source()) reach the callers waiting for that build as a
//    BuildError too, but the next request tries again.
//  - memory_hits/memory_misses count find() only: the bridge calls find()
//    first and getOrBuild() on a miss, so one call counts once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "flagos/compiler.h"
#include "jit/gen/generator.h"

namespace flagos::kernels {

struct CacheConfig {
  std::string dir;  // on-disk store; "" = memory only
  uint64_t max_disk_bytes = uint64_t{512} << 20;
  int compile_threads = 1;  // background pool size
  int background_nice = 0;  // pool threads' nice value (Note [Background priority]); 0: as is
  std::string device_arch;  // flagosDeviceProperties.arch + driver facts
  // The plugin's message for the calling thread's last failed call (the
  // core plugs in flagosVendorTables.getLastError): the build log of a
  // rejected source. Empty: "compile failed".
  std::function<std::string()> last_error;
};

struct CacheStats {
  uint64_t memory_hits = 0;    // find() found a ready kernel
  uint64_t memory_misses = 0;  // find() found nothing
  uint64_t disk_hits = 0;      // binaries loaded from disk
  uint64_t disk_writes = 0;
  uint64_t disk_corrupt = 0;       // bad files found (removed, rebuilt)
  uint64_t disk_evictions = 0;     // files removed to stay under max_disk_bytes
  uint64_t disk_write_errors = 0;  // failed writes (the first turns writing off)
  uint64_t sync_builds = 0;        // compiles on a calling thread (getOrBuild)
  uint64_t async_builds = 0;       // compiles on the background pool
  uint64_t build_failures = 0;
  uint64_t async_pending = 0;  // queued or running now
  double build_seconds = 0;    // total compile time, both kinds
  uint64_t entries = 0;        // kernels held in memory
  uint64_t preloaded = 0;      // disk loads queued by preload() that succeeded
};

// Note [First launch]
// ~~~~~~~~~~~~~~~~~~~
// A driver may do per-kernel work on a kernel's first launch that loading
// its binary does not: PoCL builds or loads (dlopen) a work-group function
// per kernel and work-group size, each slow next to a launch: most of the
// opencl backend's remaining first-iteration cost with a warm cache
// (Note [Kernel preload]). Every generated kernel returns at once for work
// items at or beyond meta.work (both dialects), so a launch with the same
// argument kinds and global size, NULL pointers and zeroed bytes touches no
// memory and does exactly that first-launch work. The cache records each
// kernel's launch shapes (LaunchLog, on the launch path: a few relaxed
// loads once a shape was seen); the manifest carries them to the next
// process, which repeats them once its preloaded kernels are loaded, on a
// stream of its own, in the background (first_launches.cpp). The opencl
// training step's first iteration in a fresh process is shorter with it
// (docs/benchmarks.md, "Measurements behind design decisions").
struct LaunchShape {
  std::vector<uint32_t> arg_sizes;  // per argument: 0 = DEVICE_PTR, else BYTES of that size
  std::vector<uint64_t> globals;    // distinct global sizes launched, first seen first
};

// Note [Warm before publishing]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The same first-launch work awaits a specialized kernel the background pool
// has just built: published at once, its first launch came from the caller
// and, on PoCL, took the compile lock to build the work-group function,
// waiting behind whatever background build held the lock (a long stall
// once in bench_dynamic_shapes.py). So the pool launches it once with no
// work, and waits, before publishing it: the caller's first launch of it
// finds the work-group function ready.
class LaunchLog {
 public:
  static constexpr int kGlobals = 4;  // distinct global sizes kept per kernel
  void note(const Launch& launch);
  LaunchShape shape() const;  // empty arg_sizes: never launched

 private:
  std::atomic<uint64_t> globals_[kGlobals] = {};  // 0: free slot
  std::once_flag args_once_;
  std::atomic<bool> args_ready_{false};
  std::vector<uint32_t> arg_sizes_;  // written once, before args_ready_
};

// A compiled kernel; owned by the cache, valid until the cache is destroyed.
struct CompiledKernel {
  flagosProgram_t program = nullptr;
  std::string kernel_name;
  std::shared_ptr<LaunchLog> log;  // set when the kernel becomes ready
};

// A kernel a caller used: the manifest's entry (Note [Kernel preload]).
struct UsedKernel {
  KernelKey key;
  LaunchShape shape;
  uint32_t unused = 0;  // processes since one used it (manifest merge; 0: this one)
};

// The compiler rejected a generated source (what() holds the build log).
class BuildError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class KernelCache {
 public:
  // @p compiler: the active plugin's table (not owned, outlives the cache).
  // @p device: physical device index the programs are built for.
  KernelCache(const flagosCompilerTable* compiler, int32_t device, CacheConfig config);
  ~KernelCache();  // waits for running builds, destroys every program
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The ready kernel for @p key, or nullptr. Never blocks on a build.
  const CompiledKernel* find(const KernelKey& key);

  // The kernel for @p key: memory, else disk, else compiled now from
  // @p source() (called only on a full miss). Concurrent callers for one key
  // share one build. Throws BuildError (also for a key that failed before).
  const CompiledKernel* getOrBuild(const KernelKey& key, const std::function<Source()>& source);

  // Queue a background build of @p key (disk first) unless it is ready,
  // queued, running or failed already. Returns immediately. @p warm, when
  // given, runs on the pool thread after a successful build and before the
  // kernel is published (Note [Warm before publishing]); it must not throw.
  using Warm = std::function<void(const CompiledKernel&)>;
  void buildAsync(const KernelKey& key, std::function<Source()> source, Warm warm = nullptr);

  // Note [Kernel preload] (manifest.h): queue disk-only loads of @p keys on
  // the background pool, in order; a key not on disk is dropped, never
  // compiled. A caller asking for a key while its load runs waits for it,
  // and builds it itself if the load found nothing. Returns at once.
  // After the last load, @p loaded runs once on the pool thread with those
  // of @p keys that are ready, in order (Note [First launch]); it must not
  // throw.
  using Loaded =
      std::function<void(const std::vector<std::pair<KernelKey, const CompiledKernel*>>&)>;
  void preload(const std::vector<KernelKey>& keys, Loaded loaded = nullptr);

  // The kernels callers used (find() or getOrBuild() returned them), in
  // order of first use, at most kManifestKeys, with their launch shapes: the
  // next process's preload list.
  std::vector<UsedKernel> usedKernels() const;

  // Runs @p job on the background pool, after what is queued (dropped once
  // stopBackground() ran). It must not throw.
  void runInBackground(std::function<void()> job);

  // Blocks until the background pool is idle (tests, benchmarks, shutdown).
  void waitIdle();

  // Drops queued background builds, waits for running ones and joins the
  // pool; later buildAsync() calls do nothing. Idempotent. Called at process
  // exit, before the SDK (whose compiler the pool may be inside) tears down
  // (Note [Stopping background work], csrc/runtime/lifecycle.h). With a
  // @p bound, gives up waiting after it: the threads still inside a build
  // are detached (their result is never written to disk) and false is
  // returned. A build that finishes is stored as usual; none is cut short.
  bool stopBackground(std::chrono::milliseconds bound = std::chrono::milliseconds::max());

  CacheStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flagos::kernels
