// The ATen -> semantic-op bridge: one boxed kernel serves every overload of
// the catalog.
//
// Note [The semantic bridge]
// Every overload listed in ops/catalog.yaml is registered for PrivateUse1
// with a SemanticKernel bound to its catalog row. A call walks the execution
// tiers (docs/architecture.md, "Tiers"), counting the one that ran:
//
//  1. native: the active plugin's flagosKernelFn for the semantic ID.
//     Outputs are found from the schema (Note [Finding the outputs]); shapes
//     and dtypes are inferred by running the same overload on meta tensors,
//     which also performs ATen's argument checks (so errors read as on
//     CPU); functional outputs are then allocated on the device with the
//     strides the meta kernel chose (memory format preserved). Pointwise
//     inputs are broadcast to the output shape (stride 0) and cast to the
//     promoted dtype. The kernel is called on the current stream of the
//     output's device. NOT_SUPPORTED / FALLBACK from the kernel, or no
//     kernel at all, moves on to the next tier; other statuses raise.
//  2. generated: a kernel from the generator and the kernel cache
//     (generated_tier.h), for operators whose catalog row has a recipe, on
//     backends with a compiler table. Same prepared call as tier 1; the
//     generator declining the call (a dtype it lacks, a failed compile) moves
//     on, and a failed compile is reported once.
//  3. decomposition: our own composite for the semantic op (Note [Composite
//     kernels], csrc/dispatch/composite/: convolution as im2col + GEMM), else
//     the overload's CompositeExplicitAutograd kernel, which re-enters the
//     dispatcher with catalog ops. See Note [Reaching the composite kernel].
//  4. host: copy to CPU, run ATen's CPU kernel, copy back (cpu_fallback), or
//     the catalog's `host` op for overloads that only exist for out-of-tree
//     devices (convolution_overrideable).
//
// FLAGOS_OP_<ID> / FLAGOS_FORCE_FALLBACK (routing.cpp) can skip tiers.
//
// Note [Finding the outputs]
// (mirrored by codegen/gen_catalog.py, which checks the counts at build time)
//  - out=:       the kwarg-only mutable arguments, in order;
//  - in-place:   the arguments the returns alias, in order;
//  - void (`-> ()`, the _foreach_*_ family): every mutable argument;
//  - functional: the returns, allocated by the bridge.
//
// Note [Reaching the composite kernel]
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
#include <ATen/native/CPUFallback.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "dispatch/composite/composite.h"
#include "dispatch/device_check.h"
#include "flagos_kit/fnv1a.h"
#include "dispatch/host_fallback.h"
#include "dispatch/op_stats.h"
#include "dispatch/semantic/autocompare.h"
#include "dispatch/semantic/catalog.h"
#include "dispatch/semantic/generated_tier.h"
#include "dispatch/semantic/host_tier.h"
#include "dispatch/semantic/overlap.h"
#include "dispatch/semantic/shape_store.h"
#include "runtime/allocator.h"
#include "runtime/backend.h"
#include "runtime/dtype.h"
#include "runtime/stream.h"

namespace flagos::semantic {

// Shape inference counters (_shape_store_info): loaded/dropped store
// entries, meta kernel calls, and results synthesized from a shape class
// (Note [Shape classes]).
std::atomic<int64_t> g_shapes_loaded{0}, g_shapes_dropped{0}, g_meta_calls{0}, g_class_hits{0};
namespace {

// ------------------------------------------------------- vendor kernels ---

// Semantic ID -> the active plugin's kernel, built once after initialize().
class KernelIndex {
 public:
  static const KernelIndex* get() {
    static std::atomic<const KernelIndex*> instance{nullptr};
    const KernelIndex* k = instance.load(std::memory_order_acquire);
    if (k) return k;
    if (!flagos::isInitialized()) return nullptr;
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    k = instance.load(std::memory_order_relaxed);
    if (!k) {
      k = new KernelIndex(flagos::backend().tables.kernels);
      instance.store(k, std::memory_order_release);
    }
    return k;
  }
  flagosKernelFn find(const char* id) const {
    auto it = fns_.find(id);
    return it == fns_.end() ? nullptr : it->second;
  }

 private:
  explicit KernelIndex(const flagosKernelTable* table) {
    constexpr size_t kNeeded = offsetof(flagosKernelTable, entries) + sizeof(table->entries);
    if (!table || table->struct_size < kNeeded || !table->entries) return;
    for (int32_t i = 0; i < table->num_entries; ++i) {
      const flagosKernelEntry& e = table->entries[i];
      if (e.op_id && e.fn) fns_.emplace(e.op_id, e.fn);
    }
  }
  std::unordered_map<std::string, flagosKernelFn> fns_;
};

// ------------------------------------------------------- schema analysis ---

enum class OutKind : uint8_t { Functional, InPlace, Out, Void };

bool isScalarTypeArg(const c10::Argument& a) {
  c10::TypePtr t = a.real_type();
  if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
  return t->kind() == c10::TypeKind::ScalarTypeType;
}

// Per-call storage for the descriptors' shape/stride arrays.
struct DescStore {
  int64_t shape[FLAGOS_MAX_DIMS];
  int64_t strides[FLAGOS_MAX_DIMS];
};

// Outcome of the native tier.
enum class Native : uint8_t { Done, Skip };

class SemanticKernel final : public c10::OperatorKernel {
 public:
  explicit SemanticKernel(int overload)
      : ov_(overload),
        op_index_(kOverloads[overload].op),
        spec_(kOps[op_index_]),
        name_(std::string("aten::") + kOverloads[overload].name) {
    registry()[overload] = this;
  }

  // Every overload's kernel, by index into kOverloads (owned by the
  // dispatcher, alive until exit).
  static std::vector<SemanticKernel*>& registry() {
    static std::vector<SemanticKernel*> kernels(kNumOverloads, nullptr);
    return kernels;
  }

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    std::call_once(analyzed_, [&] { analyze(op); });
    const Route route = routeFor(op_index_, ov_);
    // FLAGOS_AUTOCOMPARE (autocompare.cpp): off, this is one relaxed load.
    // On, calls that may run on the device are replayed on the CPU.
    if (C10_UNLIKELY(autocompareActive()) &&
        (((route == Route::Auto || route == Route::Native) && kernel()) ||
         (route != Route::Fallback &&
          (decomposable_ || composite_ || hasGeneratedKernel(op_index_))))) {
      const bool accumulates = spec_.family == Family::Reduction ||
                               spec_.family == Family::Normalization ||
                               spec_.family == Family::Gemm ||
                               spec_.family == Family::Convolution || spec_.family == Family::Loss;
      AutocompareCall check(op, name_, spec_.id, spec_.host_op, mutated_, *stack, num_args_,
                            accumulates);
      check.check(run(op, route, stack), *stack);
      return;
    }
    run(op, route, stack);
  }

