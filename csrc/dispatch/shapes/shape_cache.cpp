// Note [Shape inference cache]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Output shapes, strides and dtypes come from running the overload on meta
// tensors, which also performs ATen's argument checks. Many meta kernels
// are Python (torch/_meta_registrations.py), slow next to a kernel, so results are
// cached per overload under a key holding everything a meta kernel can see:
// the default dtype, each tensor's dtype, rank, sizes, strides,
// CPU-scalar-ness, and every non-tensor argument's value. A hit skips the meta call (and the
// checks, which passed for the identical key before). Arguments the key cannot hold (generators,
// devices, ...) disable caching for that call.
//
// Note [Shape classes]
// ~~~~~~~~~~~~~~~~~~~~
// On a shape never seen, inferShapes runs the meta kernel, and for many
// pointwise overloads that is a Python registration (meta mul, meta gelu: the
// bulk of a new shape's first call, many times its steady state). For a
// functional pointwise overload whose tensor arguments are all contiguous, the
// output is the broadcast of the input shapes, contiguous, with dtypes that do
// not depend on the sizes. So a result is also remembered per *class*: the key
// without sizes and strides (each tensor's dtype, 0-dim-ness, CPU/wrapped
// flags; every non-tensor value as in the full key), once a real meta call in
// that class returned exactly broadcast-shaped contiguous outputs. A new shape
// of a known class is then synthesized: at::infer_size over the inputs (a
// mismatch takes the meta path, which raises the usual error) and contiguous
// strides. An in-place pointwise call is a class member too when the broadcast
// shape is self's (its meta call is then only the check that self cannot grow,
// and its dtype rules are in the key). Anything else (a strided input, out=
// overloads, other families, an output that broke the rule once) keeps the
// meta kernel.
//
// The same holds for two more kinds of operator whose output shape is a
// function of the input shape and of arguments the class key holds
// (ShapeRule): row operators, whose outputs have the shape of their first
// input (softmax, log_softmax and their backwards, cumsum; every tensor
// input must have that shape), with layer_norm's statistics the input's
// leading dims and 1s (normalized_shape must match the trailing dims, and
// weight and bias be that shape); and reductions (sum, mean, amax, var,
// argmax, max.dim, ...), whose outputs drop the reduced dims or keep them as
// 1 (dim and keepdim are values in the key). For these the key also holds
// each tensor's rank (dims are normalized against it), and a call is
// eligible only with canonically contiguous, non-empty tensors: the meta
// kernel checks empty reductions (amax of an empty dim raises) and the
// layout of an output that mirrors a size-1 dim's stride. A call whose
// arguments the rule cannot shape (a dim out of range, a normalized_shape
// that does not match, row inputs of different shapes) takes the meta path
// and gets its error. Each rule is proven per class by a real meta call
// first, exactly as for pointwise calls.
#include "dispatch/shapes/shape_cache.h"

#include <ATen/ATen.h>
#include <c10/core/DefaultDtype.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "dispatch/shapes/shape_store.h"
#include "flagos_kit/fnv1a.h"

