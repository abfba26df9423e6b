// The ATen -> semantic-op bridge: one boxed kernel serves every overload of
// the catalog.
//
// Note [The semantic bridge]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every overload listed in ops/catalog.yaml is registered for PrivateUse1
// with a SemanticKernel bound to its catalog row. A call walks the execution
// tiers (docs/architecture.md, "Tiers"), counting the one that ran:
//
//  1. native: the active plugin's flagosKernelFn for the semantic ID.
//     Outputs are found from the schema (Note [Finding the outputs],
//     schema.cpp); shapes and dtypes are inferred by running the same
//     overload on meta tensors (shape_cache.cpp), which also performs
//     ATen's argument checks (so errors read as on CPU); functional outputs
//     are then allocated on the device with the strides the meta kernel
//     chose (memory format preserved). Pointwise inputs are broadcast to the
//     output shape (stride 0) and cast to the promoted dtype
//     (prepared_call.cpp). The kernel is called on the current stream of the
//     output's device. NOT_SUPPORTED from the kernel, or no kernel at
//     all, moves on to the next tier; FALLBACK (the plugin asks for the
//     host, status.h) goes straight to tier 4; other statuses raise.
//  2. generated: a kernel from the generator and the kernel cache
//     (tiers/generated/tier.h), for operators whose catalog row has a recipe, on
//     backends with a compiler table. Same prepared call as tier 1; the
//     generator declining the call (a dtype it lacks, a failed compile) moves
//     on, and a failed compile is reported once.
//  3. decomposition: our own composite for the semantic op (Note [Composite
//     kernels], csrc/dispatch/tiers/decomposition/: convolution as im2col + GEMM), else
//     the overload's CompositeExplicitAutograd kernel, which re-enters the
//     dispatcher with catalog ops. See Note [Reaching the composite kernel].
//  4. host: copy to CPU, run ATen's CPU kernel, copy back (cpu_fallback), or
//     the catalog's `host` op for overloads that only exist for out-of-tree
//     devices (convolution_overrideable).
//
// FLAGOS_OP_<ID> / FLAGOS_FORCE_FALLBACK (routing.cpp) can skip tiers.
//
// Note [Reaching the composite kernel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// There is no public call for "the CompositeExplicitAutograd kernel of this
// op". But an alias key's kernel fills every backend slot nobody registered
// for, and no one registers aten kernels for PrivateUse3, so that slot holds
// exactly the composite kernel. Redispatching the op to PrivateUse3 (through
// the computed dispatch table: callBoxedForDispatchKey only sees direct
// registrations and would find nothing) therefore runs
// the decomposition; the ops it calls dispatch on the tensors' own keys
// (PrivateUse1) again. Checked once per overload: if anything registers aten
// kernels for PrivateUse3 directly, the decomposition tier is skipped.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dispatch/bridge/autocompare.h"
#include "dispatch/bridge/catalog.h"
#include "dispatch/bridge/index_bounds.h"
#include "dispatch/bridge/overlap.h"
#include "dispatch/bridge/semantic_kernel.h"
#include "dispatch/bridge/unboxed.h"
#include "dispatch/core/device_check.h"
#include "dispatch/core/op_stats.h"
#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/generated/tier.h"
#include "dispatch/tiers/host/host_fallback.h"
#include "dispatch/tiers/host/host_tier.h"
#include "dispatch/tiers/native/kernel_index.h"
#include "runtime/backend.h"

