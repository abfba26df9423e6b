// The layout of a reduction's or a row operator's call (size-1 dims dropped,
// neighbouring dims merged) and the strategy its kernel uses; the kernel
// bodies are reduce.cpp (reductions) and row.cpp (row operators).
//
// Note [Reduction strategies]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A reduction's work is its outputs (a row operator's: its rows), each
// combining `count` input elements. Where the elements of one output lie
// decides how work items should walk them (reduceStrategy; part of the
// kernel key, so one generic kernel per strategy):
// * the reduced elements are innermost in memory (sum(-1) of a row-major
//   matrix, softmax over the last dim, a full reduction):
//   - Group, on a dialect with work-groups: a segment of the work-group per
//     output. Its items stride over the row together (adjacent items read
//     adjacent elements: GPUs coalesce), each accumulating privately, and
//     combine in local memory (Note [Work-group combine helpers], emit.h);
//     a row operator's later passes walk the row the same way. On
//     contiguous rows each item loads vectorWidth() elements at once.
//     Segments rather than whole groups, measured on PoCL (16M floats,
//     rows of 4096, groups of 256): a whole group per row ran softmax
//     several times slower than segments of 16-32 items, and vector loads
//     took a row sum from about a copy's time to well under it
//     (docs/benchmarks.md, "Measurements behind design decisions"). A
//     segment of kSegment items is one warp on a GPU. A launch holds whole
//     groups of rows (segmentsPerGroup divides the row count; meta.lanes is
//     the segment's size): PoCL 3.1 ran the stores of segments past the work,
//     clamped onto the last row, although `if (live)` skipped them (a
//     softmax's last row came out scaled twice), and with a zero trip count
//     for them it corrupted live rows.
//   - Rows otherwise (no groups, or rows shorter than kMinGroupRow, where
//     most of a segment would idle): one work item walks its output's
//     elements; "c" gives the contiguous walk `#pragma omp simd` with the
//     reduction as a clause, so the compiler keeps independent
//     accumulators in vector lanes (a single `acc += x` chain cannot be
//     reordered: one add per add latency).
// * a kept dim is innermost (sum(0) of a row-major matrix): Columns:
//   neighbouring work items own neighbouring outputs, so one step of all of
//   them reads one contiguous stretch.
//   - OpenCL: each item owns vectorWidth() neighbouring outputs (vector
//     loads on contiguous data); a barrier after every kTile elements
//     (Items::Uniform) makes PoCL run the group's items innermost,
//     vectorized, instead of one item's whole strided column after another
//     (sum(0) of 4096x4096: far faster tiled than serial, and faster again
//     with 8 outputs an item). Items past the work compute the last real
//     item's outputs and store the same values.
//   - "c": a block of up to kBlock neighbouring outputs (Items::Range): for
//     each reduced element the block's row slice is added into an
//     accumulator row, a contiguous loop the compiler vectorizes.
//   Row operators over a leading dim (softmax(x, 0)) take Rows instead: one
//   item per strided row. Their Columns form would rewrite the output
//   (softmax scales it in place) from items past the work too, which PoCL
//   did not reliably skip (above).
// Floating sums accumulate in double where the target has it (float
// otherwise); row operators compute elements in their own precision (float
// for float32 and the 16-bit types) and accumulate sums in double. The order
// of additions differs from CPU's (within the tests' reduction tolerances).
// Not done: a full reduction (or a few huge rows) is one segment, one core
// on PoCL and one warp on a GPU; a GPU wants a split into a second pass.
#include <algorithm>

#include "jit/gen/emit.h"
#include "jit/gen/recipe.h"
#include "jit/gen/reduction.h"

