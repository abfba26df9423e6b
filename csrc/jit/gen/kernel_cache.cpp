// The kernel cache; see Note [Kernel cache] in kernel_cache.h.
//
// Every key has one Entry from the first request on: Queued (waiting for a
// pool thread), Building (one thread is loading or compiling it; others
// wait on `built`), Ready or Failed. A Ready entry never changes again, so
// find() can hand out &entry->kernel after one lookup under a shared lock.
#include "jit/gen/kernel_cache.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "jit/gen/disk_store.h"
#include "jit/gen/manifest.h"

namespace flagos::kernels {
namespace {

enum class State : uint8_t { Queued, Building, Ready, Failed };

struct Entry {
  State state = State::Queued;
  CompiledKernel kernel;          // Ready
  std::string error;              // Failed
  bool retry = false;             // Failed: a preload found no file; waiters build it
  std::atomic<bool> used{false};  // handed to a caller (usedKernels())
};

// What one build produced. `sticky`: the compiler rejected the source, so
// the key is never tried again; other failures (an exception, a device
// error) are reported to the waiting callers and then forgotten.
struct Outcome {
  bool ok = false;
  bool sticky = false;
  bool retry = false;  // a disk-only load missed
  CompiledKernel kernel;
  std::string error;
};

// A disk file's payload: the kernel's entry point name (a disk hit does
// not run the generator, so the name must come from the file) + binary.
std::vector<uint8_t> packBlob(const std::string& name, const std::vector<uint8_t>& binary) {
  const auto n = static_cast<uint32_t>(name.size());
  std::vector<uint8_t> blob(sizeof n + name.size() + binary.size());
  std::memcpy(blob.data(), &n, sizeof n);
  std::memcpy(blob.data() + sizeof n, name.data(), name.size());
  if (!binary.empty())
    std::memcpy(blob.data() + sizeof n + name.size(), binary.data(), binary.size());
  return blob;
}

bool unpackBlob(const std::vector<uint8_t>& blob, std::string* name, const uint8_t** binary,
                size_t* size) {
  uint32_t n = 0;
  if (blob.size() < sizeof n) return false;
  std::memcpy(&n, blob.data(), sizeof n);
  if (blob.size() - sizeof n < n) return false;
  name->assign(reinterpret_cast<const char*>(blob.data()) + sizeof n, n);
  *binary = blob.data() + sizeof n + n;
  *size = blob.size() - sizeof n - n;
  return true;
}

}  // namespace

struct KernelCache::Impl {
  struct Task {
    KernelKey key;
    std::function<Source()> source;  // empty: a disk-only preload
    std::function<void()> job;       // set: not a build, just run this
    KernelCache::Warm warm;          // Note [Warm before publishing]
  };

  Impl(const flagosCompilerTable* c, int32_t d, CacheConfig cfg)
      : compiler(c),
        device(d),
        config(std::move(cfg)),
        language(c->language != nullptr ? c->language : ""),
        disk(config.dir, config.max_disk_bytes) {}

  Outcome produce(const KernelKey& key, const std::function<Source()>& source, bool async);
  Outcome compile(const std::string& file_key, const std::function<Source()>& source, bool async);
  void finish(const KernelKey& key, const std::shared_ptr<Entry>& entry, Outcome out);
  void worker();
  void enqueue(const KernelKey& key, std::function<Source()> source,
               KernelCache::Warm warm = nullptr);
  // Started on first use: most caches never need them. pool_mu held.
  void startWorkers() {
    if (!workers.empty()) return;
    const int n = config.compile_threads > 0 ? config.compile_threads : 1;
    for (int i = 0; i < n; ++i) workers.emplace_back([this] { worker(); });
  }
  bool resultsDiscarded() const {
    std::lock_guard<std::mutex> lock(pool_mu);
    return discard_results;
  }
  // First hand-out of @p entry to a caller: remember the key's order.
  void markUsed(const KernelKey& key, Entry& entry) {
    if (entry.used.load(std::memory_order_relaxed) || entry.used.exchange(true)) return;
    std::lock_guard<std::mutex> lock(order_mu);
    if (order.size() < kManifestKeys) order.push_back(key);
  }