namespace flagos::semantic {

std::atomic<int64_t> g_meta_calls{0}, g_class_hits{0};

namespace {

constexpr size_t kMaxCacheEntries = 1024;

// ------------------------------------------------------------ the keys ---

void keyTensor(const at::Tensor& t, ShapeKey& k) {
  if (!t.defined()) {
    k.push_back(1);
    return;
  }
  // One resize, then plain stores: the key is built on every call.
  const c10::IntArrayRef sizes = t.sizes(), strides = t.strides();
  const size_t at = k.size(), nd = sizes.size();
  k.resize(at + 4 + 2 * nd);
  int64_t* p = k.data() + at;
  p[0] = 2;
  p[1] = static_cast<int64_t>(t.scalar_type());
  p[2] = static_cast<int64_t>(nd);
  p[3] = (t.device().is_cpu() ? 1 : 0) | (t.unsafeGetTensorImpl()->is_wrapped_number() ? 2 : 0);
  for (size_t i = 0; i < nd; ++i) {  // a loop: an inlined memcpy of unknown size was a `rep movs`
    p[4 + i] = sizes[i];
    p[4 + nd + i] = strides[i];
  }
}

// False when `v` cannot be part of a key.
bool keyValue(const c10::IValue& v, ShapeKey& k) {
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

int64_t defaultDtype() {
  return static_cast<int64_t>(c10::typeMetaToScalarType(c10::get_default_dtype()));
}

// The exact key of a call (Note [Shape inference cache]); false when an
// argument cannot be part of it.
bool exactKey(const c10::IValue* args, int num_args, ShapeKey& key) {
  key.clear();
  // Meta kernels read one global: the default dtype (int / int -> float).
  key.push_back(defaultDtype());
  bool cacheable = true;
  for (int i = 0; i < num_args && cacheable; ++i) cacheable = keyValue(args[i], key);
  return cacheable;
}

// ------------------------------------------------------- shape classes ---

c10::SmallVector<int64_t, 6> contiguousStrides(c10::IntArrayRef shape) {
  c10::SmallVector<int64_t, 6> strides(shape.size());
  int64_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = step;
    step *= std::max<int64_t>(shape[d], 1);
  }
  return strides;
}

// A tensor whose strides are exactly the contiguous ones (is_contiguous()
// ignores the strides of size-1 dims).
bool canonical(const at::Tensor& t) {
  return t.strides() == c10::IntArrayRef(contiguousStrides(t.sizes()));
}

// False when the call is not class-eligible (Note [Shape classes]).
bool classKey(const c10::IValue* args, const OverloadSchema& schema, const ShapeRuleSpec& rule,
              ShapeKey& k) {
  const bool pointwise = rule.rule == ShapeRule::Broadcast;
  if (rule.rule == ShapeRule::None ||
      !(schema.kind == OutKind::Functional || (pointwise && schema.kind == OutKind::InPlace)))
    return false;
  k.push_back(defaultDtype());
  for (int i = 0; i < schema.num_args; ++i) {
    const c10::IValue& v = args[i];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) {
        k.push_back(1);
        continue;
      }
      if (pointwise ? !t.is_contiguous() : (!canonical(t) || t.numel() == 0)) return false;
      k.push_back(2);
      k.push_back(static_cast<int64_t>(t.scalar_type()));
      k.push_back((t.dim() == 0 ? 1 : 0) | (t.device().is_cpu() ? 2 : 0) |
                  (t.unsafeGetTensorImpl()->is_wrapped_number() ? 4 : 0));
      if (!pointwise) k.push_back(t.dim());
    } else if (v.isTensorList() || !keyValue(v, k)) {
      return false;
    }
  }
  return true;
}

const at::Tensor* firstTensor(const c10::IValue* args, int num_args) {
  for (int i = 0; i < num_args; ++i)
    if (args[i].isTensor() && args[i].toTensor().defined()) return &args[i].toTensor();
  return nullptr;
}

// The broadcast shape of the tensor arguments; false when they do not
// broadcast (the meta kernel then reports it).
bool broadcastShape(const c10::IValue* args, int num_args, RuleShapes& shapes) {
  std::vector<int64_t> shape;
  try {
    for (int i = 0; i < num_args; ++i) {
      if (!args[i].isTensor() || !args[i].toTensor().defined()) continue;
      shape = at::infer_size(shape, args[i].toTensor().sizes());
    }
  } catch (const std::exception&) {
    return false;
  }
  shapes.emplace_back(shape.begin(), shape.end());
  return true;
}

// Rows: every tensor argument has the first one's shape, which the outputs take.
bool rowShape(const c10::IValue* args, int num_args, RuleShapes& shapes) {
  const at::Tensor* first = firstTensor(args, num_args);
  if (!first) return false;
  for (int i = 0; i < num_args; ++i)
    if (args[i].isTensor() && args[i].toTensor().defined() &&
        args[i].toTensor().sizes() != first->sizes())
      return false;
  shapes.emplace_back(first->sizes().begin(), first->sizes().end());
  return true;
}

