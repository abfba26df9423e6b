// Index and shape operators (catalog families index/shape): recipes, keys,
// launch meta and kernel bodies.
//
// Note [Index kernels]
// ~~~~~~~~~~~~~~~~~~~~
// * gather-like ops (index_select, gather, embedding, tril/triu, flip, cat,
//   constant_pad_nd): one work item per OUTPUT element; it finds its
//   coordinates in the output and reads one source element.
// * scatter-like ops (scatter.src/.value, scatter_add, index_add): one work
//   item per SOURCE element writing out[...]. "c" runs them serially (one
//   work item looping over all; torch CPU's order, so duplicate indices
//   give torch's result) and first copies self into out when they differ;
//   "opencl-c" takes only in-place calls (out is self) and adds atomically
//   (Dialect::parallelScatters).
// Out-of-range index values do not raise on this tier: gathers read 0,
// scatters skip the element. Only generic kernels (no shape baked in).
#include <algorithm>
#include <map>

#include "jit/gen/emit.h"
#include "jit/gen/source_template.h"

namespace flagos::kernels {
namespace {

constexpr int kMaxIndexDims = 8;  // meta arrays: keeps the struct < 1 KiB
constexpr int kMaxCatInputs = 8;
constexpr int kAux = 20;  // pad lo[8], self sizes[8], self numel, self ndim

const std::map<std::string, IndexOp>& indexOps() {
  static const std::map<std::string, IndexOp> kOps = {
      {"index_select", IndexOp::IndexSelect},
      {"gather", IndexOp::Gather},
      {"embedding", IndexOp::Embedding},
      {"scatter_src", IndexOp::ScatterSrc},
      {"scatter_value", IndexOp::ScatterValue},
      {"scatter_add", IndexOp::ScatterAdd},
      {"index_add", IndexOp::IndexAdd},
      {"tril", IndexOp::Tril},
      {"triu", IndexOp::Triu},
      {"flip", IndexOp::Flip},
      {"cat", IndexOp::Cat},
      {"constant_pad_nd", IndexOp::Pad},
  };
  return kOps;
}

bool isScatter(IndexOp op) {
  return op == IndexOp::ScatterSrc || op == IndexOp::ScatterValue || op == IndexOp::ScatterAdd ||
         op == IndexOp::IndexAdd;
}
bool isAdd(IndexOp op) {
  return op == IndexOp::ScatterAdd || op == IndexOp::IndexAdd;
}
// Which input holds the index values (-1: none).
int indexInput(IndexOp op) {
  switch (op) {
    case IndexOp::IndexSelect:
    case IndexOp::Gather:
    case IndexOp::Embedding:
    case IndexOp::ScatterSrc:
    case IndexOp::ScatterValue:
    case IndexOp::ScatterAdd:
    case IndexOp::IndexAdd:
      return 1;
    default:
      return -1;
  }
}
// Whether the op's scalar 0 is a normalized dim.
bool hasDim(IndexOp op) {
  return op != IndexOp::Embedding && op != IndexOp::Tril && op != IndexOp::Triu &&
         op != IndexOp::Flip && op != IndexOp::Pad;
}

bool reject(std::string* why_not, const std::string& why) {
  if (why_not) *why_not = why;
  return false;
}

int64_t numel(const flagosTensor& t) {
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.shape[d];
  return n;
}
bool sameLayout(const flagosTensor& a, const flagosTensor& b) {
  if (a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim; ++d)
    if (a.shape[d] != b.shape[d] || (a.shape[d] != 1 && a.strides[d] != b.strides[d])) return false;
  return true;
}
int64_t dimOf(const Call& call) {
  return call.num_scalars > 0 && call.scalars[0].dtype != 0 ? call.scalars[0].i : 0;
}

// constant_pad_nd's leading pads per dim, from the scalars ({len: 8}
// repeats a short list's last value: a pair is real when it matches the
// sizes). False when the pads do not explain the output's shape.
bool padsOf(const Call& call, int64_t lo[kMaxIndexDims]) {
  const flagosTensor &out = call.outputs[0], &in = call.inputs[0];
  for (int d = 0; d < kMaxIndexDims; ++d) lo[d] = 0;
  for (int i = 0; i < in.ndim; ++i) {
    const int d = in.ndim - 1 - i;
    const int64_t grow = out.shape[d] - in.shape[d];
    int64_t a = 0, b = 0;
    if (2 * i + 1 < 8) {
      a = call.scalars[2 * i].i;
      b = call.scalars[2 * i + 1].i;
    }
    if (a + b == grow) {
      lo[d] = a;
    } else if (grow != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool makeIndexRecipe(const OpInfo& op, Recipe* r, std::string* why_not) {
  auto it = indexOps().find(op.id);
  if (it == indexOps().end()) {
    return reject(why_not, op.family + " operator '" + op.id + "' has no generator recipe");
  }
  r->kind = RecipeKind::Index;
  r->index_op = it->second;
  return true;
}

bool indexFloatScalar(const Recipe& r, int k, flagosDtype_t out_dtype) {
  // Into an integer or bool output the value stays an int64: a double
  // would round values past 2^53 (and INT64_MAX to 2^63, which overflows).
  if (!isFloating(out_dtype)) return false;
  switch (r.index_op) {
    case IndexOp::ScatterValue:
    case IndexOp::IndexAdd:
      return k == 1;  // value, alpha
    case IndexOp::Pad:
      return k == 8;  // value
    default:
      return false;
  }
}

bool indexKeyFor(const Recipe& recipe, const Call& call, Variant variant, const Target& target,
                 KernelKey* key, std::string* why_not) {
  const std::string& id = recipe.id;
  const IndexOp op = recipe.index_op;
  const Dialect* dl = dialectFor(target.language);
  const bool parallel = dl && dl->parallelScatters();  // in place only, atomic adds
  if (variant == Variant::Specialized) return reject(why_not, id + ": generic kernel only");
  const bool cat = op == IndexOp::Cat;
  // constant_pad_nd's {pad, len: 8} arrives as 8 scalars.
  const int num_scalars = (int)recipe.scalars.size() + (op == IndexOp::Pad ? 7 : 0);
  if (call.num_outputs != 1 || call.num_scalars != num_scalars ||
      (cat ? call.num_inputs < 1 : call.num_inputs != (int)recipe.inputs.size())) {
    return reject(why_not, id + ": operand counts differ from the catalog's");
  }
  if (cat && call.num_inputs > kMaxCatInputs) return reject(why_not, "cat: more than 8 inputs");
  const int nops = 1 + call.num_inputs;
  auto operand = [&](int k) -> const flagosTensor& {
    return k == 0 ? call.outputs[0] : call.inputs[k - 1];
  };
  for (int k = 0; k < nops; ++k) {
    const flagosTensor& t = operand(k);
    if (t.ndim < 0 || t.ndim > kMaxIndexDims) return reject(why_not, id + ": more than 8 dims");
    if (t.data == nullptr && numel(t) != 0) return reject(why_not, id + ": an operand is None");
    if (!isSupportedDtype(t.dtype))
      return reject(why_not, id + std::string(": dtype ") + dtypeName(t.dtype));
    if (t.dtype == FLAGOS_DTYPE_FLOAT64 && !target.fp64)
      return reject(why_not, id + ": float64 on a device without fp64");
  }
  const flagosTensor& out = call.outputs[0];
  const flagosTensor& self = call.inputs[0];
  const int ix = indexInput(op);
  if (ix >= 0) {
    const flagosDtype_t d = call.inputs[ix].dtype;
    if (d != FLAGOS_DTYPE_INT64 && d != FLAGOS_DTYPE_INT32)
      return reject(why_not, id + ": index is not int64/int32");
  }
  const int64_t dim = dimOf(call);
  if (hasDim(op) && (dim < 0 || dim >= std::max(1, cat ? out.ndim : self.ndim)))
    return reject(why_not, id + ": the dim is not a normalized dim");
  auto same_rank = [&](std::initializer_list<int> ks) {
    for (int k : ks)
      if (operand(k).ndim != self.ndim) return false;
    return true;
  };
  bool shapes_ok = true;
  switch (op) {
    case IndexOp::IndexSelect:
      shapes_ok = same_rank({0}) && call.inputs[1].ndim <= 1;
      break;
    case IndexOp::Gather:
      shapes_ok = same_rank({0, 2});
      break;
    case IndexOp::Embedding:
      shapes_ok = self.ndim == 2 && out.ndim == call.inputs[1].ndim + 1;
      break;
    case IndexOp::Tril:
    case IndexOp::Triu:
      shapes_ok = self.ndim >= 2 && same_rank({0});
      break;
    case IndexOp::Flip: {
      // The encoding says "all dims" for dims=[] too, which torch does not
      // flip: decline it (and so a flip of every dim).
      const uint64_t all = (1ull << self.ndim) - 1;
      shapes_ok = same_rank({0});
      if ((uint64_t)call.scalars[0].i == all) return reject(why_not, id + ": flip of every dim");
      break;
    }
    case IndexOp::Pad: {
      int64_t lo[kMaxIndexDims];
      shapes_ok = same_rank({0}) && padsOf(call, lo);
      break;
    }
    case IndexOp::Cat:
      shapes_ok = out.ndim >= 1;
      for (int k = 1; k < nops; ++k) {
        const flagosTensor& t = operand(k);
        if (!(t.ndim == out.ndim || (t.ndim == 1 && numel(t) == 0))) shapes_ok = false;
      }
      break;
    case IndexOp::ScatterSrc:
    case IndexOp::ScatterAdd:
      shapes_ok = same_rank({0, 2, 3});
      break;
    case IndexOp::ScatterValue:
      shapes_ok = same_rank({0, 2});
      break;
    case IndexOp::IndexAdd:
      shapes_ok = same_rank({0, 3}) && call.inputs[1].ndim <= 1;
      break;
  }
  if (!shapes_ok) return reject(why_not, id + ": operand shapes are not the ones expected");
  if (isScatter(op)) {
    if (out.dtype != self.dtype || !sameLayout(out, self))
      return reject(why_not, id + ": out and self differ in dtype or shape");
    // One kernel cannot copy self first and then scatter in parallel.
    if (parallel && out.data != self.data)
      return reject(why_not, id + ": only the in-place form is generated for OpenCL");
    if (parallel && isAdd(op)) {
      const flagosDtype_t d = out.dtype;
      if (d != FLAGOS_DTYPE_FLOAT32 && d != FLAGOS_DTYPE_FLOAT64 && d != FLAGOS_DTYPE_INT32 &&
          d != FLAGOS_DTYPE_INT64)
        return reject(why_not, id + ": no atomic add for this dtype");
    }
  }

  genericKey(recipe, call, variant, target, key);
  return true;
}

uint64_t packIndex(const Recipe& recipe, const Call& call, const Target& target,
                   std::vector<int64_t>* meta) {
  const IndexOp op = recipe.index_op;
  const int nops = 1 + call.num_inputs;
  auto operand = [&](int k) -> const flagosTensor& {
    return k == 0 ? call.outputs[0] : call.inputs[k - 1];
  };
  // The iteration space: the output, or the scatter's source.
  const flagosTensor& it = op == IndexOp::IndexAdd ? call.inputs[2]
                           : isScatter(op)         ? call.inputs[1]
                                                   : call.outputs[0];
  const int64_t work = numel(it);
  const int64_t dim = hasDim(op) ? dimOf(call) : 0;  // embedding's scalar 0 is padding_idx
  meta->push_back(work);
  meta->push_back(it.ndim);
  for (int d = 0; d < kMaxIndexDims; ++d) meta->push_back(d < it.ndim ? it.shape[d] : 1);
  for (int k = 0; k < nops; ++k) {
    const flagosTensor& t = operand(k);
    for (int d = 0; d < kMaxIndexDims; ++d) meta->push_back(d < t.ndim ? t.strides[d] : 0);
  }
  // ext: each operand's size along dim (cat: 0 for the empty ones torch
  // skips; embedding: the number of rows).
  for (int k = 0; k < std::max(nops, 2); ++k) {
    const flagosTensor& t = operand(k < nops ? k : 0);
    int64_t e = t.ndim > dim ? t.shape[dim] : 1;
    if (op == IndexOp::Embedding) e = t.ndim > 0 ? t.shape[0] : 1;
    if (op == IndexOp::Cat && numel(t) == 0) e = 0;
    meta->push_back(e);
  }
  int64_t aux[kAux] = {};
  if (op == IndexOp::Pad) padsOf(call, aux);
  const flagosTensor& self = call.inputs[0];
  for (int d = 0; d < kMaxIndexDims; ++d) aux[8 + d] = d < self.ndim ? self.shape[d] : 1;
  aux[16] = numel(self);
  aux[17] = self.ndim;
  meta->insert(meta->end(), aux, aux + kAux);
  // Serial scatters are one work item (it also copies self).
  const Dialect* dl = dialectFor(target.language);
  if (isScatter(op) && dl && !dl->parallelScatters()) return 1;
  return static_cast<uint64_t>(work);
}

std::vector<MetaField> indexMetaLayout(int num_operands) {
  return {{"work", 1},
          {"ndim", 1},
          {"size", kMaxIndexDims},
          {"st[" + std::to_string(num_operands) + "]", kMaxIndexDims},
          {"ext", std::max(num_operands, 2)},
          {"aux", kAux}};
}

std::string indexPrelude(const Recipe& recipe, const Signature& sig, const Dialect& dl) {
  if (!dl.parallelScatters() || !isAdd(recipe.index_op)) return "";
  return dl.atomicsPrelude(sig.operands[0].dtype);
}

namespace {

// The texts of indexBody; Note [Source templates]. ${L} is the dialect's
// 64-bit integer, ${skip} its early exit of a work item.

// "c" runs scatters serially (Note [Index kernels]): self into out first,
// unless the call is in place, then one loop over the work.
constexpr const char* kSerialOpen = R"(  if ((const void*)p0 != (const void*)p1) {
    for (${L} e = 0; e < meta.aux[16]; ++e) {
      ${L} r = e, oo = 0, oi = 0;
      for (int d = (int)meta.aux[17] - 1; d >= 0; --d) {
        ${L} cc = r % meta.aux[8 + d]; r /= meta.aux[8 + d];
        oo += cc * meta.st[0][d]; oi += cc * meta.st[1][d]; }
      ${copy}
    } }
  for (${L} w = 0; w < meta.work; ++w) {
)";
constexpr const char* kParallelOpen = R"(  { const ${L} w = gid;
)";
// The work item's coordinates c from its number w.
constexpr const char* kCoordinates = R"(  ${L} c[${dims}] = {0};
  { ${L} r = w; for (int d = (int)meta.ndim - 1; d >= 0; --d) {
    c[d] = r % meta.size[d]; r /= meta.size[d]; } }
)";
// Offset o<k> of operand k at c (padding strides are 0).
constexpr const char* kOffset = R"(  ${L} o${k} = 0;
  for (int d = 0; d < ${dims}; ++d) o${k} += c[d] * meta.st[${k}][d];
)";
// The index value idx, in [0, meta.ext[bound]) or the work item is done.
constexpr const char* kIndex = R"(  const ${L} idx = (${L})${load};
  if (idx < 0 || idx >= meta.ext[${bound}]) { ${out_of_range}${skip}; }
)";
constexpr const char* kGather = R"(  o1 += (idx - c[${dim}]) * meta.st[1][${dim}];
  ${store}
)";
constexpr const char* kEmbeddingLast = R"(  const int last = (int)meta.ndim - 1;
)";
constexpr const char* kEmbedding =
    R"(  const ${L} o1 = idx * meta.st[1][0] + c[last] * meta.st[1][1];
  ${store}
)";
constexpr const char* kTriangle = R"(  const ${L} diff = c[meta.ndim - 1] - c[meta.ndim - 2];
  const int keep = diff ${compare} s0;
  ${store}
)";
constexpr const char* kFlip = R"(  for (int d = 0; d < (int)meta.ndim; ++d)
    if (s0 >> d & 1) c[d] = meta.size[d] - 1 - c[d];
)";
constexpr const char* kPad = R"(  int inside = 1;
  for (int d = 0; d < (int)meta.ndim; ++d) {
    c[d] -= meta.aux[d];
    if (c[d] < 0 || c[d] >= meta.aux[8 + d]) inside = 0; }
  if (!inside) { ${fill} ${skip}; }
)";
constexpr const char* kCatStart = R"(  ${L} j = c[${dim}];
)";
// Input k of cat takes the item when j falls in its extent along dim.
constexpr const char* kCatInput = R"(  if (j < meta.ext[${k}]) {
  c[${dim}] = j;
