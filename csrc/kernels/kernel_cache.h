// The kernel cache: compiled generated kernels by KernelKey, in memory and on
// disk, with a background compiler pool for specialization.
//
// Note [Kernel cache]
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

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "flagos/compiler.h"
#include "kernels/generator.h"

namespace flagos::kernels {

struct CacheConfig {
  std::string dir;  // on-disk store; "" = memory only
  uint64_t max_disk_bytes = uint64_t{512} << 20;
  int compile_threads = 1;  // background pool size
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

// A compiled kernel; owned by the cache, valid until the cache is destroyed.
struct CompiledKernel {
  flagosProgram_t program = nullptr;
  std::string kernel_name;
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
  // queued, running or failed already. Returns immediately.
  void buildAsync(const KernelKey& key, std::function<Source()> source);

  // Note [Kernel preload] (manifest.h): queue disk-only loads of @p keys on
  // the background pool, in order; a key not on disk is dropped, never
  // compiled. A caller asking for a key while its load runs waits for it,
  // and builds it itself if the load found nothing. Returns at once.
  void preload(const std::vector<KernelKey>& keys);

  // The keys callers used (find() or getOrBuild() returned them), in order
  // of first use, at most kManifestKeys: the next process's preload list.
  std::vector<KernelKey> usedKeys() const;

  // Blocks until the background pool is idle (tests, benchmarks, shutdown).
  void waitIdle();

  // Drops queued background builds, waits for running ones and joins the
  // pool; later buildAsync() calls do nothing. Idempotent. Called at process
  // exit, before the SDK (whose compiler the pool may be inside) tears down.
  void stopBackground();

  CacheStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flagos::kernels