 private:
  // The tiers; returns the one that ran.
  Tier run(const c10::OperatorHandle& op, Route route, torch::jit::Stack* stack) {
    if (check_devices_) {  // Note [Tensors on one device]
      checkSameDevice(op, c10::ArrayRef<c10::IValue>(stack->data() + stack->size() - num_args_,
                                                     static_cast<size_t>(num_args_)));
    }
    if (kind_ != OutKind::Functional) {  // Note [Overlapping writes]: CPU's error, any tier
      checkWrittenOverlap(spec_.family,
                          c10::ArrayRef<c10::IValue>(stack->data() + stack->size() - num_args_,
                                                     static_cast<size_t>(num_args_)),
                          outputs_, inputs_);
    }
    if (route == Route::Auto || route == Route::Native) {
      if (flagosKernelFn fn = kernel()) {
        if (tryKernel(op, fn, stack) == Native::Done) {
          recordOpCall(counters(), Tier::Native);
          return Tier::Native;
        }
      }
    }
    if (route != Route::Fallback && hasGeneratedKernel(op_index_)) {
      if (tryKernel(op, nullptr, stack) == Native::Done) {
        recordOpCall(counters(), Tier::Generated);
        return Tier::Generated;
      }
    }
    // Our own composites (Note [Composite kernels]) before ATen's: ATen has
    // none for the ops we write them for.
    if (route != Route::Fallback && composite_ && runComposite(op, stack)) {
      recordOpCall(counters(), Tier::Decomposition);
      return Tier::Decomposition;
    }
    if (route != Route::Fallback && decomposable_) {
      recordOpCall(counters(), Tier::Decomposition);
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse3), stack);
      return Tier::Decomposition;
    }
    if (recordOpCall(counters(), Tier::Fallback) && flagos::logFallback()) {
      std::fprintf(
          stderr,
          "[flagos] %s (semantic op '%s') has no kernel on backend '%s': running it on the "
          "host (CPU fallback); later calls are only counted (flagos_torchfl.op_stats())\n",
          name_.c_str(), spec_.id, flagos::isInitialized() ? flagos::backend().name.c_str() : "?");
    }
    runOnHost(op, spec_.host_op, mutated_, stack);
    return Tier::Fallback;
  }

  // Resolved once per overload from the live schema (the generator checked
  // the same facts against the same torch at build time).
  void analyze(const c10::OperatorHandle& op) {
    const c10::FunctionSchema& schema = op.schema();
    const auto& args = schema.arguments();
    num_args_ = static_cast<int>(args.size());
    check_devices_ = !mixesDevicesByDesign(op);
    auto indexOf = [&](const char* name) -> int {
      for (int i = 0; i < num_args_; ++i)
        if (args[i].name() == name) return i;
      return -1;
    };
    for (int i = 0; i < spec_.num_inputs; ++i) {
      int a = indexOf(spec_.inputs[i]);
      TORCH_INTERNAL_ASSERT(a >= 0, name_, ": no input ", spec_.inputs[i]);
      inputs_.push_back(a);
      if (spec_.mutates_mask >> i & 1u) mutated_.push_back(a);
    }
    for (int i = 0; i < spec_.num_scalars; ++i) {
      int a = indexOf(spec_.scalars[i].name);
      scalars_.push_back({a, a >= 0 && isScalarTypeArg(args[a])});
    }
    // Note [Finding the outputs]
    for (int i = 0; i < num_args_; ++i)
      if (args[i].is_out()) outputs_.push_back(i);
    if (!outputs_.empty()) {
      kind_ = OutKind::Out;
    } else {
      for (const auto& r : schema.returns()) {
        if (!r.alias_info()) continue;
        for (int i = 0; i < num_args_; ++i) {
          if (args[i].alias_info() && args[i].alias_info()->isWrite() &&
              args[i].alias_info()->beforeSets() == r.alias_info()->beforeSets()) {
            outputs_.push_back(i);
            break;
          }
        }
      }
      if (!outputs_.empty()) {
        kind_ = OutKind::InPlace;
      } else if (schema.returns().empty()) {
        kind_ = OutKind::Void;
        for (int i = 0; i < num_args_; ++i)
          if (args[i].alias_info() && args[i].alias_info()->isWrite()) outputs_.push_back(i);
      } else {
        kind_ = OutKind::Functional;
      }
    }
    num_returns_ = static_cast<int>(schema.returns().size());
    // Composites compute functional calls; out= overloads whose out
    // arguments are the trailing ones (all of ATen's) reuse them, and
    // in-place ones (self first) when the composite allows it.
    const bool trailing_outs = kind_ == OutKind::Out &&
                               static_cast<int>(outputs_.size()) == num_returns_ &&
                               outputs_.front() == num_args_ - static_cast<int>(outputs_.size());
    const bool self_in_place = kind_ == OutKind::InPlace && outputs_.size() == 1 &&
                               outputs_.front() == 0 && num_returns_ == 1;
    if (const composite::Composite* c = composite::findComposite(spec_.id)) {
      if (kind_ == OutKind::Functional || trailing_outs || (self_in_place && c->in_place))
        composite_ = c->fn;
    }
    decomposable_ = kOverloads[ov_].decomposable &&
                    !op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse3) &&
                    op.hasComputedKernelForDispatchKey(c10::DispatchKey::PrivateUse3);
  }

  // This overload's op_stats counters (looked up once).
  OpCounters* counters() {
    OpCounters* c = counters_.load(std::memory_order_acquire);
    if (C10_UNLIKELY(!c)) {
      c = opCounters(name_);
      counters_.store(c, std::memory_order_release);
    }
    return c;
  }

  flagosKernelFn kernel() {
    int state = kernel_state_.load(std::memory_order_acquire);
    if (state == 2) return fn_;
    const KernelIndex* index = KernelIndex::get();
    if (!index) return nullptr;
    fn_ = index->find(spec_.id);
    kernel_state_.store(2, std::memory_order_release);
    return fn_;
  }

  static at::Tensor toMeta(const at::Tensor& t) {
    // CPU scalars stay as they are: ATen's meta kernels accept them next to
    // meta tensors exactly as CPU kernels accept them next to device ones.
    if (!t.defined() || (t.device().is_cpu() && t.dim() == 0)) return t;
    at::Tensor m = at::empty_strided(t.sizes(), t.strides(),
                                     at::TensorOptions().dtype(t.scalar_type()).device(at::kMeta));
    return m;
  }

  static c10::IValue toMetaIValue(const c10::IValue& v) {
    if (v.isTensor()) return toMeta(v.toTensor());
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(toMeta(t));
      return out;
    }
    if (v.isList() && v.toListRef().size() > 0 &&
        (v.toListRef()[0].isTensor() || v.toListRef()[0].isNone())) {
      c10::List<std::optional<at::Tensor>> out;
      for (const c10::IValue& e : v.toListRef())
        out.push_back(e.isNone() ? std::optional<at::Tensor>() : toMeta(e.toTensor()));
      return out;
    }
    return v;
  }

  static void appendTensors(const c10::IValue& v, c10::SmallVectorImpl<at::Tensor>& out, bool& ok) {
    if (v.isTensor()) {
      out.push_back(v.toTensor());
    } else if (v.isNone()) {
      out.emplace_back();
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) out.push_back(t);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef())
        out.push_back(e.isNone() ? at::Tensor() : e.toTensor());
    } else {
      ok = false;
    }
  }

  static bool describe(const at::Tensor& t, flagosTensor& d, DescStore& s) {
    if (!t.defined()) {
      d = flagosTensor{nullptr, 0, 0, nullptr, nullptr};
      return true;
    }
    const int64_t nd = t.dim();
    if (nd > FLAGOS_MAX_DIMS) return false;
    const auto dtype = toVendorDtype(t.scalar_type());
    if (!dtype) return false;
    d.dtype = *dtype;
    for (int64_t i = 0; i < nd; ++i) {
      s.shape[i] = t.size(i);
      s.strides[i] = t.stride(i);
    }
    d.data = t.numel() == 0 ? nullptr : const_cast<void*>(t.const_data_ptr());
    d.ndim = static_cast<int32_t>(nd);
    d.shape = nd ? s.shape : nullptr;
    d.strides = nd ? s.strides : nullptr;
    return true;
  }

  // `t` seen with `out`'s shape: size-1 and missing leading dims get stride 0.
  static bool describeBroadcast(const at::Tensor& t, const at::Tensor& out, flagosTensor& d,
                                DescStore& s) {
    if (!t.defined()) return describe(t, d, s);  // absent optional: data == NULL
    if (!describe(t, d, s)) return false;
    const int64_t nd = out.dim(), off = nd - t.dim();
    if (off < 0 || nd > FLAGOS_MAX_DIMS) return false;
    int64_t shape[FLAGOS_MAX_DIMS], strides[FLAGOS_MAX_DIMS];
    for (int64_t i = 0; i < nd; ++i) {
      const int64_t os = out.size(i);
      if (i < off) {
        shape[i] = os;
        strides[i] = 0;
        continue;
      }
      const int64_t ts = t.size(i - off);
      if (ts == os) {
        shape[i] = os;
        strides[i] = t.stride(i - off);
      } else if (ts == 1) {
        shape[i] = os;
        strides[i] = 0;
      } else {
        return false;
      }
    }
    std::memcpy(s.shape, shape, sizeof(int64_t) * nd);
    std::memcpy(s.strides, strides, sizeof(int64_t) * nd);
    d.ndim = static_cast<int32_t>(nd);
    d.shape = nd ? s.shape : nullptr;
    d.strides = nd ? s.strides : nullptr;
    return true;
  }

  // flagosScalar values for scalar `k`; false: not expressible (-> next tier).
  bool encodeScalar(int k, const c10::IValue* args, int64_t ndim,
                    c10::SmallVector<flagosScalar, 16>& out) const {
    const ScalarSpec& sp = spec_.scalars[k];
    const int a = scalars_[k].arg;
    const c10::IValue none;
    const c10::IValue& v = a >= 0 ? args[a] : none;
    flagosScalar s{0, 0, 0, 0.0};
    auto pushInt = [&](int64_t i) {
      flagosScalar x{FLAGOS_DTYPE_INT64, 0, i, static_cast<double>(i)};
      out.push_back(x);
    };
    const int64_t wrap = ndim == 0 ? 1 : ndim;
    switch (sp.encoding) {
      case Encoding::Plain:
        if (v.isNone()) {
          out.push_back(s);
        } else if (scalars_[k].is_scalar_type) {
          const auto dt = toVendorDtype(static_cast<at::ScalarType>(v.toInt()));
          if (!dt) return false;
          pushInt(*dt);
        } else if (v.isDouble()) {
          s.dtype = FLAGOS_DTYPE_FLOAT64;
          s.f = v.toDouble();
          s.i = static_cast<int64_t>(s.f);
          out.push_back(s);
        } else if (v.isBool()) {
          s.dtype = FLAGOS_DTYPE_BOOL;
          s.i = v.toBool();
          s.f = static_cast<double>(s.i);
          out.push_back(s);
        } else if (v.isInt()) {
          pushInt(v.toInt());
        } else {
          return false;  // complex, symbolic, ...
        }
        return true;
      case Encoding::Dims: {
        if (ndim > 63) return false;
        uint64_t mask = 0;
        if (v.isNone() || (v.isIntList() && v.toIntList().empty())) {
          mask = ndim ? ((uint64_t{1} << ndim) - 1) : 0;
        } else if (v.isInt()) {
          mask = uint64_t{1} << c10::maybe_wrap_dim(v.toInt(), wrap);
        } else if (v.isIntList()) {
          for (int64_t d : v.toIntList()) mask |= uint64_t{1} << c10::maybe_wrap_dim(d, wrap);
        } else {
          return false;
        }
        if (ndim == 0) mask = 0;
        pushInt(static_cast<int64_t>(mask));
        return true;
      }
      case Encoding::Dim:
        if (v.isNone()) {
          out.push_back(s);
        } else {
          pushInt(c10::maybe_wrap_dim(v.toInt(), wrap));
        }
        return true;
      case Encoding::Length:
        if (!v.isList()) return false;
        pushInt(static_cast<int64_t>(v.toListRef().size()));
        return true;
      case Encoding::Enum: {
        if (v.isNone()) {
          out.push_back(s);
          return true;
        }
        if (!v.isString()) return false;
        const std::string& str = v.toStringRef();
        for (int i = 0; i < sp.count; ++i) {
          if (str == sp.names[i]) {
            pushInt(i);
            return true;
          }
        }
        return false;
      }
      case Encoding::List: {
        if (v.isNone()) {
          for (int i = 0; i < sp.count; ++i) out.push_back(s);
          return true;
        }
        if (!v.isList()) return false;
        const auto& list = v.toListRef();
        if (static_cast<int>(list.size()) > sp.count) return false;
        for (int i = 0; i < sp.count; ++i) {
          const c10::IValue& e =
              list.empty() ? c10::IValue(int64_t{0}) : list[std::min<size_t>(i, list.size() - 1)];
          if (e.isBool()) {
            flagosScalar b{FLAGOS_DTYPE_BOOL, 0, e.toBool(), static_cast<double>(e.toBool())};
            out.push_back(b);
          } else if (e.isInt()) {
            pushInt(e.toInt());
          } else {
            return false;
          }
        }
        return true;
      }
    }
    return false;
  }

  // Note [Shape inference cache]
  // Output shapes, strides and dtypes come from running the overload on meta
  // tensors, which also performs ATen's argument checks. Many meta kernels
  // are Python (torch/_meta_registrations.py), ~100 us a call, so results are
  // cached per overload under a key holding everything a meta kernel can see:
  // the default dtype, each tensor's dtype, rank, sizes, strides,
  // CPU-scalar-ness, and every non-tensor argument's value. A hit skips the meta call (and the
  // checks, which passed for the identical key before). Arguments the key cannot hold (generators,
  // devices, ...) disable caching for that call.
  struct OutShape {
    at::ScalarType dtype;
    c10::SmallVector<int64_t, 6> sizes, strides;
  };
  struct MetaResult {
    std::vector<OutShape> outs;
    std::vector<int32_t> layout;            // per return: -1 one tensor, n: a list of n
    mutable std::atomic<bool> used{false};  // Note [Shape inference across processes]
  };
  using Key = std::vector<int64_t>;
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept {
      return static_cast<size_t>(flagos_kit::fnv1aWords(k));
    }
  };
  static constexpr size_t kMaxCacheEntries = 1024;

  static void keyTensor(const at::Tensor& t, Key& k) {
    if (!t.defined()) {
      k.push_back(1);
      return;
    }
    k.push_back(2);
    k.push_back(static_cast<int64_t>(t.scalar_type()));
    k.push_back(t.dim());
    k.push_back((t.device().is_cpu() ? 1 : 0) |
                (t.unsafeGetTensorImpl()->is_wrapped_number() ? 2 : 0));
    for (int64_t d : t.sizes()) k.push_back(d);
    for (int64_t d : t.strides()) k.push_back(d);
  }

  // False when `v` cannot be part of a key.
  static bool keyValue(const c10::IValue& v, Key& k) {
    if (v.isTensor()) {
      keyTensor(v.toTensor(), k);
    } else if (v.isNone()) {
      k.push_back(3);
    } else if (v.isInt()) {
      k.push_back(4);
      k.push_back(v.toInt());
    } else if (v.isDouble()) {
      k.push_back(5);
      const double d = v.toDouble();
      int64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      k.push_back(bits);
    } else if (v.isBool()) {
      k.push_back(6);
      k.push_back(v.toBool());
    } else if (v.isString()) {
      k.push_back(7);
      for (char c : v.toStringRef()) k.push_back(c);
      k.push_back(-7);
    } else if (v.isList()) {
      const auto& list = v.toListRef();
      k.push_back(8);
      k.push_back(static_cast<int64_t>(list.size()));
      for (const c10::IValue& e : list)
        if (!keyValue(e, k)) return false;
    } else {
      return false;
    }
    return true;
  }

  // Note [Shape classes]
  // On a shape never seen, inferShapes runs the meta kernel, and for many
  // pointwise overloads that is a Python registration (meta mul 86 us,
  // gelu 537 us: the bulk of a new shape's first call, against a 10 us
  // steady state). For a functional pointwise overload whose tensor
  // arguments are all contiguous, the output is the broadcast of the input
  // shapes, contiguous, with dtypes that do not depend on the sizes. So a
  // result is also remembered per *class*: the key without sizes and
  // strides (each tensor's dtype, 0-dim-ness, CPU/wrapped flags; every
  // non-tensor value as in the full key), once a real meta call in that
  // class returned exactly broadcast-shaped contiguous outputs. A new shape
  // of a known class is then synthesized: at::infer_size over the inputs
  // (a mismatch takes the meta path, which raises the usual error) and
  // contiguous strides. Anything else (a strided input, in-place and out=
  // overloads, other families, an output that broke the rule once) keeps
  // the meta kernel.
  struct ShapeClass {
    std::vector<at::ScalarType> dtypes;  // per output
    std::vector<int32_t> layout;
  };

  // False when the call is not class-eligible (see the Note).
  bool classKey(const c10::IValue* args, Key& k) const {
    if (kind_ != OutKind::Functional || spec_.family != Family::Pointwise) return false;
    k.push_back(static_cast<int64_t>(c10::typeMetaToScalarType(c10::get_default_dtype())));
    for (int i = 0; i < num_args_; ++i) {
      const c10::IValue& v = args[i];
      if (v.isTensor()) {
        const at::Tensor& t = v.toTensor();
        if (!t.defined()) {
          k.push_back(1);
          continue;
        }
        if (!t.is_contiguous()) return false;
        k.push_back(2);
        k.push_back(static_cast<int64_t>(t.scalar_type()));
        k.push_back((t.dim() == 0 ? 1 : 0) | (t.device().is_cpu() ? 2 : 0) |
                    (t.unsafeGetTensorImpl()->is_wrapped_number() ? 4 : 0));
      } else if (v.isTensorList() || !keyValue(v, k)) {
        return false;
      }
    }
    return true;
  }

  // The broadcast shape of the tensor arguments; false when they do not
  // broadcast (the meta kernel then reports it).
  bool broadcastShape(const c10::IValue* args, std::vector<int64_t>& shape) const {
    shape.clear();
    try {
      for (int i = 0; i < num_args_; ++i) {
        if (!args[i].isTensor() || !args[i].toTensor().defined()) continue;
        shape = at::infer_size(shape, args[i].toTensor().sizes());
      }
    } catch (const std::exception&) {
      return false;
    }
    return true;
  }

  static c10::SmallVector<int64_t, 6> contiguousStrides(const std::vector<int64_t>& shape) {
    c10::SmallVector<int64_t, 6> strides(shape.size());
    int64_t step = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      strides[d] = step;
      step *= std::max<int64_t>(shape[d], 1);
    }
    return strides;
  }

  static std::shared_ptr<const MetaResult> synthesize(const ShapeClass& c,
                                                      const std::vector<int64_t>& shape) {
    auto r = std::make_shared<MetaResult>();
    r->layout = c.layout;
    const auto strides = contiguousStrides(shape);
    for (at::ScalarType dt : c.dtypes)
      r->outs.push_back({dt, c10::SmallVector<int64_t, 6>(shape.begin(), shape.end()), strides});
    return r;
  }

  // Caches a result under its exact key (and marks it used for the store).
  void remember(Key&& key, const std::shared_ptr<const MetaResult>& result) {
    markUsed(key, result);
    std::unique_lock<std::shared_mutex> lock(cache_mu_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::move(key), result);
  }

  // Records the class of a meta result when it followed the rule.
  void learnClass(Key&& ckey, const std::vector<int64_t>& shape, const MetaResult& r) {
    ShapeClass c{{}, r.layout};
    const c10::SmallVector<int64_t, 6> sizes(shape.begin(), shape.end());
    const auto strides = contiguousStrides(shape);
    for (const OutShape& o : r.outs) {
      if (o.dtype == at::ScalarType::Undefined || o.sizes != sizes || o.strides != strides) return;
      c.dtypes.push_back(o.dtype);
    }
    if (c.dtypes.empty()) return;
    std::unique_lock<std::shared_mutex> lock(cache_mu_);
    if (classes_.size() < kMaxCacheEntries) classes_.emplace(std::move(ckey), std::move(c));
  }

  std::shared_ptr<const MetaResult> inferShapes(const c10::OperatorHandle& op,
                                                const c10::IValue* args) {
    // A per-thread buffer: building the key allocates nothing once warm.
    thread_local Key key;
    key.clear();
    // Meta kernels read one global: the default dtype (int / int -> float).
    key.push_back(static_cast<int64_t>(c10::typeMetaToScalarType(c10::get_default_dtype())));
    bool cacheable = true;
    for (int i = 0; i < num_args_ && cacheable; ++i) cacheable = keyValue(args[i], key);
    if (cacheable) {
      std::shared_lock<std::shared_mutex> lock(cache_mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) {
        markUsed(it->first, it->second);
        return it->second;
      }
    }
    // A miss: a known shape class (Note [Shape classes]) skips the meta call.
    Key ckey;
    std::vector<int64_t> shape;
    const bool classed = cacheable && classKey(args, ckey) && broadcastShape(args, shape);
    if (classed) {
      std::shared_ptr<const MetaResult> made;
      {
        std::shared_lock<std::shared_mutex> lock(cache_mu_);
        auto it = classes_.find(ckey);
        if (it != classes_.end()) made = synthesize(it->second, shape);
      }
      if (made) {
        remember(Key(key), made);
        g_class_hits.fetch_add(1, std::memory_order_relaxed);
        return made;
      }
    }
    Key owned = key;  // a miss: the meta kernel may run code that reuses the buffer
    torch::jit::Stack meta;
    meta.reserve(num_args_);
    for (int i = 0; i < num_args_; ++i) meta.push_back(toMetaIValue(args[i]));
    // redispatch (the computed table), not callBoxedForDispatchKey (direct
    // registrations only): many meta kernels come from a composite.
    g_meta_calls.fetch_add(1, std::memory_order_relaxed);
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
    auto result = std::make_shared<MetaResult>();
    auto add = [&](const at::Tensor& m) {
      // An undefined return (an output_mask entry that is false) stays
      // undefined: the kernel sees data == NULL.
      OutShape o{m.defined() ? m.scalar_type() : at::ScalarType::Undefined, {}, {}};
      if (m.defined()) {
        o.sizes.assign(m.sizes().begin(), m.sizes().end());
        o.strides.assign(m.strides().begin(), m.strides().end());
      }
      result->outs.push_back(std::move(o));
    };
    for (const c10::IValue& r : meta) {
      if (r.isTensor()) {
        add(r.toTensor());
        result->layout.push_back(-1);
      } else if (r.isTensorList()) {
        const auto list = r.toTensorList();
        for (const at::Tensor& m : list) add(m);
        result->layout.push_back(static_cast<int32_t>(list.size()));
      }
    }
    if (classed) learnClass(std::move(ckey), shape, *result);
    if (cacheable) remember(std::move(owned), result);
    return result;
  }

 public:
  // Resolves the schema facts and the generator's recipe now instead of on
  // the first call (done at initialize for the overloads an earlier process
  // used). A recipe is ~20-90 us: parsing a gelu-like expression and one
  // lowering (Note [Support checks on first use]).
  void prepare(const c10::OperatorHandle& op) {
    std::call_once(analyzed_, [&] { analyze(op); });
    hasGeneratedKernel(op_index_);
  }

  // Note [Shape inference across processes]: this overload's signatures
  // used in this process, and the ones an earlier process stored.
  void exportShapes(std::vector<StoredShape>* out) const {
    std::lock_guard<std::mutex> lock(used_mu_);
    for (const auto& [key, r] : used_) {
      if (out->size() >= kMaxStoredShapes) return;
      StoredShape s{kOverloads[ov_].name, key, r->layout, {}};
      for (const OutShape& o : r->outs)
        s.outs.push_back(
            {static_cast<int32_t>(o.dtype == at::ScalarType::Undefined ? -1
                                                                       : static_cast<int>(o.dtype)),
             {o.sizes.begin(), o.sizes.end()},
             {o.strides.begin(), o.strides.end()}});
      out->push_back(std::move(s));
    }
  }
  void importShape(const StoredShape& s) {
    auto r = std::make_shared<MetaResult>();
    r->layout = s.layout;
    size_t listed = 0;
    for (int32_t n : s.layout) listed += n < 0 ? 1 : static_cast<size_t>(n);
    if (listed != s.outs.size()) return;  // not what this bridge writes
    for (const StoredShape::Out& o : s.outs) {
      if (o.dtype < -1 || o.dtype >= static_cast<int>(at::ScalarType::NumOptions) ||
          o.sizes.size() != o.strides.size())
        return;
      OutShape m{
          o.dtype < 0 ? at::ScalarType::Undefined : static_cast<at::ScalarType>(o.dtype), {}, {}};
      m.sizes.assign(o.sizes.begin(), o.sizes.end());
      m.strides.assign(o.strides.begin(), o.strides.end());
      r->outs.push_back(std::move(m));
    }
    std::unique_lock<std::shared_mutex> lock(cache_mu_);
    if (cache_.size() < kMaxCacheEntries) cache_.emplace(s.key, std::move(r));
  }

 private:
  void markUsed(const Key& key, const std::shared_ptr<const MetaResult>& r) {
    if (r->used.load(std::memory_order_relaxed) || r->used.exchange(true)) return;
    std::lock_guard<std::mutex> lock(used_mu_);
    if (used_.size() < kMaxStoredShapes) used_.emplace_back(key, r);
  }

  // Tier 3, our composite (Note [Composite kernels]). An out= call runs it on
  // its functional arguments and copies the results into the out tensors;
  // an in-place call copies the result into self.
  bool runComposite(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
    if (kind_ == OutKind::Functional) return composite_(op, stack);
    // out=: the arguments before the outs; in-place: all, self included.
    const int n_out = static_cast<int>(outputs_.size());
    const c10::IValue* args = stack->data() + (stack->size() - num_args_);
    torch::jit::Stack call(args, args + num_args_ - (kind_ == OutKind::Out ? n_out : 0));
    if (!composite_(op, &call)) return false;
    // self cannot grow: CPU raises for such an in-place call, so decline.
    if (kind_ == OutKind::InPlace &&
        args[outputs_[0]].toTensor().sizes() != call[0].toTensor().sizes())
      return false;
    c10::SmallVector<c10::IValue, 4> outs;
    for (int i = 0; i < n_out; ++i) {
      at::Tensor out = args[outputs_[i]].toTensor();
      const at::Tensor& result = call[i].toTensor();
      if (out.sizes() != result.sizes()) out.resize_(result.sizes());
      out.copy_(result);
      outs.push_back(args[outputs_[i]]);
    }
    torch::jit::drop(*stack, num_args_);
    for (c10::IValue& v : outs) stack->push_back(std::move(v));
    return true;
  }

  // Tier 1 (fn: the native kernel) or tier 2 (fn == nullptr: generated).
  Native tryKernel(const c10::OperatorHandle& op, flagosKernelFn fn, torch::jit::Stack* stack) {
    const c10::IValue* args = stack->data() + (stack->size() - num_args_);

    // Inputs, and the device they live on.
    c10::SmallVector<at::Tensor, 8> inputs;
    bool ok = true;
    for (int a : inputs_) appendTensors(args[a], inputs, ok);
    if (!ok) return Native::Skip;
    std::optional<c10::Device> device;
    for (const at::Tensor& t : inputs) {
      if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) {
        device = t.device();
        break;
      }
    }
    c10::SmallVector<at::Tensor, 4> outputs;
    if (kind_ != OutKind::Functional) {
      for (int a : outputs_) appendTensors(args[a], outputs, ok);
      if (!ok) return Native::Skip;
      for (const at::Tensor& t : outputs) {
        if (t.defined() && !device && t.device().type() == c10::DeviceType::PrivateUse1)
          device = t.device();
      }
    }
    if (!device) return Native::Skip;
    for (const at::Tensor& t : inputs) {
      // CPU 0-dim tensors are scalars to ATen's pointwise ops; anything else
      // on another device is the host tier's business (it raises or copies).
      if (t.defined() && t.device() != *device &&
          !(spec_.family == Family::Pointwise && t.device().is_cpu() && t.dim() == 0)) {
        return Native::Skip;
      }
    }
    for (const at::Tensor& t : outputs)
      if (t.defined() && t.device() != *device) return Native::Skip;

    // Shapes and dtypes (Note [Shape inference cache]).
    // Note [Argument errors come from the CPU]
    // The meta kernel also checks the arguments, but PyTorch's Python meta
    // registrations word some errors differently from the CPU kernels (mv:
    // "got input (3x4), vec (5)" where CPU says "got input (3), mat (3x4),
    // vec (5)"), and a few overloads have no meta kernel at all. So a
    // failing meta call only means "not on this tier": the call goes on,
    // composites decline bad arguments, and the host tier raises CPU's own
    // error (or, where only the meta kernel was missing, computes it). The
    // fallback is counted like any other.
    std::shared_ptr<const MetaResult> shapes;
    try {
      shapes = inferShapes(op, args);
    } catch (const std::exception&) {
      return Native::Skip;
    }
    if (kind_ == OutKind::Functional) {
      for (const OutShape& m : shapes->outs) {
        if (m.dtype == at::ScalarType::Undefined) {
          outputs.emplace_back();
          continue;
        }
        // Straight to the device allocator (what the core's empty_strided
        // kernel does) under a guard: a trip through the dispatcher per
        // output was ~0.1 us of a tiny op's cost.
        const c10::DeviceGuard guard(*device);
        outputs.push_back(at::detail::empty_strided_generic(
            m.sizes, m.strides, flagos::deviceAllocator(),
            c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), m.dtype));
      }
    } else if (kind_ == OutKind::Out) {
      // The meta kernel resized its copies of the outputs: mirror that.
      if (shapes->outs.size() != outputs.size()) return Native::Skip;
      for (size_t i = 0; i < outputs.size(); ++i) {
        if (outputs[i].defined() && outputs[i].sizes() != c10::IntArrayRef(shapes->outs[i].sizes)) {
          outputs[i].resize_(shapes->outs[i].sizes);
        }
      }
    }
    if (static_cast<int>(outputs.size()) < 1) return Native::Skip;

    // Pointwise: promote and broadcast the inputs.
    // Note [CPU scalars are filled, not copied]
    // A CPU 0-dim input (ATen's wrapped scalar: add_(1), mul(x, 0.5) on a
    // tensor) becomes a device tensor by fill_, enqueued on the stream like
    // any kernel (memFill reads the pattern before it returns). A .to() is a
    // host-to-device copy from pageable memory, which synchronizes the stream
    // (Note [Copies are ordered on the current stream]): BatchNorm's
    // num_batches_tracked.add_(1) stalled every training step until all the
    // work queued before it had finished (host CNN step: 1.3 ms of waiting).
    const at::Tensor& out0 = outputs[0];
    const bool pointwise = spec_.family == Family::Pointwise;
    if (pointwise && spec_.promote_mask) {
      at::native::ResultTypeState state;
      for (int i = 0; i < static_cast<int>(inputs.size()) && i < 32; ++i)
        if ((spec_.promote_mask >> i & 1u) && inputs[i].defined())
          state = at::native::update_result_type_state(inputs[i], state);
      const at::ScalarType common = at::native::result_type(state);
      for (int i = 0; i < static_cast<int>(inputs.size()) && i < 32; ++i) {
        at::Tensor& t = inputs[i];
        if (!t.defined()) continue;
        const bool promoted = spec_.promote_mask >> i & 1u;
        const at::ScalarType dtype = promoted ? common : t.scalar_type();
        if (t.device() != *device) {
          // Note [CPU scalars are filled, not copied]
          t = at::empty({}, t.options().device(*device).dtype(dtype)).fill_(t.item());
        } else if (dtype != t.scalar_type()) {
          t = t.to(dtype);
        }
      }
    }

    // Descriptors.
    const size_t n_in = inputs.size(), n_out = outputs.size();
    c10::SmallVector<DescStore, 8> store;
    store.resize_for_overwrite(n_in + n_out);  // describe() writes what it uses
    c10::SmallVector<flagosTensor, 8> in_desc(n_in), out_desc(n_out);
    for (size_t i = 0; i < n_out; ++i)
      if (!describe(outputs[i], out_desc[i], store[i])) return Native::Skip;
    for (size_t i = 0; i < n_in; ++i) {
      const bool good = pointwise ? describeBroadcast(inputs[i], out0, in_desc[i], store[n_out + i])
                                  : describe(inputs[i], in_desc[i], store[n_out + i]);
      if (!good) return Native::Skip;
    }
    c10::SmallVector<flagosScalar, 16> scalars;
    // Dims are normalized against the highest-rank input (cat may list 1-D
    // empty tensors first; a reduction has one input).
    int64_t ndim0 = inputs.empty() ? out0.dim() : 0;
    for (const at::Tensor& t : inputs)
      if (t.defined()) ndim0 = std::max<int64_t>(ndim0, t.dim());
    try {
      for (int k = 0; k < spec_.num_scalars; ++k)
        if (!encodeScalar(k, args, ndim0, scalars)) return Native::Skip;
    } catch (const c10::Error&) {
      return Native::Skip;  // e.g. a dim out of range: the host tier raises it properly
    }

    // Empty outputs: the meta kernel checked the arguments and there is
    // nothing to write (kernels and the generator need not handle numel 0).
    if (std::all_of(outputs.begin(), outputs.end(),
                    [](const at::Tensor& t) { return !t.defined() || t.numel() == 0; }))
      return finish(outputs, shapes, args, stack);

    // Call.
    c10::DeviceGuard guard(*device);
    flagosStream_t stream = flagos::currentVendorStream(device->index());
    if (checksIndexRange()) checkIndexRange(inputs, scalars);  // Note [Index bounds]
    if (!fn) {
      const kernels::Call call{out_desc.data(), static_cast<int32_t>(n_out),
                               in_desc.data(),  static_cast<int32_t>(n_in),
                               scalars.data(),  static_cast<int32_t>(scalars.size())};
      if (!runGeneratedKernel(op_index_, device->index(), stream, call)) return Native::Skip;
      return finish(outputs, shapes, args, stack);
    }
    const flagosStatus_t status =
        fn(stream, out_desc.data(), static_cast<int32_t>(n_out), in_desc.data(),
           static_cast<int32_t>(n_in), scalars.data(), static_cast<int32_t>(scalars.size()));
    if (status == FLAGOS_ERROR_NOT_SUPPORTED || status == FLAGOS_ERROR_FALLBACK)
      return Native::Skip;
    if (status != FLAGOS_SUCCESS) {
      const std::string what = std::string("native kernel '") + spec_.id + "' for " + name_;
      flagos::check(status, what.c_str());
    }
    return finish(outputs, shapes, args, stack);
  }

  // Note [Index bounds]
  // Generated index kernels cannot raise, so an out-of-range index would
  // read 0 silently; a native kernel's own check surfaces only at the next
  // synchronization, as a stream error (CUDA's device-side assert). Before
  // launching either, the index tensor's range is checked on the host (a
  // copy of the index, usually small, and a sync), raising the errors CPU
  // raises, with the offending index named: wrong input is an error at the
  // call, never a silent wrong result. Negative indices are out of range
  // here as on CPU (index_select does not wrap). nll_loss's targets get the
  // same check (ignore_index excepted).
  bool checksIndexRange() const {
    return spec_.family == Family::Index || std::strcmp(spec_.id, "nll_loss") == 0 ||
           std::strcmp(spec_.id, "nll_loss2d") == 0;
  }
  void checkIndexRange(const c10::SmallVectorImpl<at::Tensor>& inputs,
                       const c10::SmallVectorImpl<flagosScalar>& scalars) const {
    if (spec_.family != Family::Index) return checkTargetRange(inputs, scalars);
    int index = -1, self = -1;
    for (int i = 0; i < spec_.num_inputs && i < static_cast<int>(inputs.size()); ++i) {
      const std::string name = spec_.inputs[i];
      if (name == "index" || name == "indices") index = i;
      if (name == "self" || name == "weight") self = i;
    }
    if (index < 0 || self < 0 || !inputs[index].defined() || inputs[index].numel() == 0) return;
    const at::Tensor& source = inputs[self];
    const bool embedding = std::string(spec_.inputs[self]) == "weight";
    const int64_t dim = embedding || scalars.empty() ? 0 : scalars[0].i;
    const int64_t size = source.dim() == 0 ? 1 : source.size(dim);
    const at::Tensor host = inputs[index].to(at::kCPU, at::kLong);
    const int64_t lo = host.min().item<int64_t>(), hi = host.max().item<int64_t>();
    const int64_t bad = lo < 0 ? lo : hi;
    const std::string id = spec_.id;
    if (id == "index_select" || id == "embedding") {
      TORCH_CHECK_INDEX(lo >= 0 && hi < size, "index out of range in self: index ", bad,
                        " for dimension ", dim, " with size ", size);
    } else {  // gather, scatter*, index_add
      TORCH_CHECK(lo >= 0 && hi < size, "index ", bad, " is out of bounds for dimension ", dim,
                  " with size ", size);
    }
  }
  // nll_loss(self, target, weight; reduction, ignore_index): CPU's IndexError.
  void checkTargetRange(const c10::SmallVectorImpl<at::Tensor>& inputs,
                        const c10::SmallVectorImpl<flagosScalar>& scalars) const {
    if (inputs.size() < 2 || scalars.size() < 2 || !inputs[1].defined() || inputs[1].numel() == 0)
      return;
    const at::Tensor& self = inputs[0];
    const int64_t classes = self.dim() >= 2 ? self.size(1) : self.size(0);
    at::Tensor target = inputs[1].to(at::kCPU, at::kLong).flatten();
    target = target.masked_select(target != scalars[1].i);  // ignore_index
    if (target.numel() == 0) return;
    const int64_t lo = target.min().item<int64_t>(), hi = target.max().item<int64_t>();
    TORCH_CHECK_INDEX(lo >= 0 && hi < classes, "Target ", lo < 0 ? lo : hi, " is out of bounds.");
  }

  // Replaces the arguments on @p stack by the returns.
  Native finish(c10::SmallVectorImpl<at::Tensor>& outputs,
                const std::shared_ptr<const MetaResult>& shapes, const c10::IValue* args,
                torch::jit::Stack* stack) {
    switch (kind_) {
      case OutKind::Functional: {
        torch::jit::drop(*stack, num_args_);
        size_t next = 0;
        for (int32_t n : shapes->layout) {
          if (n < 0) {
            stack->emplace_back(outputs[next++]);
          } else {
            c10::List<at::Tensor> list;
            for (int32_t j = 0; j < n; ++j) list.push_back(outputs[next++]);
            stack->emplace_back(std::move(list));
          }
        }
        break;
      }
      case OutKind::InPlace:
      case OutKind::Out: {
        c10::SmallVector<c10::IValue, 4> rets;
        for (int a : outputs_) rets.push_back(args[a]);
        torch::jit::drop(*stack, num_args_);
        for (int i = 0; i < num_returns_ && i < static_cast<int>(rets.size()); ++i)
          stack->push_back(std::move(rets[i]));
        break;
      }
      case OutKind::Void:
        torch::jit::drop(*stack, num_args_);
        break;
    }
    return Native::Done;
  }

  struct ScalarArg {
    int arg;              // schema index, -1: absent in this overload
    bool is_scalar_type;  // ScalarType argument: passed as a flagos dtype code
  };

  const int ov_;
  const int op_index_;
  const OpSpec& spec_;
  const std::string name_;  // "aten::add.Tensor", the op_stats key

  std::once_flag analyzed_;
  int num_args_ = 0;
  bool check_devices_ = true;  // false for the copy and indexing operators
  int num_returns_ = 0;
  OutKind kind_ = OutKind::Functional;
  bool decomposable_ = false;
  composite::CompositeFn composite_ = nullptr;
  std::vector<int> inputs_;
  std::vector<ScalarArg> scalars_;
  std::vector<int> outputs_;
  std::vector<int> mutated_;  // schema indices of `mutates` inputs

  std::atomic<OpCounters*> counters_{nullptr};
  std::atomic<int> kernel_state_{0};
  flagosKernelFn fn_ = nullptr;

  std::shared_mutex cache_mu_;
  std::unordered_map<Key, std::shared_ptr<const MetaResult>, KeyHash> cache_;
  std::unordered_map<Key, ShapeClass, KeyHash> classes_;  // Note [Shape classes]
  mutable std::mutex used_mu_;
  std::vector<std::pair<Key, std::shared_ptr<const MetaResult>>> used_;  // first use order
};

