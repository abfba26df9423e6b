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

// Note [Fused kernel bodies]: the neutral names in OpenCL C.
const char* kFusedTypes = R"(typedef char flagos_i8;
typedef uchar flagos_u8;
typedef short flagos_i16;
typedef int flagos_i32;
typedef long flagos_i64;
#define FLAGOS_LD_F16(p, i) vload_half((i), (p))
#define FLAGOS_ST_F16(p, i, v) vstore_half_rte((float)(v), (i), (p))
#define FLAGOS_LD_BF16(p, i) flagos_bf2f((p)[i])
#define FLAGOS_ST_BF16(p, i, v) ((p)[i] = flagos_f2bf((float)(v)))
#define flagos_rsqrt rsqrt
/* Atomic adds (inductor's scatter stores); floats by compare-and-swap on
   their bits, 64-bit ones only with cl_khr_int64_base_atomics. */
#define FLAGOS_ATOMIC_ADD(S, p, v) flagos_atomic_add_##S((p), (v))
void flagos_atomic_add_i32(__global int* p, int v) { atomic_add((volatile __global int*)p, v); }
void flagos_atomic_add_f(__global float* p, float v) {
  volatile __global uint* a = (volatile __global uint*)p;
  uint old = *a, prev;
  do { prev = old; old = atomic_cmpxchg(a, prev, as_uint(as_float(prev) + v)); } while (old != prev); }
#ifdef cl_khr_int64_base_atomics
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
void flagos_atomic_add_i64(__global long* p, long v) { atom_add((volatile __global long*)p, v); }
#ifdef FLAGOS_FUSED_FP64
void flagos_atomic_add_d(__global double* p, double v) {
  volatile __global long* a = (volatile __global long*)p;
  long old = *a, prev;
  do { prev = old; old = atom_cmpxchg(a, prev, as_long(as_double(prev) + v)); } while (old != prev); }
#endif
#endif
)";

// GroupReduction: the items of a group stride over the row, then combine.
const char* kGroupMacros =
    R"(#define FLAGOS_LOCAL (FLAGOS_GROUP * FLAGOS_ROWS)
