// The "opencl-c" dialect: OpenCL C 1.2 kernels. Device pointers arrive as
// (base, byte offset) pairs (backends/opencl/launch.cpp, Note [Device
// pointer arguments]); the plugin may round the global size up, so every
// kernel compares its id with meta.work.
#include <utility>

#include "kernels/emit.h"

namespace flagos::kernels {
namespace {

const char* storageType(flagosDtype_t d) {
  switch (d) {
    case FLAGOS_DTYPE_BOOL:
    case FLAGOS_DTYPE_UINT8:
      return "uchar";
    case FLAGOS_DTYPE_INT8:
      return "char";
    case FLAGOS_DTYPE_INT16:
      return "short";
    case FLAGOS_DTYPE_INT32:
      return "int";
    case FLAGOS_DTYPE_INT64:
      return "long";
    case FLAGOS_DTYPE_FLOAT16:
      return "half";  // only through vload/vstore_half
    case FLAGOS_DTYPE_BFLOAT16:
      return "ushort";
    case FLAGOS_DTYPE_FLOAT32:
      return "float";
    default:
      return "double";
  }
}

const char* kBf16Helpers = R"(float flagos_bf2f(ushort b) { return as_float((uint)b << 16); }
ushort flagos_f2bf(float f) {
  uint x = as_uint(f);
  if ((x & 0x7fffffff) > 0x7f800000) return (ushort)((x >> 16) | 0x40);
  return (ushort)((x + 0x7fff + ((x >> 16) & 1)) >> 16); }
)";

// Note [Work-group combine helpers] (emit.h) for one type: the first level
// folds runs of 8 values into s[lanes + 1 ...], the second (lane 0) those
// into s[lanes], which every lane then reads; the next call writes s[lane]
// before its first barrier, so no trailing barrier is needed.
std::string groupHelpers(const std::string& t, const std::string& suffix) {
  const bool floating = t != "long";
  const std::string max = floating ? "flagos_max" + suffix : "flagos_imax";
  const std::string min = floating ? "flagos_min" + suffix : "flagos_imin";
  std::string out;
  for (const auto& [op, expr] :
       std::vector<std::pair<std::string, std::string>>{{"sum", "r + s[k]"},
                                                        {"prod", "r * s[k]"},
                                                        {"max", max + "(r, s[k])"},
                                                        {"min", min + "(r, s[k])"}}) {
    const std::string seg = "flagos_segment_" + op + "_" + suffix;
    out += t + " " + seg + "(" + t + " v, __local " + t +
           "* s, int lane, int n) {\n"
           "  const int m = (n + 7) / 8;\n"
           "  s[lane] = v;\n"
           "  barrier(CLK_LOCAL_MEM_FENCE);\n"
           "  if (lane < m) {\n"
           "    " +
           t +
           " r = s[lane * 8];\n"
           "    for (int k = lane * 8 + 1; k < lane * 8 + 8 && k < n; ++k) r = " +
           expr +
           ";\n"
           "    s[n + 1 + lane] = r;\n"
           "  }\n"
           "  barrier(CLK_LOCAL_MEM_FENCE);\n"
           "  if (lane == 0) {\n"
           "    " +
           t +
           " r = s[n + 1];\n"
           "    for (int k = n + 2; k < n + 1 + m; ++k) r = " +
           expr +
           ";\n"
           "    s[n] = r;\n"
           "  }\n"
           "  barrier(CLK_LOCAL_MEM_FENCE);\n"
           "  return s[n]; }\n" +
           t + " flagos_group_" + op + "_" + suffix + "(" + t + " v, __local " + t +
           "* s) {\n"
           "  return " +
           seg + "(v, s, (int)get_local_id(0), (int)get_local_size(0)); }\n";
  }
  return out;
}

class OpenCLDialect : public Dialect {
 public:
  std::string int64Type() const override { return "long"; }
  std::string prelude(bool fp64) const override {
    std::string s = fp64 ? "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" : "";
    return s + "#define FLAGOS_I64 long\n#define FLAGOS_U64 ulong\n#define FLAGOS_FN\n" +
           kBf16Helpers + commonHelpers(fp64);
  }
  std::string load(flagosDtype_t d, const std::string& ptr, const std::string& i) const override {
    if (d == FLAGOS_DTYPE_FLOAT16) return "vload_half(" + i + ", " + ptr + ")";
    if (d == FLAGOS_DTYPE_BFLOAT16) return "flagos_bf2f(" + ptr + "[" + i + "])";
    return ptr + "[" + i + "]";
  }
  std::string store(flagosDtype_t d, const std::string& ptr, const std::string& i,
                    const std::string& v) const override {
    if (d == FLAGOS_DTYPE_FLOAT16)
      return "vstore_half_rte((float)(" + v + "), " + i + ", " + ptr + ");";
    if (d == FLAGOS_DTYPE_BFLOAT16) return ptr + "[" + i + "] = flagos_f2bf((float)(" + v + "));";
    return ptr + "[" + i + "] = (" + storageType(d) + ")(" + v + ");";
  }
  std::string open(const std::string& name, const std::vector<Param>& params, Items items,
                   uint64_t group_size) const override {
    std::string sig, setup;
    for (const Param& p : params) {
      if (!sig.empty()) sig += ", ";
      if (p.kind == Param::Pointer) {
        std::string t =
            std::string("__global ") + (p.read_only ? "const " : "") + storageType(p.dtype) + "*";
        sig += t + " " + p.name + "_base, ulong " + p.name + "_offset";
        setup += "  " + t + " " + p.name + " = (" + t + ")((__global " +
                 (p.read_only ? "const " : "") + "char*)" + p.name + "_base + " + p.name +
                 "_offset);\n";
      } else {
        sig += (p.kind == Param::Meta ? std::string("flagos_meta") : p.scalar_type) + " " + p.name;
      }
    }
    switch (items) {
      case Items::Uniform:
        // Every item stays for the barriers; work == 0: a launch with
        // zeroed meta and NULL pointers (Note [First launch]).
        return "__kernel void " + name + "(" + sig + ") {\n" + setup +
               "  if (meta.work <= 0) return;\n"
               "  const long gid_ = (long)get_global_id(0);\n"
               "  const int live = gid_ < meta.work;\n"
               "  const long gid = live ? gid_ : meta.work - 1;\n";
      case Items::Group: {
        const std::string g = std::to_string(group_size);
        return "__kernel __attribute__((reqd_work_group_size(" + g + ", 1, 1))) void " + name +
               "(" + sig + ") {\n" + setup +
               "  if (meta.work <= 0) return;\n"
               "  const int lid = (int)get_local_id(0), lanes = (int)meta.lanes;\n"
               "  const int seg = lid / lanes, lane = lid % lanes;\n"
               "  const long gid = (long)get_group_id(0) * (" +
               g +
               " / lanes) + seg;\n"
               "  if (gid >= meta.work) return;\n";
      }
      default:
        return "__kernel void " + name + "(" + sig + ") {\n" + setup +
               "  const long gid = (long)get_global_id(0);\n  if (gid >= meta.work) return;\n";
    }
  }
  bool hasGroups() const override { return true; }
  std::string barrier() const override { return "barrier(CLK_LOCAL_MEM_FENCE);"; }
  std::string localArray(const std::string& type, const std::string& name,
                         uint64_t count) const override {
    return "__local " + type + " " + name + "[" + std::to_string(count) + "];";
  }
  int vectorWidth() const override { return 8; }
  std::string loadVector(flagosDtype_t d, const std::string& ptr, const std::string& i,
                         const std::string& type) const override {
    std::string raw, raw_type;
    switch (d) {
      case FLAGOS_DTYPE_FLOAT16:
        raw = "vload_half8(0, " + ptr + " + " + i + ")", raw_type = "float";
        break;
      case FLAGOS_DTYPE_BFLOAT16:
        raw = "as_float8(convert_uint8(vload8(0, " + ptr + " + " + i + ")) << 16)";
        raw_type = "float";
        break;
      default:
        raw = "vload8(0, " + ptr + " + " + i + ")", raw_type = storageType(d);
        break;
    }
    return raw_type == type ? raw : "convert_" + type + "8(" + raw + ")";
  }
  std::string vectorType(const std::string& type) const override { return type + "8"; }
  std::string storeVector(flagosDtype_t d, const std::string& ptr, const std::string& i,
                          const std::string& v, const std::string& type) const override {
    if ((d == FLAGOS_DTYPE_FLOAT32 && type == "float") ||
        (d == FLAGOS_DTYPE_FLOAT64 && type == "double"))
      return "vstore8(" + v + ", 0, " + ptr + " + " + i + ");";
    if (d == FLAGOS_DTYPE_FLOAT16)
      return "vstore_half8_rte(" + convertVector("float", v) + ", 0, " + ptr + " + " + i + ");";
    std::string s = "{ const " + type + "8 v_ = " + v + ";";
    for (int k = 0; k < 8; ++k)
      s += " " + store(d, ptr, i + " + " + std::to_string(k), vectorLane("v_", k));
    return s + " }";
  }
  std::string vectorLane(const std::string& v, int k) const override {
    return "(" + v + ").s" + std::to_string(k);
  }
  std::string convertVector(const std::string& type, const std::string& v) const override {
    return "convert_" + type + "8(" + v + ")";
  }
  std::string vectorMaxMin(bool max, const std::string& type, const std::string& a,
                           const std::string& b) const override {
    if (type == "long") return std::string(max ? "max(" : "min(") + a + ", " + b + ")";
    // b where neither a is NaN nor a wins: NaN propagates as in flagos_max.
    return "select(" + b + ", " + a + ", isnan(" + a + ") | (" + a + (max ? " > " : " < ") + b +
           "))";
  }
  std::string vectorTruth(const std::string& v) const override {
    return "convert_long8(-(" + v + " != 0))";
  }
  std::string groupPrelude(bool fp64) const override {
    std::string s = groupHelpers("float", "f") + groupHelpers("long", "l");
    if (fp64) s += groupHelpers("double", "d");
    return s;
  }
  const char* skip() const override { return "return"; }
  // Floats by compare-and-swap on their bits; 64-bit needs
  // cl_khr_int64_base_atomics (atomicsPrelude enables it).
  std::string atomicAdd(flagosDtype_t d, const std::string& ptr, const std::string& i,
                        const std::string& v) const override {
    const std::string a = "(" + ptr + " + " + i + ")";
    switch (d) {
      case FLAGOS_DTYPE_INT32:
        return "atomic_add(" + a + ", (int)(" + v + "));";
      case FLAGOS_DTYPE_INT64:
        return "atom_add(" + a + ", (long)(" + v + "));";
      case FLAGOS_DTYPE_FLOAT32:
        return "{ volatile __global uint* a_ = (volatile __global uint*)" + a +
               "; const float v_ = (float)(" + v +
               "); uint old_ = *a_, prev_; do { prev_ = old_; old_ = atomic_cmpxchg(a_, prev_, "
               "as_uint(as_float(prev_) + v_)); } while (old_ != prev_); }";
      case FLAGOS_DTYPE_FLOAT64:
        return "{ volatile __global long* a_ = (volatile __global long*)" + a +
               "; const double v_ = (double)(" + v +
               "); long old_ = *a_, prev_; do { prev_ = old_; old_ = atom_cmpxchg(a_, prev_, "
               "as_long(as_double(prev_) + v_)); } while (old_ != prev_); }";
      default:
        return "";
    }
  }
  std::string atomicsPrelude(flagosDtype_t d) const override {
    if (d == FLAGOS_DTYPE_INT64 || d == FLAGOS_DTYPE_FLOAT64)
      return "#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable\n";
    return "";
  }
  bool parallelScatters() const override { return true; }
  std::string fp64Probe() const override {
    return "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
           "__kernel void flagos_fp64_probe(__global double* p, ulong off) { p[0] = 1.0; }\n";
  }
  std::string close(const std::string&, const std::vector<Param>&, Items) const override {
    return "}\n";
  }
};

}  // namespace

std::unique_ptr<Dialect> makeOpenCLDialect() {
  return std::make_unique<OpenCLDialect>();
}

}  // namespace flagos::kernels