// Python-visible introspection, without touching the binding module:
// torch.ops.flagos._catalog_overloads() etc. (tests, coverage tools).
std::vector<std::string> catalogOverloads() {
  std::vector<std::string> out;
  out.reserve(kNumOverloads);
  for (int i = 0; i < kNumOverloads; ++i)
    out.push_back(std::string("aten::") + kOverloads[i].name + "=" + kOps[kOverloads[i].op].id);
  return out;
}

std::vector<std::string> catalogNativeIds() {
  std::vector<std::string> out;
  const KernelIndex* index = KernelIndex::get();
  if (!index) return out;
  for (int i = 0; i < kNumOps; ++i)
    if (index->find(kOps[i].id)) out.emplace_back(kOps[i].id);
  return out;
}

// Semantic IDs the generated tier can take on this backend (a recipe and a
// compiler table), and those with a composite (Note [Composite kernels]).
std::vector<std::string> catalogGeneratedIds() {
  std::vector<std::string> out;
  for (int i = 0; i < kNumOps; ++i)
    if (hasGeneratedKernel(i)) out.emplace_back(kOps[i].id);
  return out;
}

std::vector<std::string> catalogCompositeIds() {
  std::vector<std::string> out;
  for (int i = 0; i < kNumOps; ++i)
    if (composite::findComposite(kOps[i].id)) out.emplace_back(kOps[i].id);
  return out;
}