#define FLAGOS_RLOOP(r, n) for (long r = flagos_lid; r < (n); r += FLAGOS_GROUP)
#define FLAGOS_GROUP_LEADER (flagos_lid == 0 && flagos_valid)
#define FLAGOS_STORE_OK flagos_valid
#define FLAGOS_SEG(s) ((s) + flagos_seg * FLAGOS_GROUP)
#define FLAGOS_GROUP_SUM(S, v) flagos_group_sum##S((v), FLAGOS_SEG(flagos_scratch_##S))
#define FLAGOS_GROUP_PROD(S, v) flagos_group_prod##S((v), FLAGOS_SEG(flagos_scratch_##S))
#define FLAGOS_GROUP_MAX(S, v) flagos_group_max##S((v), FLAGOS_SEG(flagos_scratch_##S))
#define FLAGOS_GROUP_MIN(S, v) flagos_group_min##S((v), FLAGOS_SEG(flagos_scratch_##S))
#define FLAGOS_GROUP_WELFORD(S, mean, m2, w) flagos_group_welford##S(&(mean), &(m2), &(w), FLAGOS_SEG(flagos_scratch_##S))
#define FLAGOS_GROUP_ARGMAX(S, v, i) flagos_group_argmax##S(&(v), &(i), FLAGOS_SEG(flagos_scratch_##S), FLAGOS_SEG(flagos_scratch_i + 2 * FLAGOS_LOCAL))
#define FLAGOS_GROUP_ARGMIN(S, v, i) flagos_group_argmin##S(&(v), &(i), FLAGOS_SEG(flagos_scratch_##S), FLAGOS_SEG(flagos_scratch_i + 2 * FLAGOS_LOCAL))
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
    const std::string sig = signature(params), setup = pointers(params);
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

  std::string fusedPrelude(FusedMode mode, int group, int rows, bool fp64) const override {
    std::string s = prelude(fp64) + (fp64 ? "#define FLAGOS_FUSED_FP64\n" : "") + kFusedTypes +
                    fusedHelpers(fp64);
    if (mode != FusedMode::GroupReduction) return s + fusedSerialMacros();
    s += "#define FLAGOS_GROUP " + std::to_string(group) + "\n#define FLAGOS_ROWS " +
         std::to_string(rows) + "\n" + kGroupMacros;
    s += fusedGroupHelpers("float", "f", "flagos_maxf", "flagos_minf") +
         fusedGroupHelpers("long", "i", "flagos_imax", "flagos_imin");
    if (fp64) s += fusedGroupHelpers("double", "d", "flagos_maxd", "flagos_mind");
    return s;
  }
  std::string fusedOpen(const std::string& name, const std::vector<Param>& params,
                        FusedMode mode) const override {
    if (mode != FusedMode::GroupReduction)
      return header(name, params) +
             "  const long xindex = (long)get_global_id(0);\n  if (xindex >= xnumel) return;\n";
    // Local arrays live at kernel scope (OpenCL C 1.2, 6.5.2); each segment
    // of the work-group lends its slice to the helpers.
    //
    // Note [No return before a barrier]: a segment past the last row must
    // not return (the barriers after it would be conditional): it takes the
    // last row again (xindex is clamped) and FLAGOS_STORE_OK keeps it from
    // storing. PoCL 3.1's default work-group method ("loopvec") treats every
    // barrier after a `return` as conditional and then gave some work-items
    // another copy of the local arrays: 156 of 300 launches of a softmax
    // kernel (16 lanes, rows of 12, a work-group per row, `if (xindex >=
    // xnumel) return;` first) had wrong rows (pocl/pocl#2239,
    // JuliaGPU/OpenCL.jl#460). test_compile.py checks 300 launches of a group
    // reduction whose last work-group runs past the rows.
    std::string s = header(name, params) +
                    "  __local float flagos_scratch_f[3 * FLAGOS_LOCAL];\n"
                    "  __local long flagos_scratch_i[3 * FLAGOS_LOCAL];\n";
    s += "#ifdef FLAGOS_FUSED_FP64\n  __local double flagos_scratch_d[3 * FLAGOS_LOCAL];\n#endif\n";
    return s +
           "  const long flagos_lid = (long)(get_local_id(0) % FLAGOS_GROUP);\n"
           "  const long flagos_seg = (long)(get_local_id(0) / FLAGOS_GROUP);\n"
           "  const long flagos_row = (long)get_group_id(0) * FLAGOS_ROWS + flagos_seg;\n"
           "  const bool flagos_valid = flagos_row < xnumel;\n"
           "  const long xindex = flagos_valid ? flagos_row : xnumel - 1;\n";
  }
  std::string fusedClose(const std::string&, const std::vector<Param>&) const override {
    return "}\n";
  }

 private:
  // The parameter list: a pointer is a (buffer, byte offset) pair (Note
  // [Device pointer arguments] in backends/opencl/launch.cpp).
  static std::string signature(const std::vector<Param>& params) {
    std::string sig;
    for (const Param& p : params) {
      if (!sig.empty()) sig += ", ";
      if (p.kind == Param::Pointer) {
        sig += pointerType(p) + " " + p.name + "_base, ulong " + p.name + "_offset";
      } else {
        sig += (p.kind == Param::Meta ? std::string("flagos_meta") : p.scalar_type) + " " + p.name;
      }
    }
    return sig;
  }
  // Each pointer rebuilt from its pair.
  static std::string pointers(const std::vector<Param>& params) {
    std::string setup;
    for (const Param& p : params) {
      if (p.kind != Param::Pointer) continue;
      const std::string t = pointerType(p);
      setup += "  " + t + " " + p.name + " = (" + t + ")((__global " +
               (p.read_only ? "const " : "") + "char*)" + p.name + "_base + " + p.name +
               "_offset);\n";
    }
    return setup;
  }
  static std::string pointerType(const Param& p) {
    return std::string("__global ") + (p.read_only ? "const " : "") + storageType(p.dtype) + "*";
  }
  static std::string header(const std::string& name, const std::vector<Param>& params) {
    return "__kernel void " + name + "(" + signature(params) + ") {\n" + pointers(params);
  }

  // A tree over a segment's FLAGOS_GROUP lanes in local memory (@p s: the
  // segment's slice; a second and third array follow FLAGOS_LOCAL apart);
  // every item of the work-group calls it (it has barriers) and gets its
  // segment's result.
  static std::string fusedGroupHelpers(const std::string& t, const std::string& sfx,
                                       const std::string& max, const std::string& min) {
    std::string s;
    const std::pair<const char*, std::string> ops[] = {
        {"sum", "a + b"}, {"prod", "a * b"}, {"max", max + "(a, b)"}, {"min", min + "(a, b)"}};
    for (const auto& [op, combine] : ops) {
      s += t + " flagos_group_" + op + sfx + "(" + t + " v, __local " + t +
           "* s) {\n"
           "  const uint l = get_local_id(0) % FLAGOS_GROUP;\n"
           "  s[l] = v; barrier(CLK_LOCAL_MEM_FENCE);\n"
           "  for (uint h = FLAGOS_GROUP / 2; h > 0; h >>= 1) {\n"
           "    if (l < h) { const " +
           t + " a = s[l], b = s[l + h]; s[l] = " + combine +
           "; }\n"
           "    barrier(CLK_LOCAL_MEM_FENCE);\n"
           "  }\n"
           "  v = s[0]; barrier(CLK_LOCAL_MEM_FENCE); return v; }\n";
    }
    for (const char* arg : {"argmax", "argmin"}) {
      s += std::string("void flagos_group_") + arg + sfx + "(" + t + "* v, long* i, __local " + t +
           "* s, __local long* si) {\n"
           "  const uint l = get_local_id(0) % FLAGOS_GROUP;\n"
           "  s[l] = *v; si[l] = *i; barrier(CLK_LOCAL_MEM_FENCE);\n"
           "  for (uint h = FLAGOS_GROUP / 2; h > 0; h >>= 1) {\n"
           "    if (l < h && flagos_" +
           arg + "_better" + sfx +
           "(s[l], si[l], s[l + h], si[l + h])) { s[l] = s[l + h]; si[l] = si[l + h]; }\n"
           "    barrier(CLK_LOCAL_MEM_FENCE);\n"
           "  }\n"
           "  *v = s[0]; *i = si[0]; barrier(CLK_LOCAL_MEM_FENCE); }\n";
    }
    if (sfx != "i") {
      s += "void flagos_group_welford" + sfx + "(" + t + "* mean, " + t + "* m2, " + t +
           "* w, __local " + t +
           "* s) {\n"
           "  const uint l = get_local_id(0) % FLAGOS_GROUP, G = FLAGOS_LOCAL;\n"
           "  s[l] = *mean; s[G + l] = *m2; s[2 * G + l] = *w; barrier(CLK_LOCAL_MEM_FENCE);\n"
           "  for (uint h = FLAGOS_GROUP / 2; h > 0; h >>= 1) {\n"
           "    if (l < h) {\n"
           "      " +
           t + " m = s[l], q = s[G + l], n = s[2 * G + l];\n" + "      flagos_welford_combine" +
           sfx +
           "(&m, &q, &n, s[l + h], s[G + l + h], s[2 * G + l + h]);\n"
           "      s[l] = m; s[G + l] = q; s[2 * G + l] = n;\n"
           "    }\n"
           "    barrier(CLK_LOCAL_MEM_FENCE);\n"
           "  }\n"
           "  *mean = s[0]; *m2 = s[G]; *w = s[2 * G]; barrier(CLK_LOCAL_MEM_FENCE); }\n";
    }
    return s;
  }
};

}  // namespace

std::unique_ptr<Dialect> makeOpenCLDialect() {
  return std::make_unique<OpenCLDialect>();
}

}  // namespace flagos::kernels
