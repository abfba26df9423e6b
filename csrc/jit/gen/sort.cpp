// Rank sorts (sort, topk) and index-returning reductions (argmax, argmin,
// max.dim, min.dim).
//
// Note [Sort kernels]
// ~~~~~~~~~~~~~~~~~~~
// * sort and topk are *rank sorts*: one work item per input element counts
//   the elements of its row (along `dim`) that sort before it and writes
//   the element and its position at that rank (topk: only ranks < k). Ties
//   are broken by position, so the order is stable, as torch's stable sort;
//   NaN sorts as the largest value (after +inf ascending, first
//   descending), as on CPU. A row costs O(len^2), so rows longer than
//   kMaxSortLen are sorted in several passes instead (Note [Long sorts]).
//   topk with largest sorts descending; sorted=False gets the sorted order
//   too (CPU's order is unspecified then).
// * argmax/argmin/max_dim/min_dim: one work item per output element walks
//   its reduced elements in row-major order and keeps the first max/min; a
//   NaN is both the max and the min, and the first NaN wins (torch CPU).
//   argmax/argmin without a dim reduce the flattened tensor. keepdim is
//   read from the outputs' shapes (checked against the scalar).
// * Any strides; float32/float64 (float64 only with target.fp64), the
//   16-bit floats (compared as float), the integer types and bool (compared
//   as int64). Only generic kernels (no shape baked in). An output that
//   shares memory with the input (out= aliasing self) is declined.
//
// Note [Long sorts]
// ~~~~~~~~~~~~~~~~~
// A row longer than kMaxSortLen is a per-row merge sort over scratch
// memory (Note [Multi-pass calls] in generator.h: the bridge appends two
// scratch outputs, positions as int64 and values in the input's dtype, and
// launches the one kernel sortPasses() times; meta.pass says which pass a
// launch is):
// * pass 0 sorts each block of kBlock elements of a row with the rank sort
//   above (O(kBlock) per element) and writes the sorted (position, value)
//   pairs to scratch buffer 0;
// * pass m >= 1 merges pairs of sorted blocks of width kBlock << (m - 1):
//   the element at position p of block b finds, by binary search, how many
//   elements of the partner block b ^ 1 sort before it, so its place in the
//   merged block is (b & ~1) * width + (p - b * width) + that count. The
//   comparison is the rank sort's (value, then original position: a strict
//   total order, NaN largest), so no two elements tie, every element lands
//   on its own place, and the order is stable. Passes ping-pong between
//   scratch buffers 0 and 1 (rows * len elements each); the last one writes
//   values and indices at their rank (topk: ranks < k) to the outputs.
// One work item per element in every pass, no barriers and no atomics, so
// it runs as is on the "c" dialect's threads; O(len log len) work per row
// in ceil(log2(len / kBlock)) + 1 launches; scratch is 2 * rows * len *
// (8 + element size) bytes. Values travel with positions, so a probe of
// the search reads one scratch value rather than a position and then the
// input element it names (markedly faster on the CPU backends); they go to
// scratch rather than the outputs, which may be strided or (topk) only k
// long. Passes between the first and the last skip the row's offsets. A
// four-way merge (three independent searches, half the passes) measured no
// faster on host and slower on PoCL. Why not a bitonic network or a radix
// sort: bitonic needs O(log^2 len) launches and pads to a power of two;
// radix needs per-dtype key transforms and a prefix sum (barriers or more
// launches). The merge keeps the rank sort's exact comparison, so NaN,
// -0.0 and stability match torch by construction. Rows of at most
// kMaxSortLen keep the one-launch rank sort.
#include <algorithm>
#include <functional>
#include <map>

#include "jit/gen/emit.h"
#include "jit/gen/source_template.h"