namespace flagos::semantic {

SemanticKernel::SemanticKernel(int overload)
    : ov_(overload),
      op_index_(kOverloads[overload].op),
      spec_(kOps[op_index_]),
      name_(std::string("aten::") + kOverloads[overload].name),
      checks_index_range_(checksIndexRange(spec_)),
      check_arguments_(argumentCheckFor(spec_)) {
  registry()[overload] = this;
}

std::vector<SemanticKernel*>& SemanticKernel::registry() {
  static std::vector<SemanticKernel*> kernels(kNumOverloads, nullptr);
  return kernels;
}

void SemanticKernel::operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                                torch::jit::Stack* stack) {
  ensureAnalyzed(op);
  const Route route = routeFor(op_index_, ov_);
  // FLAGOS_AUTOCOMPARE (autocompare.cpp): off, this is one relaxed load.
  // On, calls that may run on the device are replayed on the CPU; random
  // operators are not: their streams differ from CPU's by design.
  if (C10_UNLIKELY(autocompareActive()) && spec_.family != Family::Random &&
      (((route == Route::Auto || route == Route::Native) && kernel()) ||
       (route != Route::Fallback &&
        (schema_.decomposable || schema_.composite || hasGeneratedKernel(op_index_))))) {
    const bool accumulates = spec_.family == Family::Reduction ||
                             spec_.family == Family::Normalization ||
                             spec_.family == Family::Gemm || spec_.family == Family::Convolution ||
                             spec_.family == Family::Loss;
    AutocompareCall check(op, name_, spec_.id, spec_.host_op, schema_.mutated, *stack,
                          schema_.num_args, accumulates);
    check.check(run(op, route, stack), *stack);
    return;
  }
  run(op, route, stack);
}

Unboxed SemanticKernel::callUnboxed(const c10::OperatorHandle& op, const c10::IValue* args,
                                    at::Tensor* out, torch::jit::Stack* stack) {
  ensureAnalyzed(op);
  const auto boxed = [&] {  // owned copies: the boxed path may keep them
    stack->assign(args, args + schema_.num_args);
    return Unboxed::Boxed;
  };
  if (C10_UNLIKELY(autocompareActive())) {
    boxed();
    (*this)(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
    return Unboxed::Boxed;
  }
  const Route route = routeFor(op_index_, ov_);
  KernelTiers tiers = kernelTiers(op, route, args);
  switch (tiers.got) {
    case Native::Done:
      if (schema_.kind == OutKind::Functional) *out = std::move(tiers.ret.outs[0]);
      return Unboxed::Done;
    case Native::Host:
      boxed();
      runHostTier(op, stack, &tiers.why_host);
      return Unboxed::Boxed;
    case Native::Skip:
      break;
  }
  boxed();
  laterTiers(op, route, stack);
  return Unboxed::Boxed;
}

void SemanticKernel::checkCall(const c10::OperatorHandle& op, const c10::IValue* args) {
  if (check_arguments_)
    check_arguments_(schema_, args);  // Note [Argument checks the meta kernels skip]
  if (schema_.check_devices)          // Note [Tensors on one device]
    checkSameDevice(op, c10::ArrayRef<c10::IValue>(args, static_cast<size_t>(schema_.num_args)));
  if (schema_.kind != OutKind::Functional) {  // Note [Overlapping writes]: CPU's error, any tier
    checkWrittenOverlap(spec_,
                        c10::ArrayRef<c10::IValue>(args, static_cast<size_t>(schema_.num_args)),
                        schema_.outputs, schema_.inputs);
  }
}

Tier SemanticKernel::run(const c10::OperatorHandle& op, Route route, torch::jit::Stack* stack) {
  KernelTiers tiers = kernelTiers(op, route, stack->data() + stack->size() - schema_.num_args);
  switch (tiers.got) {
    case Native::Done:
      pushReturns(tiers.ret, stack);
      return tiers.ran;
    case Native::Host:
      return runHostTier(op, stack, &tiers.why_host);
    case Native::Skip:
      break;
  }
  return laterTiers(op, route, stack);
}

KernelTiers SemanticKernel::kernelTiers(const c10::OperatorHandle& op, Route route,
                                        const c10::IValue* args) {
  checkCall(op, args);
  KernelTiers t;
  if (route == Route::Auto || route == Route::Native) {
    if (flagosKernelFn fn = kernel()) {
      t.got = tryKernel(op, fn, args, t.ret, &t.why_host);
      if (t.got == Native::Done) recordOpCall(counters(), Tier::Native);
      if (t.got != Native::Skip) return t;
    }
  }
  if (route != Route::Fallback && hasGeneratedKernel(op_index_) &&
      !(schema_.kind == OutKind::Functional && generatedInPlaceOnly(op_index_))) {
    if (tryKernel(op, nullptr, args, t.ret) == Native::Done) {
      recordOpCall(counters(), Tier::Generated);
      t.got = Native::Done;
      t.ran = Tier::Generated;
    }
  }
  return t;
}

Tier SemanticKernel::laterTiers(const c10::OperatorHandle& op, Route route,
                                torch::jit::Stack* stack) {
  // Our own composites (Note [Composite kernels]) before ATen's: ATen has
  // none for the ops we write them for.
  if (route != Route::Fallback && schema_.composite && runComposite(op, stack)) {
    recordOpCall(counters(), Tier::Decomposition);
    return Tier::Decomposition;
  }
  if (route != Route::Fallback && schema_.decomposable) {
    recordOpCall(counters(), Tier::Decomposition);
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse3), stack);
    return Tier::Decomposition;
  }
  return runHostTier(op, stack, nullptr);
}

