// The kernel body of a reduction (sum, mean, prod, amax, amin, any, all,
// ...) for each strategy of Note [Reduction strategies] (reduce_layout.cpp).
#include "jit/gen/emit.h"
#include "jit/gen/recipe.h"
#include "jit/gen/reduction.h"
#include "jit/gen/source_template.h"

namespace flagos::kernels {
namespace {

// Reduced elements an OpenCL Columns item takes between two barriers.
constexpr int kTile = 8;
// Outputs a "c" Columns block accumulates at once (doubles: 4 KiB).
constexpr int kBlock = 512;

// The reduced extent of a generic kernel, from meta: the last reduced dim
// (inner) and the others (outer).
constexpr const char* kRuntimeSizes =
    R"(  const ${I} inner_n = meta.nr ? meta.rsize[meta.nr - 1] : 1;
  const ${I} inner_st = meta.nr ? meta.rst[meta.nr - 1] : 0;
  const ${I} outer_n = inner_n ? meta.count / inner_n : 0;
)";
// The last kept dim of a generic kernel (Columns).
constexpr const char* kLastKept = R"(  const ${I} klast = meta.nk ? meta.ksize[meta.nk - 1] : 1;
  const ${I} kin = meta.nk ? meta.kst[1][meta.nk - 1] : 0;
  const ${I} kout = meta.nk ? meta.kst[0][meta.nk - 1] : 0;
)";
// An empty max/min has no value: the output is left as it is.
constexpr const char* kEmptyMinMax = R"(  if (${count} == 0) ${leave};
)";
// The offset of outer reduced element `o` added to `base` (generic).
constexpr const char* kOuterOffset = R"(${_}{ ${I} orest = o;
${_}  for (int d = (int)meta.nr - 2; d >= 0; --d) {
${_}    base += (orest % meta.rsize[d]) * meta.rst[d]; orest /= meta.rsize[d]; } }
)";
// Every strategy's walk over the outer reduced elements; ${inner} walks
// the last reduced dim from `base`.
constexpr const char* kOuterLoop = R"(${_}for (${I} o = 0; o < ${outer_n}; ++o) {
${_}  ${I} base = in_off;
${outer}${inner}${_}}
)";
// A generic kernel's choice between its unit-stride and strided loops.
constexpr const char* kUnitOrStrided = R"(${_}if (${unit_stride}) {
${unit}${_}} else {
${strided}${_}}
)";

// "c" Columns: blocks of neighbouring outputs along the last kept dim.
constexpr const char* kRangeColumns = R"(${last_kept}  ${A} acc[${block}];
  for (${I} b = rbegin; b < rend;) {
    ${I} run = ${klast} - b % ${klast};
    if (run > rend - b) run = rend - b;
    if (run > ${block}) run = ${block};
    const ${I} gid = b;
    ${I} out_off = 0, in_off = 0;
${kept_index}    for (${I} t = 0; t < run; ++t) acc[t] = ${identity};
${columns}    for (${I} t = 0; t < run; ++t) { ${store} }
    b += run;
  }
)";
constexpr const char* kRangeColumnsInner = R"(      for (${I} j = 0; j < ${inner_n}; ++j) {
        const ${I} at = base + j * ${inner_st};
        ${simd}
        for (${I} t = 0; t < run; ++t) { const ${X} x = ${x}; acc[t] = ${combine}; }
      }
)";

// OpenCL Columns: item gid owns outputs [first, first + cnt) of one run of
// the last kept dim, as the lanes of a vector accumulator.
constexpr const char* kVectorColumns =
    R"(${last_kept}  const ${I} chunks = (${klast} + ${W_1}) / ${W};
  const ${I} first = (gid / chunks) * ${klast} + (gid % chunks) * ${W};
  const ${I} cnt = min((${I})${W}, ${klast} - (gid % chunks) * ${W});
  ${I} out_off = 0, in_off = 0;
