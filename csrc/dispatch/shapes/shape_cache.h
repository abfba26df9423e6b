// The meta-shape cache: output shapes, strides and dtypes of a call, from
// the overload's meta kernel or from a cache of earlier results (Note
// [Shape inference cache], Note [Shape classes] in shape_cache.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>
#include <c10/util/SmallVector.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dispatch/bridge/catalog.h"
#include "dispatch/bridge/schema.h"

namespace flagos::semantic {

struct OutShape {
  at::ScalarType dtype;  // Undefined: an undefined return (output_mask false)
  c10::SmallVector<int64_t, 6> sizes, strides;
};
struct MetaResult {
  std::vector<OutShape> outs;
  std::vector<int32_t> layout;            // per return: -1 one tensor, n: a list of n
  mutable std::atomic<bool> used{false};  // Note [Shape inference across processes]
};
using ShapeKey = std::vector<int64_t>;

// How an overload's output shapes follow from its arguments, for shape
// classes (Note [Shape classes]).
enum class ShapeRule : uint8_t {
  None,       // only the meta kernel knows
  Broadcast,  // pointwise: the broadcast of the tensor arguments
  Rows,       // the first tensor argument's shape (softmax, cumsum, ...)
  Reduce,     // the reduced dims dropped, or kept as 1 (sum, amax, ...)
  LayerNorm,  // the input's shape; statistics: its leading dims, then 1s
};
struct ShapeRuleSpec {
  ShapeRule rule = ShapeRule::None;
  int dim_arg = -1;         // Reduce: the `dim` argument (-1: every dim)
  int keepdim_arg = -1;     // Reduce
  int normalized_arg = -1;  // LayerNorm: `normalized_shape`
};
// The rule of one overload (None for out= overloads, and in-place ones
// outside the pointwise family).
ShapeRuleSpec shapeRuleFor(const OpSpec& spec, const OverloadSchema& schema);
// Per output: the rule's shapes (the last one repeats for further outputs).
using RuleShapes = c10::SmallVector<c10::SmallVector<int64_t, 6>, 2>;

// Meta kernel calls, and results synthesized from a shape class
// (_shape_store_info).
extern std::atomic<int64_t> g_meta_calls, g_class_hits;

// One overload's cache; thread-safe.
class ShapeCache {
 public:
  // The shapes of one call of @p op (@p args: its arguments on the stack).
  // Throws what the meta kernel throws. The result lives in @p keep, or,
  // when @p keep is left empty, in this thread's memo (Note [Per-thread
  // shape memo]) until the thread's next inferShapes call.
  const MetaResult* inferShapes(const c10::OperatorHandle& op, const c10::IValue* args,
                                const OverloadSchema& schema, const ShapeRuleSpec& rule,
                                std::shared_ptr<const MetaResult>* keep);

  // Note [Shape inference across processes]: the results this process
  // used, in order of first use, until @p visit returns false.
  void forEachUsed(const std::function<bool(const ShapeKey&, const MetaResult&)>& visit) const;
  // A result an earlier process stored (not counted as used).
  void insert(const ShapeKey& key, std::shared_ptr<const MetaResult> result);

 private:
  struct KeyHash {
    size_t operator()(const ShapeKey& k) const noexcept;
  };
  struct ShapeClass {
    std::vector<at::ScalarType> dtypes;  // per output
    std::vector<int32_t> layout;
  };

  std::shared_ptr<const MetaResult> findExact(const ShapeKey& key);
  std::shared_ptr<const MetaResult> fromClass(const ShapeKey& ckey, const RuleShapes& shapes);
  void remember(ShapeKey&& key, const std::shared_ptr<const MetaResult>& result);
  void learnClass(ShapeKey&& ckey, const RuleShapes& shapes, const MetaResult& r);
  void markUsed(const ShapeKey& key, const std::shared_ptr<const MetaResult>& r);

  std::shared_mutex cache_mu_;
  std::unordered_map<ShapeKey, std::shared_ptr<const MetaResult>, KeyHash> cache_;
  std::unordered_map<ShapeKey, ShapeClass, KeyHash> classes_;  // Note [Shape classes]
  mutable std::mutex used_mu_;
  std::vector<std::pair<ShapeKey, std::shared_ptr<const MetaResult>>> used_;  // first use order
};

}  // namespace flagos::semantic