void SemanticKernel::pushReturns(KernelReturns& ret, torch::jit::Stack* stack) {
  const c10::IValue* args = stack->data() + (stack->size() - schema_.num_args);
  switch (schema_.kind) {
    case OutKind::Functional: {
      torch::jit::drop(*stack, schema_.num_args);
      size_t next = 0;
      for (int32_t n : ret.layout) {
        if (n < 0) {
          stack->emplace_back(std::move(ret.outs[next++]));
        } else {
          c10::List<at::Tensor> list;
          for (int32_t j = 0; j < n; ++j) list.push_back(std::move(ret.outs[next++]));
          stack->emplace_back(std::move(list));
        }
      }
      break;
    }
    case OutKind::InPlace:
    case OutKind::Out: {
      c10::SmallVector<c10::IValue, 4> rets;
      for (int a : schema_.outputs) rets.push_back(args[a]);
      torch::jit::drop(*stack, schema_.num_args);
      for (int i = 0; i < schema_.num_returns && i < static_cast<int>(rets.size()); ++i)
        stack->push_back(std::move(rets[i]));
      break;
    }
    case OutKind::Void:
      torch::jit::drop(*stack, schema_.num_args);
      break;
  }
}

Tier SemanticKernel::runHostTier(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                                 const std::string* asked) {
  if (recordOpCall(counters(), Tier::Fallback) && flagos::logFallback()) {
    const char* backend_name = flagos::isInitialized() ? flagos::backend().name.c_str() : "?";
    if (asked) {
      std::fprintf(stderr,
                   "[flagos] %s (semantic op '%s'): the native kernel of backend '%s' asked for "
                   "the host%s%s%s: running it on the host (CPU fallback); later calls are only "
                   "counted (flagos_torchfl.op_stats())\n",
                   name_.c_str(), spec_.id, backend_name, asked->empty() ? "" : " (",
                   asked->c_str(), asked->empty() ? "" : ")");
    } else {
      std::fprintf(
          stderr,
          "[flagos] %s (semantic op '%s') has no kernel on backend '%s': running it on the "
          "host (CPU fallback); later calls are only counted (flagos_torchfl.op_stats())\n",
          name_.c_str(), spec_.id, backend_name);
    }
  }
  runOnHost(op, spec_.host_op, schema_.mutated, stack);
  return Tier::Fallback;
}

void SemanticKernel::ensureAnalyzed(const c10::OperatorHandle& op) {
  if (C10_LIKELY(analyzed_done_.load(std::memory_order_acquire))) return;
  std::call_once(analyzed_, [&] {
    analyze(op);
    analyzed_done_.store(true, std::memory_order_release);
  });
}

