// Reductions (sum, mean, prod, amax, amin, any, all, ...) and row operators
// (softmax, log_softmax and their backwards): the layout of a call, the
// strategy its kernel uses, and the kernel bodies.
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
#include <sstream>

#include "jit/gen/emit.h"
#include "jit/gen/recipe.h"

namespace flagos::kernels {
namespace {

// Items of a Group segment (at most; a power of two dividing the group).
constexpr uint64_t kSegment = 32;
// Reduced elements an OpenCL Columns item takes between two barriers.
constexpr int kTile = 8;
// Outputs a "c" Columns block accumulates at once (doubles: 4 KiB).
constexpr int kBlock = 512;
// Rows shorter than this take Rows rather than Group.
constexpr int64_t kMinGroupRow = 64;

std::string str(int64_t v) {
  return std::to_string(v);
}

std::string lit(int64_t v, const std::string& i64) {
  return int64Literal(v, i64);
}

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

namespace {

ReduceLayout layoutOf(const Recipe& r, const Signature& sig) {
  std::vector<std::vector<int64_t>> shapes, strides;
  for (const Operand& o : sig.operands) {
    shapes.push_back(o.shape);
    strides.push_back(o.strides);
  }
  return reduceLayout(r, shapes, strides, sig.dims_mask);
}

// Whether an OpenCL-like Columns reduction gives each item a vector of
// outputs (Note [Reduction strategies]).
bool vectorColumns(const Recipe& r, const Dialect& dl) {
  return r.kind == RecipeKind::Reduce && dl.hasGroups() && dl.vectorWidth() > 1;
}

ReduceStrategy strategyFor(const Recipe& r, const ReduceLayout& l, const Target& target) {
  return reduceStrategy(r, l, target);
}

}  // namespace

int64_t reduceWorkItems(const Recipe& recipe, const ReduceLayout& l, ReduceStrategy strategy,
                        const Target& target) {
  const Dialect* dl = dialectFor(target.language);
  if (strategy != ReduceStrategy::Columns || !dl || !vectorColumns(recipe, *dl)) return l.work;
  const int64_t klast = l.ksize.empty() ? 1 : l.ksize.back(), w = dl->vectorWidth();
  return klast == 0 ? 0 : l.work / klast * ((klast + w - 1) / w);
}

Items reduceItems(const Recipe& r, const Signature& sig, const Target& target) {
  const Dialect* dl = dialectFor(target.language);
  switch (strategyFor(r, layoutOf(r, sig), target)) {
    case ReduceStrategy::Group:
      return Items::Group;
    case ReduceStrategy::Columns:
      return dl->hasGroups() ? Items::Uniform : dl->hasRanges() ? Items::Range : Items::PerItem;
    default:
      return Items::PerItem;
  }
}

namespace {

// What one reducer accumulates, as code: the accumulator's type, the type
// an element is loaded as, the identity, and how an element (or another
// accumulator) joins an accumulator, scalar and vector.
struct Reduction {
  Reducer reducer;
  std::string acc_type, x_type, identity;
  std::string group_op;   // flagos_group_<op>_<suffix>
  std::string suffix;     // f, d, l
  std::string simd;       // "c" reduction clause operator
  bool nan_flag = false;  // floating max/min: the vector loop keeps NaN aside

