// keyFor() and signatureOf(): what selects a kernel, and the copy of a call
// that emit() works from.
#include "jit/gen/emit.h"
#include "jit/gen/recipe.h"

namespace flagos::kernels {
namespace {

bool reject(std::string* why_not, const std::string& why) {
  if (why_not) *why_not = why;
  return false;
}

int64_t languageCode(const std::string& language) {
  int64_t h = 0;
  for (unsigned char c : language) h = h * 131 + c;
  return h & 0x7fffffff;
}

bool isContiguous(const flagosTensor& t) {
  int64_t expect = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.shape[d];
  }
  return true;
}

}  // namespace

void genericKey(const Recipe& recipe, const Call& call, Variant variant, const Target& target,
                KernelKey* key) {
  uint32_t present = 0;
  for (int k = 0; k < call.num_scalars; ++k) present |= (call.scalars[k].dtype != 0) << k;
  const int nops = call.num_outputs + call.num_inputs;
  std::vector<int64_t>& w = key->words;
  w.assign({kGeneratorVersion, static_cast<int64_t>(recipe.identity), static_cast<int64_t>(variant),
            languageCode(target.language), target.fp64 ? 1 : 0, nops, present});
  for (int k = 0; k < call.num_outputs; ++k) w.push_back(call.outputs[k].dtype);
  for (int k = 0; k < call.num_inputs; ++k) w.push_back(call.inputs[k].dtype);
}

// KernelKey::toString and KernelKeyHash live in key_hash.cpp.