${kept_index}  ${VA} acc = (${VA})(${identity});
${loop}  if (live) {
${stores}  }
)";
constexpr const char* kVectorColumnsInner =
    R"(    for (${I} j0 = 0; j0 < ${inner_n}; j0 += ${tile}) {
      for (int u = 0; u < ${tile}; ++u) {
        const ${I} j = j0 + u;
        if (j < ${inner_n}) {
          const ${I} at = base + j * ${inner_st};
          const ${VX} x = cnt == ${W} && ${kin} == 1 ? ${vector_load} : (${VX})(${lanes});
          acc = ${combine};
        }
      }
      ${barrier}
    }
)";
constexpr const char* kLaneStore = R"(    if (${k} < cnt) ${store}
)";

// Group and Rows: one output per item (Rows) or per segment (Group).
constexpr const char* kOneOutput = R"(  ${I} out_off = 0, in_off = 0;
${kept_index}  ${A} acc = ${identity};
)";
// Group: vectors on contiguous rows, then the tail; the segment's items
// combine (Note [Work-group combine helpers]).
constexpr const char* kGroup = R"(  ${scratch}
${vector_acc}${loop}${fold}  acc = flagos_segment_${op}_${suffix}(acc, flagos_scratch + seg * (lanes + 1 + (lanes + 7) / 8), lane, lanes);
  if (lane == 0) ${store}
)";
constexpr const char* kGroupVectorAcc = R"(  ${VA} vacc = (${VA})(${identity});
)";
constexpr const char* kGroupFold = R"(  acc = ${combine};
)";
constexpr const char* kGroupContiguous = R"(      const ${I} nv = ${inner_n} / ${W};
      for (${I} v = lane; v < nv; v += lanes) { const ${VX} x = ${vector_load}; vacc = ${combine_v}; }
      for (${I} j = nv * ${W} + lane; j < ${inner_n}; j += lanes) { const ${X} x = ${x}; ${join} }
)";
constexpr const char* kGroupStrided =
    R"(      for (${I} j = lane; j < ${inner_n}; j += lanes) { const ${X} x = ${x}; ${join} }
)";
// Rows: one work item walks its output's elements; "c" contiguous rows as
// a vector loop, NaN kept aside for max/min (the clause's max does not
// propagate it).
constexpr const char* kRows = R"(${loop}  ${store}
)";
constexpr const char* kRowsStrided =
    R"(      for (${I} j = 0; j < ${inner_n}; ++j) { const ${X} x = ${x}; ${join} }
)";
constexpr const char* kRowsContiguous = R"(      ${simd}
      for (${I} j = 0; j < ${inner_n}; ++j) { ${body} }
)";
constexpr const char* kNanFlagged = R"(    int nan_ = 0;
${walk}    if (nan_) acc = NAN;
)";

}  // namespace