  const flagosCompilerTable* compiler;
  const int32_t device;
  const CacheConfig config;
  const std::string language;
  DiskStore disk;

  mutable std::shared_mutex mu;
  std::condition_variable_any built;  // some entry left Building (mu)
  std::unordered_map<KernelKey, std::shared_ptr<Entry>, KernelKeyHash> entries;

  mutable std::mutex pool_mu;
  std::condition_variable work_cv, idle_cv;
  std::deque<Task> queue;
  uint64_t pending = 0;  // queued + running tasks (pool_mu)
  bool stopping = false;
  bool discard_results = false;  // stopBackground() gave up waiting (pool_mu)
  std::vector<std::thread> workers;

  mutable std::mutex order_mu;
  std::vector<KernelKey> order;  // first use (order_mu)

  std::atomic<uint64_t> memory_hits{0}, memory_misses{0}, disk_hits{0}, sync_builds{0},
      async_builds{0}, build_failures{0}, build_ns{0}, ready{0}, preloaded{0};
};

// Disk first, then the compiler. Never throws: a waiting caller must always
// be woken with a result.
Outcome KernelCache::Impl::produce(const KernelKey& key, const std::function<Source()>& source,
                                   bool async) {
  try {
    const std::string file_key = fileKeyOf(key, language, config.device_arch);
    std::vector<uint8_t> blob;
    if (disk.load(file_key, &blob)) {
      Outcome out;
      const uint8_t* binary = nullptr;
      size_t size = 0;
      flagosProgram_t program = nullptr;
      if (unpackBlob(blob, &out.kernel.kernel_name, &binary, &size) &&
          compiler->programLoadBinary(device, binary, size, &program) == FLAGOS_SUCCESS &&
          program != nullptr) {
        disk_hits.fetch_add(1, std::memory_order_relaxed);
        if (!source) preloaded.fetch_add(1, std::memory_order_relaxed);
        out.ok = true;
        out.kernel.program = program;
        return out;
      }
      disk.discard(file_key);  // another driver, or damage the checksum missed
    }
    if (!source) {  // a preload: never compile, let a caller do it
      Outcome out;
      out.retry = true;
      out.error = "flagos: preloaded kernel not on disk";
      return out;
    }
    return compile(file_key, source, async);
  } catch (const std::exception& e) {
    Outcome out;
    out.error = std::string("flagos: building a generated kernel failed: ") + e.what();
    return out;
  } catch (...) {
    Outcome out;
    out.error = "flagos: building a generated kernel failed: unknown exception";
    return out;
  }
}

// Note [First-use build notice]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A first run on opencl compiles kernels on the calling thread for seconds (a
// word LM's first batches) and said nothing. The first synchronous build of a
// process prints one line, on a terminal only (logs, pipes and the tests see
// nothing).
static void noticeFirstUseBuild(const std::string& dir) {
  static std::atomic<bool> said{false};
  if (said.exchange(true) || !isatty(2)) return;
  std::fprintf(stderr,
               "[flagos] building device kernels on first use (kept in %s for later runs)...\n",
               dir.empty() ? "memory" : dir.c_str());
}

Outcome KernelCache::Impl::compile(const std::string& file_key,
                                   const std::function<Source()>& source, bool async) {
  const Source src = source();
  (async ? async_builds : sync_builds).fetch_add(1, std::memory_order_relaxed);
  if (!async) noticeFirstUseBuild(config.dir);
  flagosProgram_t program = nullptr;
  const auto start = std::chrono::steady_clock::now();
  const flagosStatus_t status =
      compiler->programBuild(device, src.text.c_str(), src.options.c_str(), &program);
  // Read the log on this thread, right after the failing call.
  const std::string log = status == FLAGOS_SUCCESS ? std::string()
                          : config.last_error      ? config.last_error()
                                                   : std::string("compile failed");
  build_ns.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count(),
      std::memory_order_relaxed);
  Outcome out;
  if (status != FLAGOS_SUCCESS || program == nullptr) {
    build_failures.fetch_add(1, std::memory_order_relaxed);
    out.sticky = status == FLAGOS_ERROR_COMPILE;
    out.error =
        "flagos: the " + language + " compiler rejected kernel '" + src.kernel_name + "': " + log;
    return out;
  }
  out.ok = true;
  out.kernel.program = program;
  out.kernel.kernel_name = src.kernel_name;
  // Persist (best effort: a plugin without binaries just is not cached).
  uint64_t size = 0;
  if (disk.enabled() && !resultsDiscarded() &&
      compiler->programGetBinary(program, nullptr, &size) == FLAGOS_SUCCESS && size > 0) {
    std::vector<uint8_t> binary(size);
    if (compiler->programGetBinary(program, binary.data(), &size) == FLAGOS_SUCCESS) {
      binary.resize(size);
      const std::vector<uint8_t> blob = packBlob(src.kernel_name, binary);
      disk.store(file_key, blob.data(), blob.size());
    }
  }
  return out;
}

