// pack(): a call's kernelLaunch arguments, and the flagos_meta layout the
// emitters declare (Note [Launch convention of generated kernels]).
#include <algorithm>
#include <cstring>

#include "jit/gen/recipe.h"

namespace flagos::kernels {
namespace {

constexpr int kD = FLAGOS_MAX_DIMS;

void put(std::vector<int64_t>* words, const std::vector<int64_t>& values, int count) {
  for (int i = 0; i < count; ++i) words->push_back(i < (int)values.size() ? values[i] : 0);
}

}  // namespace

std::vector<MetaField> metaLayout(const Recipe& recipe, int num_operands) {
  std::vector<MetaField> f = {{"work", 1}};
  switch (recipe.kind) {
    case RecipeKind::Pointwise:
    case RecipeKind::Random:
      f.push_back({"ndim", 1});
      f.push_back({"size", kD});
      f.push_back({"st[" + std::to_string(num_operands) + "]", kD});
      break;
    case RecipeKind::Reduce:
      f.insert(f.end(), {{"nk", 1},
                         {"nr", 1},
                         {"count", 1},
                         {"ksize", kD},
                         {"kst[2]", kD},
                         {"rsize", kD},
                         {"rst", kD},
                         {"lanes", 1}});
      break;
    case RecipeKind::Row:
      f.insert(f.end(), {{"nk", 1},
                         {"len", 1},
                         {"ksize", kD},
                         {"kst[" + std::to_string(num_operands) + "]", kD},
                         {"rst", num_operands < 2 ? 2 : num_operands},
                         {"lanes", 1}});
      break;
    case RecipeKind::Index:
      return indexMetaLayout(num_operands);
    case RecipeKind::Window:
      return windowMetaLayout(num_operands);
    case RecipeKind::Sort:
      return sortMetaLayout(recipe, num_operands);
  }
  return f;
}

uint64_t dimsMaskOf(const Recipe& recipe, const flagosScalar* scalars, int32_t num_scalars,
                    int32_t input_ndim) {
  const uint64_t all = input_ndim >= 64 ? ~0ull : (1ull << input_ndim) - 1;
  const bool has = num_scalars > 0 && scalars[0].dtype != 0;
  const int64_t v = has ? (isFloating(scalars[0].dtype) ? (int64_t)scalars[0].f : scalars[0].i) : 0;
  if (recipe.kind == RecipeKind::Row) return input_ndim == 0 ? 1 : 1ull << v;
  switch (recipe.dims_arg) {
    case DimsArg::All:
      return all;
    case DimsArg::Single:
      return has && input_ndim > 0 ? 1ull << v : all;
    case DimsArg::Mask:
      return has && v != 0 ? (uint64_t)v & all : all;
  }
  return all;
}

std::vector<ScratchBuffer> scratchFor(const Recipe& recipe, const Call& call,
                                      const Target& target) {
  if (recipe.kind == RecipeKind::Sort) return sortScratch(recipe, call, target);
  return {};
}

int passesOf(const Recipe& recipe, const Call& call) {
  return recipe.kind == RecipeKind::Sort ? sortPasses(recipe, call) : 1;
}

void pack(const Recipe& recipe, const Call& call, const Target& target, Launch* out, int pass) {
  const int nops = call.num_outputs + call.num_inputs;
  out->args.clear();
  out->local = 0;
  out->strategy = 0;
  out->pointers.clear();
  out->meta.clear();
  out->scalar_bytes.clear();
  std::vector<int64_t> meta;
  auto operand = [&](int k) -> const flagosTensor& {
    return k < call.num_outputs ? call.outputs[k] : call.inputs[k - call.num_outputs];
  };
  switch (recipe.kind) {
    case RecipeKind::Pointwise:
    case RecipeKind::Random: {
      // Generic kernels split the index over meta's dims: drop size-1 dims
      // and merge dims every operand walks contiguously (fewer divisions).
      const flagosTensor& o = call.outputs[0];
      int64_t numel = 1;
      std::vector<int64_t> sizes;
      std::vector<std::vector<int64_t>> strides(nops);
      for (int d = 0; d < o.ndim; ++d) {
        numel *= o.shape[d];
        if (o.shape[d] == 1) continue;
        bool merge = !sizes.empty();
        for (int k = 0; k < nops && merge; ++k) {
          merge = strides[k].back() == operand(k).strides[d] * o.shape[d];
        }
        if (merge) {
          sizes.back() *= o.shape[d];
          for (int k = 0; k < nops; ++k) strides[k].back() = operand(k).strides[d];
        } else {
          sizes.push_back(o.shape[d]);
          for (int k = 0; k < nops; ++k) strides[k].push_back(operand(k).strides[d]);
        }
      }
      meta.push_back(numel);
      meta.push_back(static_cast<int64_t>(sizes.size()));
      put(&meta, sizes, kD);
      for (int k = 0; k < nops; ++k) put(&meta, strides[k], kD);
      out->global = static_cast<uint64_t>(numel);
      break;
    }
    case RecipeKind::Reduce:
    case RecipeKind::Row: {
      const ReduceLayout l = reduceLayout(recipe, call);
      const ReduceStrategy strategy = reduceStrategy(recipe, l, target);
      const int64_t work = reduceWorkItems(recipe, l, strategy, target);
      out->strategy = static_cast<uint8_t>(strategy);
      meta.push_back(work);
      meta.push_back(static_cast<int64_t>(l.ksize.size()));
      if (recipe.kind == RecipeKind::Reduce) {
        meta.insert(meta.end(), {(int64_t)l.rsize.size(), l.count});
        put(&meta, l.ksize, kD);
        put(&meta, l.kst[0], kD);
        put(&meta, l.kst[1], kD);
        put(&meta, l.rsize, kD);
        put(&meta, l.rst[0], kD);
      } else {
        meta.push_back(l.count);
        put(&meta, l.ksize, kD);
        for (int k = 0; k < nops; ++k) put(&meta, l.kst[k], kD);
        std::vector<int64_t> rst;
        for (int k = 0; k < nops; ++k) rst.push_back(l.rst[k][0]);
        put(&meta, rst, nops < 2 ? 2 : nops);
      }
      // Note [Reduction strategies]: Group: a segment of a work-group per
      // output, whole groups of them.
      out->global = static_cast<uint64_t>(work);
      int64_t lanes = 0;
      if (strategy == ReduceStrategy::Group) {
        const uint64_t group = groupSize(target), per = segmentsPerGroup(target, work);
        lanes = static_cast<int64_t>(group / per);
        out->global = static_cast<uint64_t>(work) / per * group;
        out->local = group;
      } else if (groupSize(target) == 0 && target.local_size > 0) {
        // "c": local is the smallest range a thread takes (compiler.h), in
        // items; an item here reduces `count` elements, so the same work a
        // chunk is fewer items (else a sum over 4096 rows of 4096 ran on one
        // thread: 4096 items, below two chunks).
        const uint64_t count = static_cast<uint64_t>(std::max<int64_t>(l.count, 1));
        out->local = std::max<uint64_t>(1, target.local_size / count);
      }
      meta.push_back(lanes);
      break;
    }
    case RecipeKind::Index:
      out->global = packIndex(recipe, call, target, &meta);
      break;
    case RecipeKind::Window:
      out->global = packWindow(recipe, call, target, &meta);
      break;
    case RecipeKind::Sort:
      out->global = packSort(recipe, call, target, &meta, pass);
      break;
  }
  if (out->local == 0) out->local = target.local_size;
  out->meta.resize(meta.size() * sizeof(int64_t));
  std::memcpy(out->meta.data(), meta.data(), out->meta.size());

  // Scalars: double (float without fp64) for a floating pointwise compute
  // type, int64 otherwise; absent ones as zero.
  bool floating = false;
  if (recipe.kind == RecipeKind::Pointwise) {
    Signature sig;
    sig.num_outputs = call.num_outputs;
    for (int k = 0; k < nops; ++k) sig.operands.push_back({operand(k).dtype, {}, {}});
    floating = classOf(computeDtype(sig)) != ComputeClass::Int;
  }
  // Every scalar gets an 8-byte slot; a 4-byte float uses its start.
  out->scalar_bytes.resize(8 * call.num_scalars);
  std::vector<uint32_t> widths(call.num_scalars);
  const bool pointwise_floating = floating;
  for (int k = 0; k < call.num_scalars; ++k) {
    const flagosScalar& s = call.scalars[k];
    uint8_t* dst = out->scalar_bytes.data() + 8 * k;
    const bool is_float = isFloating(s.dtype);
    floating =
        pointwise_floating ||
        (recipe.kind == RecipeKind::Index && indexFloatScalar(recipe, k, operand(0).dtype)) ||
        (recipe.kind == RecipeKind::Window && windowFloatScalar(recipe, k)) ||
        (recipe.kind == RecipeKind::Random && randomFloatScalar(recipe, k));
    const size_t width = floating && !target.fp64 ? 4 : 8;
    widths[k] = (uint32_t)width;
    if (floating && width == 8) {
      double v = s.dtype == 0 ? 0.0 : is_float ? s.f : (double)s.i;
      std::memcpy(dst, &v, 8);
    } else if (floating) {
      float v = s.dtype == 0 ? 0.0f : is_float ? (float)s.f : (float)s.i;
      std::memcpy(dst, &v, 4);
    } else {
      int64_t v = s.dtype == 0 ? 0 : is_float ? (int64_t)s.f : s.i;
      std::memcpy(dst, &v, 8);
    }
  }

  out->pointers.resize(nops);
  for (int k = 0; k < nops; ++k) out->pointers[k] = operand(k).data;
  for (int k = 0; k < nops; ++k) {
    out->args.push_back({FLAGOS_ARG_DEVICE_PTR, (uint32_t)sizeof(void*), &out->pointers[k]});
  }
  out->args.push_back({FLAGOS_ARG_BYTES, (uint32_t)out->meta.size(), out->meta.data()});
  for (int k = 0; k < call.num_scalars; ++k) {
    out->args.push_back({FLAGOS_ARG_BYTES, widths[k], out->scalar_bytes.data() + 8 * k});
  }
}

}  // namespace flagos::kernels