${offset}  ${store} ${skip}; }
  j -= meta.ext[${k}];
)";
constexpr const char* kScatter = R"(  o0 += (idx - c[${dim}]) * meta.st[0][${dim}];
  ${write}
)";
constexpr const char* kStatement = R"(  ${statement}
)";

}  // namespace

std::string indexBody(const Recipe& r, const Signature& sig, const Dialect& dl,
                      const Target& target) {
  const std::string L = dl.int64Type();
  const std::string dims = std::to_string(kMaxIndexDims);
  const IndexOp op = r.index_op;
  const int nops = static_cast<int>(sig.operands.size());
  const flagosDtype_t odt = sig.operands[0].dtype;
  const std::string T = !isFloating(odt) ? L : odt == FLAGOS_DTYPE_FLOAT64 ? "double" : "float";
  const bool serial = isScatter(op) && !dl.parallelScatters();
  auto load = [&](int k, const std::string& i) {
    return dl.load(sig.operands[k].dtype, "p" + std::to_string(k), i);
  };
  auto store = [&](const std::string& v) {
    return dl.store(odt, "p0", "o0", odt == FLAGOS_DTYPE_BOOL ? "(" + v + ") != 0" : v);
  };
  auto offset = [&](int k) {
    return fillTemplate(kOffset, {{"L", L}, {"k", std::to_string(k)}, {"dims", dims}});
  };
  auto index = [&](const std::string& at, int bound, const std::string& out_of_range) {
    return fillTemplate(kIndex, {{"L", L},
                                 {"load", load(2, at)},
                                 {"bound", std::to_string(bound)},
                                 {"out_of_range", out_of_range},
                                 {"skip", dl.skip()}});
  };
  auto statement = [&](const std::string& text) {
    return fillTemplate(kStatement, {{"statement", text}});
  };
  const std::string dim = "((int)s0)";
  const std::string zero = "(" + T + ")0";

  std::string s = serial
                      ? fillTemplate(kSerialOpen,
                                     {{"L", L}, {"copy", dl.store(odt, "p0", "oo", load(1, "oi"))}})
                      : fillTemplate(kParallelOpen, {{"L", L}});
  s += fillTemplate(kCoordinates, {{"L", L}, {"dims", dims}});
  switch (op) {
    case IndexOp::IndexSelect:
    case IndexOp::Gather: {
      const bool gather = op == IndexOp::Gather;
      s += offset(0) + offset(1) + (gather ? offset(2) : "");
      s += index(gather ? "o2" : "c[" + dim + "] * meta.st[2][0]", 1, store(zero));
      s += fillTemplate(kGather, {{"dim", dim}, {"store", store(load(1, "o1"))}});
      break;
    }
    case IndexOp::Embedding:
      s += offset(0) + offset(2) + kEmbeddingLast + index("o2", 1, store(zero));
      s += fillTemplate(kEmbedding, {{"L", L}, {"store", store(load(1, "o1"))}});
      break;
    case IndexOp::Tril:
    case IndexOp::Triu:
      s += offset(0) + offset(1);
      s += fillTemplate(kTriangle,
                        {{"L", L},
                         {"compare", op == IndexOp::Tril ? "<=" : ">="},
                         {"store", store("keep ? (" + T + ")" + load(1, "o1") + " : " + zero)}});
      break;
    case IndexOp::Flip:
      s += offset(0) + kFlip + offset(1) + statement(store(load(1, "o1")));
      break;
    case IndexOp::Pad:
      s += offset(0) + fillTemplate(kPad, {{"fill", store("(" + T + ")s8")}, {"skip", dl.skip()}});
      s += offset(1) + statement(store(load(1, "o1")));
      break;
    case IndexOp::Cat:
      s += offset(0) + fillTemplate(kCatStart, {{"L", L}, {"dim", dim}});
      for (int k = 1; k < nops; ++k) {
        const std::string o = "o" + std::to_string(k);
        s += fillTemplate(kCatInput, {{"k", std::to_string(k)},
                                      {"dim", dim},
                                      {"offset", offset(k)},
                                      {"store", store(load(k, o))},
                                      {"skip", dl.skip()}});
      }
      break;
    case IndexOp::ScatterSrc:
    case IndexOp::ScatterValue:
    case IndexOp::ScatterAdd:
    case IndexOp::IndexAdd: {
      const bool ia = op == IndexOp::IndexAdd;
      const int src = ia || op != IndexOp::ScatterValue ? 3 : -1;
      s += offset(0) + (src > 0 ? offset(src) : "") + (ia ? "" : offset(2));
      s += index(ia ? "c[" + dim + "] * meta.st[2][0]" : "o2", 0, "");
      std::string v = src > 0 ? "(" + T + ")" + load(src, "o3") : "(" + T + ")s1";
      if (ia) v = "(" + T + ")s1 * " + v;
      const std::string write = !isAdd(op) ? store(v)
                                : serial   ? store("(" + T + ")" + load(0, "o0") + " + " + v)
                                           : dl.atomicAdd(odt, "p0", "o0", v);
      s += fillTemplate(kScatter, {{"dim", dim}, {"write", write}});
      break;
    }
  }
  (void)target;
  return s + "  }\n";
}

bool inPlaceOnly(const Recipe& recipe, const std::string& language) {
  const Dialect* dl = dialectFor(language);
  return recipe.kind == RecipeKind::Index && isScatter(recipe.index_op) && dl &&
         dl->parallelScatters();
}

}  // namespace flagos::kernels
