// Language-independent kernel bodies: pointwise (lower.h types the
// expression), index arithmetic (runtime or baked), reductions and row
// operators. The Dialect supplies signatures, loads, stores and helpers.
#include "kernels/emit.h"
#include "kernels/lower.h"

#include <cctype>
#include <sstream>

namespace flagos::kernels {
namespace {

// --- index arithmetic -------------------------------------------------------

std::string str(int64_t v) {
  return std::to_string(v);
}
std::string lit(int64_t v, const std::string& i64) {
  return "((" + i64 + ")" + str(v) + ")";
}

// Statements that split work index @p index over @p dims (runtime: the meta
// arrays `meta.<size>[d]`, `meta.<stride>[op][d]`; baked: constants) and add
// each operand's offset to `<off>op`. @p sizes / @p strides are the baked
// values (specialized) or empty (generic).
struct IndexPlan {
  std::string index;                       // variable holding the linear index
  std::string count_field;                 // meta field with the number of dims
  std::string size_field;                  // meta field with the sizes
  std::vector<std::string> stride_fields;  // per operand: "kst[1]" etc.
  std::vector<std::string> offsets;        // per operand: variable to add to
};

std::string indexCode(const IndexPlan& p, bool baked, const std::vector<int64_t>& sizes,
                      const std::vector<std::vector<int64_t>>& strides, const std::string& i64,
                      const std::string& tmp) {
  std::ostringstream s;
  if (!baked) {
    s << "{ " << i64 << " " << tmp << " = " << p.index << ";\n"
      << "  for (int d = (int)meta." << p.count_field << " - 1; d >= 0; --d) {\n"
      << "    " << i64 << " c = " << tmp << " % meta." << p.size_field << "[d]; " << tmp
      << " /= meta." << p.size_field << "[d];\n";
    for (size_t k = 0; k < p.offsets.size(); ++k) {
      s << "    " << p.offsets[k] << " += c * meta." << p.stride_fields[k] << "[d];\n";
    }
    s << "  } }\n";
    return s.str();
  }
  s << "{ " << i64 << " " << tmp << " = " << p.index << "; " << i64 << " c;\n";
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 1) continue;
    s << "  c = " << tmp << " % " << lit(sizes[d], i64) << "; " << tmp
      << " /= " << lit(sizes[d], i64) << ";";
    for (size_t k = 0; k < p.offsets.size(); ++k) {
      if (strides[k][d] != 0)
        s << " " << p.offsets[k] << " += c * " << lit(strides[k][d], i64) << ";";
    }
    s << "\n";
  }
  s << "  (void)c; (void)" << tmp << "; }\n";
  return s.str();
}

std::string metaStruct(const Recipe& r, int nops, const std::string& i64) {
  std::ostringstream s;
  s << "typedef struct {\n";
  for (const MetaField& f : metaLayout(r, nops)) {
    s << "  " << i64 << " " << f.name;
    if (f.count > 1) s << "[" << f.count << "]";
    s << ";\n";
  }
  s << "} flagos_meta;\n";
  return s.str();
}

// --- pointwise ----------------------------------------------------------------

std::string pointwiseBody(const Recipe& r, const Signature& sig, bool baked, const Dialect& dl,
                          bool fp64) {
  const std::string i64 = dl.int64Type();
  flagosDtype_t compute = computeDtype(sig);
  ComputeClass cls = classOf(compute);
  uint32_t present = 0;
  for (size_t k = 0; k < sig.scalar_dtypes.size(); ++k) present |= (sig.scalar_dtypes[k] != 0) << k;
  Lowering lowering(r, cls, compute == FLAGOS_DTYPE_BOOL, present, fp64, i64);
  const std::string vtype = cls == ComputeClass::Int ? i64 : lowering.ftype();
  const int nops = static_cast<int>(sig.operands.size());
  std::ostringstream s;
  std::vector<std::string> index(nops, "gid");
  if (!sig.contiguous) {
    IndexPlan plan{"gid", "ndim", "size", {}, {}};
    for (int k = 0; k < nops; ++k) {
      plan.stride_fields.push_back("st[" + str(k) + "]");
      plan.offsets.push_back("off" + str(k));
      index[k] = "off" + str(k);
      s << "  " << i64 << " off" << k << " = 0;\n";
    }
    std::vector<std::vector<int64_t>> strides;
    for (const Operand& o : sig.operands) strides.push_back(o.strides);
    s << indexCode(plan, baked, sig.operands[0].shape, strides, i64, "rest");
  }
  for (int k = sig.num_outputs; k < nops; ++k) {
    int in = k - sig.num_outputs;
    s << "  const " << vtype << " v" << in << " = (" << vtype << ")"
      << dl.load(sig.operands[k].dtype, "p" + str(k), index[k]) << ";\n";
  }
  Val v = lowering.lower(*r.expr);
  flagosDtype_t out = sig.operands[0].dtype;
  std::string value = out == FLAGOS_DTYPE_BOOL ? "(" + v.code + " != 0)" : v.code;
  s << "  " << dl.store(out, "p0", index[0], value) << "\n";
  return s.str();
}