// Reductions: the reduced dims dropped (or kept as 1). No dim argument,
// None or an empty list: every dim.
bool reduceShape(const ShapeRuleSpec& rule, const c10::IValue* args, int num_args,
                 RuleShapes& shapes) {
  const at::Tensor* self = firstTensor(args, num_args);
  if (!self) return false;
  const int64_t rank = self->dim();
  uint64_t reduced = 0;  // bit d: dim d reduced
  const c10::IValue* dim = rule.dim_arg >= 0 ? &args[rule.dim_arg] : nullptr;
  auto add = [&](int64_t d) {
    const int64_t n = std::max<int64_t>(rank, 1);  // a 0-dim tensor takes dim 0 and -1
    if (d < -n || d >= n) return false;
    d = d < 0 ? d + n : d;
    if (reduced >> d & 1u) return false;  // a repeated dim: the meta kernel's error
    reduced |= uint64_t{1} << d;
    return true;
  };
  if (rank > 63) return false;
  if (dim == nullptr || dim->isNone()) {
    reduced = ~uint64_t{0};
  } else if (dim->isInt()) {
    if (!add(dim->toInt())) return false;
  } else if (dim->isIntList()) {
    const auto dims = dim->toIntList();
    if (dims.empty()) reduced = ~uint64_t{0};
    for (int64_t d : dims)
      if (!add(d)) return false;
  } else {
    return false;
  }
  const bool keepdim =
      rule.keepdim_arg >= 0 && args[rule.keepdim_arg].isBool() && args[rule.keepdim_arg].toBool();
  c10::SmallVector<int64_t, 6> out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!(reduced >> d & 1u)) {
      out.push_back(self->size(d));
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  shapes.push_back(std::move(out));
  return true;
}

// layer_norm: the output has the input's shape, the statistics its leading
// dims and 1s for the normalized ones.
bool layerNormShapes(const ShapeRuleSpec& rule, const c10::IValue* args, int num_args,
                     RuleShapes& shapes) {
  const at::Tensor* input = firstTensor(args, num_args);
  if (!input || rule.normalized_arg < 0 || !args[rule.normalized_arg].isIntList()) return false;
  const auto normalized = args[rule.normalized_arg].toIntList();
  const c10::IntArrayRef sizes = input->sizes();
  const int64_t n = static_cast<int64_t>(normalized.size());
  const int64_t axis = static_cast<int64_t>(sizes.size()) - n;
  if (n == 0 || axis < 0) return false;
  for (int64_t i = 0; i < n; ++i)
    if (sizes[axis + i] != normalized.get(i)) return false;
  for (int i = 0; i < num_args; ++i) {  // weight and bias: normalized_shape
    if (!args[i].isTensor() || !args[i].toTensor().defined() || &args[i].toTensor() == input)
      continue;
    const c10::IntArrayRef w = args[i].toTensor().sizes();
    if (static_cast<int64_t>(w.size()) != n) return false;
    for (int64_t j = 0; j < n; ++j)
      if (w[j] != normalized.get(j)) return false;
  }
  shapes.emplace_back(sizes.begin(), sizes.end());
  c10::SmallVector<int64_t, 6> stats(sizes.begin(), sizes.begin() + axis);
  stats.append(static_cast<size_t>(n), 1);
  shapes.push_back(std::move(stats));
  return true;
}

// The output shapes @p rule gives a call; false: the rule cannot shape it.
bool ruleShapes(const ShapeRuleSpec& rule, const c10::IValue* args, const OverloadSchema& schema,
                RuleShapes& shapes) {
  const int num_args = schema.num_args;
  shapes.clear();
  switch (rule.rule) {
    case ShapeRule::Broadcast:
      if (!broadcastShape(args, num_args, shapes)) return false;
      // In place: self cannot grow (the meta kernel raises CPU's error).
      return schema.kind != OutKind::InPlace ||
             (schema.outputs.size() == 1 && args[schema.outputs[0]].isTensor() &&
              args[schema.outputs[0]].toTensor().sizes() == c10::IntArrayRef(shapes[0]));
    case ShapeRule::Rows:
      return rowShape(args, num_args, shapes);
    case ShapeRule::Reduce:
      return reduceShape(rule, args, num_args, shapes);
    case ShapeRule::LayerNorm:
      return layerNormShapes(rule, args, num_args, shapes);
    case ShapeRule::None:
      break;
  }
  return false;
}