bool keyFor(const Recipe& recipe, const Call& call, Variant variant, const Target& target,
            KernelKey* key, std::string* why_not) {
  if (!dialectFor(target.language)) {
    return reject(why_not, "no emitter for language '" + target.language + "'");
  }
  if (recipe.kind == RecipeKind::Index) {
    return indexKeyFor(recipe, call, variant, target, key, why_not);
  }
  if (recipe.kind == RecipeKind::Window) {
    return windowKeyFor(recipe, call, variant, target, key, why_not);
  }
  if (recipe.kind == RecipeKind::Sort) {
    return sortKeyFor(recipe, call, variant, target, key, why_not);
  }
  const bool random = recipe.kind == RecipeKind::Random;
  const bool elementwise = recipe.kind == RecipeKind::Pointwise || random;
  if (call.num_outputs != recipe.num_outputs || call.num_inputs != (int)recipe.inputs.size() ||
      call.num_scalars != (random ? randomScalarCount(recipe) : (int)recipe.scalars.size())) {
    return reject(why_not, recipe.id + ": operand counts differ from the catalog's");
  }
  const int nops = call.num_outputs + call.num_inputs;
  auto operand = [&](int k) -> const flagosTensor& {
    return k < call.num_outputs ? call.outputs[k] : call.inputs[k - call.num_outputs];
  };
  const flagosTensor& ref = recipe.kind == RecipeKind::Reduce ? call.inputs[0] : call.outputs[0];
  uint32_t present = 0;
  for (int k = 0; k < call.num_scalars; ++k) present |= (call.scalars[k].dtype != 0) << k;
  bool contiguous = true;
  for (int k = 0; k < nops; ++k) {
    const flagosTensor& t = operand(k);
    if (t.data == nullptr) return reject(why_not, recipe.id + ": an operand is None");
    if (!isSupportedDtype(t.dtype)) {
      return reject(why_not, recipe.id + std::string(": dtype ") + dtypeName(t.dtype));
    }
    if (t.dtype == FLAGOS_DTYPE_FLOAT64 && !target.fp64) {
      return reject(why_not, recipe.id + ": float64 on a device without fp64");
    }
    if (t.ndim > FLAGOS_MAX_DIMS || t.ndim < 0) return reject(why_not, "too many dims");
    if (recipe.kind != RecipeKind::Reduce && t.ndim != ref.ndim) {
      return reject(why_not, recipe.id + ": operands are not broadcast to the output's rank");
    }
    contiguous = contiguous && isContiguous(t);
  }
  if (random) {
    if (!randomSupports(recipe, call, why_not)) return false;
  } else if (recipe.kind == RecipeKind::Pointwise) {
    Signature sig;
    sig.num_outputs = call.num_outputs;
    for (int k = 0; k < nops; ++k) sig.operands.push_back({operand(k).dtype, {}, {}});
    const size_t cls = static_cast<size_t>(classOf(computeDtype(sig)));
    const std::string& why = recipe.pointwiseSupport(static_cast<ComputeClass>(cls), present);
    if (!why.empty()) return reject(why_not, recipe.id + ": " + why);
  } else if (recipe.kind == RecipeKind::Row) {
    if (ref.ndim > 0) {
      const flagosScalar& dim = call.scalars[0];
      if (dim.dtype == 0 || dim.i < 0 || dim.i >= ref.ndim) {
        return reject(why_not, recipe.id + ": the row dim is not a normalized dim");
      }
    }
  } else if (recipe.dims_arg == DimsArg::Single && ref.ndim > 0) {
    if (call.num_scalars < 1 || call.scalars[0].dtype == 0 || call.scalars[0].i < 0 ||
        call.scalars[0].i >= ref.ndim) {
      return reject(why_not, recipe.id + ": the dim is not a normalized dim");
    }
  }

  std::vector<int64_t>& w = key->words;
  w.clear();
  w.reserve(16 + (variant == Variant::Specialized ? 2 * nops * (ref.ndim + 1) : 0));
  w.insert(w.end(), {kGeneratorVersion, static_cast<int64_t>(recipe.identity),
                     static_cast<int64_t>(variant), languageCode(target.language),
                     target.fp64 ? 1 : 0, nops, present, elementwise && contiguous ? 1 : 0});
  for (int k = 0; k < nops; ++k) w.push_back(operand(k).dtype);
  if (recipe.kind == RecipeKind::Reduce || recipe.kind == RecipeKind::Row) {
    // Note [Reduction strategies]: one kernel per strategy, a Group kernel
    // per group size (baked in).
    const ReduceStrategy strategy = reduceStrategy(recipe, reduceLayout(recipe, call), target);
    w.push_back(static_cast<int64_t>(strategy));
    w.push_back(strategy == ReduceStrategy::Group ? static_cast<int64_t>(groupSize(target)) : 0);
  }
  if (variant == Variant::Specialized) {
    for (int k = 0; k < nops; ++k) {
      const flagosTensor& t = operand(k);
      w.push_back(t.ndim);
      w.insert(w.end(), t.shape, t.shape + t.ndim);
      w.insert(w.end(), t.strides, t.strides + t.ndim);
    }
    if (!elementwise) {
      w.push_back(
          static_cast<int64_t>(dimsMaskOf(recipe, call.scalars, call.num_scalars, ref.ndim)));
    }
  }
  return true;
}

std::shared_ptr<const Signature> signatureOf(const Recipe& recipe, const Call& call) {
  auto sig = std::make_shared<Signature>();
  sig->num_outputs = call.num_outputs;
  bool contiguous = true;
  auto add = [&](const flagosTensor& t) {
    Operand o;
    o.dtype = t.dtype;
    o.shape.assign(t.shape, t.shape + t.ndim);
    o.strides.assign(t.strides, t.strides + t.ndim);
    sig->operands.push_back(std::move(o));
    contiguous = contiguous && isContiguous(t);
  };
  for (int k = 0; k < call.num_outputs; ++k) add(call.outputs[k]);
  for (int k = 0; k < call.num_inputs; ++k) add(call.inputs[k]);
  for (int k = 0; k < call.num_scalars; ++k) sig->scalar_dtypes.push_back(call.scalars[k].dtype);
  const bool elementwise =
      recipe.kind == RecipeKind::Pointwise || recipe.kind == RecipeKind::Random;
  sig->contiguous = elementwise && contiguous;
  if (!elementwise) {
    const flagosTensor& ref = recipe.kind == RecipeKind::Reduce ? call.inputs[0] : call.outputs[0];
    sig->dims_mask = dimsMaskOf(recipe, call.scalars, call.num_scalars, ref.ndim);
  }
  return sig;
}

}  // namespace flagos::kernels