// --- reductions ---------------------------------------------------------------

std::string reduceBody(const Recipe& r, const Signature& sig, bool baked, const Dialect& dl,
                       bool fp64) {
  const std::string i64 = dl.int64Type();
  const Operand& out = sig.operands[0];
  const Operand& in = sig.operands[1];
  const bool floating = isFloating(in.dtype) || isFloating(out.dtype);
  const std::string ftype = fp64 ? "double" : "float";
  const bool minmax = r.reducer == Reducer::Max || r.reducer == Reducer::Min;
  // Sums and products accumulate wide; max/min stay in the input's type.
  std::string acc_type = floating ? ftype : i64;
  if (minmax) {
    acc_type = !isFloating(in.dtype) ? i64 : in.dtype == FLAGOS_DTYPE_FLOAT64 ? "double" : "float";
  }

  // Kept and reduced dims (as pack() lays them out in meta).
  std::vector<int64_t> ksize, rsize;
  std::vector<std::vector<int64_t>> kst(2), rst(1);
  for (size_t d = 0, od = 0; d < in.shape.size(); ++d) {
    bool reduced = sig.dims_mask >> d & 1;
    if (reduced) {
      rsize.push_back(in.shape[d]);
      rst[0].push_back(in.strides[d]);
      if (out.shape.size() == in.shape.size()) ++od;
    } else {
      ksize.push_back(in.shape[d]);
      kst[0].push_back(od < out.shape.size() ? out.strides[od] : 0);
      ++od;
      kst[1].push_back(in.strides[d]);
    }
  }
  std::ostringstream s;
  s << "  " << i64 << " out_off = 0, in_off = 0;\n";
  IndexPlan kept{"gid", "nk", "ksize", {"kst[0]", "kst[1]"}, {"out_off", "in_off"}};
  s << indexCode(kept, baked, ksize, kst, i64, "rest");
  // The innermost reduced dim is a plain loop; the others are split from
  // an outer counter.
  std::string inner_n, inner_st, outer_n, nr;
  if (baked) {
    int64_t count = 1;
    for (int64_t v : rsize) count *= v;
    inner_n = lit(rsize.empty() ? 1 : rsize.back(), i64);
    inner_st = lit(rsize.empty() ? 0 : rst[0].back(), i64);
    outer_n = lit(rsize.empty() || rsize.back() == 0 ? 0 : count / rsize.back(), i64);
    if (rsize.empty()) outer_n = lit(1, i64);
  } else {
    s << "  const " << i64 << " inner_n = meta.nr ? meta.rsize[meta.nr - 1] : 1;\n"
      << "  const " << i64 << " inner_st = meta.nr ? meta.rst[meta.nr - 1] : 0;\n"
      << "  const " << i64 << " outer_n = inner_n ? meta.count / inner_n : 0;\n";
    inner_n = "inner_n";
    inner_st = "inner_st";
    outer_n = "outer_n";
  }
  std::string init;
  switch (r.reducer) {
    case Reducer::Sum:
    case Reducer::Mean:
    case Reducer::Any:
      init = "0";
      break;
    case Reducer::Prod:
    case Reducer::All:
      init = "1";
      break;
    case Reducer::Max:
    case Reducer::Min:
      init = "0";
      break;
  }
  s << "  " << acc_type << " acc = (" << acc_type << ")" << init << ";\n  int first = 1;\n";
  s << "  for (" << i64 << " o = 0; o < " << outer_n << "; ++o) {\n"
    << "    " << i64 << " base = in_off;\n";
  if (baked) {
    std::vector<int64_t> osize(rsize.begin(), rsize.empty() ? rsize.end() : rsize.end() - 1);
    std::vector<std::vector<int64_t>> ost{
        std::vector<int64_t>(rst[0].begin(), rst[0].empty() ? rst[0].end() : rst[0].end() - 1)};
    IndexPlan outer{"o", "", "", {""}, {"base"}};
    s << indexCode(outer, true, osize, ost, i64, "orest");
  } else {
    s << "    { " << i64 << " orest = o;\n"
      << "      for (int d = (int)meta.nr - 2; d >= 0; --d) {\n"
      << "        base += (orest % meta.rsize[d]) * meta.rst[d]; orest /= meta.rsize[d]; } }\n";
  }
  s << "    for (" << i64 << " j = 0; j < " << inner_n << "; ++j) {\n"
    << "      const " << acc_type << " x = (" << acc_type << ")"
    << dl.load(in.dtype, "p1", "base + j * " + inner_st) << ";\n";
  const std::string suf = acc_type == "float" ? "f" : "d";
  switch (r.reducer) {
    case Reducer::Sum:
    case Reducer::Mean:
      s << "      acc += x;\n";
      break;
    case Reducer::Prod:
      s << "      acc *= x;\n";
      break;
    case Reducer::Any:
      s << "      if (x != 0) { acc = 1; break; }\n";
      break;
    case Reducer::All:
      s << "      if (x == 0) { acc = 0; break; }\n";
      break;
    case Reducer::Max:
    case Reducer::Min: {
      std::string fn = acc_type == i64 ? "flagos_i" : "flagos_";
      fn += r.reducer == Reducer::Max ? "max" : "min";
      if (acc_type != i64) fn += suf;
      s << "      acc = first ? x : " << fn << "(acc, x); first = 0;\n";
      break;
    }
  }
  s << "    }\n";
  if (r.reducer == Reducer::Any) s << "    if (acc) break;\n";
  if (r.reducer == Reducer::All) s << "    if (!acc) break;\n";
  s << "  }\n";
  std::string value = "acc";
  if (r.reducer == Reducer::Mean) {
    value = baked ? "acc / (" + acc_type + ")" + str([&] {
                      int64_t c = 1;
                      for (int64_t v : rsize) c *= v;
                      return c;
                    }())
                  : "acc / (" + acc_type + ")meta.count";
  }
  if (out.dtype == FLAGOS_DTYPE_BOOL) value = "(" + value + " != 0)";
  if (minmax) s << "  if (first) " << dl.skip() << ";\n";
  s << "  " << dl.store(out.dtype, "p0", "out_off", value) << "\n";
  return s.str();
}

