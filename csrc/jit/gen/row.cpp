// The kernel body of a row operator (softmax, log_softmax and their
// backwards) for each strategy of Note [Reduction strategies]
// (reduce_layout.cpp).
//
// Every row operator is one or two passes over its row: the forward ones
// first find the row's max (kRowMax), then all four sum over the row and
// write it (kSumThenWrite): one template, and per operator a line of what
// to sum, the value the sum gives and what to write.
#include "jit/gen/emit.h"
#include "jit/gen/recipe.h"
#include "jit/gen/reduction.h"
#include "jit/gen/source_template.h"

namespace flagos::kernels {
namespace {

// ${_} is the indent: a generic kernel has the passes twice, for contiguous
// and for strided rows, one level deeper.

// Group on contiguous rows: vectors of ${W}, then the tail element by element.
constexpr const char* kGroupVectorWalk = R"(${_}{ const ${I} nv = ${n} / ${W};
${_}  for (${I} v = lane; v < nv; v += lanes) { const ${I} j = v * ${W}; ${body_v} }
${_}  for (${I} j = nv * ${W} + lane; j < ${n}; j += lanes) { ${body} } }
)";
constexpr const char* kGroupWalk = R"(${_}for (${I} j = lane; j < ${n}; j += lanes) { ${body} }
)";
// ${simd}: the dialect's vector-loop pragma (`omp simd`) or nothing.
constexpr const char* kSerialWalk = R"(${simd}${_}for (${I} j = 0; j < ${n}; ++j) { ${body} }
)";
// Note [Work-group combine helpers]: the segment's items' values.
constexpr const char* kCombine =
    R"(${_}${var} = flagos_segment_${op}_${suffix}(${var}, flagos_scratch_${scratch} + seg * (lanes + 1 + (lanes + 7) / 8), lane, lanes);
)";
// Declared where their pass starts: on PoCL every value live across a
// barrier (the combine helpers) is kept per item in memory.
constexpr const char* kSums = R"(${_}${A} sum = 0;
)";
constexpr const char* kVectorSums = R"(${_}${A} sum = 0;
${_}${VA} sv = (${VA})(0);
)";
constexpr const char* kFoldSum = R"(${_}sum += ${horizontal};
)";
// The max of the row into m. "c" rows keep NaN in a flag (the simd
// clause's max does not propagate it); vectors fold their lanes after.
constexpr const char* kRowMax = R"(${_}${E} m = -INFINITY;
${pass}${combine})";
constexpr const char* kNanFlaggedPass = R"(${_}int nan_ = 0;
${walk}${_}if (nan_) m = NAN;
)";
constexpr const char* kVectorMaxPass = R"(${_}${VE} mv = (${VE})(-INFINITY);
${walk}${_}m = flagos_max${es}(m, ${horizontal});
)";
constexpr const char* kSumThenWrite =
    R"(${sums}${sum_pass}${fold}${combine}${_}const ${E} ${name} = ${value};