void KernelCache::Impl::finish(const KernelKey& key, const std::shared_ptr<Entry>& entry,
                               Outcome out) {
  {
    std::unique_lock<std::shared_mutex> lock(mu);
    if (out.ok) {
      entry->kernel = std::move(out.kernel);
      entry->kernel.log = std::make_shared<LaunchLog>();
      entry->state = State::Ready;
      ready.fetch_add(1, std::memory_order_relaxed);
    } else {
      entry->error = std::move(out.error);
      entry->retry = out.retry;
      entry->state = State::Failed;
      // Waiters hold their own reference; later calls will try again.
      auto it = entries.find(key);
      if (!out.sticky && it != entries.end() && it->second == entry) entries.erase(it);
    }
  }
  built.notify_all();
}

// Note [Background priority]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Pool threads compile (PoCL's LLVM runs on the calling thread; the host
// compiler's cc inherits the thread's nice value), load and warm kernels
// while the process computes. On a CPU device they compete for the same
// cores as the foreground's kernels, so they run at a lower priority
// (CacheConfig::background_nice, FLAGOS_BACKGROUND_NICE): the foreground
// keeps its cores, the pool gets what is idle. A caller waiting for a pool
// build is blocked, not spinning, so its cores go to the pool then. Linux
// gives each thread its own nice value (setpriority on the thread id).
static void lowerThisThreadsPriority(int nice) {
#ifdef __linux__
  if (nice > 0) {
    const auto tid = static_cast<id_t>(syscall(SYS_gettid));
    (void)setpriority(PRIO_PROCESS, tid, nice);  // best effort: a refusal leaves it as is
  }
#else
  (void)nice;
#endif
}

void KernelCache::Impl::worker() {
  lowerThisThreadsPriority(config.background_nice);
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(pool_mu);
      work_cv.wait(lock, [&] { return stopping || !queue.empty(); });
      if (stopping) return;
      task = std::move(queue.front());
      queue.pop_front();
    }
    if (task.job) {
      task.job();
      std::lock_guard<std::mutex> lock(pool_mu);
      if (--pending == 0) idle_cv.notify_all();
      continue;
    }
    std::shared_ptr<Entry> entry;
    {
      std::unique_lock<std::shared_mutex> lock(mu);
      auto it = entries.find(task.key);
      // Not Queued: a getOrBuild() took the build over meanwhile.
      if (it != entries.end() && it->second->state == State::Queued) {
        entry = it->second;
        entry->state = State::Building;
      }
    }
    if (entry) {
      Outcome out = produce(task.key, task.source, /*async=*/true);
      if (out.ok && task.warm) task.warm(out.kernel);  // Note [Warm before publishing]
      finish(task.key, entry, std::move(out));
    }
    std::lock_guard<std::mutex> lock(pool_mu);
    if (--pending == 0) idle_cv.notify_all();
  }
}

KernelCache::KernelCache(const flagosCompilerTable* compiler, int32_t device, CacheConfig config)
    : impl_(std::make_unique<Impl>(compiler, device, std::move(config))) {}

KernelCache::~KernelCache() {
  stopBackground();
  for (auto& [key, entry] : impl_->entries) {
    if (entry->state == State::Ready) impl_->compiler->programDestroy(entry->kernel.program);
  }
}

