// Tier 2 of the semantic bridge: generated kernels.
//
// Note [The generated tier]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// For a call the bridge prepared (outputs allocated, inputs broadcast and
// promoted, scalars encoded), this file picks a kernel from the kernel cache
// of the call's device (csrc/jit/gen/kernel_cache.h) and launches it through
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
#include "dispatch/tiers/generated/tier.h"

#include <ATen/ATen.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dispatch/bridge/catalog.h"
#include "dispatch/tiers/generated/launch.h"
#include "dispatch/tiers/generated/recipes.h"
#include "jit/devices.h"
#include "jit/first_launches.h"
#include "jit/gen/kernel_cache.h"
#include "jit/kernel_fault.h"
#include "jit/specialization.h"
#include "jit/target.h"
#include "runtime/backend.h"

namespace flagos::semantic {

std::atomic<uint64_t> g_declined{0};
std::atomic<uint64_t> g_failed{0};
std::atomic<uint64_t> g_launches{0};
std::atomic<uint64_t> g_specialized_launches{0};
std::atomic<uint64_t> g_strategy_launches[4] = {};

namespace {

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

// One launch of @p kernel; a failed launch raises.
void launchKernel(const char* id, const kernels::CompiledKernel& kernel,
                  const kernels::Launch& launch, flagosStream_t stream) {
  const flagosStatus_t status = backend().tables.compiler->kernelLaunch(
      kernel.program, kernel.kernel_name.c_str(), launch.args.data(),
      static_cast<int32_t>(launch.args.size()), 1, &launch.global, launch.localOrNull(), stream);
  if (status != FLAGOS_SUCCESS) {
    const std::string what = std::string("generated kernel '") + id + "' launch";
    check(status, what.c_str());
  }
}

// Note [Multi-pass calls] (csrc/jit/gen/generator.h): the launches of
// @p kernel after the first one (pass 0), in order on @p stream.
void launchLaterPasses(const char* id, const kernels::Recipe& recipe,
                       const kernels::CompiledKernel& kernel, const kernels::Target& target,
                       flagosStream_t stream, const kernels::Call& call) {
  const int passes = kernels::passesOf(recipe, call);
  kernels::Launch launch;
  for (int pass = 1; pass < passes; ++pass) {
    kernels::pack(recipe, call, target, &launch, pass);
    launchKernel(id, kernel, launch, stream);
  }
}

// Queues the build of specialized kernel @p key on the background pool,
// warmed before it is published (Note [Warm before publishing]).
void requestSpecialized(DeviceGenerator& d, const char* id, const kernels::Recipe* recipe,
                        const kernels::Call& call, const kernels::KernelKey& key,
                        const kernels::Launch& launch) {
  auto sig = kernels::signatureOf(*recipe, call);
  // The recipe outlives the build: recipes are kept until exit.
  const kernels::Target target = d.target;
  kernels::KernelCache::Warm warm;  // Note [Warm before publishing]
  if (launch.global != 0) {
    // A specialized kernel takes the generic one's arguments.
    kernels::LaunchShape shape = warmShape(launch, /*with_call=*/true);
    FirstLaunches* first = d.first_launches.get();
    warm = [first, shape](const kernels::CompiledKernel& built) { first->warm(built, shape); };
  }
  d.cache->buildAsync(
      key,
      [id, recipe, sig, target] {
        return emitFor(id, *recipe, *sig, kernels::Variant::Specialized, target);
      },
      std::move(warm));
}

// The specialized kernel of the call's exact shape once it is ready (it is
// requested when FLAGOS_SPECIALIZE says it is due); nullptr until then.
const kernels::CompiledKernel* specializedKernel(DeviceGenerator& d, const char* id,
                                                 const kernels::Recipe* recipe,
                                                 const kernels::Call& call,
                                                 const kernels::Launch& launch) {
  if (policy().kind == Policy::Off) return nullptr;
  kernels::KernelKey key;
  std::string why;
  if (!kernels::keyFor(*recipe, call, kernels::Variant::Specialized, d.target, &key, &why))
    return nullptr;
  const kernels::CompiledKernel* kernel = d.cache->find(key);
  if (!kernel && d.specializations.due(key)) requestSpecialized(d, id, recipe, call, key, launch);
  return kernel;
}

// The generic kernel @p generic: in memory, from disk, or built on this
// thread; nullptr when the build failed (reported once).
const kernels::CompiledKernel* genericKernel(DeviceGenerator& d, const char* id,
                                             const kernels::Recipe* recipe,
                                             const kernels::Call& call,
                                             const kernels::KernelKey& generic,
                                             const kernels::Launch& launch) {
  const kernels::CompiledKernel* kernel = d.cache->find(generic);
  if (kernel) return kernel;
  try {
    auto sig = kernels::signatureOf(*recipe, call);
    kernel = d.cache->getOrBuild(
        generic, [&] { return emitFor(id, *recipe, *sig, kernels::Variant::Generic, d.target); });
  } catch (const kernels::BuildError& e) {
    reportFailure(d, generic, id, e.what());
    return nullptr;
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
  return kernel;
}

// Note [Multi-pass calls] (csrc/jit/gen/generator.h): a call that needs
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

bool launchGenerated(const char* id, const kernels::Recipe* recipe, c10::DeviceIndex device,
                     flagosStream_t stream, const kernels::Call& call) {
  DeviceGenerator& d = Generators::get().device(device);
  kernels::KernelKey generic;
  std::string why;
  if (!kernels::keyFor(*recipe, call, kernels::Variant::Generic, d.target, &generic, &why)) {
    g_declined.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  kernels::Launch launch;
  kernels::pack(*recipe, call, d.target, &launch);
  const kernels::CompiledKernel* kernel = specializedKernel(d, id, recipe, call, launch);
  const bool specialized = kernel != nullptr;
  if (!kernel) kernel = genericKernel(d, id, recipe, call, generic, launch);
  if (!kernel) return false;

  if (kernel->log) kernel->log->note(launch);  // Note [First launch]
  g_launches.fetch_add(1, std::memory_order_relaxed);
  if (specialized) g_specialized_launches.fetch_add(1, std::memory_order_relaxed);
  if (launch.strategy)
    g_strategy_launches[launch.strategy & 3].fetch_add(1, std::memory_order_relaxed);
  if (launch.global == 0) return true;
  launchKernel(id, *kernel, launch, stream);
  launchLaterPasses(id, *recipe, *kernel, d.target, stream, call);
  return true;
}

bool hasGeneratedKernel(int op) {
  return hasCompiler() && Recipes::get().find(op) != nullptr;
}

bool generatedInPlaceOnly(int op) {
  // Asked on every functional call of a generated op: answered once per op
  // (the compiler's language is fixed once a backend is loaded).
  static std::unique_ptr<std::atomic<int8_t>[]> known(new std::atomic<int8_t>[kNumOps]());
  const int8_t k = known[op].load(std::memory_order_relaxed);  // 0: not yet, 1: no, 2: yes
  if (k != 0) return k == 2;
  if (!hasCompiler()) return false;
  const kernels::Recipe* recipe = Recipes::get().find(op);
  const bool only = recipe && kernels::inPlaceOnly(*recipe, backend().tables.compiler->language);
  known[op].store(only ? 2 : 1, std::memory_order_relaxed);
  return only;
}

// Note [Atomic scatters decline]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A dialect with parallel scatters (opencl-c) adds duplicate indices with
// atomics, in whatever order the work items run. In float32 the sums then
// differ from CPU's in the last bits, within PyTorch's tolerances; two
// cases decline to the next tier (the host tier runs CPU's serial loop):
// * torch.use_deterministic_algorithms(True): the same call must give the
//   same bits every time (test_index_add_deterministic);
// * 16-bit floats: every atomic add rounds the partial sum to 8 or 11
//   bits, so the order decides the result far beyond any tolerance (an
//   index_put_ accumulating 400k bfloat16 rows into 16 differed from CPU's
//   by up to 190: test_index_put_large_indices).
bool atomicScatterDeclines(int op, const kernels::Call& call) {
  if (!generatedInPlaceOnly(op) || call.num_outputs < 1) return false;
  const flagosDtype_t dtype = call.outputs[0].dtype;
  return at::globalContext().deterministicAlgorithms() || dtype == FLAGOS_DTYPE_FLOAT16 ||
         dtype == FLAGOS_DTYPE_BFLOAT16;
}

bool runGeneratedKernel(int op, c10::DeviceIndex device, flagosStream_t stream,
                        const kernels::Call& call) {
  if (atomicScatterDeclines(op, call)) return false;
  const kernels::Recipe* recipe = Recipes::get().find(op);
  return recipe && launchWithScratch(kOps[op].id, recipe, device, stream, call);
}

}  // namespace flagos::semantic
