// Tier 2 of the semantic bridge: generated kernels.
//
// Note [The generated tier]
// For a call the bridge prepared (outputs allocated, inputs broadcast and
// promoted, scalars encoded), this file picks a kernel from the kernel cache
// of the call's device (csrc/kernels/kernel_cache.h) and launches it through
// the plugin's compiler table:
//
//  - the *generic* kernel of the call's key (dtypes, layout class; no
//    shapes) is found in memory, or loaded from disk, or compiled on this
//    thread: only an operator's first call with a dtype/layout waits for a
//    compiler;
//  - the *specialized* kernel of the call's exact shape is used once ready.
//    FLAGOS_SPECIALIZE decides when it is requested from the background
//    pool: `off`, `eager` (first call of a shape), `after:N` (N-th call of a
//    shape; the default is after:3). The call that requests it, and every
//    call until it is ready, runs the generic kernel; nothing waits.
//
// A kernel the compiler rejects is reported once on stderr with its build
// log and counted (kernel_cache_stats()); that key then always takes the
// next tier. Cache settings come from the environment once per process:
// FLAGOS_CACHE_DIR, FLAGOS_CACHE_MAX_BYTES, FLAGOS_COMPILE_THREADS.
#include "dispatch/semantic/generated_tier.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "dispatch/device_copy.h"
#include "dispatch/semantic/catalog.h"
#include "flagos_kit/fnv1a.h"
#include "kernels/disk_store.h"
#include "kernels/kernel_cache.h"
#include "kernels/manifest.h"
#include "flagos_kit/byte_size.h"
#include "runtime/backend.h"
#include "runtime/dtype.h"
#include "runtime/lifecycle.h"
#include "runtime/plugin_loader.h"
#include "runtime/stream.h"

namespace flagos::semantic {
namespace {

const char* familyName(Family f) {
  switch (f) {
    case Family::Pointwise:
      return "pointwise";
    case Family::Reduction:
      return "reduction";
    case Family::Normalization:
      return "normalization";
    case Family::Gemm:
      return "gemm";
    case Family::Convolution:
      return "convolution";
    case Family::Pooling:
      return "pooling";
    case Family::Index:
      return "index";
    case Family::Shape:
      return "shape";
    case Family::Random:
      return "random";
    case Family::Loss:
      return "loss";
    case Family::Optimizer:
      return "optimizer";
  }
  return "?";
}

// ---------------------------------------------------------------- policy ---

struct Policy {
  enum Kind { Off, Eager, After } kind = After;
  int64_t after = 3;
  std::string text = "after:3";
};

// FLAGOS_SPECIALIZE, parsed once; a malformed value raises naming it.
const Policy& policy() {
  static const Policy p = [] {
    Policy out;
    const char* env = std::getenv("FLAGOS_SPECIALIZE");
    if (!env || !*env) return out;
    const std::string v(env);
    out.text = v;
    if (v == "off") {
      out.kind = Policy::Off;
    } else if (v == "eager") {
      out.kind = Policy::Eager;
    } else if (v.rfind("after:", 0) == 0) {
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str() + 6, &end, 10);
      TORCH_CHECK(end && *end == '\0' && n >= 1, "FLAGOS_SPECIALIZE='", v,
                  "': expected off, eager or after:N with N >= 1");
      out.kind = Policy::After;
      out.after = n;
    } else {
      TORCH_CHECK(false, "FLAGOS_SPECIALIZE='", v, "': expected off, eager or after:N with N >= 1");
    }
    return out;
  }();
  return p;
}

// FLAGOS_CACHE_MAX_BYTES, parsed like the plugins' memory limits.
uint64_t maxDiskBytes(uint64_t fallback) {
  const char* text = std::getenv("FLAGOS_CACHE_MAX_BYTES");
  if (!text || !*text) return fallback;
  uint64_t bytes = 0;
  TORCH_CHECK(flagos_kit::parseByteSize(text, &bytes), "FLAGOS_CACHE_MAX_BYTES='", text,
              "': expected bytes, e.g. 536870912, 512M or 512MiB");
  return bytes;
}

// ------------------------------------------------------- per-op recipes ---

class Recipes {
 public:
  static Recipes& get() {
    static Recipes* r = new Recipes();  // leaked: used until exit
    return *r;
  }
  // Null when op has no recipe.
  const kernels::Recipe* find(int op) {
    int s = state_[op].load(std::memory_order_acquire);
    if (s == 2) return recipes_[op].get();
    if (s == 1) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    s = state_[op].load(std::memory_order_relaxed);
    if (s == 0) {
      const OpSpec& spec = kOps[op];
      kernels::OpInfo info;
      info.id = spec.id;
      info.family = familyName(spec.family);
      info.expr = spec.expr ? spec.expr : "";
      for (int i = 0; i < spec.num_inputs; ++i) info.inputs.emplace_back(spec.inputs[i]);
      for (int i = 0; i < spec.num_scalars; ++i) info.scalars.emplace_back(spec.scalars[i].name);
      info.num_outputs = spec.num_outputs;
      std::string why;
      recipes_[op] = kernels::makeRecipe(info, &why);
      if (!recipes_[op]) why_not_[op] = why;
      s = recipes_[op] ? 2 : 1;
      state_[op].store(s, std::memory_order_release);
    }
    return s == 2 ? recipes_[op].get() : nullptr;
  }
  std::string whyNot(int op) {
    std::lock_guard<std::mutex> lock(mu_);
    return why_not_[op];
  }