std::vector<std::string> catalogRoutes() {
  initRouting();
  std::vector<std::string> out;
  for (int i = 0; i < kNumOverloads; ++i) {
    const char* r = "auto";
    switch (routeFor(kOverloads[i].op, i)) {
      case Route::Auto:
        r = "auto";
        break;
      case Route::Native:
        r = "native";
        break;
      case Route::Generated:
        r = "generated";
        break;
      case Route::Fallback:
        r = "fallback";
        break;
    }
    out.push_back(std::string("aten::") + kOverloads[i].name + "=" + r);
  }
  return out;
}

}  // namespace

// Note [Shape inference across processes]: load at initialize, save at exit.
// What loadShapeStore read: kept for the merge at exit (leaked: exit reads it).
static std::vector<StoredShape>& earlierShapes() {
  static auto* shapes = new std::vector<StoredShape>();
  return *shapes;
}

static void saveShapeStore() {
  try {
    const std::string path = shapeStorePath();
    if (path.empty()) return;
    std::vector<StoredShape> shapes;
    for (const SemanticKernel* k : SemanticKernel::registry())
      if (k) k->exportShapes(&shapes);
    shapes = mergeShapes(std::move(shapes), earlierShapes());
    if (!shapes.empty()) writeShapeStore(path, shapes);
  } catch (...) {  // at exit: losing the store only costs the next start
  }
}