const CompiledKernel* KernelCache::find(const KernelKey& key) {
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  auto it = impl_->entries.find(key);
  if (it != impl_->entries.end() && it->second->state == State::Ready) {
    impl_->memory_hits.fetch_add(1, std::memory_order_relaxed);
    impl_->markUsed(key, *it->second);
    return &it->second->kernel;
  }
  impl_->memory_misses.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

const CompiledKernel* KernelCache::getOrBuild(const KernelKey& key,
                                              const std::function<Source()>& source) {
  for (;;) {  // again only after a preload found no file (Entry::retry)
    {
      std::shared_lock<std::shared_mutex> lock(impl_->mu);
      auto it = impl_->entries.find(key);
      if (it != impl_->entries.end()) {
        if (it->second->state == State::Ready) {
          impl_->markUsed(key, *it->second);
          return &it->second->kernel;
        }
        if (it->second->state == State::Failed && !it->second->retry)
          throw BuildError(it->second->error);
      }
    }
    std::shared_ptr<Entry> entry;
    {
      std::unique_lock<std::shared_mutex> lock(impl_->mu);
      auto [it, inserted] = impl_->entries.try_emplace(key);
      if (inserted) it->second = std::make_shared<Entry>();
      entry = it->second;
      if (inserted || entry->state == State::Queued) {
        entry->state = State::Building;  // ours (a queued build is taken over)
      } else {
        impl_->built.wait(lock, [&] { return entry->state != State::Building; });
        if (entry->state == State::Failed && entry->retry) continue;
        if (entry->state == State::Ready) {
          impl_->markUsed(key, *entry);
          return &entry->kernel;
        }
        throw BuildError(entry->error);
      }
    }
    impl_->finish(key, entry, impl_->produce(key, source, /*async=*/false));
    // Ready and Failed never change again: no lock needed to read them now.
    if (entry->state == State::Ready) {
      impl_->markUsed(key, *entry);
      return &entry->kernel;
    }
    throw BuildError(entry->error);
  }
}

void KernelCache::buildAsync(const KernelKey& key, std::function<Source()> source, Warm warm) {
  impl_->enqueue(key, std::move(source), std::move(warm));
}

void KernelCache::preload(const std::vector<KernelKey>& keys, Loaded loaded) {
  for (const KernelKey& key : keys) impl_->enqueue(key, nullptr);
  if (!loaded) return;
  Impl* impl = impl_.get();
  auto job = [impl, keys, loaded = std::move(loaded)] {
    std::vector<std::pair<KernelKey, const CompiledKernel*>> ready;
    {
      std::shared_lock<std::shared_mutex> lock(impl->mu);
      for (const KernelKey& key : keys) {
        auto it = impl->entries.find(key);
        // Ready never changes again: the pointer stays valid without the lock.
        if (it != impl->entries.end() && it->second->state == State::Ready)
          ready.emplace_back(key, &it->second->kernel);
      }
    }
    loaded(ready);
  };
  // FIFO: after the loads (with more than one pool thread, a load may still
  // run; that kernel just gets no head start).
  runInBackground(std::move(job));
}

void KernelCache::runInBackground(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(impl_->pool_mu);
  if (impl_->stopping) return;
  impl_->queue.push_back({KernelKey{}, nullptr, std::move(job), nullptr});
  ++impl_->pending;
  impl_->startWorkers();
  impl_->work_cv.notify_one();
}

std::vector<UsedKernel> KernelCache::usedKernels() const {
  std::vector<KernelKey> keys;
  {
    std::lock_guard<std::mutex> lock(impl_->order_mu);
    keys = impl_->order;
  }
  std::vector<UsedKernel> out;
  out.reserve(keys.size());
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  for (KernelKey& key : keys) {
    auto it = impl_->entries.find(key);
    LaunchShape shape;
    if (it != impl_->entries.end() && it->second->state == State::Ready && it->second->kernel.log)
      shape = it->second->kernel.log->shape();
    out.push_back({std::move(key), std::move(shape)});
  }
  return out;
}

void LaunchLog::note(const Launch& launch) {
  const uint64_t global = launch.global;
  for (std::atomic<uint64_t>& slot : globals_) {
    uint64_t seen = slot.load(std::memory_order_relaxed);
    if (seen == 0 && slot.compare_exchange_strong(seen, global, std::memory_order_relaxed)) break;
    if (seen == global) break;  // full slots: later sizes are not kept
  }
  if (args_ready_.load(std::memory_order_acquire)) return;
  std::call_once(args_once_, [&] {
    for (const flagosKernelArg& a : launch.args)
      arg_sizes_.push_back(a.kind == FLAGOS_ARG_DEVICE_PTR ? 0 : a.size);
    args_ready_.store(true, std::memory_order_release);
  });
}

LaunchShape LaunchLog::shape() const {
  LaunchShape s;
  if (!args_ready_.load(std::memory_order_acquire)) return s;
  s.arg_sizes = arg_sizes_;
  for (const std::atomic<uint64_t>& slot : globals_)
    if (const uint64_t g = slot.load(std::memory_order_relaxed)) s.globals.push_back(g);
  return s;
}

void KernelCache::Impl::enqueue(const KernelKey& key, std::function<Source()> source,
                                KernelCache::Warm warm) {
  {
    std::lock_guard<std::mutex> lock(pool_mu);
    if (stopping) return;  // after stopBackground(): the generic kernel serves
  }
  {
    std::shared_lock<std::shared_mutex> lock(mu);
    if (entries.count(key) != 0) return;  // ready, queued, running or failed
  }
  {
    std::unique_lock<std::shared_mutex> lock(mu);
    auto [it, inserted] = entries.try_emplace(key);
    if (!inserted) return;
    it->second = std::make_shared<Entry>();  // Queued
  }
  {
    std::lock_guard<std::mutex> lock(pool_mu);
    queue.push_back({key, std::move(source), nullptr, std::move(warm)});
    ++pending;
    startWorkers();
  }
  work_cv.notify_one();
}

bool KernelCache::stopBackground(std::chrono::milliseconds bound) {
  std::vector<std::thread> workers;
  bool idle = true;
  {
    std::unique_lock<std::mutex> lock(impl_->pool_mu);
    impl_->stopping = true;  // running builds finish; queued ones are dropped
    impl_->pending -= impl_->queue.size();
    impl_->queue.clear();
    workers.swap(impl_->workers);
    impl_->work_cv.notify_all();
    const auto done = [&] { return impl_->pending == 0; };
    if (bound == std::chrono::milliseconds::max()) {
      impl_->idle_cv.wait(lock, done);
    } else {
      idle = impl_->idle_cv.wait_for(lock, bound, done);
    }
    if (!idle) impl_->discard_results = true;  // a late build is not persisted
  }
  for (std::thread& t : workers) {
    if (idle) {
      t.join();
    } else {
      t.detach();  // still inside the compiler: leave it, the process is ending
    }
  }
  std::lock_guard<std::mutex> lock(impl_->pool_mu);
  if (idle) impl_->pending = 0;  // the workers are gone: nothing runs any more
  impl_->idle_cv.notify_all();
  return idle;
}

void KernelCache::waitIdle() {
  std::unique_lock<std::mutex> lock(impl_->pool_mu);
  impl_->idle_cv.wait(lock, [&] { return impl_->pending == 0; });
}

CacheStats KernelCache::stats() const {
  const Impl& m = *impl_;
  CacheStats s;
  s.memory_hits = m.memory_hits.load(std::memory_order_relaxed);
  s.memory_misses = m.memory_misses.load(std::memory_order_relaxed);
  s.disk_hits = m.disk_hits.load(std::memory_order_relaxed);
  const DiskStore::Stats d = m.disk.stats();
  s.disk_writes = d.writes;
  s.disk_corrupt = d.corrupt;
  s.disk_evictions = d.evictions;
  s.disk_write_errors = d.write_errors;
  s.sync_builds = m.sync_builds.load(std::memory_order_relaxed);
  s.async_builds = m.async_builds.load(std::memory_order_relaxed);
  s.build_failures = m.build_failures.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(m.pool_mu);
    s.async_pending = m.pending;
  }
  s.build_seconds = static_cast<double>(m.build_ns.load(std::memory_order_relaxed)) * 1e-9;
  s.entries = m.ready.load(std::memory_order_relaxed);
  s.preloaded = m.preloaded.load(std::memory_order_relaxed);
  return s;
}

}  // namespace flagos::kernels