namespace flagos::kernels {
namespace {

constexpr int kD = FLAGOS_MAX_DIMS;
constexpr int64_t kMaxSortLen = 4096;  // longest row one rank sort takes
constexpr int64_t kBlock = 64;         // Note [Long sorts]: pass 0's blocks

struct SortRow {
  SortOp op;
  int num_outputs;
  int num_scalars;
};

const std::map<std::string, SortRow>& sortOps() {
  static const std::map<std::string, SortRow> kOps = {
      {"sort", {SortOp::Sort, 2, 3}},      {"topk", {SortOp::Topk, 2, 4}},
      {"argmax", {SortOp::Argmax, 1, 2}},  {"argmin", {SortOp::Argmin, 1, 2}},
      {"max_dim", {SortOp::MaxDim, 2, 2}}, {"min_dim", {SortOp::MinDim, 2, 2}},
  };
  return kOps;
}

bool reject(std::string* why_not, const std::string& why) {
  if (why_not) *why_not = why;
  return false;
}

bool isRankSort(SortOp op) {
  return op == SortOp::Sort || op == SortOp::Topk;
}

// What the kernel reads from flagos_meta.
struct Layout {
  int64_t work = 0, len = 1, k = 0;
  std::vector<int64_t> ksize, rsize, rst;
  std::vector<std::vector<int64_t>> kst;  // per operand
  int64_t ost[2] = {0, 0};                // outputs' strides along dim (rank sorts)
  // Note [Long sorts]: rows longer than kMaxSortLen, in `passes` launches
  // over two scratch buffers of `scratch` elements each.
  bool long_rows = false;
  int passes = 1;
  int64_t scratch = 0;
};

// The layout of @p call, or false with *why when the operands do not have
// the shapes the operator implies.
bool layoutOf(const Recipe& recipe, const Call& call, Layout* L, std::string* why) {
  const std::string& id = recipe.id;
  const SortOp op = recipe.sort_op;
  // Outputs past the catalog's are the scratch of a long sort: meta has
  // strides (kst) for the catalog's outputs and the input only.
  const int nout = sortOps().at(id).num_outputs;
  const flagosTensor& x = call.inputs[0];
  const int nd = x.ndim;
  if (nd < 0 || nd > kD) return reject(why, id + ": too many dims");
  for (int k = 0; k < call.num_outputs; ++k)
    if (call.outputs[k].ndim < 0 || call.outputs[k].ndim > kD)
      return reject(why, id + ": too many dims");
  auto scalar = [&](int k, int64_t* v) {
    if (k >= call.num_scalars || call.scalars[k].dtype == 0) return false;
    const flagosScalar& s = call.scalars[k];
    *v = isFloating(s.dtype) ? (int64_t)s.f : s.i;
    return true;
  };
  L->kst.assign(nout + 1, {});
  if (isRankSort(op)) {
    int64_t dim = 0;
    if (!scalar(1, &dim) || dim < 0 || dim >= std::max(nd, 1))
      return reject(why, id + ": the dim is not a normalized dim");
    L->len = nd ? x.shape[dim] : 1;
    L->k = L->len;
    if (op == SortOp::Topk && (!scalar(0, &L->k) || L->k < 0 || L->k > L->len))
      return reject(why, id + ": k out of range");
    for (int k = 0; k < nout; ++k) {
      const flagosTensor& o = call.outputs[k];
      bool same = o.ndim == nd;
      for (int d = 0; same && d < nd; ++d) same = o.shape[d] == (d == dim ? L->k : x.shape[d]);
      if (!same) return reject(why, id + ": output " + std::to_string(k) + " has the wrong shape");
      L->ost[k] = nd ? o.strides[dim] : 0;
    }
    int64_t rows = 1;
    for (int d = 0; d < nd; ++d) {
      if (d == dim) {
        L->rst.push_back(x.strides[d]);
        continue;
      }
      L->ksize.push_back(x.shape[d]);
      rows *= x.shape[d];
      for (int k = 0; k <= nout; ++k)
        L->kst[k].push_back(k < nout ? call.outputs[k].strides[d] : x.strides[d]);
    }
    if (L->rst.empty()) L->rst.push_back(0);
    L->rsize.push_back(L->len);
    L->work = rows * L->len;
    L->long_rows = L->len > kMaxSortLen && L->work > 0;
    if (L->long_rows) {
      for (int64_t width = kBlock; width < L->len; width *= 2) ++L->passes;
      // Pass 0 writes buffer 0; merges alternate, the last writes the outputs.
      L->scratch = (L->passes > 2 ? 2 : 1) * L->work;
    }
    return true;
  }
  // Reductions: dims reduced, and the output shape keepdim implies.
  int64_t dim = -1, keepdim = 0;
  const bool has_dim = scalar(0, &dim);
  scalar(1, &keepdim);
  if (has_dim && (dim < 0 || dim >= std::max(nd, 1)))
    return reject(why, id + ": the dim is not a normalized dim");
  if (!has_dim && (op == SortOp::MaxDim || op == SortOp::MinDim))
    return reject(why, id + ": no dim");
  std::vector<int64_t> want;
  std::vector<int> out_dim(nd, -1);  // output dim of each kept input dim
  for (int d = 0; d < nd; ++d) {
    const bool reduced = !has_dim || d == dim;
    if (reduced) {
      L->rsize.push_back(x.shape[d]);
      L->rst.push_back(x.strides[d]);
      L->len *= x.shape[d];
      if (keepdim) want.push_back(1);
    } else {
      out_dim[d] = (int)want.size();
      want.push_back(x.shape[d]);
    }
  }
  for (int k = 0; k < nout; ++k) {
    const flagosTensor& o = call.outputs[k];
    if (!std::equal(want.begin(), want.end(), o.shape, o.shape + o.ndim) ||
        o.ndim != (int)want.size())
      return reject(why, id + ": output " + std::to_string(k) + " has the wrong shape");
  }
  int64_t work = 1;
  for (int d = 0; d < nd; ++d) {
    if (out_dim[d] < 0) continue;
    L->ksize.push_back(x.shape[d]);
    work *= x.shape[d];
    for (int k = 0; k <= nout; ++k)
      L->kst[k].push_back(k < nout ? call.outputs[k].strides[out_dim[d]] : x.strides[d]);
  }
  if (L->len == 0 && work != 0) return reject(why, id + ": reduction over no elements");
  L->work = work;
  return true;
}

// Byte range [lo, hi) that @p t's elements span.
void extent(const flagosTensor& t, uintptr_t* lo, uintptr_t* hi) {
  intptr_t a = 0, b = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] == 0) {
      *lo = *hi = 0;
      return;
    }
    const intptr_t step = (intptr_t)((t.shape[d] - 1) * t.strides[d]);
    (step < 0 ? a : b) += step;
  }
  const intptr_t size = (intptr_t)FLAGOS_DTYPE_SIZE(t.dtype);
  *lo = (uintptr_t)t.data + a * size;
  *hi = (uintptr_t)t.data + (b + 1) * size;
}