 private:
  Recipes() : state_(new std::atomic<int>[kNumOps]), recipes_(kNumOps), why_not_(kNumOps) {
    for (int i = 0; i < kNumOps; ++i) state_[i].store(0);
  }
  std::mutex mu_;
  std::unique_ptr<std::atomic<int>[]> state_;  // 0 unknown, 1 none, 2 ready
  std::vector<std::shared_ptr<const kernels::Recipe>> recipes_;
  std::vector<std::string> why_not_;
};

// ------------------------------------------------- per-device generators ---

std::atomic<uint64_t> g_first_launches{0};  // Note [First launch]: launches with no work
std::atomic<uint64_t> g_warm_launches{0};   // Note [Warm before publishing]: the same

// Note [First launch] (kernel_cache.h): a device's preloaded kernels, their
// launch shapes from the manifest repeated with no work (NULL pointers,
// zeroed bytes: meta.work == 0) on a stream of their own, on the cache's
// pool thread once the loads are done (a first launch may compile: it must
// not hold up the loads). Not waited for; the plugin also learns these work
// sizes, so the caller's repeats of them take no compile lock (opencl: Note
// [Launches without the compile lock]). Failures only lose the head start.
class FirstLaunches {
 public:
  FirstLaunches(int32_t physical, uint64_t local, const std::vector<kernels::UsedKernel>& kernels)
      : physical_(physical), local_(local) {
    for (const kernels::UsedKernel& k : kernels)
      if (!k.shape.globals.empty() && !k.shape.arg_sizes.empty()) shapes_.emplace(k.key, k.shape);
  }
  void run(const std::vector<std::pair<kernels::KernelKey, const kernels::CompiledKernel*>>&
               loaded) noexcept {
    for (const auto& [key, kernel] : loaded) launch(key, *kernel);
  }
  // After the cache's pool stopped (no run() any more).
  void close() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    if (stream_) {
      backend().tables.stream->streamSynchronize(stream_);
      backend().tables.stream->streamDestroy(stream_);
    }
    stream_ = nullptr;
    closed_ = true;
  }

  // Note [Warm before publishing] (kernel_cache.h): one launch of @p kernel
  // with no work in @p shape, waited for. On the cache's pool thread.
  void warm(const kernels::CompiledKernel& kernel, const kernels::LaunchShape& shape) noexcept {
    launchShape(kernel, shape, /*wait=*/true, g_warm_launches);
  }