namespace flagos::kernels {
namespace {

// Items of a Group segment (at most; a power of two dividing the group).
constexpr uint64_t kSegment = 32;
// Rows shorter than this take Rows rather than Group.
constexpr int64_t kMinGroupRow = 64;

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

int64_t magnitude(int64_t v) {
  return v < 0 ? -v : v;
}

// Merges neighbouring dims every operand walks as one: outer a, inner b
// with st[k][a] == st[k][b] * size[b] for every k.
void mergeDims(std::vector<int64_t>* size, std::vector<std::vector<int64_t>>* st) {
  std::vector<int64_t> s;
  std::vector<std::vector<int64_t>> t(st->size());
  for (size_t d = 0; d < size->size(); ++d) {
    bool merge = !s.empty();
    for (size_t k = 0; k < st->size() && merge; ++k)
      merge = t[k].back() == (*st)[k][d] * (*size)[d];
    if (merge) {
      s.back() *= (*size)[d];
      for (size_t k = 0; k < st->size(); ++k) t[k].back() = (*st)[k][d];
    } else {
      s.push_back((*size)[d]);
      for (size_t k = 0; k < st->size(); ++k) t[k].push_back((*st)[k][d]);
    }
  }
  *size = std::move(s);
  *st = std::move(t);
}

// Whether an OpenCL-like Columns reduction gives each item a vector of
// outputs (Note [Reduction strategies]).
bool vectorColumns(const Recipe& r, const Dialect& dl) {
  return r.kind == RecipeKind::Reduce && dl.hasGroups() && dl.vectorWidth() > 1;
}

}  // namespace

ReduceLayout reduceLayout(const Recipe& recipe, const std::vector<std::vector<int64_t>>& shapes,
                          const std::vector<std::vector<int64_t>>& strides, uint64_t dims_mask) {
  ReduceLayout l;
  if (recipe.kind == RecipeKind::Reduce) {
    const std::vector<int64_t>& in = shapes[1];
    const bool keepdim = shapes[0].size() == in.size();
    l.kst.resize(2);
    l.rst.resize(1);
    // Reduced dims in order of falling stride: the order of the additions
    // does not matter, and the innermost then has the smallest stride.
    std::vector<std::pair<int64_t, int64_t>> reduced;  // (stride, size)
    for (size_t d = 0, od = 0; d < in.size(); ++d) {
      if (dims_mask >> d & 1) {
        if (in[d] != 1) reduced.push_back({strides[1][d], in[d]});
        if (keepdim) ++od;
        continue;
      }
      if (in[d] != 1) {
        l.ksize.push_back(in[d]);
        l.kst[0].push_back(od < shapes[0].size() ? strides[0][od] : 0);
        l.kst[1].push_back(strides[1][d]);
      }
      ++od;
    }
    std::stable_sort(reduced.begin(), reduced.end(), [](const auto& a, const auto& b) {
      return magnitude(a.first) > magnitude(b.first);
    });
    for (const auto& [st, size] : reduced) {
      l.rsize.push_back(size);
      l.rst[0].push_back(st);
    }
    mergeDims(&l.rsize, &l.rst);
    l.count = product(l.rsize);
  } else {
    const int nops = static_cast<int>(shapes.size());
    const std::vector<int64_t>& ref = shapes[0];
    l.kst.resize(nops);
    l.rst.resize(nops);
    int64_t len = 1;
    for (size_t d = 0; d < ref.size(); ++d) {
      if (dims_mask >> d & 1) {
        len = ref[d];
        for (int k = 0; k < nops; ++k) l.rst[k].push_back(strides[k][d]);
      } else if (ref[d] != 1) {
        l.ksize.push_back(ref[d]);
        for (int k = 0; k < nops; ++k) l.kst[k].push_back(strides[k][d]);
      }
    }
    if (l.rst[0].empty()) {
      for (int k = 0; k < nops; ++k) l.rst[k].push_back(0);  // a 0-dim tensor: one row of 1
    }
    l.rsize = {len};
    l.count = len;
  }
  mergeDims(&l.ksize, &l.kst);
  l.work = product(l.ksize);
  if (recipe.kind == RecipeKind::Row && l.count == 0) l.work = 0;
  return l;
}

ReduceLayout reduceLayout(const Recipe& recipe, const Call& call) {
  const int nops = call.num_outputs + call.num_inputs;
  std::vector<std::vector<int64_t>> shapes(nops), strides(nops);
  for (int k = 0; k < nops; ++k) {
    const flagosTensor& t =
        k < call.num_outputs ? call.outputs[k] : call.inputs[k - call.num_outputs];
    shapes[k].assign(t.shape, t.shape + t.ndim);
    strides[k].assign(t.strides, t.strides + t.ndim);
  }
  const flagosTensor& ref = recipe.kind == RecipeKind::Reduce ? call.inputs[0] : call.outputs[0];
  return reduceLayout(recipe, shapes, strides,
                      dimsMaskOf(recipe, call.scalars, call.num_scalars, ref.ndim));
}

uint64_t groupSize(const Target& target) {
  const Dialect* dl = dialectFor(target.language);
  return dl && dl->hasGroups() ? target.local_size : 0;
}

uint64_t segmentsPerGroup(const Target& target, int64_t rows) {
  const uint64_t group = groupSize(target);
  uint64_t per = 1;
  while (per * 2 * kSegment <= group && group % (per * 2) == 0 && rows % (per * 2) == 0) per *= 2;
  return per;
}

uint64_t groupScratchMax(uint64_t group) {
  uint64_t most = groupScratch(group);
  for (uint64_t per = 2; per * kSegment <= group && group % per == 0; per *= 2)
    most = std::max(most, per * groupScratch(group / per));
  return most;
}

ReduceStrategy reduceStrategy(const Recipe& recipe, const ReduceLayout& l, const Target& target) {
  // The input's strides: the kept dims' kst[1]; the reduced dims' rst[0]
  // (Reduce) or the first input's row stride (Row).
  const std::vector<int64_t>& kin = l.kst[1];
  const std::vector<int64_t>& rin = recipe.kind == RecipeKind::Reduce ? l.rst[0] : l.rst[1];
  // Row operators over a leading dim walk their strided rows, one item
  // each: a Columns form needs items past the work in every group, and
  // their stores (skipped by `if (live)`) were not reliably skipped by
  // PoCL 3.1 when they wrote where a real item does (a softmax's last row
  // came out scaled twice).
  const ReduceStrategy columns =
      recipe.kind == RecipeKind::Row ? ReduceStrategy::Rows : ReduceStrategy::Columns;
  if (l.rsize.empty() || l.count <= 1) return columns;
  int64_t kept = INT64_MAX;
  for (int64_t st : kin) kept = std::min(kept, magnitude(st));
  if (magnitude(rin.back()) >= kept) return columns;
  if (groupSize(target) > 1 && (l.ksize.empty() || l.rsize.back() >= kMinGroupRow))
    return ReduceStrategy::Group;
  return ReduceStrategy::Rows;
}

ReduceLayout reduceLayout(const Recipe& r, const Signature& sig) {
  std::vector<std::vector<int64_t>> shapes, strides;
  for (const Operand& o : sig.operands) {
    shapes.push_back(o.shape);
    strides.push_back(o.strides);
  }
  return reduceLayout(r, shapes, strides, sig.dims_mask);
}

int64_t reduceWorkItems(const Recipe& recipe, const ReduceLayout& l, ReduceStrategy strategy,
                        const Target& target) {
  const Dialect* dl = dialectFor(target.language);
  if (strategy != ReduceStrategy::Columns || !dl || !vectorColumns(recipe, *dl)) return l.work;
  const int64_t klast = l.ksize.empty() ? 1 : l.ksize.back(), w = dl->vectorWidth();
  return klast == 0 ? 0 : l.work / klast * ((klast + w - 1) / w);
}

Items reduceItems(const Recipe& r, const Signature& sig, const Target& target) {
  const Dialect* dl = dialectFor(target.language);
  switch (reduceStrategy(r, reduceLayout(r, sig), target)) {
    case ReduceStrategy::Group:
      return Items::Group;
    case ReduceStrategy::Columns:
      return dl->hasGroups() ? Items::Uniform : dl->hasRanges() ? Items::Range : Items::PerItem;
    default:
      return Items::PerItem;
  }
}

}  // namespace flagos::kernels