bool overlap(const flagosTensor& x, const flagosTensor& y) {
  uintptr_t a0, a1, b0, b1;
  extent(x, &a0, &a1);
  extent(y, &b0, &b1);
  return a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1;
}

void put(std::vector<int64_t>* words, const std::vector<int64_t>& values, int count) {
  for (int i = 0; i < count; ++i) words->push_back(i < (int)values.size() ? values[i] : 0);
}

}  // namespace

bool isSortOp(const std::string& id) {
  return sortOps().count(id) != 0;
}

bool makeSortRecipe(const OpInfo& op, Recipe* r, std::string* why_not) {
  auto it = sortOps().find(op.id);
  if (it == sortOps().end()) return reject(why_not, "'" + op.id + "' has no sort recipe");
  if (op.num_outputs != it->second.num_outputs || op.inputs.size() != 1 ||
      (int)op.scalars.size() != it->second.num_scalars)
    return reject(why_not, op.id + ": catalog row has unexpected operands");
  r->kind = RecipeKind::Sort;
  r->sort_op = it->second.op;
  return true;
}

namespace {

// What keyFor checks but the scratch operand (Note [Long sorts]): @p call
// has the catalog's outputs, or those and a scratch (rank sorts).
bool checkCall(const Recipe& recipe, const Call& call, const Target& target, Layout* L,
               std::string* why_not) {
  const std::string& id = recipe.id;
  const SortRow& row = sortOps().at(id);
  const bool with_scratch = isRankSort(row.op) && call.num_outputs == row.num_outputs + 2;
  if ((call.num_outputs != row.num_outputs && !with_scratch) || call.num_inputs != 1 ||
      call.num_scalars != row.num_scalars)
    return reject(why_not, id + ": operand counts differ from the catalog's");
  const flagosDtype_t dt = call.inputs[0].dtype;
  if (!isSupportedDtype(dt)) return reject(why_not, id + std::string(": dtype ") + dtypeName(dt));
  if (dt == FLAGOS_DTYPE_FLOAT64 && !target.fp64)
    return reject(why_not, id + ": float64 on a device without fp64");
  const bool values_out = row.num_outputs == 2;
  for (int k = 0; k < row.num_outputs; ++k) {
    const flagosDtype_t want = values_out && k == 0 ? dt : FLAGOS_DTYPE_INT64;
    if (call.outputs[k].dtype != want)
      return reject(why_not, id + ": output " + std::to_string(k) + " is " +
                                 dtypeName(call.outputs[k].dtype) + ", expected " +
                                 dtypeName(want));
  }
  if (!layoutOf(recipe, call, L, why_not)) return false;
  if (L->work != 0) {
    if (call.inputs[0].data == nullptr) return reject(why_not, id + ": an operand is None");
    for (int k = 0; k < row.num_outputs; ++k)
      if (call.outputs[k].data == nullptr) return reject(why_not, id + ": an operand is None");
    // Work items read the whole row while others write: outputs must not
    // share memory with the input (torch allows sort(x, out=(x, i))).
    for (int k = 0; k < row.num_outputs; ++k)
      if (overlap(call.outputs[k], call.inputs[0]))
        return reject(why_not, id + ": an output overlaps the input");
  }
  return true;
}

// Note [Long sorts]: positions, then values.
std::vector<ScratchBuffer> scratchOf(flagosDtype_t dtype, const Layout& L) {
  return {{FLAGOS_DTYPE_INT64, L.scratch}, {dtype, L.scratch}};
}

}  // namespace