 private:
  void launch(const kernels::KernelKey& key, const kernels::CompiledKernel& kernel) noexcept {
    auto it = shapes_.find(key);
    if (it != shapes_.end()) launchShape(kernel, it->second, /*wait=*/false, g_first_launches);
  }
  void launchShape(const kernels::CompiledKernel& kernel, const kernels::LaunchShape& shape,
                   bool wait, std::atomic<uint64_t>& launched) noexcept {
    const Backend& b = backend();
    std::lock_guard<std::mutex> lock(mu_);
    if (!stream_ && (closed_ || b.tables.stream->streamCreate(physical_, 0, &stream_) != 0)) {
      closed_ = true;
      return;
    }
    try {
      void* null = nullptr;
      std::vector<std::vector<uint8_t>> zeros;  // one buffer per BYTES argument
      zeros.reserve(shape.arg_sizes.size());
      std::vector<flagosKernelArg> args;
      for (uint32_t size : shape.arg_sizes) {
        if (size == 0) {
          args.push_back({FLAGOS_ARG_DEVICE_PTR, sizeof(void*), &null});
        } else {
          zeros.emplace_back(size, 0);
          args.push_back({FLAGOS_ARG_BYTES, size, zeros.back().data()});
        }
      }
      // Not waited for unless asked: the driver does the work on its threads.
      for (uint64_t global : shape.globals) {
        if (b.tables.compiler->kernelLaunch(kernel.program, kernel.kernel_name.c_str(), args.data(),
                                            static_cast<int32_t>(args.size()), 1, &global,
                                            local_ != 0 ? &local_ : nullptr,
                                            stream_) == FLAGOS_SUCCESS)
          launched.fetch_add(1, std::memory_order_relaxed);
      }
      if (wait) b.tables.stream->streamSynchronize(stream_);
    } catch (...) {  // bad_alloc: nothing lost but the head start
    }
  }

  const int32_t physical_;
  const uint64_t local_;  // Note [Launch geometry]
  std::unordered_map<kernels::KernelKey, kernels::LaunchShape, kernels::KernelKeyHash> shapes_;
  std::mutex mu_;
  flagosStream_t stream_ = nullptr;
  bool closed_ = false;
};

struct DeviceGenerator {
  std::unique_ptr<kernels::KernelCache> cache;
  // Launches with no work: the manifest's (Note [First launch]) and each
  // specialized kernel's before it is published (Note [Warm before publishing]).
  std::unique_ptr<FirstLaunches> first_launches;
  kernels::Target target;
  std::string manifest_path;  // Note [Kernel preload]; "" without a cache dir
  kernels::Manifest earlier;  // the manifest read at creation, merged at exit
  // Calls seen per specialized key (FLAGOS_SPECIALIZE=after:N); bounded.
  std::mutex seen_mu;
  std::unordered_map<kernels::KernelKey, int64_t, kernels::KernelKeyHash> seen;
  // Keys whose compile failed and was reported.
  std::mutex failed_mu;
  std::unordered_map<kernels::KernelKey, bool, kernels::KernelKeyHash> reported;
};

std::atomic<uint64_t> g_declined{0};  // calls the generator declined (dtype, rank, ...)
std::atomic<uint64_t> g_failed{0};    // calls that met a failed compile
std::atomic<uint64_t> g_launches{0};  // generic + specialized launches
std::atomic<uint64_t> g_specialized_launches{0};

// Where a device's manifest lives: beside its kernel files, named by the
// target and every device fact but the fp64 answer the manifest holds.
std::string manifestPath(const std::string& kernel_dir, const std::string& language,
                         const std::string& device) {
  if (kernel_dir.empty()) return "";
  const std::string id = language + "|" + device;
  char name[40];
  std::snprintf(name, sizeof name, "manifest-%016llx.txt",
                static_cast<unsigned long long>(flagos_kit::fnv1a(id.data(), id.size())));
  return kernel_dir + "/" + name;
}

// Everything about a device that changes a binary: backend, SDK and driver
// versions, architecture, model (the fp64 answer is added by the caller).
std::string deviceIdentity(int32_t physical) {
  const Backend& b = backend();
  flagosDeviceProperties props{};
  props.struct_size = sizeof(props);
  check(b.tables.device->getProperties(physical, &props), "getProperties");
  return b.name + "|" + b.probe.sdk_version + "|" + b.probe.driver_version + "|" +
         std::string(props.arch, strnlen(props.arch, sizeof(props.arch))) + "|" +
         std::string(props.name, strnlen(props.name, sizeof(props.name)));
}