// --- row operators ----------------------------------------------------------

std::string rowBody(const Recipe& r, const Signature& sig, bool baked, const Dialect& dl,
                    bool fp64) {
  const std::string i64 = dl.int64Type();
  const int nops = static_cast<int>(sig.operands.size());
  const std::string t = fp64 ? "double" : "float";
  const std::string suf = fp64 ? "d" : "f";
  int dim = 0;
  while (dim < 63 && !(sig.dims_mask >> dim & 1)) ++dim;
  const Operand& ref = sig.operands[0];
  std::vector<int64_t> ksize;
  std::vector<std::vector<int64_t>> kst(nops);
  std::vector<int64_t> rst(nops, 0);
  int64_t len = 1;
  for (size_t d = 0; d < ref.shape.size(); ++d) {
    if ((int)d == dim) {
      len = ref.shape[d];
      for (int k = 0; k < nops; ++k) rst[k] = sig.operands[k].strides[d];
    } else {
      ksize.push_back(ref.shape[d]);
      for (int k = 0; k < nops; ++k) kst[k].push_back(sig.operands[k].strides[d]);
    }
  }
  std::ostringstream s;
  IndexPlan plan{"gid", "nk", "ksize", {}, {}};
  for (int k = 0; k < nops; ++k) {
    s << "  " << i64 << " off" << k << " = 0;\n";
    plan.stride_fields.push_back("kst[" + str(k) + "]");
    plan.offsets.push_back("off" + str(k));
  }
  s << indexCode(plan, baked, ksize, kst, i64, "rest");
  auto rs = [&](int k) { return baked ? lit(rst[k], i64) : "meta.rst[" + str(k) + "]"; };
  const std::string n = baked ? lit(len, i64) : "meta.len";
  auto at = [&](int k) {
    return "(" + t + ")" +
           dl.load(sig.operands[k].dtype, "p" + str(k), "off" + str(k) + " + j * " + rs(k));
  };
  auto loop = [&](const std::string& body) {
    s << "  for (" << i64 << " j = 0; j < " << n << "; ++j) { " << body << " }\n";
  };
  auto put = [&](const std::string& v) {
    return dl.store(sig.operands[0].dtype, "p0", "off0 + j * " + rs(0), v);
  };
  if (r.row == RowOp::Softmax || r.row == RowOp::LogSoftmax) {
    s << "  " << t << " m = -INFINITY, sum = 0;\n";
    loop("m = flagos_max" + suf + "(m, " + at(1) + ");");
    const flagosDtype_t od = sig.operands[0].dtype;
    const bool out_is_t = od == (fp64 ? FLAGOS_DTYPE_FLOAT64 : FLAGOS_DTYPE_FLOAT32);
    if (r.row == RowOp::Softmax && out_is_t) {
      // One exp an element: the exponentials go to the output, then scale
      // by 1 / sum as CPU's softmax does. Each pass reads an element before
      // writing it, so an output that aliases the input is fine.
      loop("const " + t + " e = exp(" + at(1) + " - m); sum += e; " + put("e"));
      s << "  const " << t << " inv = (" << t << ")1 / sum;\n";
      loop(put(at(0) + " * inv"));
    } else if (r.row == RowOp::Softmax) {
      loop("sum += exp(" + at(1) + " - m);");
      loop(put("exp(" + at(1) + " - m) / sum"));
    } else {
      loop("sum += exp(" + at(1) + " - m);");
      s << "  const " << t << " lse = log(sum);\n";
      loop(put(at(1) + " - m - lse"));
    }
  } else {
    // Inputs: grad_output (operand 1), output (operand 2).
    s << "  " << t << " sum = 0;\n";
    if (r.row == RowOp::SoftmaxBackward) {
      loop("sum += " + at(1) + " * " + at(2) + ";");
      loop(put(at(2) + " * (" + at(1) + " - sum)"));
    } else {
      loop("sum += " + at(1) + ";");
      loop(put(at(1) + " - exp(" + at(2) + ") * sum"));
    }
  }
  return s.str();
}