bool sortKeyFor(const Recipe& recipe, const Call& call, Variant variant, const Target& target,
                KernelKey* key, std::string* why_not) {
  const std::string& id = recipe.id;
  const SortRow& row = sortOps().at(id);
  if (variant == Variant::Specialized) return reject(why_not, id + ": generic kernel only");
  Layout L;
  if (!checkCall(recipe, call, target, &L, why_not)) return false;
  const bool with_scratch = call.num_outputs > row.num_outputs;
  if (L.long_rows && !with_scratch)
    return reject(why_not, id + ": rows longer than " + std::to_string(kMaxSortLen) +
                               " need a scratch operand (Note [Multi-pass calls])");
  if (with_scratch) {
    if (!L.long_rows)
      return reject(why_not,
                    id + ": a scratch operand for rows of at most " + std::to_string(kMaxSortLen));
    const std::vector<ScratchBuffer> want = scratchOf(call.inputs[0].dtype, L);
    for (size_t b = 0; b < want.size(); ++b) {
      const flagosTensor& s = call.outputs[row.num_outputs + b];
      if (s.dtype != want[b].dtype || s.ndim != 1 || s.shape[0] < want[b].elements ||
          (s.shape[0] > 1 && s.strides[0] != 1) || s.data == nullptr)
        return reject(why_not,
                      id + ": scratch " + std::to_string(b) + " is not a contiguous vector of " +
                          std::to_string(want[b].elements) + " " + dtypeName(want[b].dtype));
    }
  }
  genericKey(recipe, call, variant, target, key);
  return true;
}

std::vector<ScratchBuffer> sortScratch(const Recipe& recipe, const Call& call,
                                       const Target& target) {
  if (call.num_outputs != sortOps().at(recipe.id).num_outputs) return {};
  Layout L;
  if (!checkCall(recipe, call, target, &L, nullptr) || !L.long_rows) return {};
  return scratchOf(call.inputs[0].dtype, L);
}

int sortPasses(const Recipe& recipe, const Call& call) {
  Layout L;
  std::string why;
  if (!layoutOf(recipe, call, &L, &why)) return 1;
  return L.long_rows ? L.passes : 1;
}