void SemanticKernel::analyze(const c10::OperatorHandle& op) {
  schema_ = analyzeSchema(op, spec_, kOverloads[ov_], name_);
  shape_rule_ = shapeRuleFor(spec_, schema_);  // Note [Shape classes]
}

void SemanticKernel::prepare(const c10::OperatorHandle& op) {
  ensureAnalyzed(op);
  hasGeneratedKernel(op_index_);
}

const c10::OperatorHandle& SemanticKernel::handle() {
  if (C10_LIKELY(handle_done_.load(std::memory_order_acquire))) return *handle_;
  std::call_once(handle_once_, [&] {
    const std::string full = kOverloads[ov_].name;  // "add.Tensor"
    const size_t dot = full.find('.');
    handle_ = c10::Dispatcher::singleton().findSchemaOrThrow(
        ("aten::" + full.substr(0, dot)).c_str(),
        dot == std::string::npos ? "" : full.substr(dot + 1).c_str());
    handle_done_.store(true, std::memory_order_release);
  });
  return *handle_;
}

// This overload's op_stats counters (looked up once).
OpCounters* SemanticKernel::counters() {
  OpCounters* c = counters_.load(std::memory_order_acquire);
  if (C10_UNLIKELY(!c)) {
    c = opCounters(name_);
    counters_.store(c, std::memory_order_release);
  }
  return c;
}

flagosKernelFn SemanticKernel::kernel() {
  int state = kernel_state_.load(std::memory_order_acquire);
  if (state == 2) return fn_;
  const KernelIndex* index = KernelIndex::get();
  if (!index) return nullptr;
  fn_ = index->find(spec_.id);
  kernel_state_.store(2, std::memory_order_release);
  return fn_;
}

// Tier 3, our composite (Note [Composite kernels]). An out= call runs it on
// its functional arguments and copies the results into the out tensors;
// an in-place call copies the result into self.
bool SemanticKernel::runComposite(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const int num_args = schema_.num_args;
  const std::vector<int>& outputs = schema_.outputs;
  if (schema_.kind == OutKind::Functional || schema_.kind == OutKind::Void ||
      (schema_.kind == OutKind::Out && schema_.composite_sees_out))
    return schema_.composite(op, stack);  // a Void one updates its arguments itself
  // out=: the arguments before the outs; in-place: all, self included.
  const int n_out = static_cast<int>(outputs.size());
  const c10::IValue* args = stack->data() + (stack->size() - num_args);
  torch::jit::Stack call(args, args + num_args - (schema_.kind == OutKind::Out ? n_out : 0));
  if (!schema_.composite(op, &call)) return false;
  // self cannot grow: CPU raises for such an in-place call, so decline.
  if (schema_.kind == OutKind::InPlace &&
      args[outputs[0]].toTensor().sizes() != call[0].toTensor().sizes())
    return false;
  c10::SmallVector<c10::IValue, 4> outs;
  for (int i = 0; i < n_out; ++i) {
    at::Tensor out = args[outputs[i]].toTensor();
    const at::Tensor& result = call[i].toTensor();
    if (out.sizes() != result.sizes()) out.resize_(result.sizes());
    out.copy_(result);
    outs.push_back(args[outputs[i]]);
  }
  torch::jit::drop(*stack, num_args);
  for (c10::IValue& v : outs) stack->push_back(std::move(v));
  return true;
}

void registerCatalog(torch::Library& m) {
  for (int i = 0; i < kNumOverloads; ++i) {
    auto kernel = std::make_unique<SemanticKernel>(i);
    if (registerUnboxed(m, kernel)) continue;  // Note [Unboxed entries]
    m.impl(kOverloads[i].name, torch::CppFunction::makeFromBoxedFunctor(std::move(kernel)));
  }
}

}  // namespace flagos::semantic
