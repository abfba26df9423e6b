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
  std::string open(const std::string& name, const std::vector<Param>& params) const override {
    return header(name, params) +
           "  const long gid = (long)get_global_id(0);\n  if (gid >= meta.work) return;\n";
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
  std::string close(const std::string&, const std::vector<Param>&) const override { return "}\n"; }

  bool workGroups() const override { return true; }
  std::string fusedPrelude(FusedMode mode, int group, int rows, bool fp64) const override {
    std::string s = prelude(fp64) + (fp64 ? "#define FLAGOS_FUSED_FP64\n" : "") + kFusedTypes +
                    fusedHelpers(fp64);
    if (mode != FusedMode::GroupReduction) return s + fusedSerialMacros();
    s += "#define FLAGOS_GROUP " + std::to_string(group) + "\n#define FLAGOS_ROWS " +
         std::to_string(rows) + "\n" + kGroupMacros;
    s += groupHelpers("float", "f", "flagos_maxf", "flagos_minf") +
         groupHelpers("long", "i", "flagos_imax", "flagos_imin");
    if (fp64) s += groupHelpers("double", "d", "flagos_maxd", "flagos_mind");
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
  // The signature, and each pointer rebuilt from its (buffer, offset) pair.
  static std::string header(const std::string& name, const std::vector<Param>& params) {
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
    return "__kernel void " + name + "(" + sig + ") {\n" + setup;
  }

  // A tree over a segment's FLAGOS_GROUP lanes in local memory (@p s: the
  // segment's slice; a second and third array follow FLAGOS_LOCAL apart);
  // every item of the work-group calls it (it has barriers) and gets its
  // segment's result.
  static std::string groupHelpers(const std::string& t, const std::string& sfx,
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
