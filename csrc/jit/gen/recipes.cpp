// makeRecipe: pointwise operators from their catalog expression, reductions
// and row operators by semantic ID; index (index.cpp), window (window.cpp)
// and sort (sort.cpp: sort, topk, argmax/argmin, max/min.dim) operators by
// semantic ID.
#include <map>

#include "flagos_kit/fnv1a.h"
#include "jit/gen/recipe.h"

namespace flagos::kernels {
namespace {

using flagos_kit::fnv1a;

#define FLAGOS_FLOOR_DIV                                                                      \
  "(d != 0 ? (d - floor(d) > 0.5 ? floor(d) + 1 : floor(d)) : copysign(0, self / other)) "    \
  "where d = m != 0 && (other < 0) != (m < 0) ? (self - m) / other - 1 : (self - m) / other " \
  "where m = fmod(self, other)"

// Catalog expressions the language cannot say as written: prose ("d/dx",
// "see ...") or `^` meaning a power. Same semantics as torch's CPU kernels.
const std::map<std::string, std::string>& overrides() {
  static const std::map<std::string, std::string> kOverrides = {
      {"gelu",
       "approximate == 0 ? 0.5 * self * (1 + erf(self / sqrt(2))) "
       ": 0.5 * self * (1 + tanh(sqrt(2 / pi) * (self + 0.044715 * self * self * self)))"},
      {"gelu_backward",
       "approximate == 0 "
       "? grad_output * (0.5 * (1 + erf(self / sqrt(2))) + self * exp(-0.5 * self * self) / "
       "sqrt(2 * pi)) "
       ": grad_output * (0.5 * (1 + t) + 0.5 * self * (1 - t * t) * k * (1 + 3 * 0.044715 * self "
       "* self)) "
       "where t = tanh(k * (self + 0.044715 * self * self * self)) where k = sqrt(2 / pi)"},
      {"elu_backward",
       "is_result ? (self_or_result <= 0 ? grad_output * input_scale * (self_or_result + alpha * "
       "scale) : grad_output * scale) "
       ": (self_or_result <= 0 ? grad_output * input_scale * alpha * scale * exp(self_or_result * "
       "input_scale) : grad_output * scale)"},
      // torch's CPU formulas, more exact than the catalog's for floats.
      {"remainder", "m != 0 && (other < 0) != (m < 0) ? m + other : m where m = fmod(self, other)"},
      {"logaddexp",
       "self == other && (self == inf || self == -inf) ? self "
       ": max(self, other) + log1p(exp(-abs(self - other)))"},
      // torch's div_floor_floating (exact for integers too: `/` divides in
      // double, fmod is `%` on integers).
      {"floor_divide", "other == 0 ? self / other : " FLAGOS_FLOOR_DIV},
      // trunc: of the quotient rounded to the inputs' type, as CPU
      // (Note [Intermediates rounded to the inputs' type], lower.cpp).
      {"div_mode",
       "rounding_mode is None ? self / other : rounding_mode == 0 ? trunc(round_common(self / "
       "other)) "
       ": other == 0 ? self / other : " FLAGOS_FLOOR_DIV},
      // An absent bound does not clamp.
      {"clamp",
       "min is None ? (max is None ? self : min(self, max)) "
       ": max is None ? max(self, min) : min(max(self, min), max)"},
      // torch's lerp: exact at both ends.
      {"lerp",
       "abs(weight) < 0.5 ? self + weight * (end - self) : end - (end - self) * (1 - weight)"},
      {"lerp_tensor",
       "abs(weight) < 0.5 ? self + weight * (end - self) : end - (end - self) * (1 - weight)"},
      // torch: out-of-range inputs give NaN (no eps) or 0 (eps).
      {"logit_backward",
       "eps is None ? (self < 0 || self > 1 ? nan : g) "
       ": (self < eps || self > 1 - eps ? 0 : g) where g = grad_output / (self * (1 - self))"},
  };
  return kOverrides;
}

struct ReduceRow {
  Reducer reducer;
  DimsArg dims;
};

const std::map<std::string, ReduceRow>& reductions() {
  static const std::map<std::string, ReduceRow> kReductions = {
      {"sum", {Reducer::Sum, DimsArg::Mask}},     {"mean", {Reducer::Mean, DimsArg::Mask}},
      {"prod", {Reducer::Prod, DimsArg::Single}}, {"prod_all", {Reducer::Prod, DimsArg::All}},
      {"amax", {Reducer::Max, DimsArg::Mask}},    {"amin", {Reducer::Min, DimsArg::Mask}},
      {"max_all", {Reducer::Max, DimsArg::All}},  {"min_all", {Reducer::Min, DimsArg::All}},
      {"any", {Reducer::Any, DimsArg::Mask}},     {"all", {Reducer::All, DimsArg::Mask}},
  };
  return kReductions;
}

const std::map<std::string, RowOp>& rowOps() {
  static const std::map<std::string, RowOp> kRows = {
      {"softmax", RowOp::Softmax},
      {"log_softmax", RowOp::LogSoftmax},
      {"softmax_backward", RowOp::SoftmaxBackward},
      {"log_softmax_backward", RowOp::LogSoftmaxBackward},
  };
  return kRows;
}

std::shared_ptr<const Recipe> fail(std::string* why_not, const std::string& why) {
  if (why_not) *why_not = why;
  return nullptr;
}

}  // namespace

// Note [Support checks on first use]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Whether a pointwise expression lowers depends on the compute class and
// on which optional scalars are present: 3 << num_scalars lowerings. Doing
// them all in makeRecipe was the bulk of a gelu-like op's first call in a
// fresh process (warm kernel cache, nothing else to build), most of it
// for classes the process never calls. makeRecipe now lowers until one
// combination succeeds (float32 with every scalar first, the usual call);
// keyFor asks for the call's own combination, lowered once and kept.
const std::string& Recipe::pointwiseSupport(ComputeClass cls, uint32_t present_mask) const {
  SupportEntry& e = support[(static_cast<size_t>(cls) << scalars.size()) | present_mask];
  if (e.known.load(std::memory_order_acquire)) return e.why;
  std::lock_guard<std::mutex> lock(support_mu);
  if (!e.known.load(std::memory_order_relaxed)) {
    e.why = checkPointwise(*this, cls, present_mask);
    e.known.store(true, std::memory_order_release);
  }
  return e.why;
}

std::shared_ptr<const Recipe> makeRecipe(const OpInfo& op, std::string* why_not) {
  auto r = std::make_shared<Recipe>();
  r->id = op.id;
  r->inputs = op.inputs;
  r->scalars = op.scalars;
  r->num_outputs = op.num_outputs;
  if (op.family == "pooling" || op.family == "convolution") {
    if (!makeWindowRecipe(op, r.get(), why_not)) return nullptr;
    r->identity = fnv1a("window\n" + op.id);
    return r;
  }
  if (isSortOp(op.id)) {
    if (!makeSortRecipe(op, r.get(), why_not)) return nullptr;
    r->identity = fnv1a("sort\n" + op.id);
    return r;
  }
  if (op.family == "random") {
    if (!makeRandomRecipe(op, r.get(), why_not)) return nullptr;
    r->identity = fnv1a("random\n" + op.id);
    return r;
  }
  if (op.num_outputs != 1) return fail(why_not, "only single-output operators are generated");
  if (op.family == "pointwise") {
    auto ov = overrides().find(op.id);
    const std::string& source = ov != overrides().end() ? ov->second : op.expr;
    if (source.empty()) return fail(why_not, "no expr");
    std::string error;
    r->expr = parseExpr(source, &error);
    if (!r->expr) return fail(why_not, "expr \"" + source + "\": " + error);
    if (r->scalars.size() > 8) return fail(why_not, "more than 8 scalars");
    r->kind = RecipeKind::Pointwise;
    // Note [Support checks on first use]: one lowering that succeeds proves
    // the expression is generated at all; the rest wait for a call.
    const uint32_t combos = 1u << r->scalars.size();
    r->support.reset(new Recipe::SupportEntry[3 * combos]);
    bool any_ok = false;
    std::string first_reason;
    for (int cls : {1, 2, 0}) {  // float32 first: what calls use most
      if (any_ok) break;
      for (uint32_t mask = combos; mask-- > 0 && !any_ok;) {  // every scalar present first
        const std::string& why = r->pointwiseSupport(static_cast<ComputeClass>(cls), mask);
        if (why.empty())
          any_ok = true;
        else if (first_reason.empty())
          first_reason = why;
      }
    }
    if (!any_ok) return fail(why_not, "expr \"" + source + "\": " + first_reason);
    r->identity = fnv1a("pointwise\n" + op.id + "\n" + source);
    return r;
  }
  if (op.family == "reduction") {
    auto red = reductions().find(op.id);
    if (red != reductions().end()) {
      if (op.inputs.size() != 1) return fail(why_not, "a reduction takes one input");
      r->kind = RecipeKind::Reduce;
      r->reducer = red->second.reducer;
      r->dims_arg = red->second.dims;
      r->identity = fnv1a("reduce\n" + op.id);
      return r;
    }
    auto row = rowOps().find(op.id);
    if (row != rowOps().end()) {
      size_t want = row->second == RowOp::Softmax || row->second == RowOp::LogSoftmax ? 1 : 2;
      if (op.inputs.size() != want) return fail(why_not, "unexpected inputs for a row operator");
      r->kind = RecipeKind::Row;
      r->row = row->second;
      r->identity = fnv1a("row\n" + op.id);
      return r;
    }
    return fail(why_not, "reduction '" + op.id + "' has no generator recipe");
  }
  if (op.family == "index" || op.family == "shape") {
    if (!makeIndexRecipe(op, r.get(), why_not)) return nullptr;
    r->identity = fnv1a("index\n" + op.id);
    return r;
  }
  return fail(why_not, "family '" + op.family + "' is not generated");
}

}  // namespace flagos::kernels