// Output i's shape: the rule's i-th, the last one for the rest.
const c10::SmallVector<int64_t, 6>& shapeOf(const RuleShapes& shapes, size_t i) {
  return shapes[std::min(i, shapes.size() - 1)];
}

// --------------------------------------------------------- meta kernel ---

at::Tensor toMeta(const at::Tensor& t) {
  // CPU scalars stay as they are: ATen's meta kernels accept them next to
  // meta tensors exactly as CPU kernels accept them next to device ones.
  if (!t.defined() || (t.device().is_cpu() && t.dim() == 0)) return t;
  at::Tensor m = at::empty_strided(t.sizes(), t.strides(),
                                   at::TensorOptions().dtype(t.scalar_type()).device(at::kMeta));
  return m;
}

c10::IValue toMetaIValue(const c10::IValue& v) {
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

// Runs @p op on meta copies of @p args.
std::shared_ptr<MetaResult> runMeta(const c10::OperatorHandle& op, const c10::IValue* args,
                                    int num_args) {
  torch::jit::Stack meta;
  meta.reserve(num_args);
  for (int i = 0; i < num_args; ++i) meta.push_back(toMetaIValue(args[i]));
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
  return result;
}

}  // namespace

ShapeRuleSpec shapeRuleFor(const OpSpec& spec, const OverloadSchema& schema) {
  ShapeRuleSpec r;
  if (spec.family == Family::Pointwise && schema.kind == OutKind::InPlace) {
    r.rule = ShapeRule::Broadcast;  // checked against self's shape per call
    return r;
  }
  if (schema.kind != OutKind::Functional) return r;
  const std::string id = spec.id;
  auto argOf = [&](const char* name) {
    for (int k = 0; k < spec.num_scalars && k < static_cast<int>(schema.scalars.size()); ++k)
      if (std::strcmp(spec.scalars[k].name, name) == 0) return schema.scalars[k].arg;
    return -1;
  };
  if (spec.family == Family::Pointwise) {
    r.rule = ShapeRule::Broadcast;
  } else if (id == "softmax" || id == "log_softmax" || id == "softmax_backward" ||
             id == "log_softmax_backward" || id == "cumsum") {
    r.rule = ShapeRule::Rows;
  } else if (spec.family == Family::Reduction) {
    r.rule = ShapeRule::Reduce;
    r.dim_arg = argOf("dim");
    r.keepdim_arg = argOf("keepdim");
  } else if (id == "layer_norm") {
    r.rule = ShapeRule::LayerNorm;
    r.normalized_arg = argOf("normalized_shape");
  }
  return r;
}

size_t ShapeCache::KeyHash::operator()(const ShapeKey& k) const noexcept {
  return static_cast<size_t>(flagos_kit::fnv1aWords(k));
}

const MetaResult* ShapeCache::inferShapes(const c10::OperatorHandle& op, const c10::IValue* args,
                                          const OverloadSchema& schema, const ShapeRuleSpec& rule,
                                          std::shared_ptr<const MetaResult>* keep) {
  // A per-thread buffer: building the key allocates nothing once warm.
  thread_local ShapeKey key;
  const bool cacheable = exactKey(args, schema.num_args, key);
  if (cacheable) {
    // Note [Per-thread shape memo]
    // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    // A repeated call is answered from a small per-thread table of recent
    // hits (direct-mapped by cache and key hash) with one compare, without
    // the cache's lock and map walk. A slot holds its own reference, so the
    // cache may drop the entry meanwhile: the result of a key never changes.
    // A hit hands out the slot's result without a reference count of its
    // own (two atomic operations a call): valid until this thread's next
    // call here.
    struct MemoSlot {
      const ShapeCache* owner = nullptr;
      size_t hash = 0;
      ShapeKey key;
      std::shared_ptr<const MetaResult> result;
    };
    thread_local std::array<MemoSlot, 64> memo;
    const size_t hash = KeyHash{}(key);
    MemoSlot& slot = memo[(hash ^ reinterpret_cast<uintptr_t>(this) >> 4) % memo.size()];
    if (slot.owner == this && slot.hash == hash && slot.key == key) return slot.result.get();
    if (auto hit = findExact(key)) {
      slot.owner = this;
      slot.hash = hash;
      slot.key = key;  // reuses the slot's buffer
      slot.result = hit;
      *keep = std::move(hit);
      return keep->get();
    }
  }
  // A miss: a known shape class (Note [Shape classes]) skips the meta call.
  ShapeKey ckey;
  RuleShapes shape;
  const bool classed =
      cacheable && classKey(args, schema, rule, ckey) && ruleShapes(rule, args, schema, shape);
  if (classed) {
    if (auto made = fromClass(ckey, shape)) {
      remember(ShapeKey(key), made);
      g_class_hits.fetch_add(1, std::memory_order_relaxed);
      *keep = std::move(made);
      return keep->get();
    }
  }
  ShapeKey owned = key;  // a miss: the meta kernel may run code that reuses the buffer
  std::shared_ptr<const MetaResult> result = runMeta(op, args, schema.num_args);
  if (classed) learnClass(std::move(ckey), shape, *result);
  if (cacheable) remember(std::move(owned), result);
  *keep = std::move(result);
  return keep->get();
}

