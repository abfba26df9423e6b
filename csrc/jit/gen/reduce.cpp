// The kernel body of a reduction (sum, mean, prod, amax, amin, any, all,
// ...) for each strategy of Note [Reduction strategies] (reduce_layout.cpp).
#include <sstream>

#include "jit/gen/emit.h"
#include "jit/gen/recipe.h"
#include "jit/gen/reduction.h"

namespace flagos::kernels {
namespace {

// Reduced elements an OpenCL Columns item takes between two barriers.
constexpr int kTile = 8;
// Outputs a "c" Columns block accumulates at once (doubles: 4 KiB).
constexpr int kBlock = 512;

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

}  // namespace flagos::kernels