std::vector<MetaField> sortMetaLayout(const Recipe& recipe, int num_operands) {
  // Strides for the catalog's operands (a long sort's scratch has none).
  num_operands = std::min(num_operands, sortOps().at(recipe.id).num_outputs + 1);
  return {{"work", 1},
          {"nk", 1},
          {"nr", 1},
          {"len", 1},
          {"k", 1},
          {"ksize", kD},
          {"kst[" + std::to_string(num_operands) + "]", kD},
          {"rsize", kD},
          {"rst", kD},
          {"ost", 2},
          {"pass", 1},
          {"width", 1},
          {"passes", 1}};
}

uint64_t packSort(const Recipe& recipe, const Call& call, const Target& target,
                  std::vector<int64_t>* meta, int pass) {
  Layout L;
  std::string why;
  if (!layoutOf(recipe, call, &L, &why)) return 0;  // keyFor accepted it
  meta->insert(meta->end(), {L.work, (int64_t)L.ksize.size(), (int64_t)L.rsize.size(), L.len, L.k});
  put(meta, L.ksize, kD);
  for (const auto& st : L.kst) put(meta, st, kD);
  put(meta, L.rsize, kD);
  put(meta, L.rst, kD);
  meta->insert(meta->end(), {L.ost[0], L.ost[1]});
  // Note [Long sorts]: pass 0 sorts blocks of kBlock; pass m merges blocks
  // of kBlock << (m - 1).
  const int64_t width = !L.long_rows ? 0 : pass == 0 ? kBlock : kBlock << (pass - 1);
  meta->insert(meta->end(), {pass, width, L.passes});
  return static_cast<uint64_t>(L.work);
}

namespace {

// The texts of sortBody; Note [Source templates]. ${I} is the dialect's
// 64-bit integer, ${T} the compute type, ${skip} the early exit of a work
// item, ${nu}/${nv} the NaN flags of u and v (empty for integers).

// The row's offsets off<k> in every strided operand, from its number.
constexpr const char* kRowOffsets = R"(  { ${I} rest = row;
    for (int d = (int)meta.nk - 1; d >= 0; --d) {
      const ${I} c = rest % meta.ksize[d]; rest /= meta.ksize[d];
${offsets}    } }
)";
// Scalar 2 is `descending` (sort) or `largest` (topk).
constexpr const char* kEitherOrder = R"(  if (s2) {
${descending}  } else {
${ascending}  }
)";
// Adds to `rank` the elements of [from, to) that sort before element j.
constexpr const char* kRankScan = R"(    for (${I} i = ${from}; i < ${to}; ++i) {
      const ${T} u = ${u};
${nu}      rank += (${before}) ? 1 : 0;
    }
)";
// Note [Long sorts]: pass 0 rank-sorts blocks of w into the scratch (p2
// positions, p3 values); each later pass merges neighbouring blocks, each
// element finding its place in the other block by binary search; the last
// pass writes the outputs.
constexpr const char* kLongSortBlocks =
    R"(  const ${I} xs = meta.rst[0], n = meta.len, w = meta.width;
  const ${I} sb = row * n;
  if (meta.pass == 0) {
  const ${I} bs = j - j % w;
  const ${I} be = bs + w < n ? bs + w : n;
  const ${T} v = ${v};
${nv}  ${I} rank = bs;
${scan}    ${put_position}
    ${put_value}
    ${skip};
  }
)";
constexpr const char* kLongSortMerge = R"(  const ${I} src = ((meta.pass - 1) & 1) * meta.work + sb;
  const ${I} me = ${me};
  const ${T} v = ${v};
${nv}  const ${I} b = j / w, ps = (b ^ 1) * w;
  ${I} lo = ps, hi = ps + w < n ? ps + w : n;
${search}  const ${I} rank = (b - (b & 1)) * w + (j - b * w) + (lo - ps);
  if (meta.pass + 1 < meta.passes) {
    ${put_position}
    ${put_value}
    ${skip};
  }
)";
constexpr const char* kBinarySearch = R"(    while (lo < hi) {
      const ${I} mid = lo + (hi - lo) / 2;
      const ${T} u = ${u};