// Note [Launch geometry] (compiler.h): the local size of every generated
// launch on @p physical; FLAGOS_WORK_GROUP_SIZE overrides the device's.
uint64_t localSize(int32_t physical) {
  flagosDeviceProperties props{};
  props.struct_size = sizeof(props);
  check(backend().tables.device->getProperties(physical, &props), "getProperties");
  const uint64_t max = props.max_work_group_size != 0 ? props.max_work_group_size : UINT32_MAX;
  uint64_t local = props.preferred_work_group_size != 0 ? props.preferred_work_group_size
                                                        : std::min<uint64_t>(256, max);
  if (const char* v = std::getenv("FLAGOS_WORK_GROUP_SIZE"); v && *v) {
    char* end = nullptr;
    const long long n = std::strtoll(v, &end, 10);
    TORCH_CHECK(end && *end == '\0' && n >= 1 && static_cast<uint64_t>(n) <= max,
                "FLAGOS_WORK_GROUP_SIZE='", v, "': expected a work-group size from 1 to ", max,
                " (the device's limit)");
    local = static_cast<uint64_t>(n);
  }
  return std::min(local, max);
}

// Whether the device compiles double-precision code: a tiny probe build.
bool probeFp64(const flagosCompilerTable* c, int32_t physical) {
  if (std::strcmp(c->language, "opencl-c") != 0) return true;
  const char* src =
      "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
      "__kernel void flagos_fp64_probe(__global double* p, ulong off) { p[0] = 1.0; }\n";
  flagosProgram_t program = nullptr;
  if (c->programBuild(physical, src, "", &program) != FLAGOS_SUCCESS) return false;
  c->programDestroy(program);
  return true;
}

class Generators {
 public:
  static Generators& get() {
    static Generators* g = new Generators();  // leaked: kernels may run at exit
    return *g;
  }
  DeviceGenerator& device(c10::DeviceIndex logical) {
    std::lock_guard<std::mutex> lock(mu_);
    // No background compile may be inside the SDK's compiler while it
    // tears down (Note [Stopping background work], runtime/lifecycle.h).
    static const bool stop_at_exit =
        (registerBackgroundStopper(
             "the kernel cache's background builds",
             [](std::chrono::milliseconds bound) { return Generators::get().stopAll(bound); }),
         true);
    (void)stop_at_exit;
    auto& slot = devices_[logical];
    if (!slot) slot = create(logical);
    return *slot;
  }
  // Note [Stopping background work]: false when a build outlived @p bound.
  bool stopAll(std::chrono::milliseconds bound) {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    bool idle = true;
    for (DeviceGenerator* d : all()) {
      const auto left = std::max(std::chrono::milliseconds(0),
                                 std::chrono::duration_cast<std::chrono::milliseconds>(
                                     deadline - std::chrono::steady_clock::now()));
      idle = d->cache->stopBackground(left) && idle;
      if (d->first_launches) d->first_launches->close();
      writeManifest(*d);
    }
    return idle;
  }
  // Note [Kernel preload]: what this process used, for the next one. Never
  // throws (it runs at exit); a failed write only loses the preload.
  static void writeManifest(const DeviceGenerator& d) {
    if (d.manifest_path.empty() || !preloadEnabledNoThrow()) return;
    try {
      kernels::Manifest m;
      m.fp64 = d.target.fp64;
      m.kernels = d.cache->usedKernels();
      if (m.kernels.empty()) return;  // nothing new: the file stays as it is
      kernels::writeManifest(d.manifest_path, kernels::mergeManifests(std::move(m), d.earlier));
    } catch (...) {  // bad_alloc at exit: the next process just preloads less
    }
  }
  static bool preloadEnabledNoThrow() {
    try {
      return preloadEnabled();
    } catch (...) {
      return false;
    }
  }
  std::vector<DeviceGenerator*> all() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<DeviceGenerator*> out;
    for (auto& [index, d] : devices_) out.push_back(d.get());
    return out;
  }

 private:
  std::unique_ptr<DeviceGenerator> create(c10::DeviceIndex logical) {
    const Backend& b = backend();
    const flagosCompilerTable* compiler = b.tables.compiler;
    const int32_t physical = physicalDevice(logical);
    auto d = std::make_unique<DeviceGenerator>();
    d->target.language = compiler->language;
    d->target.local_size = localSize(physical);
    kernels::CacheConfig config;
    const std::string root = defaultCacheDir();
    config.dir = root.empty() ? "" : root + "/kernels";
    const std::string device = deviceIdentity(physical);
    // Note [Kernel preload]: the last process's manifest answers fp64 and
    // lists the kernels to load in the background.
    kernels::Manifest manifest;
    bool preload = false;
    if (preloadEnabled()) {
      d->manifest_path = manifestPath(config.dir, d->target.language, device);
      preload = !d->manifest_path.empty() && kernels::readManifest(d->manifest_path, &manifest);
    }
    d->target.fp64 = preload ? manifest.fp64 : probeFp64(compiler, physical);
    config.max_disk_bytes = maxDiskBytes(config.max_disk_bytes);
    if (const char* t = std::getenv("FLAGOS_COMPILE_THREADS"); t && *t) {
      char* end = nullptr;
      const long n = std::strtol(t, &end, 10);
      TORCH_CHECK(end && *end == '\0' && n >= 1 && n <= 64, "FLAGOS_COMPILE_THREADS='", t,
                  "': expected a number of threads from 1 to 64");
      config.compile_threads = static_cast<int>(n);
    }
    config.device_arch = device + (d->target.fp64 ? "|fp64" : "");
    config.last_error = [] { return detail::lastError(backend().tables); };
    d->cache = std::make_unique<kernels::KernelCache>(compiler, physical, std::move(config));
    d->first_launches =
        std::make_unique<FirstLaunches>(physical, d->target.local_size, manifest.kernels);
    if (preload) {
      std::vector<kernels::KernelKey> keys;
      for (const kernels::UsedKernel& k : manifest.kernels) keys.push_back(k.key);
      FirstLaunches* first = d->first_launches.get();  // lives as long as the cache's pool
      d->cache->preload(keys, [first](const auto& loaded) { first->run(loaded); });
      d->earlier = std::move(manifest);
    }
    return d;
  }
  std::mutex mu_;
  std::unordered_map<c10::DeviceIndex, std::unique_ptr<DeviceGenerator>> devices_;
};

