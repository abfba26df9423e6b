// The kernel generator: from a semantic operator's recipe and the types and
// layout of one call, OpenCL C or C source for a kernel, and the arguments
// to launch it with. No PyTorch here (the library builds and is tested
// without torch); the bridge's generated tier (csrc/dispatch/tiers/generated/
// tier.cpp) and the kernel cache (kernel_cache.h) drive it.
//
// Note [Generic and specialized kernels]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A *generic* kernel reads sizes and strides at run time: one build serves
// every shape of an operator for its dtypes and layout class (all operands
// contiguous, or not), so a new shape never waits for a compiler once the
// operator ran once. A *specialized* kernel bakes one shape and stride set
// in: index arithmetic folds to constants, contiguous operands read with
// vector loads. Both take the SAME arguments in the same order (pack()), so
// the cache can swap one for the other between two calls.
//
// Note [Launch convention of generated kernels]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Kernels are 1-D: work item i of `global[0]` computes output element i
// (pointwise); reductions and row operators map outputs or rows onto work
// items by their strategy (Note [Reduction strategies], reduce_layout.cpp: one
// item, a few neighbouring items' worth, or a segment of a work-group each).
// Arguments, in order: each output's data, each input's data (device
// pointers; FLAGOS_ARG_DEVICE_PTR, so "opencl-c" sees base + byte offset,
// compiler.h), then one FLAGOS_ARG_BYTES struct `flagos_meta` with the
// sizes and strides (layout chosen by the emitter, the same for generic and
// specialized kernels), then one FLAGOS_ARG_BYTES value per scalar (double
// for floating compute types, float where the target has no fp64, int64
// otherwise; absent scalars pass zero). For language "c" a kernel
// is `void NAME(void* const* args, uint64_t begin, uint64_t end)` computing
// work items [begin, end); the plugin splits `global[0]` across its
// threads. The source also defines `const int NAME_num_args` (the argument
// count above) so the plugin can check a launch. The first field of
// flagos_meta is `work`, and every kernel of both dialects returns at once
// for work items >= work, before touching memory: a launch with zeroed
// meta and NULL pointers does nothing (Note [First launch]).
//
// Note [Multi-pass calls]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Most calls are one launch. A call that one launch cannot do well (a sort
// of rows longer than one rank sort handles: sort.cpp, Note [Long sorts])
// asks for device scratch memory and several launches of its one kernel:
// scratchFor() lists the scratch buffers it needs (none: one launch, as
// usual). The caller allocates them on the call's stream and appends them,
// in order, to the call's outputs as contiguous 1-D tensors of their dtype
// and length; keyFor, signatureOf, emit and pack then take that extended
// call (the kernel sees each buffer as one more output pointer), and
// passesOf() launches of the kernel, in order on that stream, with
// pack(..., pass) for each, make the call. No barriers are needed: a pass
// reads only what earlier passes wrote.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flagos/compiler.h"
#include "flagos/kernel.h"