std::string sanitize(const std::string& id) {
  std::string out;
  for (char c : id) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

}  // namespace

const Dialect* dialectFor(const std::string& language) {
  // Leaked: a background build may still emit while the process exits.
  static const Dialect* const c = makeCDialect().release();
  static const Dialect* const opencl = makeOpenCLDialect().release();
  if (language == "c") return c;
  if (language == "opencl-c") return opencl;
  return nullptr;
}

Source emit(const Recipe& recipe, const Signature& sig, Variant variant, const Target& target) {
  const Dialect* dl = dialectFor(target.language);
  Source src;
  if (!dl) return src;
  const bool baked = variant == Variant::Specialized;
  bool fp64 = target.fp64;
  src.kernel_name = "flagos_" + sanitize(recipe.id) + (baked ? "_s" : "_g");
  src.options = dl->buildOptions(baked);
  const int nops = static_cast<int>(sig.operands.size());
  std::vector<Param> params;
  for (int k = 0; k < nops; ++k) {
    params.push_back(
        {Param::Pointer, "p" + str(k), sig.operands[k].dtype, "", k >= sig.num_outputs});
  }
  params.push_back({Param::Meta, "meta", 0, "", false});
  bool float_scalars =
      recipe.kind == RecipeKind::Pointwise && classOf(computeDtype(sig)) != ComputeClass::Int;
  for (size_t k = 0; k < sig.scalar_dtypes.size(); ++k) {
    const bool f = float_scalars ||
                   (recipe.kind == RecipeKind::Index && indexFloatScalar(recipe, (int)k)) ||
                   (recipe.kind == RecipeKind::Window && windowFloatScalar(recipe, (int)k));
    params.push_back(
        {Param::Scalar, "s" + str(k), 0, f ? (fp64 ? "double" : "float") : dl->int64Type(), false});
  }
  std::string body;
  switch (recipe.kind) {
    case RecipeKind::Pointwise:
      body = pointwiseBody(recipe, sig, baked, *dl, fp64);
      break;
    case RecipeKind::Reduce:
      body = reduceBody(recipe, sig, baked, *dl, fp64);
      break;
    case RecipeKind::Row:
      body = rowBody(recipe, sig, baked, *dl, fp64);
      break;
    case RecipeKind::Index:
      body = indexBody(recipe, sig, *dl, target);
      break;
    case RecipeKind::Window:
      body = windowBody(recipe, sig, *dl, target);
      break;
    case RecipeKind::Sort:
      body = sortBody(recipe, sig, *dl, target);
      break;
  }
  std::ostringstream s;
  s << "/* generated by flagos kernels v" << kGeneratorVersion << ": " << recipe.id << " ("
    << (baked ? "specialized" : "generic") << ") */\n"
    << (recipe.kind == RecipeKind::Index ? indexPrelude(recipe, sig, *dl) : "") << dl->prelude(fp64)
    << metaStruct(recipe, nops, dl->int64Type()) << "\n"
    << dl->open(src.kernel_name, params) << body << dl->close(src.kernel_name, params);
  src.text = s.str();
  return src;
}

}  // namespace flagos::kernels