${nu}      const int c = ${before};
      lo = c ? mid + 1 : lo;
      hi = c ? hi : mid;
    }
)";
constexpr const char* kRankSort = R"(  const ${I} xs = meta.rst[0];
  const ${T} v = ${v};
${nv}  ${I} rank = 0;
${scan})";
constexpr const char* kTopkCut = R"(  if (rank >= meta.k) ${skip};
)";
constexpr const char* kTwoStores = R"(  ${first}
  ${second}
)";
// First max/min in row-major order over the reduced dims; a NaN ends it.
constexpr const char* kArgBest = R"(  const ${I} inner_n = meta.nr ? meta.rsize[meta.nr - 1] : 1;
  const ${I} inner_st = meta.nr ? meta.rst[meta.nr - 1] : 0;
  const ${I} outer_n = inner_n ? meta.len / inner_n : 0;
  ${T} best = (${T})0;
  ${I} arg = 0;
  int first = 1, done = 0;
  for (${I} o = 0; o < outer_n && !done; ++o) {
    ${I} base = ${in_offset};
    { ${I} orest = o;
      for (int d = (int)meta.nr - 2; d >= 0; --d) {
        base += (orest % meta.rsize[d]) * meta.rst[d]; orest /= meta.rsize[d]; } }
    for (${I} jj = 0; jj < inner_n; ++jj) {
      const ${T} x = ${x};
      if (first || ${better}) {
        best = x; arg = o * inner_n + jj; first = 0;
${nan_ends}      }
    }
  }
)";

}  // namespace