std::shared_ptr<const MetaResult> ShapeCache::findExact(const ShapeKey& key) {
  std::shared_lock<std::shared_mutex> lock(cache_mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) return nullptr;
  markUsed(it->first, it->second);
  return it->second;
}

// The result of a known class for @p shape (nullptr: class unknown).
std::shared_ptr<const MetaResult> ShapeCache::fromClass(const ShapeKey& ckey,
                                                        const RuleShapes& shapes) {
  std::shared_lock<std::shared_mutex> lock(cache_mu_);
  auto it = classes_.find(ckey);
  if (it == classes_.end()) return nullptr;
  const ShapeClass& c = it->second;
  auto r = std::make_shared<MetaResult>();
  r->layout = c.layout;
  for (size_t i = 0; i < c.dtypes.size(); ++i) {
    const auto& sizes = shapeOf(shapes, i);
    r->outs.push_back({c.dtypes[i], sizes, contiguousStrides(sizes)});
  }
  return r;
}

// Caches a result under its exact key (and marks it used for the store).
void ShapeCache::remember(ShapeKey&& key, const std::shared_ptr<const MetaResult>& result) {
  markUsed(key, result);
  std::unique_lock<std::shared_mutex> lock(cache_mu_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::move(key), result);
}

// Records the class of a meta result when it followed the rule.
void ShapeCache::learnClass(ShapeKey&& ckey, const RuleShapes& shapes, const MetaResult& r) {
  ShapeClass c{{}, r.layout};
  for (size_t i = 0; i < r.outs.size(); ++i) {
    const OutShape& o = r.outs[i];
    const auto& sizes = shapeOf(shapes, i);
    if (o.dtype == at::ScalarType::Undefined || o.sizes != sizes ||
        o.strides != contiguousStrides(sizes))
      return;
    c.dtypes.push_back(o.dtype);
  }
  if (c.dtypes.empty()) return;
  std::unique_lock<std::shared_mutex> lock(cache_mu_);
  if (classes_.size() < kMaxCacheEntries) classes_.emplace(std::move(ckey), std::move(c));
}

void ShapeCache::markUsed(const ShapeKey& key, const std::shared_ptr<const MetaResult>& r) {
  if (r->used.load(std::memory_order_relaxed) || r->used.exchange(true)) return;
  std::lock_guard<std::mutex> lock(used_mu_);
  if (used_.size() < kMaxStoredShapes) used_.emplace_back(key, r);
}

void ShapeCache::forEachUsed(
    const std::function<bool(const ShapeKey&, const MetaResult&)>& visit) const {
  std::lock_guard<std::mutex> lock(used_mu_);
  for (const auto& [key, r] : used_)
    if (!visit(key, *r)) return;
}

void ShapeCache::insert(const ShapeKey& key, std::shared_ptr<const MetaResult> result) {
  std::unique_lock<std::shared_mutex> lock(cache_mu_);
  if (cache_.size() < kMaxCacheEntries) cache_.emplace(key, std::move(result));
}

}  // namespace flagos::semantic
