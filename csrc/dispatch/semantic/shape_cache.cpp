// Note [Shape inference cache]
// Output shapes, strides and dtypes come from running the overload on meta
// tensors, which also performs ATen's argument checks. Many meta kernels
// are Python (torch/_meta_registrations.py), ~100 us a call, so results are
// cached per overload under a key holding everything a meta kernel can see:
// the default dtype, each tensor's dtype, rank, sizes, strides,
// CPU-scalar-ness, and every non-tensor argument's value. A hit skips the meta call (and the
// checks, which passed for the identical key before). Arguments the key cannot hold (generators,
// devices, ...) disable caching for that call.
//
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
#include "dispatch/semantic/shape_cache.h"

#include <ATen/ATen.h>
#include <c10/core/DefaultDtype.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "dispatch/semantic/shape_store.h"
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

// False when the call is not class-eligible (Note [Shape classes]).
bool classKey(const c10::IValue* args, const OverloadSchema& schema, Family family, ShapeKey& k) {
  if (schema.kind != OutKind::Functional || family != Family::Pointwise) return false;
  k.push_back(defaultDtype());
  for (int i = 0; i < schema.num_args; ++i) {
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
bool broadcastShape(const c10::IValue* args, int num_args, std::vector<int64_t>& shape) {
  shape.clear();
  try {
    for (int i = 0; i < num_args; ++i) {
      if (!args[i].isTensor() || !args[i].toTensor().defined()) continue;
      shape = at::infer_size(shape, args[i].toTensor().sizes());
    }
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

c10::SmallVector<int64_t, 6> contiguousStrides(const std::vector<int64_t>& shape) {
  c10::SmallVector<int64_t, 6> strides(shape.size());
  int64_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = step;
    step *= std::max<int64_t>(shape[d], 1);
  }
  return strides;
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

size_t ShapeCache::KeyHash::operator()(const ShapeKey& k) const noexcept {
  return static_cast<size_t>(flagos_kit::fnv1aWords(k));
}

std::shared_ptr<const MetaResult> ShapeCache::inferShapes(const c10::OperatorHandle& op,
                                                          const c10::IValue* args,
                                                          const OverloadSchema& schema,
                                                          Family family) {
  // A per-thread buffer: building the key allocates nothing once warm.
  thread_local ShapeKey key;
  const bool cacheable = exactKey(args, schema.num_args, key);
  if (cacheable) {
    // Note [Per-thread shape memo]
    // A repeated call is answered from a small per-thread table of recent
    // hits (direct-mapped by cache and key hash) with one compare, without
    // the cache's lock and map walk. A slot holds its own reference, so the
    // cache may drop the entry meanwhile: the result of a key never changes.
    struct MemoSlot {
      const ShapeCache* owner = nullptr;
      size_t hash = 0;
      ShapeKey key;
      std::shared_ptr<const MetaResult> result;
    };
    thread_local std::array<MemoSlot, 64> memo;
    const size_t hash = KeyHash{}(key);
    MemoSlot& slot = memo[(hash ^ reinterpret_cast<uintptr_t>(this) >> 4) % memo.size()];
    if (slot.owner == this && slot.hash == hash && slot.key == key) return slot.result;
    if (auto hit = findExact(key)) {
      slot.owner = this;
      slot.hash = hash;
      slot.key = key;  // reuses the slot's buffer
      slot.result = hit;
      return hit;
    }
  }
  // A miss: a known shape class (Note [Shape classes]) skips the meta call.
  ShapeKey ckey;
  std::vector<int64_t> shape;
  const bool classed = cacheable && classKey(args, schema, family, ckey) &&
                       broadcastShape(args, schema.num_args, shape);
  if (classed) {
    if (auto made = fromClass(ckey, shape)) {
      remember(ShapeKey(key), made);
      g_class_hits.fetch_add(1, std::memory_order_relaxed);
      return made;
    }
  }
  ShapeKey owned = key;  // a miss: the meta kernel may run code that reuses the buffer
  std::shared_ptr<const MetaResult> result = runMeta(op, args, schema.num_args);
  if (classed) learnClass(std::move(ckey), shape, *result);
  if (cacheable) remember(std::move(owned), result);
  return result;
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
                                                        const std::vector<int64_t>& shape) {
  std::shared_lock<std::shared_mutex> lock(cache_mu_);
  auto it = classes_.find(ckey);
  if (it == classes_.end()) return nullptr;
  const ShapeClass& c = it->second;
  auto r = std::make_shared<MetaResult>();
  r->layout = c.layout;
  const auto strides = contiguousStrides(shape);
  for (at::ScalarType dt : c.dtypes)
    r->outs.push_back({dt, c10::SmallVector<int64_t, 6>(shape.begin(), shape.end()), strides});
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
void ShapeCache::learnClass(ShapeKey&& ckey, const std::vector<int64_t>& shape,
                            const MetaResult& r) {
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