// FLAGOS_KERNEL_FAULT (testing): the semantic ID whose sources are broken.
const std::string& faultyOp() {
  static const std::string op = [] {
    const char* env = std::getenv("FLAGOS_KERNEL_FAULT");
    return std::string(env ? env : "");
  }();
  return op;
}

kernels::Source emitFor(const char* id, const kernels::Recipe& recipe,
                        const kernels::Signature& sig, kernels::Variant variant,
                        const kernels::Target& target) {
  kernels::Source source = kernels::emit(recipe, sig, variant, target);
  if (!faultyOp().empty() && faultyOp() == id)
    source.text += "\n#error FLAGOS_KERNEL_FAULT injected a compile error\n";
  return source;
}

bool hasCompiler() {
  static const bool has = isInitialized() && backend().tables.compiler != nullptr;
  return has;
}

// Note [Kernel preload]: at initialize, each device with a manifest from an
// earlier process gets its generator now, which queues the manifest's
// kernels as background loads; others are created on first use as before.
void preloadAtInitialize() {
  if (!hasCompiler() || !preloadEnabled()) return;
  const std::string root = defaultCacheDir();
  if (root.empty()) return;
  const char* language = backend().tables.compiler->language;
  for (c10::DeviceIndex i = 0; i < deviceCount(); ++i) {
    const std::string device = deviceIdentity(physicalDevice(i));
    if (std::ifstream(manifestPath(root + "/kernels", language, device)))
      Generators::get().device(i);
  }
}
const bool kPreloadHooked = (onInitialized(preloadAtInitialize), true);

// Whether a specialized kernel should be requested now for @p key.
bool specializationDue(DeviceGenerator& d, const kernels::KernelKey& key) {
  const Policy& p = policy();
  if (p.kind == Policy::Eager) return true;
  std::lock_guard<std::mutex> lock(d.seen_mu);
  if (d.seen.size() > 65536) d.seen.clear();  // bounded; worst case a late request
  return ++d.seen[key] == p.after;
}

void reportFailure(DeviceGenerator& d, const kernels::KernelKey& key, const char* id,
                   const char* what) {
  g_failed.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(d.failed_mu);
  if (d.reported.emplace(key, true).second) {
    std::fprintf(stderr,
                 "[flagos] generated kernel for '%s' failed to build; this call and later ones "
                 "with the same types take the next tier:\n%s\n",
                 id, what);
  }
}

}  // namespace

