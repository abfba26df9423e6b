// The "opencl-c" dialect: OpenCL C 1.2 kernels. Device pointers arrive as
// (base, byte offset) pairs (backends/opencl/launch.cpp, Note [Device
// pointer arguments]); the plugin may round the global size up, so every
// kernel compares its id with meta.work.
#include <utility>

#include "jit/gen/emit.h"

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

// Note [Eight halves, one at a time]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// loadVector reads eight float16 values with eight vload_half calls, not
// one vload_half8. OpenCL asks only 2-byte alignment of vload_half8, but
// PoCL 3.1 (pthread device, LLVM 15) lowers it in the vector-columns any/all
// reduction to an access that faults when the address is not 16-byte
// aligned: torch.any(x, dim=0) of a float16 [5, 12] tensor killed the process
// (PyTorch's test_reductions). The scalar loads give the same values and
// leave the vectorizing to the compiler.
//
// 16-bit helpers: roundTo's half rounding (half exists only behind
// pointers) and the bfloat16 conversions.
const char* k16BitHelpers = R"(float flagos_round_half(float v) {
  ushort h[1];
  vstore_half_rte(v, 0, (__private half*)h);
  return vload_half(0, (__private half*)h); }
float flagos_bf2f(ushort b) { return as_float((uint)b << 16); }
ushort flagos_f2bf(float f) {
  uint x = as_uint(f);
  if ((x & 0x7fffffff) > 0x7f800000) return (ushort)((x >> 16) | 0x40);
  return (ushort)((x + 0x7fff + ((x >> 16) & 1)) >> 16); }
float8 flagos_vload_half8(__global const half* p) {
  return (float8)(vload_half(0, p), vload_half(1, p), vload_half(2, p), vload_half(3, p),
                  vload_half(4, p), vload_half(5, p), vload_half(6, p), vload_half(7, p)); }
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

// The spellings of the shared work-group code (emit_groups.cpp).
const GroupSpelling kGroups{"",
                            "__local ",
                            "__local ",
                            "barrier(CLK_LOCAL_MEM_FENCE);",
                            "get_local_id(0)",
                            "get_local_size(0)",
                            "get_group_id(0)",
                            "long"};

class OpenCLDialect : public Dialect {
 public:
  std::string int64Type() const override { return "long"; }
  std::string prelude(bool fp64) const override {
    std::string s = fp64 ? "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" : "";
    return s + "#define FLAGOS_I64 long\n#define FLAGOS_U64 ulong\n#define FLAGOS_FN\n" +
           "#define FLAGOS_U32 uint\n#define flagos_f2u(x) as_uint(x)\n"
           "#define flagos_u2f(x) as_float(x)\n" +
           // Without fp64 no program may name double (the random helpers
           // use these only with it).
           (fp64 ? "#define flagos_d2u(x) as_ulong(x)\n#define flagos_u2d(x) as_double(x)\n" : "") +
           k16BitHelpers + commonHelpers(fp64);
  }
  std::string strictFloatPrelude() const override { return "#pragma OPENCL FP_CONTRACT OFF\n"; }
  std::string strictFloatOptions() const override {
    return "-cl-fp32-correctly-rounded-divide-sqrt";
  }
  std::string load(flagosDtype_t d, const std::string& ptr, const std::string& i) const override {
    if (d == FLAGOS_DTYPE_FLOAT16) return "vload_half(" + i + ", " + ptr + ")";
    if (d == FLAGOS_DTYPE_BFLOAT16) return "flagos_bf2f(" + ptr + "[" + i + "])";
    return ptr + "[" + i + "]";
  }
  std::string roundTo(flagosDtype_t d, const std::string& v) const override {
    if (d == FLAGOS_DTYPE_FLOAT16) return "flagos_round_half((float)(" + v + "))";
    return Dialect::roundTo(d, v);
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
      case FLAGOS_DTYPE_FLOAT16:  // Note [Eight halves, one at a time]
        raw = "flagos_vload_half8(" + ptr + " + " + i + ")", raw_type = "float";
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
    std::string s = groupHelpers(kGroups, "float", "f") + groupHelpers(kGroups, "long", "l");
    if (fp64) s += groupHelpers(kGroups, "double", "d");
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
    return s + fusedGroupPrelude(kGroups, group, rows, fp64);
  }
  std::string fusedOpen(const std::string& name, const std::vector<Param>& params,
                        FusedMode mode) const override {
    if (mode != FusedMode::GroupReduction)
      return header(name, params) +
             "  const long xindex = (long)get_global_id(0);\n  if (xindex >= xnumel) return;\n";
    // Note [No return before a barrier]
    // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    // A segment past the last row must not return (the barriers after it
    // would be conditional): it takes the last row again (xindex is clamped)
    // and FLAGOS_STORE_OK keeps it from storing. PoCL 3.1's default
    // work-group method ("loopvec") treats every barrier after a `return` as
    // conditional and then gave some work-items another copy of the local
    // arrays: 156 of 300 launches of a softmax kernel (16 lanes, rows of 12,
    // a work-group per row, `if (xindex >= xnumel) return;` first) had wrong
    // rows (pocl/pocl#2239, JuliaGPU/OpenCL.jl#460). test_compile.py checks
    // 300 launches of a group reduction whose last work-group runs past the
    // rows.
    return header(name, params) + fusedGroupOpen(kGroups);
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
};

}  // namespace

std::unique_ptr<Dialect> makeOpenCLDialect() {
  return std::make_unique<OpenCLDialect>();
}

}  // namespace flagos::kernels
