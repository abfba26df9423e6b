// Language-independent kernel bodies: pointwise (lower.h types the
// expression), index arithmetic (runtime or baked), reductions and row
// operators. The Dialect supplies signatures, loads, stores and helpers.
#include "jit/gen/emit.h"
#include "jit/gen/lower.h"

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

}  // namespace

std::string int64Literal(int64_t v, const std::string& i64) {
  return lit(v, i64);
}

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

std::string elementOffsets(const Signature& sig, bool baked, const std::string& i64,
                           std::vector<std::string>* index) {
  const int nops = static_cast<int>(sig.operands.size());
  std::ostringstream s;
  index->assign(nops, "gid");
  if (!sig.contiguous) {
    IndexPlan plan{"gid", "ndim", "size", {}, {}};
    for (int k = 0; k < nops; ++k) {
      plan.stride_fields.push_back("st[" + str(k) + "]");
      plan.offsets.push_back("off" + str(k));
      (*index)[k] = "off" + str(k);
      s << "  " << i64 << " off" << k << " = 0;\n";
    }
    std::vector<std::vector<int64_t>> strides;
    for (const Operand& o : sig.operands) strides.push_back(o.strides);
    s << indexCode(plan, baked, sig.operands[0].shape, strides, i64, "rest");
  }
  return s.str();
}

namespace {

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
  std::vector<std::string> index;
  s << elementOffsets(sig, baked, i64, &index);
  for (int k = sig.num_outputs; k < nops; ++k) {
    int in = k - sig.num_outputs;
    s << "  const " << vtype << " v" << in << " = (" << vtype << ")"
      << dl.load(sig.operands[k].dtype, "p" + str(k), index[k]) << ";\n";
  }
  Val v = lowering.lower(*r.expr);
  flagosDtype_t out = sig.operands[0].dtype;
  // See Note [Intermediates rounded to the inputs' type] (lower.cpp).
  if (v.code.find("FLAGOS_ROUND_COMMON(") != std::string::npos)
    s << "#define FLAGOS_ROUND_COMMON(x) " << dl.roundTo(compute, "(x)") << "\n";
  std::string value = out == FLAGOS_DTYPE_BOOL ? "(" + v.code + " != 0)" : v.code;
  s << "  " << dl.store(out, "p0", index[0], value) << "\n";
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
  static const Dialect* const cuda = makeCudaDialect().release();
  if (language == "c") return c;
  if (language == "opencl-c") return opencl;
  if (language == "cuda-c") return cuda;
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
                   (recipe.kind == RecipeKind::Index &&
                    indexFloatScalar(recipe, (int)k, sig.operands[0].dtype)) ||
                   (recipe.kind == RecipeKind::Window && windowFloatScalar(recipe, (int)k)) ||
                   (recipe.kind == RecipeKind::Random && randomFloatScalar(recipe, (int)k));
    params.push_back(
        {Param::Scalar, "s" + str(k), 0, f ? (fp64 ? "double" : "float") : dl->int64Type(), false});
  }
  std::string body;
  switch (recipe.kind) {
    case RecipeKind::Pointwise:
      body = pointwiseBody(recipe, sig, baked, *dl, fp64);
      break;
    case RecipeKind::Reduce:
      body = reduceBody(recipe, sig, baked, *dl, target);
      break;
    case RecipeKind::Row:
      body = rowBody(recipe, sig, baked, *dl, target);
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
    case RecipeKind::Random:
      body = randomBody(recipe, sig, baked, *dl, fp64);
      break;
  }
  const bool random = recipe.kind == RecipeKind::Random;
  if (random) src.options += " " + dl->strictFloatOptions();
  // Note [Reduction strategies]: how the work items of a reduction walk it.
  Items items = Items::PerItem;
  if (recipe.kind == RecipeKind::Reduce || recipe.kind == RecipeKind::Row) {
    items = reduceItems(recipe, sig, target);
  }
  std::ostringstream s;
  s << "/* generated by flagos kernels v" << kGeneratorVersion << ": " << recipe.id << " ("
    << (baked ? "specialized" : "generic") << ") */\n"
    << (recipe.kind == RecipeKind::Index ? indexPrelude(recipe, sig, *dl) : "")
    << (random ? dl->strictFloatPrelude() : "") << dl->prelude(fp64)
    << (body.find("flagos_sf_") != std::string::npos ? specialFunctionHelpers(fp64) : "")
    << (items == Items::Group ? dl->groupPrelude(fp64) : "") << (random ? randomHelpers(fp64) : "")
    << metaStruct(recipe, nops, dl->int64Type()) << "\n"
    << dl->open(src.kernel_name, params, items, groupSize(target)) << body
    << dl->close(src.kernel_name, params, items);
  src.text = s.str();
  return src;
}

}  // namespace flagos::kernels