std::string defaultCacheDir() {
  if (const char* dir = std::getenv("FLAGOS_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/flagos";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/flagos";
  return "";
}

// FLAGOS_PRELOAD (Note [Kernel preload]): on (default) or off.
bool preloadEnabled() {
  static const bool on = [] {
    const char* v = std::getenv("FLAGOS_PRELOAD");
    const std::string value = v ? v : "on";
    TORCH_CHECK(value == "on" || value == "off" || value == "1" || value == "0", "FLAGOS_PRELOAD='",
                value, "': expected on or off");
    return value == "on" || value == "1";
  }();
  return on;
}

bool hasGeneratedKernel(int op) {
  return hasCompiler() && Recipes::get().find(op) != nullptr;
}

namespace {

// Note [Multi-pass calls] (csrc/kernels/generator.h): the launches of
// @p kernel after the first one (pass 0), in order on @p stream.
void launchLaterPasses(const char* id, const kernels::Recipe& recipe,
                       const kernels::CompiledKernel& kernel, const kernels::Target& target,
                       flagosStream_t stream, const kernels::Call& call) {
  const int passes = kernels::passesOf(recipe, call);
  kernels::Launch launch;
  for (int pass = 1; pass < passes; ++pass) {
    kernels::pack(recipe, call, target, &launch, pass);
    const flagosStatus_t status = backend().tables.compiler->kernelLaunch(
        kernel.program, kernel.kernel_name.c_str(), launch.args.data(),
        static_cast<int32_t>(launch.args.size()), 1, &launch.global, launch.localOrNull(), stream);
    if (status != FLAGOS_SUCCESS) {
      const std::string what = std::string("generated kernel '") + id + "' launch";
      check(status, what.c_str());
    }
  }
}

// Note [Warm before publishing] (kernel_cache.h): the zero-work launches
// that build a kernel's work-group functions: the call's own global size
// (@p with_call) and a large grid. PoCL builds a second work-group function
// once a grid is large (a first call of 65537 floats waited 62 ms for it
// after the generic kernels had run on 4096); 1 << 20 items (4096
// work-groups of 256) is past that point.
kernels::LaunchShape warmShape(const kernels::Launch& launch, bool with_call) {
  constexpr uint64_t kLargeGrid = uint64_t{1} << 20;
  kernels::LaunchShape shape;
  for (const flagosKernelArg& a : launch.args)
    shape.arg_sizes.push_back(a.kind == FLAGOS_ARG_DEVICE_PTR ? 0 : a.size);
  if (with_call) shape.globals.push_back(launch.global);
  if (launch.global < kLargeGrid) shape.globals.push_back(kLargeGrid);
  return shape;
}

// The generated tier for one prepared call of semantic op @p id.
bool launchGenerated(const char* id, const kernels::Recipe* recipe, c10::DeviceIndex device,
                     flagosStream_t stream, const kernels::Call& call) {
  DeviceGenerator& d = Generators::get().device(device);
  const flagosCompilerTable* compiler = backend().tables.compiler;

  kernels::KernelKey generic;
  std::string why;
  if (!kernels::keyFor(*recipe, call, kernels::Variant::Generic, d.target, &generic, &why)) {
    g_declined.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  kernels::Launch launch;
  kernels::pack(*recipe, call, d.target, &launch);
  const kernels::CompiledKernel* kernel = nullptr;
  bool specialized = false;
  if (policy().kind != Policy::Off) {
    kernels::KernelKey key;
    if (kernels::keyFor(*recipe, call, kernels::Variant::Specialized, d.target, &key, &why)) {
      kernel = d.cache->find(key);
      specialized = kernel != nullptr;
      if (!kernel && specializationDue(d, key)) {
        auto sig = kernels::signatureOf(*recipe, call);
        // The recipe outlives the build: recipes are kept until exit.
        const kernels::Target target = d.target;
        kernels::KernelCache::Warm warm;  // Note [Warm before publishing]
        if (launch.global != 0) {
          // A specialized kernel takes the generic one's arguments.
          kernels::LaunchShape shape = warmShape(launch, /*with_call=*/true);
          FirstLaunches* first = d.first_launches.get();
          warm = [first, shape](const kernels::CompiledKernel& built) {
            first->warm(built, shape);
          };
        }
        d.cache->buildAsync(
            key,
            [id, recipe, sig, target] {
              return emitFor(id, *recipe, *sig, kernels::Variant::Specialized, target);
            },
            std::move(warm));
      }
    }
  }
  if (!kernel) {
    kernel = d.cache->find(generic);
    if (!kernel) {
      try {
        auto sig = kernels::signatureOf(*recipe, call);
        kernel = d.cache->getOrBuild(generic, [&] {
          return emitFor(id, *recipe, *sig, kernels::Variant::Generic, d.target);
        });
      } catch (const kernels::BuildError& e) {
        reportFailure(d, generic, id, e.what());
        return false;
      }
      // Note [Warm before publishing]: the large-grid work-group function of
      // the kernel just built, in the background (this call builds its own).
      if (launch.global != 0) {
        FirstLaunches* first = d.first_launches.get();
        const kernels::CompiledKernel* built = kernel;
        d.cache->runInBackground([first, built, shape = warmShape(launch, /*with_call=*/false)] {
          first->warm(*built, shape);
        });
      }
    }
  }

  if (kernel->log) kernel->log->note(launch);  // Note [First launch]
  g_launches.fetch_add(1, std::memory_order_relaxed);
  if (specialized) g_specialized_launches.fetch_add(1, std::memory_order_relaxed);
  if (launch.global == 0) return true;
  const flagosStatus_t status = compiler->kernelLaunch(
      kernel->program, kernel->kernel_name.c_str(), launch.args.data(),
      static_cast<int32_t>(launch.args.size()), 1, &launch.global, launch.localOrNull(), stream);
  if (status != FLAGOS_SUCCESS) {
    const std::string what = std::string("generated kernel '") + id + "' launch";
    check(status, what.c_str());
  }
  launchLaterPasses(id, *recipe, *kernel, d.target, stream, call);
  return true;
}

// Note [Multi-pass calls] (csrc/kernels/generator.h): a call that needs
// scratch memory gets it here, from the caching allocator on the current
// stream (the one the passes are queued on), as one more output. Freeing it
// on return is safe: the allocator hands the block only to later work on
// that stream.
bool launchWithScratch(const char* id, const kernels::Recipe* recipe, c10::DeviceIndex device,
                       flagosStream_t stream, const kernels::Call& call) {
  const std::vector<kernels::ScratchBuffer> need =
      kernels::scratchFor(*recipe, call, Generators::get().device(device).target);
  if (need.empty()) return launchGenerated(id, recipe, device, stream, call);
  std::vector<at::Tensor> scratch;
  std::vector<flagosTensor> outputs(call.outputs, call.outputs + call.num_outputs);
  static const int64_t kOne = 1;
  for (const kernels::ScratchBuffer& b : need) {
    const int64_t bytes = b.elements * static_cast<int64_t>(FLAGOS_DTYPE_SIZE(b.dtype));
    scratch.push_back(at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(
                                             c10::DeviceType::PrivateUse1, device)));
    flagosTensor t{};
    t.data = scratch.back().data_ptr();
    t.dtype = b.dtype;
    t.ndim = 1;
    t.shape = &need[scratch.size() - 1].elements;
    t.strides = &kOne;
    outputs.push_back(t);
  }
  kernels::Call with = call;
  with.outputs = outputs.data();
  with.num_outputs = static_cast<int32_t>(outputs.size());
  return launchGenerated(id, recipe, device, stream, with);
}

}  // namespace

bool runGeneratedKernel(int op, c10::DeviceIndex device, flagosStream_t stream,
                        const kernels::Call& call) {
  const kernels::Recipe* recipe = Recipes::get().find(op);
  return recipe && launchWithScratch(kOps[op].id, recipe, device, stream, call);
}

namespace {

// Note [Generated copies]
// Device-to-device copies that change layout or dtype (x.t().contiguous(),
// .to(dtype), broadcasting copy_) would otherwise be staged through the host
// (copy_ops.cpp, Note [Staging through the host]). A generated pointwise
// kernel with the expression `self` does them on the device: the source is
// described with dst's shape (broadcast dims get stride 0) and the
// generator casts on load. copy_ops.cpp counts such a copy on the generated
// tier of aten::_copy_from.
const kernels::Recipe* copyRecipe() {
  static const std::shared_ptr<const kernels::Recipe> recipe = [] {
    kernels::OpInfo info;
    info.id = "copy";
    info.family = "pointwise";
    info.expr = "self";
    info.inputs = {"self"};
    std::string why;
    return kernels::makeRecipe(info, &why);
  }();
  return recipe.get();
}

bool describeForCopy(const at::Tensor& t, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                     flagosTensor& d) {
  const auto dtype = toVendorDtype(t.scalar_type());
  if (!dtype || sizes.size() > FLAGOS_MAX_DIMS) return false;
  d.data = const_cast<void*>(t.const_data_ptr());
  d.dtype = *dtype;
  d.ndim = static_cast<int32_t>(sizes.size());
  d.shape = sizes.empty() ? nullptr : sizes.data();
  d.strides = strides.empty() ? nullptr : strides.data();
  return true;
}

bool generatedCopy(const at::Tensor& dst, const at::Tensor& src) {
  if (!hasCompiler() || !copyRecipe() || src.is_conj() || src.is_neg() ||
      src.device() != dst.device() || dst.numel() == 0)
    return false;
  const at::Tensor source = src.expand(dst.sizes());
  flagosTensor out{}, in{};
  if (!describeForCopy(dst, dst.sizes(), dst.strides(), out) ||
      !describeForCopy(source, source.sizes(), source.strides(), in))
    return false;
  const kernels::Call call{&out, 1, &in, 1, nullptr, 0};
  const c10::DeviceIndex device = dst.device().index();
  return launchGenerated("copy", copyRecipe(), device, currentVendorStream(device), call);
}

const bool kCopyRegistered = (setDeviceCopyKernel(&generatedCopy), true);

}  // namespace

std::string kernelCacheStatsJson() {
  std::ostringstream out;
  out << "{\"policy\": \"" << policy().text << "\", \"compiler\": ";
  if (hasCompiler()) {
    out << "\"" << backend().tables.compiler->language << "\"";
  } else {
    out << "null";
  }
  out << ", \"launches\": " << g_launches.load()
      << ", \"specialized_launches\": " << g_specialized_launches.load()
      << ", \"declined\": " << g_declined.load() << ", \"failed_calls\": " << g_failed.load()
      << ", \"first_launches\": " << g_first_launches.load()
      << ", \"warm_launches\": " << g_warm_launches.load() << ", \"devices\": [";
  bool first = true;
  for (DeviceGenerator* d : Generators::get().all()) {
    const kernels::CacheStats s = d->cache->stats();
    out << (first ? "" : ", ") << "{\"memory_hits\": " << s.memory_hits
        << ", \"memory_misses\": " << s.memory_misses << ", \"disk_hits\": " << s.disk_hits
        << ", \"disk_writes\": " << s.disk_writes << ", \"disk_corrupt\": " << s.disk_corrupt
        << ", \"disk_evictions\": " << s.disk_evictions << ", \"sync_builds\": " << s.sync_builds
        << ", \"async_builds\": " << s.async_builds << ", \"build_failures\": " << s.build_failures
        << ", \"async_pending\": " << s.async_pending << ", \"build_seconds\": " << s.build_seconds
        << ", \"entries\": " << s.entries << ", \"preloaded\": " << s.preloaded
        << ", \"fp64\": " << (d->target.fp64 ? "true" : "false")
        << ", \"local_size\": " << d->target.local_size << "}";
    first = false;
  }
  out << "]}";
  return out.str();
}

void waitForSpecializations() {
  for (DeviceGenerator* d : Generators::get().all()) d->cache->waitIdle();
}

std::string generatedRecipeReport() {
  std::ostringstream out;
  for (int i = 0; i < kNumOps; ++i) {
    const bool has = Recipes::get().find(i) != nullptr;
    out << kOps[i].id << "\t" << (has ? "recipe" : Recipes::get().whyNot(i)) << "\n";
  }
  return out.str();
}

}  // namespace flagos::semantic

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  m.def("_kernel_cache_stats() -> str", [] { return flagos::semantic::kernelCacheStatsJson(); });
  m.def("_kernel_cache_wait() -> ()", [] { flagos::semantic::waitForSpecializations(); });
  m.def("_generated_recipes() -> str", [] { return flagos::semantic::generatedRecipeReport(); });
}