namespace flagos::kernels {

// Bumped whenever emitted code changes meaning: part of every cache key, so
// on-disk kernels of an older generator are never reused.
constexpr int kGeneratorVersion = 3;

// How one semantic operator becomes a kernel (parsed expression, or a
// reduction / row-operator recipe). Built once per operator, immutable,
// shared between threads.
struct Recipe;

// The catalog facts the generator needs about one semantic operator.
struct OpInfo {
  std::string id;                    // semantic ID, "add"
  std::string family;                // catalog family, "pointwise"
  std::string expr;                  // catalog expr ("" when none)
  std::vector<std::string> inputs;   // catalog input names, ABI order
  std::vector<std::string> scalars;  // catalog scalar names, ABI order
  int32_t num_outputs = 1;
};

// The recipe for @p op, or nullptr with *why_not saying why the operator has
// no generated kernel (unparseable expression, a function the emitters do
// not have, a family the generator does not cover).
std::shared_ptr<const Recipe> makeRecipe(const OpInfo& op, std::string* why_not);

// What the generated code runs on: the compiler table's language and the
// device's facts that change the code.
struct Target {
  std::string language;     // "opencl-c", "c" or "cuda-c"
  bool fp64 = true;         // double available (cl_khr_fp64)
  uint64_t local_size = 0;  // Note [Launch geometry] (compiler.h); 0: NULL
};

// One call as the bridge resolved it: outputs allocated, pointwise inputs
// broadcast to the output's shape (stride 0) and cast to the promoted dtype,
// scalars encoded as the catalog says (kernel.h). Borrowed for one call.
struct Call {
  const flagosTensor* outputs;
  int32_t num_outputs;
  const flagosTensor* inputs;
  int32_t num_inputs;
  const flagosScalar* scalars;
  int32_t num_scalars;
};

enum class Variant : uint8_t { Generic, Specialized };

// The part of a call that selects a kernel, as integers: recipe identity,
// variant, dtypes, which optional scalars are present, layout class, and
// (specialized only) every operand's shape and strides plus the scalars'
// values where the recipe bakes them (reduction dims). Cheap to build and
// hash on every call.
struct KernelKey {
  std::vector<int64_t> words;
  bool operator==(const KernelKey& o) const { return words == o.words; }
  bool operator!=(const KernelKey& o) const { return words != o.words; }
  // Stable across processes and runs: part of the on-disk file key.
  std::string toString() const;
};
struct KernelKeyHash {
  size_t operator()(const KernelKey& k) const noexcept;
};

// The key of @p call's kernel, or false with *why_not when this call is
// outside what the recipe can generate (a dtype it does not cover, more
// than FLAGOS_MAX_DIMS dims, fp64 without target.fp64, ...): the bridge
// then takes the next tier.
bool keyFor(const Recipe& recipe, const Call& call, Variant variant, const Target& target,
            KernelKey* key, std::string* why_not);

// Whether @p recipe's kernels in @p language take only calls whose output is
// their `self` input (in place): "opencl-c" scatters add atomically into the
// destination and cannot first copy self into a fresh output. A functional
// call then never reaches this tier (the bridge decomposes it into a clone
// and the in-place op), and `ops` predicts so.
bool inPlaceOnly(const Recipe& recipe, const std::string& language);

// (toString and KernelKeyHash are implemented in key_hash.cpp.)

// Self-contained copy of what emit() needs from a call (dtypes, shapes,
// strides, scalar dtypes): safe to hand to a background compiler thread
// after the call returned.
struct Signature;
std::shared_ptr<const Signature> signatureOf(const Recipe& recipe, const Call& call);

// Kernel source for the key keyFor() gave for this signature and variant.
// Pure function of its arguments; thread-safe.
struct Source {
  std::string text;         // the whole program
  std::string kernel_name;  // entry point for kernelLaunch
  std::string options;      // build options ("" for none; "-O3" for "c"
                            // specialized kernels, so loops vectorize)
};
Source emit(const Recipe& recipe, const Signature& sig, Variant variant, const Target& target);

// Note [Multi-pass calls]: the device scratch buffers @p call needs (none:
// one launch), given the call as the bridge prepared it (without scratch);
// none too when keyFor would decline the call anyway.
struct ScratchBuffer {
  flagosDtype_t dtype;
  int64_t elements;
};
std::vector<ScratchBuffer> scratchFor(const Recipe& recipe, const Call& call, const Target& target);
// Launches of the kernel that make @p call (the extended call with its
// scratch, if any): 1 for all but multi-pass calls.
int passesOf(const Recipe& recipe, const Call& call);

// The kernelLaunch arguments for @p call (same for both variants), for pass
// @p pass of passesOf(). `args` point into this object: keep it alive until
// kernelLaunch returns.
struct Launch {
  std::vector<flagosKernelArg> args;
  std::vector<void*> pointers;  // device addresses behind DEVICE_PTR args
  std::vector<uint8_t> meta;    // the flagos_meta struct's bytes
  std::vector<uint8_t> scalar_bytes;
  uint64_t global = 0;  // work items (0: nothing to launch)
  uint64_t local = 0;   // the target's local size (0: none given); "c"
                        // reductions: fewer items, each reducing many
  // Note [Reduction strategies] (reduce_layout.cpp): the ReduceStrategy of a
  // reduction or row operator's launch (1 rows, 2 columns, 3 group), else 0.
  uint8_t strategy = 0;
  const uint64_t* localOrNull() const { return local != 0 ? &local : nullptr; }
};
void pack(const Recipe& recipe, const Call& call, const Target& target, Launch* out, int pass = 0);

}  // namespace flagos::kernels