${write_pass})";

}  // namespace

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
  const ReduceLayout l = reduceLayout(r, sig);
  const ReduceStrategy strategy = reduceStrategy(r, l, target);
  const bool group = strategy == ReduceStrategy::Group;
  const int width = group ? dl.vectorWidth() : 1;
  std::string s;
  IndexPlan plan{"gid", "nk", "ksize", {}, {}};
  for (int k = 0; k < nops; ++k) {
    s += "  " + i64 + " off" + str(k) + " = 0;\n";
    plan.stride_fields.push_back("kst[" + str(k) + "]");
    plan.offsets.push_back("off" + str(k));
  }
  s += indexCode(plan, baked, l.ksize, l.kst, i64, "rest");
  if (group) {
    const uint64_t scratch = groupScratchMax(groupSize(target));
    s += "  " + dl.localArray(et, "flagos_scratch_e", scratch) + "\n" + "  " +
         dl.localArray(at, "flagos_scratch_a", scratch) + "\n";
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
  auto put = [&](const std::string& v) { return dl.store(sig.operands[0].dtype, "p0", idx(0), v); };
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
  // reduction clause).
  const bool vector_rows = strategy == ReduceStrategy::Rows && !dl.simdLoop("").empty();
  // The passes for one addressing (contiguous or strided), indented by @p _.
  auto emitPasses = [&](bool contig, const std::string& _) {
    contiguous = contig;
    const bool vec = group && contig && width > 1;
    // One pass: @p body per element, @p body_v per vector of elements (vec).
    auto walk = [&](const std::string& body, const std::string& body_v, const std::string& clause) {
      if (group && vec) {
        return fillTemplate(kGroupVectorWalk, {{"_", _},
                                               {"I", i64},
                                               {"n", n},
                                               {"W", str(width)},
                                               {"body_v", body_v},
                                               {"body", body}});
      }
      if (group) return fillTemplate(kGroupWalk, {{"_", _}, {"I", i64}, {"n", n}, {"body", body}});
      const std::string simd = vector_rows && contig ? _ + dl.simdLoop(clause) + "\n" : "";
      return fillTemplate(kSerialWalk,
                          {{"simd", simd}, {"_", _}, {"I", i64}, {"n", n}, {"body", body}});
    };
    auto combine = [&](const std::string& var, const std::string& op, bool acc) -> std::string {
      if (!group) return "";
      return fillTemplate(kCombine, {{"_", _},
                                     {"var", var},
                                     {"op", op},
                                     {"suffix", acc ? asuf : esuf},
                                     {"scratch", acc ? "a" : "e"}});
    };
    auto horizontal = [&](Reducer reducer, flagosDtype_t d, const std::string& v) {
      return reductionFor(reducer, d, reducer == Reducer::Sum ? target.fp64 : f64, i64)
          .horizontal(dl, v, width);
    };
    std::string p;
    if (r.row == RowOp::Softmax || r.row == RowOp::LogSoftmax) {
      const std::string max_body = "m = flagos_max" + esuf + "(m, " + x(1) + ");";
      std::string pass;
      if (vector_rows && contig) {
        pass = fillTemplate(
            kNanFlaggedPass,
            {{"_", _},
             {"walk", walk("const " + et + " v = " + x(1) + "; nan_ |= v != v; m = v > m ? v : m;",
                           "", "max:m) reduction(|:nan_")}});
      } else if (vec) {
        pass = fillTemplate(
            kVectorMaxPass,
            {{"_", _},
             {"VE", vet},
             {"walk", walk(max_body,
                           "const " + vet + " xv = " + xv(1) +
                               "; mv = " + dl.vectorMaxMin(true, et, "mv", "xv") + ";",
                           "")},
             {"es", esuf},
             {"horizontal",
              horizontal(Reducer::Max, f64 ? FLAGOS_DTYPE_FLOAT64 : FLAGOS_DTYPE_FLOAT32, "mv")}});
      } else {
        pass = walk(max_body, "", "");
      }
      p += fillTemplate(
          kRowMax, {{"_", _}, {"E", et}, {"pass", pass}, {"combine", combine("m", "max", false)}});
    }
    // What each operator sums over its row (element, vector), the value the
    // sum gives, and what it writes.
    struct Passes {
      std::string sum, sum_v, name, value, write, write_v;
    };
    const std::string e1 = "exp(" + x(1) + " - m)", e1v = "exp(" + xv(1) + " - m)";
    const flagosDtype_t od = sig.operands[0].dtype;
    const bool out_is_e = od == (f64 ? FLAGOS_DTYPE_FLOAT64 : FLAGOS_DTYPE_FLOAT32);
    const std::string inverse = "(" + et + ")((" + at + ")1 / sum)";
    Passes ps;
    switch (r.row) {
      case RowOp::Softmax:
        if (out_is_e) {
          // One exp an element: the exponentials go to the output, then
          // scale by 1 / sum as CPU's softmax does. Each pass reads an
          // element before writing it, and the same item reads it again,
          // so an output that aliases the input is fine.
          ps = {"const " + et + " e = " + e1 + "; sum += e; " + put("e"),
                "const " + vet + " e = " + e1v + "; sv += " + toAcc("e") + "; " + putv("e"),
                "inv",
                inverse,
                put(x(0) + " * inv"),
                putv(xv(0) + " * inv")};
        } else {
          ps = {"sum += " + e1 + ";", "sv += " + toAcc(e1v) + ";", "inv", inverse,
                put(e1 + " * inv"),   putv(e1v + " * inv")};
        }
        break;
      case RowOp::LogSoftmax:
        ps = {"sum += " + e1 + ";",
              "sv += " + toAcc(e1v) + ";",
              "lse",
              "(" + et + ")log(sum)",
              put("(" + x(1) + " - m) - lse"),
              putv("(" + xv(1) + " - m) - lse")};
        break;
      case RowOp::SoftmaxBackward:  // inputs: grad_output (1), output (2)
        ps = {"sum += " + wide(1) + " * " + wide(2) + ";",
              "sv += " + widev(1) + " * " + widev(2) + ";",
              "dot",
              "(" + et + ")sum",
              put(x(2) + " * (" + x(1) + " - dot)"),
              putv(xv(2) + " * (" + xv(1) + " - dot)")};
        break;
      default:  // log_softmax backward: grad_output (1), output (2)
        ps = {"sum += " + wide(1) + ";",
              "sv += " + widev(1) + ";",
              "total",
              "(" + et + ")sum",
              put(x(1) + " - exp(" + x(2) + ") * total"),
              putv(xv(1) + " - exp(" + xv(2) + ") * total")};
        break;
    }
    p += fillTemplate(
        kSumThenWrite,
        {{"sums", vec ? fillTemplate(kVectorSums, {{"_", _}, {"A", at}, {"VA", vat}})
                      : fillTemplate(kSums, {{"_", _}, {"A", at}})},
         {"sum_pass", walk(ps.sum, ps.sum_v, "+:sum")},
         {"fold",
          vec ? fillTemplate(kFoldSum,
                             {{"_", _},
                              {"horizontal", horizontal(Reducer::Sum, FLAGOS_DTYPE_FLOAT32, "sv")}})
              : ""},
         {"combine", combine("sum", "sum", true)},
         {"_", _},
         {"E", et},
         {"name", ps.name},
         {"value", ps.value},
         {"write_pass", walk(ps.write, ps.write_v, "")}});
    return p;
  };
  if (!vector_rows && !group) return s + emitPasses(false, "  ");
  if (baked) {
    bool all_unit = true;
    for (int k = 0; k < nops; ++k) all_unit = all_unit && l.rst[k][0] == 1;
    return s + emitPasses(all_unit, "  ");
  }
  std::string cond;
  for (int k = 0; k < nops; ++k)
    cond += std::string(k ? " && " : "") + "meta.rst[" + str(k) + "] == 1";
  return s + "  if (" + cond + ") {\n" + emitPasses(true, "    ") + "  } else {\n" +
         emitPasses(false, "    ") + "  }\n";
}

}  // namespace flagos::kernels