std::string sortBody(const Recipe& r, const Signature& sig, const Dialect& dl,
                     const Target& target) {
  const std::string I = dl.int64Type();
  const SortOp op = r.sort_op;
  const int nops = static_cast<int>(sig.operands.size());
  const int in = nops - 1;
  const flagosDtype_t dt = sig.operands[in].dtype;
  const flagosDtype_t out_dt = sig.operands[0].dtype;
  const bool floating = isFloating(dt);
  const bool long_sort = isRankSort(op) && sig.num_outputs == 4;
  const std::string T = !floating ? I : dt == FLAGOS_DTYPE_FLOAT64 ? "double" : "float";
  auto P = [](int k) { return "p" + std::to_string(k); };
  auto load = [&](const std::string& off) { return "(" + T + ")" + dl.load(dt, P(in), off); };
  const std::string xoff = "off" + std::to_string(in);
  const std::string nu = floating ? "      const int nu = isnan(u) ? 1 : 0;\n" : "";
  const std::string nv = floating ? "  const int nv = isnan(v) ? 1 : 0;\n" : "";
  // Whether u (at position ui) sorts before v (at vj): NaN largest, ties by
  // position. Bitwise on 0/1 ints, not || and &&: no data-dependent branches.
  auto before = [&](bool descending, const std::string& ui, const std::string& vj) {
    const std::string tie = "((u == v) & (" + ui + " < " + vj + "))";
    const std::string less = descending ? "(u > v)" : "(u < v)";
    if (!floating) return less + " | " + tie;
    if (descending)
      return "nv ? (nu & (" + ui + " < " + vj + ")) : (nu | " + less + " | " + tie + ")";
    return "nv ? ((!nu) | (" + ui + " < " + vj + ")) : (" + less + " | " + tie + ")";
  };
  auto eitherOrder = [&](const std::function<std::string(bool)>& body) {
    return fillTemplate(kEitherOrder, {{"descending", body(true)}, {"ascending", body(false)}});
  };
  auto rankScan = [&](const std::string& from, const std::string& to) {
    return eitherOrder([&](bool descending) {
      return fillTemplate(kRankScan, {{"I", I},
                                      {"T", T},
                                      {"from", from},
                                      {"to", to},
                                      {"u", load(xoff + " + i * xs")},
                                      {"nu", nu},
                                      {"before", before(descending, "i", "j")}});
    });
  };
  auto outputs = [&](const std::string& value, const std::string& position) {
    return fillTemplate(
        kTwoStores,
        {{"first", dl.store(out_dt, P(0), "off0 + rank * meta.ost[0]", value)},
         {"second", dl.store(FLAGOS_DTYPE_INT64, P(1), "off1 + rank * meta.ost[1]", position)}});
  };
  const std::string topk_cut =
      op == SortOp::Topk ? fillTemplate(kTopkCut, {{"skip", dl.skip()}}) : "";

  std::string s = "  " + I + " row = gid;\n";
  if (isRankSort(op)) s += "  const " + I + " j = gid % meta.len;\n  row = gid / meta.len;\n";
  // Operands with strides in meta: the catalog's outputs and the input.
  std::vector<int> strided;
  for (int k = 0; k < sortOps().at(r.id).num_outputs; ++k) strided.push_back(k);
  strided.push_back(in);
  std::string offsets;
  for (size_t q = 0; q < strided.size(); ++q) {
    s += "  " + I + " off" + std::to_string(strided[q]) + " = 0;\n";
    offsets += "      off" + std::to_string(strided[q]) + " += c * meta.kst[" + std::to_string(q) +
               "][d];\n";
  }
  // Note [Long sorts]: merges between the first and the last pass use
  // scratch only.
  if (long_sort) s += "  if (meta.pass == 0 || meta.pass + 1 == meta.passes)";
  s += fillTemplate(kRowOffsets, {{"I", I}, {"offsets", offsets}});

  if (long_sort) {
    const std::string SP = P(2), SV = P(3);
    auto spos = [&](const std::string& at) { return dl.load(FLAGOS_DTYPE_INT64, SP, at); };
    auto sval = [&](const std::string& at) { return "(" + T + ")" + dl.load(dt, SV, at); };
    s += fillTemplate(kLongSortBlocks,
                      {{"I", I},
                       {"T", T},
                       {"v", load(xoff + " + j * xs")},
                       {"nv", nv},
                       {"scan", rankScan("bs", "be")},
                       {"put_position", dl.store(FLAGOS_DTYPE_INT64, SP, "sb + rank", "j")},
                       {"put_value", dl.store(dt, SV, "sb + rank", "v")},
                       {"skip", dl.skip()}});
    const std::string merged = "(meta.pass & 1) * meta.work + sb + rank";
    const std::string search = eitherOrder([&](bool descending) {
      return fillTemplate(kBinarySearch, {{"I", I},
                                          {"T", T},
                                          {"u", sval("src + mid")},
                                          {"nu", nu},
                                          {"before", before(descending, spos("src + mid"), "me")}});
    });
    s += fillTemplate(kLongSortMerge,
                      {{"I", I},
                       {"T", T},
                       {"me", spos("src + j")},
                       {"v", sval("src + j")},
                       {"nv", nv},
                       {"search", search},
                       {"put_position", dl.store(FLAGOS_DTYPE_INT64, SP, merged, "me")},
                       {"put_value", dl.store(dt, SV, merged, "v")},
                       {"skip", dl.skip()}});
    return s + topk_cut + outputs("v", "me");
  }
  if (isRankSort(op)) {
    s += fillTemplate(kRankSort, {{"I", I},
                                  {"T", T},
                                  {"v", load(xoff + " + j * xs")},
                                  {"nv", nv},
                                  {"scan", rankScan("0", "meta.len")}});
    return s + topk_cut + outputs("v", "j");
  }
  const bool max = op == SortOp::Argmax || op == SortOp::MaxDim;
  const std::string better =
      std::string(floating ? "isnan(x) || " : "") + "x " + (max ? ">" : "<") + " best";
  s += fillTemplate(kArgBest,
                    {{"I", I},
                     {"T", T},
                     {"in_offset", xoff},
                     {"x", load("base + jj * inner_st")},
                     {"better", better},
                     {"nan_ends", floating ? "        if (isnan(x)) { done = 1; break; }\n" : ""}});
  if (op == SortOp::MaxDim || op == SortOp::MinDim) {
    return s + fillTemplate(kTwoStores,
                            {{"first", dl.store(out_dt, P(0), "off0", "best")},
                             {"second", dl.store(FLAGOS_DTYPE_INT64, P(1), "off1", "arg")}});
  }
  (void)target;
  return s + "  (void)best;\n  " + dl.store(FLAGOS_DTYPE_INT64, P(0), "off0", "arg") + "\n";
}

}  // namespace flagos::kernels