  // acc joined by x (an element, or for any/all a 0/1 accumulator too).
  std::string combine(const std::string& a, const std::string& x) const {
    switch (reducer) {
      case Reducer::Sum:
      case Reducer::Mean:
        return a + " + " + x;
      case Reducer::Prod:
        return a + " * " + x;
      case Reducer::Any:
        return "(" + a + " | (" + x + " != 0))";
      case Reducer::All:
        return "(" + a + " & (" + x + " != 0))";
      case Reducer::Max:
      case Reducer::Min: {
        const bool max = reducer == Reducer::Max;
        const std::string fn = suffix == "l" ? (max ? "flagos_imax" : "flagos_imin")
                                             : (max ? "flagos_max" : "flagos_min") + suffix;
        return fn + "(" + a + ", " + x + ")";
      }
    }
    return a;
  }
  // The same over vectors (@p x: a vector of x_type, a variable).
  std::string combineVector(const Dialect& dl, const std::string& a, const std::string& x) const {
    switch (reducer) {
      case Reducer::Sum:
      case Reducer::Mean:
        return a + " + " + (x_type == acc_type ? x : dl.convertVector(acc_type, x));
      case Reducer::Prod:
        return a + " * " + (x_type == acc_type ? x : dl.convertVector(acc_type, x));
      case Reducer::Any:
        return dl.vectorMaxMin(true, acc_type, a, dl.vectorTruth(x));
      case Reducer::All:
        return dl.vectorMaxMin(false, acc_type, a, dl.vectorTruth(x));
      case Reducer::Max:
      case Reducer::Min:
        return dl.vectorMaxMin(reducer == Reducer::Max, acc_type, a, x);
    }
    return a;
  }
  // The lanes of vector accumulator @p v joined, as one accumulator.
  std::string horizontal(const Dialect& dl, const std::string& v, int width) const {
    std::vector<std::string> lanes;
    for (int k = 0; k < width; ++k) lanes.push_back(dl.vectorLane(v, k));
    const Reducer join = reducer == Reducer::Any   ? Reducer::Max
                         : reducer == Reducer::All ? Reducer::Min
                                                   : reducer;
    Reduction r = *this;
    r.reducer = join;
    while (lanes.size() > 1) {
      std::vector<std::string> next;
      for (size_t k = 0; k + 1 < lanes.size(); k += 2)
        next.push_back("(" + r.combine(lanes[k], lanes[k + 1]) + ")");
      if (lanes.size() % 2) next.push_back(lanes.back());
      lanes = std::move(next);
    }
    return lanes[0];
  }
};

Reduction reductionFor(Reducer reducer, flagosDtype_t in, bool fp64, const std::string& i64) {
  Reduction r;
  r.reducer = reducer;
  const bool floating = isFloating(in);
  const std::string ftype = fp64 ? "double" : "float";
  const std::string i64max = i64 == "long" ? "0x7fffffffffffffffL" : "INT64_MAX";
  const std::string i64min = i64 == "long" ? "(-0x7fffffffffffffffL - 1)" : "INT64_MIN";
  switch (reducer) {
    case Reducer::Sum:
    case Reducer::Mean:
    case Reducer::Prod: {
      const bool prod = reducer == Reducer::Prod;
      r.acc_type = r.x_type = floating ? ftype : i64;
      r.identity = prod ? "1" : "0";
      r.group_op = prod ? "prod" : "sum";
      r.simd = prod ? "*" : "+";
      break;
    }
    case Reducer::Max:
    case Reducer::Min: {
      const bool max = reducer == Reducer::Max;
      r.acc_type = r.x_type = !floating ? i64 : in == FLAGOS_DTYPE_FLOAT64 ? "double" : "float";
      r.group_op = max ? "max" : "min";
      r.simd = r.group_op;
      r.nan_flag = floating;
      r.identity = floating ? (max ? "-INFINITY" : "INFINITY") : (max ? i64min : i64max);
      break;
    }
    case Reducer::Any:
    case Reducer::All: {
      // The element as 0/1 (NaN is true, as on CPU), joined by max / min.
      const bool any = reducer == Reducer::Any;
      r.acc_type = i64;
      r.x_type = floating ? ftype : i64;
      r.identity = any ? "0" : "1";
      r.group_op = any ? "max" : "min";
      r.simd = any ? "|" : "&";
      break;
    }
  }
  r.suffix = r.acc_type == "float" ? "f" : r.acc_type == "double" ? "d" : "l";
  return r;
}

}  // namespace

// --- reductions ---------------------------------------------------------------

std::string reduceBody(const Recipe& r, const Signature& sig, bool baked, const Dialect& dl,
                       const Target& target) {
  const std::string i64 = dl.int64Type();
  const Operand& out = sig.operands[0];
  const Operand& in = sig.operands[1];
  const ReduceLayout l = layoutOf(r, sig);
  const ReduceStrategy strategy = strategyFor(r, l, target);
  const Reduction red = reductionFor(r.reducer, in.dtype, target.fp64, i64);
  const bool minmax = r.reducer == Reducer::Max || r.reducer == Reducer::Min;
  const bool range = strategy == ReduceStrategy::Columns && dl.hasRanges();
  const bool uniform = strategy == ReduceStrategy::Columns && dl.hasGroups();
  const int nk = static_cast<int>(l.ksize.size()), nr = static_cast<int>(l.rsize.size());
  const int width = dl.vectorWidth();
  const std::string vacc = dl.vectorType(red.acc_type), vx = dl.vectorType(red.x_type);
  std::ostringstream s;

  // Sizes: runtime (meta) or baked.
  std::string inner_n, inner_st, outer_n, count;
  if (baked) {
    inner_n = lit(nr ? l.rsize.back() : 1, i64);
    inner_st = lit(nr ? l.rst[0].back() : 0, i64);
    outer_n = lit(nr && l.rsize.back() != 0 ? l.count / l.rsize.back() : nr ? 0 : 1, i64);
    count = lit(l.count, i64);
  } else {
    s << "  const " << i64 << " inner_n = meta.nr ? meta.rsize[meta.nr - 1] : 1;\n"
      << "  const " << i64 << " inner_st = meta.nr ? meta.rst[meta.nr - 1] : 0;\n"
      << "  const " << i64 << " outer_n = inner_n ? meta.count / inner_n : 0;\n";
    inner_n = "inner_n";
    inner_st = "inner_st";
    outer_n = "outer_n";
    count = "meta.count";
  }
  const bool inner_unit = nr && l.rst[0].back() == 1;  // baked only
  // An empty max/min has no value: the output is left as it is.
  if (minmax) s << "  if (" << count << " == 0) " << (range ? "return" : dl.skip()) << ";\n";
  // The offset of outer reduced element `o` added to `base`.
  auto outer = [&](const std::string& indent) {
    std::ostringstream o;
    if (baked) {
      std::vector<int64_t> osize(l.rsize.begin(), nr ? l.rsize.end() - 1 : l.rsize.end());
      std::vector<std::vector<int64_t>> ost{
          std::vector<int64_t>(l.rst[0].begin(), nr ? l.rst[0].end() - 1 : l.rst[0].end())};
      IndexPlan plan{"o", "", "", {""}, {"base"}};
      o << indexCode(plan, true, osize, ost, i64, "orest");
    } else {
      o << indent << "{ " << i64 << " orest = o;\n"
        << indent << "  for (int d = (int)meta.nr - 2; d >= 0; --d) {\n"
        << indent
        << "    base += (orest % meta.rsize[d]) * meta.rst[d]; orest /= meta.rsize[d]; } }\n";
    }
    return o.str();
  };
  auto load = [&](const std::string& index) {
    return "(" + red.x_type + ")" + dl.load(in.dtype, "p1", index);
  };
  auto value = [&](const std::string& acc) {
    std::string v = acc;
    if (r.reducer == Reducer::Mean) v = "(" + acc + ") / (" + red.acc_type + ")" + count;
    if (out.dtype == FLAGOS_DTYPE_BOOL) v = "(" + v + " != 0)";
    return v;
  };
  // Runtime or baked facts of the last kept dim.
  const std::string klast = baked ? lit(nk ? l.ksize.back() : 1, i64) : "klast";
  const std::string kin = baked ? lit(nk ? l.kst[1].back() : 0, i64) : "kin";
  const std::string kout = baked ? lit(nk ? l.kst[0].back() : 0, i64) : "kout";
  auto lastKept = [&]() {
    if (baked) return std::string();
    return "  const " + i64 + " klast = meta.nk ? meta.ksize[meta.nk - 1] : 1;\n" + "  const " +
           i64 + " kin = meta.nk ? meta.kst[1][meta.nk - 1] : 0;\n" + "  const " + i64 +
           " kout = meta.nk ? meta.kst[0][meta.nk - 1] : 0;\n";
  };
  const IndexPlan kept_plan{"gid", "nk", "ksize", {"kst[0]", "kst[1]"}, {"out_off", "in_off"}};

  if (range) {
    // "c" Columns: blocks of neighbouring outputs along the last kept dim.
    s << lastKept() << "  " << red.acc_type << " acc[" << kBlock << "];\n"
      << "  for (" << i64 << " b = rbegin; b < rend;) {\n"
      << "    " << i64 << " run = " << klast << " - b % " << klast << ";\n"
      << "    if (run > rend - b) run = rend - b;\n"
      << "    if (run > " << kBlock << ") run = " << kBlock << ";\n"
      << "    const " << i64 << " gid = b;\n"
      << "    " << i64 << " out_off = 0, in_off = 0;\n"
      << indexCode(kept_plan, baked, l.ksize, l.kst, i64, "rest") << "    for (" << i64
      << " t = 0; t < run; ++t) acc[t] = " << red.identity << ";\n";
    auto columns = [&](const std::string& step) {
      std::ostringstream c;
      c << "    for (" << i64 << " o = 0; o < " << outer_n << "; ++o) {\n"
        << "      " << i64 << " base = in_off;\n"
        << outer("      ") << "      for (" << i64 << " j = 0; j < " << inner_n << "; ++j) {\n"
        << "        const " << i64 << " at = base + j * " << inner_st << ";\n"
        << "        " << dl.simdLoop("") << "\n"
        << "        for (" << i64 << " t = 0; t < run; ++t) { const " << red.x_type
        << " x = " << load("at + t" + step) << "; acc[t] = " << red.combine("acc[t]", "x")
        << "; }\n"
        << "      }\n"
        << "    }\n";
      return c.str();
    };
    if (baked) {
      s << columns(nk && l.kst[1].back() == 1 ? "" : " * " + kin);
    } else {
      s << "    if (kin == 1) {\n"
        << columns("") << "    } else {\n"
        << columns(" * kin") << "    }\n";
    }
    s << "    for (" << i64 << " t = 0; t < run; ++t) { "
      << dl.store(out.dtype, "p0", "out_off + t * " + kout, value("acc[t]")) << " }\n"
      << "    b += run;\n"
      << "  }\n";
    return s.str();
  }

  if (uniform) {
    // OpenCL Columns: item gid owns outputs [first, first + cnt) of one run
    // of the last kept dim, as the lanes of a vector accumulator.
    const std::string w = str(width);
    s << lastKept() << "  const " << i64 << " chunks = (" << klast << " + " << (width - 1) << ") / "
      << width << ";\n"
      << "  const " << i64 << " first = (gid / chunks) * " << klast << " + (gid % chunks) * " << w
      << ";\n"
      << "  const " << i64 << " cnt = min((" << i64 << ")" << w << ", " << klast
      << " - (gid % chunks) * " << w << ");\n"
      << "  " << i64 << " out_off = 0, in_off = 0;\n";
    IndexPlan plan = kept_plan;
    plan.index = "first";
    s << indexCode(plan, baked, l.ksize, l.kst, i64, "rest");
    s << "  " << vacc << " acc = (" << vacc << ")(" << red.identity << ");\n";
    std::string lanes;
    for (int k = 0; k < width; ++k) {
      lanes += std::string(k ? ", " : "") + "(" + str(k) + " < cnt ? " +
               load("at + " + str(k) + " * " + kin) + " : (" + red.x_type + ")(" + red.identity +
               "))";
    }
    s << "  for (" << i64 << " o = 0; o < " << outer_n << "; ++o) {\n"
      << "    " << i64 << " base = in_off;\n"
      << outer("    ") << "    for (" << i64 << " j0 = 0; j0 < " << inner_n << "; j0 += " << kTile
      << ") {\n"
      << "      for (int u = 0; u < " << kTile << "; ++u) {\n"
      << "        const " << i64 << " j = j0 + u;\n"
      << "        if (j < " << inner_n << ") {\n"
      << "          const " << i64 << " at = base + j * " << inner_st << ";\n"
      << "          const " << vx << " x = cnt == " << w << " && " << kin << " == 1 ? "
      << dl.loadVector(in.dtype, "p1", "at", red.x_type) << " : (" << vx << ")(" << lanes << ");\n"
      << "          acc = " << red.combineVector(dl, "acc", "x") << ";\n"
      << "        }\n"
      << "      }\n"
      << "      " << dl.barrier() << "\n"
      << "    }\n"
      << "  }\n"
      << "  if (live) {\n";
    for (int k = 0; k < width; ++k) {
      s << "    if (" << k << " < cnt) "
        << dl.store(out.dtype, "p0", "out_off + " + str(k) + " * " + kout,
                    value(dl.vectorLane("acc", k)))
        << "\n";
    }
    s << "  }\n";
    return s.str();
  }

  s << "  " << i64 << " out_off = 0, in_off = 0;\n"
    << indexCode(kept_plan, baked, l.ksize, l.kst, i64, "rest") << "  " << red.acc_type
    << " acc = " << red.identity << ";\n";
  const std::string join = "acc = " + red.combine("acc", "x") + ";";

  if (strategy == ReduceStrategy::Group) {
    // A segment per output: vectors on contiguous rows, then the tail.
    s << "  " << dl.localArray(red.acc_type, "flagos_scratch", groupScratchMax(groupSize(target)))
      << "\n";
    std::string contiguous, strided;
    if (width > 1) {
      s << "  " << vacc << " vacc = (" << vacc << ")(" << red.identity << ");\n";
      contiguous = "      const " + i64 + " nv = " + inner_n + " / " + str(width) + ";\n" +
                   "      for (" + i64 + " v = lane; v < nv; v += lanes) { const " + vx +
                   " x = " + dl.loadVector(in.dtype, "p1", "base + v * " + str(width), red.x_type) +
                   "; vacc = " + red.combineVector(dl, "vacc", "x") + "; }\n" + "      for (" +
                   i64 + " j = nv * " + str(width) + " + lane; j < " + inner_n +
                   "; j += lanes) { const " + red.x_type + " x = " + load("base + j") + "; " +
                   join + " }\n";
    }
    strided = "      for (" + i64 + " j = lane; j < " + inner_n + "; j += lanes) { const " +
              red.x_type + " x = " + load("base + j * " + inner_st) + "; " + join + " }\n";
    s << "  for (" << i64 << " o = 0; o < " << outer_n << "; ++o) {\n"
      << "    " << i64 << " base = in_off;\n"
      << outer("    ");
    if (width == 1) {
      s << strided;
    } else if (baked) {
      s << (inner_unit ? contiguous : strided);
    } else {
      s << "    if (" << inner_st << " == 1) {\n"
        << contiguous << "    } else {\n"
        << strided << "    }\n";
    }
    s << "  }\n";
    if (width > 1)
      s << "  acc = " << red.combine("acc", red.horizontal(dl, "vacc", width)) << ";\n";
    s << "  acc = flagos_segment_" << red.group_op << "_" << red.suffix
      << "(acc, flagos_scratch + seg * (lanes + 1 + (lanes + 7) / 8), lane, lanes);\n"
      << "  if (lane == 0) " << dl.store(out.dtype, "p0", "out_off", value("acc")) << "\n";
    return s.str();
  }

  // Rows: one work item walks its output's elements.
  const std::string strided = "      for (" + i64 + " j = 0; j < " + inner_n + "; ++j) { const " +
                              red.x_type + " x = " + load("base + j * " + inner_st) + "; " + join +
                              " }\n";
  s << "  for (" << i64 << " o = 0; o < " << outer_n << "; ++o) {\n"
    << "    " << i64 << " base = in_off;\n"
    << outer("    ");
  const std::string simd = dl.simdLoop("");
  if (simd.empty()) {
    s << strided;
  } else {
    // A vector loop on contiguous rows; NaN kept aside for max/min (the
    // clause's max does not propagate it).
    std::string body = "const " + red.x_type + " x = " + load("base + j") + "; ";
    body += red.nan_flag
                ? "nan_ |= x != x; acc = x " + std::string(r.reducer == Reducer::Max ? ">" : "<") +
                      " acc ? x : acc;"
                : join;
    const std::string clause = red.simd + ":acc" + (red.nan_flag ? ") reduction(|:nan_" : "");
    const std::string contiguous = "      " + dl.simdLoop(clause) + "\n      for (" + i64 +
                                   " j = 0; j < " + inner_n + "; ++j) { " + body + " }\n";
    if (red.nan_flag) s << "    int nan_ = 0;\n";
    if (baked) {
      s << (inner_unit ? contiguous : strided);
    } else {
      s << "    if (" << inner_st << " == 1) {\n"
        << contiguous << "    } else {\n"
        << strided << "    }\n";
    }
    if (red.nan_flag) s << "    if (nan_) acc = NAN;\n";
  }
  s << "  }\n"
    << "  " << dl.store(out.dtype, "p0", "out_off", value("acc")) << "\n";
  return s.str();
}

// --- row operators ----------------------------------------------------------

std::string rowBody(const Recipe& r, const Signature& sig, bool baked, const Dialect& dl,
                    const Target& target) {
  const std::string i64 = dl.int64Type();
  const int nops = static_cast<int>(sig.operands.size());
  // Elements are computed in their own precision (float for float32 and
  // the 16-bit types: a vector holds twice the floats it holds doubles),
  // sums accumulate in double where the target has it.
  bool f64 = false;
  for (const Operand& o : sig.operands) f64 = f64 || o.dtype == FLAGOS_DTYPE_FLOAT64;
  const std::string et = f64 ? "double" : "float", esuf = f64 ? "d" : "f";
  const std::string at = target.fp64 ? "double" : "float", asuf = target.fp64 ? "d" : "f";
  const std::string vet = dl.vectorType(et), vat = dl.vectorType(at);
  const ReduceLayout l = layoutOf(r, sig);
  const ReduceStrategy strategy = strategyFor(r, l, target);
  const bool group = strategy == ReduceStrategy::Group;
  const int width = group ? dl.vectorWidth() : 1;
  const std::string S = "lanes", W = str(width);
  std::ostringstream s;
  IndexPlan plan{"gid", "nk", "ksize", {}, {}};
  for (int k = 0; k < nops; ++k) {
    s << "  " << i64 << " off" << k << " = 0;\n";
    plan.stride_fields.push_back("kst[" + str(k) + "]");
    plan.offsets.push_back("off" + str(k));
  }
  s << indexCode(plan, baked, l.ksize, l.kst, i64, "rest");
  if (group) {
    const uint64_t scratch = groupScratchMax(groupSize(target));
    s << "  " << dl.localArray(et, "flagos_scratch_e", scratch) << "\n"
      << "  " << dl.localArray(at, "flagos_scratch_a", scratch) << "\n";
  }
  const std::string n = baked ? lit(l.count, i64) : "meta.len";
  // Element j of operand k: contiguous (the row stride is 1) or strided.
  bool contiguous = false;
  auto rs = [&](int k) { return baked ? lit(l.rst[k][0], i64) : "meta.rst[" + str(k) + "]"; };
  auto idx = [&](int k) {
    return contiguous ? "off" + str(k) + " + j" : "off" + str(k) + " + j * " + rs(k);
  };
  auto x = [&](int k) {
    return "(" + et + ")" + dl.load(sig.operands[k].dtype, "p" + str(k), idx(k));
  };
  auto wide = [&](int k) {
    return "(" + at + ")" + dl.load(sig.operands[k].dtype, "p" + str(k), idx(k));
  };
  auto put = [&](const std::string& v) {
    const std::string st = dl.store(sig.operands[0].dtype, "p0", idx(0), v);
    return st;
  };
  // Vector forms (Group on contiguous rows), at element j.
  auto xv = [&](int k) {
    return dl.loadVector(sig.operands[k].dtype, "p" + str(k), "off" + str(k) + " + j", et);
  };
  auto widev = [&](int k) {
    return dl.loadVector(sig.operands[k].dtype, "p" + str(k), "off" + str(k) + " + j", at);
  };
  auto putv = [&](const std::string& v) {
    return dl.storeVector(sig.operands[0].dtype, "p0", "off0 + j", v, et);
  };
  auto toAcc = [&](const std::string& v) { return et == at ? v : dl.convertVector(at, v); };
  // "c" rows: each pass a vector loop (`omp simd`, the accumulation as its
  // reduction clause; the max keeps NaN in a flag: the clause's max does
  // not propagate it).
  const bool vector_rows = strategy == ReduceStrategy::Rows && !dl.simdLoop("").empty();
  // The passes for one addressing (contiguous or strided).
  auto emitPasses = [&](bool contig, const std::string& indent) {
    contiguous = contig;
    const bool vec = group && contig && width > 1;
    std::ostringstream p;
    // One pass: @p body per element, @p body_v per vector of elements (vec).
    auto walk = [&](const std::string& body, const std::string& body_v, const std::string& clause) {
      if (group && vec) {
        p << indent << "{ const " << i64 << " nv = " << n << " / " << W << ";\n"
          << indent << "  for (" << i64 << " v = lane; v < nv; v += " << S << ") { const " << i64
          << " j = v * " << W << "; " << body_v << " }\n"
          << indent << "  for (" << i64 << " j = nv * " << W << " + lane; j < " << n
          << "; j += " << S << ") { " << body << " } }\n";
      } else if (group) {
        p << indent << "for (" << i64 << " j = lane; j < " << n << "; j += " << S << ") { " << body
          << " }\n";
      } else {
        if (vector_rows && contig) p << indent << dl.simdLoop(clause) << "\n";
        p << indent << "for (" << i64 << " j = 0; j < " << n << "; ++j) { " << body << " }\n";
      }
    };
    // Note [Work-group combine helpers]: the segment's items' values.
    auto combine = [&](const std::string& var, const std::string& op, bool acc) {
      if (!group) return;
      p << indent << var << " = flagos_segment_" << op << "_" << (acc ? asuf : esuf) << "(" << var
        << ", flagos_scratch_" << (acc ? "a" : "e")
        << " + seg * (lanes + 1 + (lanes + 7) / 8), lane, lanes);\n";
    };
    // A vector sum `sv` folded into `sum` after a vector pass.
    auto foldSum = [&]() {
      if (vec) {
        const Reduction sum_red =
            reductionFor(Reducer::Sum, FLAGOS_DTYPE_FLOAT32, target.fp64, i64);
        p << indent << "sum += " << sum_red.horizontal(dl, "sv", width) << ";\n";
      }
    };
    // Declared where their pass starts: on PoCL every value live across a
    // barrier (the combine helpers) is kept per item in memory.
    auto sums = [&]() {
      p << indent << at << " sum = 0;\n";
      if (vec) p << indent << vat << " sv = (" << vat << ")(0);\n";
    };
    if (r.row == RowOp::Softmax || r.row == RowOp::LogSoftmax) {
      p << indent << et << " m = -INFINITY;\n";
      if (vector_rows && contig) {
        p << indent << "int nan_ = 0;\n";
        walk("const " + et + " v = " + x(1) + "; nan_ |= v != v; m = v > m ? v : m;", "",
             "max:m) reduction(|:nan_");
        p << indent << "if (nan_) m = NAN;\n";
      } else if (vec) {
        const Reduction max_red =
            reductionFor(Reducer::Max, f64 ? FLAGOS_DTYPE_FLOAT64 : FLAGOS_DTYPE_FLOAT32, f64, i64);
        p << indent << vet << " mv = (" << vet << ")(-INFINITY);\n";
        walk("m = flagos_max" + esuf + "(m, " + x(1) + ");",
             "const " + vet + " xv = " + xv(1) + "; mv = " + dl.vectorMaxMin(true, et, "mv", "xv") +
                 ";",
             "");
        p << indent << "m = flagos_max" << esuf << "(m, " << max_red.horizontal(dl, "mv", width)
          << ");\n";
      } else {
        walk("m = flagos_max" + esuf + "(m, " + x(1) + ");", "", "");
      }
      combine("m", "max", false);
      sums();
      const flagosDtype_t od = sig.operands[0].dtype;
      const bool out_is_e = od == (f64 ? FLAGOS_DTYPE_FLOAT64 : FLAGOS_DTYPE_FLOAT32);
      if (r.row == RowOp::Softmax && out_is_e) {
        // One exp an element: the exponentials go to the output, then scale
        // by 1 / sum as CPU's softmax does. Each pass reads an element before
        // writing it, and the same item reads it again, so an output that
        // aliases the input is fine.
        walk("const " + et + " e = exp(" + x(1) + " - m); sum += e; " + put("e"),
             "const " + vet + " e = exp(" + xv(1) + " - m); sv += " + toAcc("e") + "; " + putv("e"),
             "+:sum");
        foldSum();
        combine("sum", "sum", true);
        p << indent << "const " << et << " inv = (" << et << ")((" << at << ")1 / sum);\n";
        walk(put(x(0) + " * inv"), putv(xv(0) + " * inv"), "");
      } else if (r.row == RowOp::Softmax) {
        walk("sum += exp(" + x(1) + " - m);", "sv += " + toAcc("exp(" + xv(1) + " - m)") + ";",
             "+:sum");
        foldSum();
        combine("sum", "sum", true);
        p << indent << "const " << et << " inv = (" << et << ")((" << at << ")1 / sum);\n";
        walk(put("exp(" + x(1) + " - m) * inv"), putv("exp(" + xv(1) + " - m) * inv"), "");
      } else {
        walk("sum += exp(" + x(1) + " - m);", "sv += " + toAcc("exp(" + xv(1) + " - m)") + ";",
             "+:sum");
        foldSum();
        combine("sum", "sum", true);
        p << indent << "const " << et << " lse = (" << et << ")log(sum);\n";
        walk(put("(" + x(1) + " - m) - lse"), putv("(" + xv(1) + " - m) - lse"), "");
      }
    } else {
      // Inputs: grad_output (operand 1), output (operand 2).
      sums();
      if (r.row == RowOp::SoftmaxBackward) {
        walk("sum += " + wide(1) + " * " + wide(2) + ";",
             "sv += " + widev(1) + " * " + widev(2) + ";", "+:sum");
        foldSum();
        combine("sum", "sum", true);
        p << indent << "const " << et << " dot = (" << et << ")sum;\n";
        walk(put(x(2) + " * (" + x(1) + " - dot)"), putv(xv(2) + " * (" + xv(1) + " - dot)"), "");
      } else {
        walk("sum += " + wide(1) + ";", "sv += " + widev(1) + ";", "+:sum");
        foldSum();
        combine("sum", "sum", true);
        p << indent << "const " << et << " total = (" << et << ")sum;\n";
        walk(put(x(1) + " - exp(" + x(2) + ") * total"),
             putv(xv(1) + " - exp(" + xv(2) + ") * total"), "");
      }
    }
    return p.str();
  };
  if (!vector_rows && !group) {
    s << emitPasses(false, "  ");
  } else if (baked) {
    bool all_unit = true;
    for (int k = 0; k < nops; ++k) all_unit = all_unit && l.rst[k][0] == 1;
    s << emitPasses(all_unit, "  ");
  } else {
    std::string cond;
    for (int k = 0; k < nops; ++k)
      cond += std::string(k ? " && " : "") + "meta.rst[" + str(k) + "] == 1";
    s << "  if (" << cond << ") {\n"
      << emitPasses(true, "    ") << "  } else {\n"
      << emitPasses(false, "    ") << "  }\n";
  }
  return s.str();
}

}  // namespace flagos::kernels