static void loadShapeStore() {
  if (!preloadEnabled()) return;
  const std::string path = shapeStorePath();
  std::vector<StoredShape> shapes;
  size_t dropped = 0;
  const bool read = !path.empty() && readShapeStore(path, &shapes, &dropped);
  if (dropped > 0) {
    g_shapes_dropped.store(static_cast<int64_t>(dropped));
    std::fprintf(stderr,
                 "[flagos] %zu entr%s of %s failed %s checksum and %s ignored (the shapes are "
                 "inferred again)\n",
                 dropped, dropped == 1 ? "y" : "ies", path.c_str(), dropped == 1 ? "its" : "their",
                 dropped == 1 ? "is" : "are");
  }
  if (read) {
    g_shapes_loaded.store(static_cast<int64_t>(shapes.size()));
    std::unordered_map<std::string, int> index;
    for (int i = 0; i < kNumOverloads; ++i) index.emplace(kOverloads[i].name, i);
    std::vector<bool> prepared(kNumOverloads, false);
    for (const StoredShape& s : shapes) {
      auto it = index.find(s.overload);
      SemanticKernel* k = it == index.end() ? nullptr : SemanticKernel::registry()[it->second];
      if (!k) continue;
      k->importShape(s);
      if (!prepared[it->second]) {  // its schema analysis and recipe too, off the first call
        prepared[it->second] = true;
        const size_t dot = s.overload.find('.');
        const auto op = c10::Dispatcher::singleton().findSchema(
            {"aten::" + s.overload.substr(0, dot),
             dot == std::string::npos ? "" : s.overload.substr(dot + 1)});
        if (op) k->prepare(*op);
      }
    }
    earlierShapes() = std::move(shapes);
  }
  static const bool saved_at_exit = (std::atexit(saveShapeStore), true);
  (void)saved_at_exit;
}
const bool kShapeStoreHooked = (onInitialized(loadShapeStore), true);

