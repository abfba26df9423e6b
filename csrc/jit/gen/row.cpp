// The kernel body of a row operator (softmax, log_softmax and their
// backwards) for each strategy of Note [Reduction strategies]
// (reduce_layout.cpp).
#include <sstream>

#include "jit/gen/emit.h"
#include "jit/gen/recipe.h"
#include "jit/gen/reduction.h"

namespace flagos::kernels {

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