std::string reduceBody(const Recipe& r, const Signature& sig, bool baked, const Dialect& dl,
                       const Target& target) {
  const std::string i64 = dl.int64Type();
  const Operand& out = sig.operands[0];
  const Operand& in = sig.operands[1];
  const ReduceLayout l = reduceLayout(r, sig);
  const ReduceStrategy strategy = reduceStrategy(r, l, target);
  const Reduction red = reductionFor(r.reducer, in.dtype, target.fp64, i64);
  const bool minmax = r.reducer == Reducer::Max || r.reducer == Reducer::Min;
  const bool range = strategy == ReduceStrategy::Columns && dl.hasRanges();
  const bool uniform = strategy == ReduceStrategy::Columns && dl.hasGroups();
  const int nk = static_cast<int>(l.ksize.size()), nr = static_cast<int>(l.rsize.size());
  const int width = dl.vectorWidth();
  const std::string vacc = dl.vectorType(red.acc_type), vx = dl.vectorType(red.x_type);
  std::string s;

  // Sizes: runtime (meta) or baked.
  std::string inner_n, inner_st, outer_n, count;
  if (baked) {
    inner_n = lit(nr ? l.rsize.back() : 1, i64);
    inner_st = lit(nr ? l.rst[0].back() : 0, i64);
    outer_n = lit(nr && l.rsize.back() != 0 ? l.count / l.rsize.back() : nr ? 0 : 1, i64);
    count = lit(l.count, i64);
  } else {
    s += fillTemplate(kRuntimeSizes, {{"I", i64}});
    inner_n = "inner_n";
    inner_st = "inner_st";
    outer_n = "outer_n";
    count = "meta.count";
  }
  const bool inner_unit = nr && l.rst[0].back() == 1;  // baked only
  if (minmax) {
    s += fillTemplate(kEmptyMinMax, {{"count", count}, {"leave", range ? "return" : dl.skip()}});
  }
  // The walk over the outer reduced elements at indent @p _, @p inner inside.
  auto outerLoop = [&](const std::string& _, const std::string& inner) {
    std::string offset;
    if (baked) {
      std::vector<int64_t> osize(l.rsize.begin(), nr ? l.rsize.end() - 1 : l.rsize.end());
      std::vector<std::vector<int64_t>> ost{
          std::vector<int64_t>(l.rst[0].begin(), nr ? l.rst[0].end() - 1 : l.rst[0].end())};
      IndexPlan plan{"o", "", "", {""}, {"base"}};
      offset = indexCode(plan, true, osize, ost, i64, "orest");
    } else {
      offset = fillTemplate(kOuterOffset, {{"_", _ + "  "}, {"I", i64}});
    }
    return fillTemplate(
        kOuterLoop,
        {{"_", _}, {"I", i64}, {"outer_n", outer_n}, {"outer", offset}, {"inner", inner}});
  };
  // Baked kernels know whether the walk is unit-stride; generic ones test.
  auto unitOrStrided = [&](bool baked_unit, const std::string& _, const std::string& unit_stride,
                           const std::string& unit, const std::string& strided) {
    if (baked) return baked_unit ? unit : strided;
    return fillTemplate(
        kUnitOrStrided,
        {{"_", _}, {"unit_stride", unit_stride}, {"unit", unit}, {"strided", strided}});
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
  const std::string last_kept = baked ? "" : fillTemplate(kLastKept, {{"I", i64}});
  const IndexPlan kept_plan{"gid", "nk", "ksize", {"kst[0]", "kst[1]"}, {"out_off", "in_off"}};

  if (range) {
    auto columns = [&](const std::string& step) {
      return outerLoop("    ",
                       fillTemplate(kRangeColumnsInner, {{"I", i64},
                                                         {"inner_n", inner_n},
                                                         {"inner_st", inner_st},
                                                         {"simd", dl.simdLoop("")},
                                                         {"X", red.x_type},
                                                         {"x", load("at + t" + step)},
                                                         {"combine", red.combine("acc[t]", "x")}}));
    };
    return s +
           fillTemplate(
               kRangeColumns,
               {{"last_kept", last_kept},
                {"A", red.acc_type},
                {"block", str(kBlock)},
                {"I", i64},
                {"klast", klast},
                {"kept_index", indexCode(kept_plan, baked, l.ksize, l.kst, i64, "rest")},
                {"identity", red.identity},
                {"columns", unitOrStrided(nk && l.kst[1].back() == 1, "    ", "kin == 1",
                                          columns(""), columns(" * " + kin))},
                {"store", dl.store(out.dtype, "p0", "out_off + t * " + kout, value("acc[t]"))}});
  }

  if (uniform) {
    IndexPlan plan = kept_plan;
    plan.index = "first";
    std::string lanes, stores;
    for (int k = 0; k < width; ++k) {
      lanes += std::string(k ? ", " : "") + "(" + str(k) + " < cnt ? " +
               load("at + " + str(k) + " * " + kin) + " : (" + red.x_type + ")(" + red.identity +
               "))";
      stores += fillTemplate(
          kLaneStore, {{"k", str(k)},
                       {"store", dl.store(out.dtype, "p0", "out_off + " + str(k) + " * " + kout,
                                          value(dl.vectorLane("acc", k)))}});
    }
    const std::string inner = fillTemplate(
        kVectorColumnsInner, {{"I", i64},
                              {"inner_n", inner_n},
                              {"tile", str(kTile)},
                              {"inner_st", inner_st},
                              {"VX", vx},
                              {"W", str(width)},
                              {"kin", kin},
                              {"vector_load", dl.loadVector(in.dtype, "p1", "at", red.x_type)},
                              {"lanes", lanes},
                              {"combine", red.combineVector(dl, "acc", "x")},
                              {"barrier", dl.barrier()}});
    return s + fillTemplate(kVectorColumns,
                            {{"last_kept", last_kept},
                             {"I", i64},
                             {"klast", klast},
                             {"W_1", str(width - 1)},
                             {"W", str(width)},
                             {"kept_index", indexCode(plan, baked, l.ksize, l.kst, i64, "rest")},
                             {"VA", vacc},
                             {"identity", red.identity},
                             {"loop", outerLoop("  ", inner)},
                             {"stores", stores}});
  }

  s += fillTemplate(kOneOutput,
                    {{"I", i64},
                     {"kept_index", indexCode(kept_plan, baked, l.ksize, l.kst, i64, "rest")},
                     {"A", red.acc_type},
                     {"identity", red.identity}});
  const std::string join = "acc = " + red.combine("acc", "x") + ";";
  const std::string store = dl.store(out.dtype, "p0", "out_off", value("acc"));

  if (strategy == ReduceStrategy::Group) {
    const std::string strided = fillTemplate(kGroupStrided, {{"I", i64},
                                                             {"inner_n", inner_n},
                                                             {"X", red.x_type},
                                                             {"x", load("base + j * " + inner_st)},
                                                             {"join", join}});
    std::string inner = strided;
    if (width > 1) {
      const std::string contiguous = fillTemplate(
          kGroupContiguous,
          {{"I", i64},
           {"inner_n", inner_n},
           {"W", str(width)},
           {"VX", vx},
           {"vector_load", dl.loadVector(in.dtype, "p1", "base + v * " + str(width), red.x_type)},
           {"combine_v", red.combineVector(dl, "vacc", "x")},
           {"X", red.x_type},
           {"x", load("base + j")},
           {"join", join}});
      inner = unitOrStrided(inner_unit, "    ", inner_st + " == 1", contiguous, strided);
    }
    const bool vectors = width > 1;
    return s +
           fillTemplate(
               kGroup,
               {{"scratch",
                 dl.localArray(red.acc_type, "flagos_scratch", groupScratchMax(groupSize(target)))},
                {"vector_acc",
                 vectors ? fillTemplate(kGroupVectorAcc, {{"VA", vacc}, {"identity", red.identity}})
                         : ""},
                {"loop", outerLoop("  ", inner)},
                {"fold",
                 vectors ? fillTemplate(
                               kGroupFold,
                               {{"combine", red.combine("acc", red.horizontal(dl, "vacc", width))}})
                         : ""},
                {"op", red.group_op},
                {"suffix", red.suffix},
                {"store", store}});
  }

  const std::string strided = fillTemplate(kRowsStrided, {{"I", i64},
                                                          {"inner_n", inner_n},
                                                          {"X", red.x_type},
                                                          {"x", load("base + j * " + inner_st)},
                                                          {"join", join}});
  std::string inner = strided;
  if (!dl.simdLoop("").empty()) {
    std::string body = "const " + red.x_type + " x = " + load("base + j") + "; ";
    body += red.nan_flag
                ? "nan_ |= x != x; acc = x " + std::string(r.reducer == Reducer::Max ? ">" : "<") +
                      " acc ? x : acc;"
                : join;
    const std::string clause = red.simd + ":acc" + (red.nan_flag ? ") reduction(|:nan_" : "");
    const std::string contiguous = fillTemplate(
        kRowsContiguous,
        {{"simd", dl.simdLoop(clause)}, {"I", i64}, {"inner_n", inner_n}, {"body", body}});
    inner = unitOrStrided(inner_unit, "    ", inner_st + " == 1", contiguous, strided);
    if (red.nan_flag) inner = fillTemplate(kNanFlagged, {{"walk", inner}});
  }
  return s + fillTemplate(kRows, {{"loop", outerLoop("  ", inner)}, {"store", store}});
}

}  // namespace flagos::kernels