void registerCatalog(torch::Library& m) {
  for (int i = 0; i < kNumOverloads; ++i) {
    m.impl(kOverloads[i].name,
           torch::CppFunction::makeFromBoxedFunctor(std::make_unique<SemanticKernel>(i)));
  }
}

}  // namespace flagos::semantic

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  m.def("_catalog_overloads() -> str[]", &flagos::semantic::catalogOverloads);
  m.def("_catalog_native_ids() -> str[]", &flagos::semantic::catalogNativeIds);
  m.def("_catalog_routes() -> str[]", &flagos::semantic::catalogRoutes);
  m.def("_shape_store_info() -> str", [] {
    return "{\"path\": \"" + flagos::semantic::shapeStorePath() +
           "\", \"loaded\": " + std::to_string(flagos::semantic::g_shapes_loaded.load()) +
           ", \"dropped\": " + std::to_string(flagos::semantic::g_shapes_dropped.load()) +
           ", \"meta_calls\": " + std::to_string(flagos::semantic::g_meta_calls.load()) +
           ", \"class_hits\": " + std::to_string(flagos::semantic::g_class_hits.load()) + "}";
  });
  m.def("_catalog_generated_ids() -> str[]", &flagos::semantic::catalogGeneratedIds);
  m.def("_catalog_composite_ids() -> str[]", &flagos::semantic::catalogCompositeIds);
}
