// The "cuda-c" dialect: CUDA C++ kernels for NVRTC (backends/cuda). A
// device pointer is one kernel parameter holding the address (compiler.h);
// kernels are `extern "C"` so the plugin finds them by name; the work item
// is blockIdx.x * blockDim.x + threadIdx.x and, as in every dialect, the
// launch may round the global size up, so every kernel compares its id with
// meta.work. No header is included: NVRTC declares the math library itself,
// and the 16-bit floats are converted here (PTX cvt for half, bits for
// bfloat16), so a program builds with no include path.
#include "jit/gen/emit.h"

namespace flagos::kernels {
namespace {

const char* storageType(flagosDtype_t d) {
  switch (d) {
    case FLAGOS_DTYPE_BOOL:
    case FLAGOS_DTYPE_UINT8:
      return "unsigned char";
    case FLAGOS_DTYPE_INT8:
      return "signed char";
    case FLAGOS_DTYPE_INT16:
      return "short";
    case FLAGOS_DTYPE_INT32:
      return "int";
    case FLAGOS_DTYPE_INT64:
      return "long long";
    case FLAGOS_DTYPE_FLOAT16:
    case FLAGOS_DTYPE_BFLOAT16:
      return "unsigned short";
    case FLAGOS_DTYPE_FLOAT32:
      return "float";
    default:
      return "double";
  }
}

// What <math.h> and <stdint.h> would give the shared helpers, and the 16-bit
// float conversions (round to nearest even; NaN stays NaN).
const char* kPrelude = R"(#define FLAGOS_I64 long long
#define FLAGOS_U64 unsigned long long
#define FLAGOS_FN static __device__ __forceinline__
#define FLAGOS_U32 unsigned int
#define flagos_f2u(x) __float_as_uint(x)
#define flagos_u2f(x) __uint_as_float(x)
#define flagos_d2u(x) ((unsigned long long)__double_as_longlong(x))
#define flagos_u2d(x) __longlong_as_double((long long)(x))
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#ifndef INT64_MAX
#define INT64_MAX 0x7fffffffffffffffLL
#define INT64_MIN (-0x7fffffffffffffffLL - 1)
#endif
FLAGOS_FN float flagos_h2f(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
FLAGOS_FN unsigned short flagos_f2h(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
FLAGOS_FN float flagos_bf2f(unsigned short b) { return __uint_as_float((unsigned)b << 16); }
FLAGOS_FN unsigned short flagos_f2bf(float f) {
  const unsigned x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16); }
)";

// Note [Fused kernel bodies]: the neutral names in CUDA C.
const char* kFusedTypes = R"(typedef signed char flagos_i8;
typedef unsigned char flagos_u8;
typedef short flagos_i16;
typedef int flagos_i32;
typedef long long flagos_i64;
#define FLAGOS_LD_F16(p, i) flagos_h2f((p)[i])
#define FLAGOS_ST_F16(p, i, v) ((p)[i] = flagos_f2h((float)(v)))
#define FLAGOS_LD_BF16(p, i) flagos_bf2f((p)[i])
#define FLAGOS_ST_BF16(p, i, v) ((p)[i] = flagos_f2bf((float)(v)))
#define flagos_rsqrt rsqrt
/* Atomic adds (inductor's scatter stores): the hardware's own. */
#define FLAGOS_ATOMIC_ADD(S, p, v) flagos_atomic_add_##S((p), (v))
FLAGOS_FN void flagos_atomic_add_i32(int* p, int v) { atomicAdd(p, v); }
FLAGOS_FN void flagos_atomic_add_i64(long long* p, long long v) {
  atomicAdd((unsigned long long*)p, (unsigned long long)v); }
FLAGOS_FN void flagos_atomic_add_f(float* p, float v) { atomicAdd(p, v); }
FLAGOS_FN void flagos_atomic_add_d(double* p, double v) { atomicAdd(p, v); }
)";

// The spellings of the shared work-group code (emit_groups.cpp).
const GroupSpelling kGroups{"__device__ ", "",           "__shared__ ", "__syncthreads();",
                            "threadIdx.x", "blockDim.x", "blockIdx.x",  "long long"};

const char* kGlobalId = "((long long)blockIdx.x * blockDim.x + threadIdx.x)";

class CudaDialect : public Dialect {
 public:
  std::string int64Type() const override { return "long long"; }
  std::string prelude(bool fp64) const override { return kPrelude + commonHelpers(fp64); }
  // NVRTC divides and takes square roots correctly rounded by default.
  std::string strictFloatOptions() const override { return "--fmad=false"; }
  std::string load(flagosDtype_t d, const std::string& ptr, const std::string& i) const override {
    if (d == FLAGOS_DTYPE_FLOAT16) return "flagos_h2f(" + ptr + "[" + i + "])";
    if (d == FLAGOS_DTYPE_BFLOAT16) return "flagos_bf2f(" + ptr + "[" + i + "])";
    return ptr + "[" + i + "]";
  }
  std::string store(flagosDtype_t d, const std::string& ptr, const std::string& i,
                    const std::string& v) const override {
    if (d == FLAGOS_DTYPE_FLOAT16) return ptr + "[" + i + "] = flagos_f2h((float)(" + v + "));";
    if (d == FLAGOS_DTYPE_BFLOAT16) return ptr + "[" + i + "] = flagos_f2bf((float)(" + v + "));";
    return ptr + "[" + i + "] = (" + storageType(d) + ")(" + v + ");";
  }
  std::string open(const std::string& name, const std::vector<Param>& params, Items items,
                   uint64_t group_size) const override {
    switch (items) {
      case Items::Uniform:
        // Every item stays for the barriers; work == 0: a launch with
        // zeroed meta and NULL pointers (Note [First launch]).
        return header(name, params, "") +
               "  if (meta.work <= 0) return;\n"
               "  const long long gid_ = " +
               kGlobalId +
               ";\n"
               "  const int live = gid_ < meta.work;\n"
               "  const long long gid = live ? gid_ : meta.work - 1;\n";
      case Items::Group: {
        const std::string g = std::to_string(group_size);
        return header(name, params, "__launch_bounds__(" + g + ") ") +
               "  if (meta.work <= 0) return;\n"
               "  const int lid = (int)threadIdx.x, lanes = (int)meta.lanes;\n"
               "  const int seg = lid / lanes, lane = lid % lanes;\n"
               "  const long long gid = (long long)blockIdx.x * (" +
               g +
               " / lanes) + seg;\n"
               "  if (gid >= meta.work) return;\n";
      }
      default:
        return header(name, params, "") + "  const long long gid = " + kGlobalId +
               ";\n  if (gid >= meta.work) return;\n";
    }
  }
  const char* skip() const override { return "return"; }
  std::string close(const std::string&, const std::vector<Param>&, Items) const override {
    return "}\n";
  }
  bool hasGroups() const override { return true; }
  std::string barrier() const override { return "__syncthreads();"; }
  std::string localArray(const std::string& type, const std::string& name,
                         uint64_t count) const override {
    return "__shared__ " + type + " " + name + "[" + std::to_string(count) + "];";
  }
  std::string groupPrelude(bool fp64) const override {
    std::string s = groupHelpers(kGroups, "float", "f") + groupHelpers(kGroups, "long long", "l");
    if (fp64) s += groupHelpers(kGroups, "double", "d");
    return s;
  }
  // One element a load (vectorWidth() is 1: an aligned vector type would
  // need aligned rows); the reduction bodies written over vectors then read
  // scalars, each item one output, neighbours coalesced.
  std::string loadVector(flagosDtype_t d, const std::string& ptr, const std::string& i,
                         const std::string& type) const override {
    return "(" + type + ")" + load(d, ptr, i);
  }
  std::string convertVector(const std::string& type, const std::string& v) const override {
    return "(" + type + ")(" + v + ")";
  }
  std::string vectorMaxMin(bool max, const std::string& type, const std::string& a,
                           const std::string& b) const override {
    const std::string fn = type == "float"    ? (max ? "flagos_maxf" : "flagos_minf")
                           : type == "double" ? (max ? "flagos_maxd" : "flagos_mind")
                                              : (max ? "flagos_imax" : "flagos_imin");
    return fn + "(" + a + ", " + b + ")";
  }
  std::string vectorTruth(const std::string& v) const override {
    return "(long long)((" + v + ") != 0)";
  }
  std::string storeVector(flagosDtype_t d, const std::string& ptr, const std::string& i,
                          const std::string& v, const std::string&) const override {
    return store(d, ptr, i, v);
  }
  std::string atomicAdd(flagosDtype_t d, const std::string& ptr, const std::string& i,
                        const std::string& v) const override {
    const std::string a = "(" + ptr + " + " + i + ")";
    switch (d) {
      case FLAGOS_DTYPE_INT32:
        return "atomicAdd(" + a + ", (int)(" + v + "));";
      case FLAGOS_DTYPE_INT64:
        return "atomicAdd((unsigned long long*)" + a + ", (unsigned long long)(long long)(" + v +
               "));";
      case FLAGOS_DTYPE_FLOAT32:
        return "atomicAdd(" + a + ", (float)(" + v + "));";
      case FLAGOS_DTYPE_FLOAT64:
        return "atomicAdd(" + a + ", (double)(" + v + "));";
      default:
        return "";
    }
  }
  bool parallelScatters() const override { return true; }

  std::string fusedPrelude(FusedMode mode, int group, int rows, bool fp64) const override {
    std::string s = prelude(fp64) + (fp64 ? "#define FLAGOS_FUSED_FP64\n" : "") + kFusedTypes +
                    fusedHelpers(fp64);
    if (mode != FusedMode::GroupReduction) return s + fusedSerialMacros();
    return s + fusedGroupPrelude(kGroups, group, rows, fp64);
  }
  std::string fusedOpen(const std::string& name, const std::vector<Param>& params,
                        FusedMode mode) const override {
    if (mode != FusedMode::GroupReduction)
      return header(name, params, "") + "  const long long xindex = " + kGlobalId +
             ";\n  if (xindex >= xnumel) return;\n";
    return header(name, params, "") + fusedGroupOpen(kGroups);
  }
  std::string fusedClose(const std::string&, const std::vector<Param>&) const override {
    return "}\n";
  }

 private:
  // `extern "C"`: the plugin looks kernels up by their plain names.
  static std::string header(const std::string& name, const std::vector<Param>& params,
                            const std::string& bounds) {
    std::string sig;
    for (const Param& p : params) {
      if (!sig.empty()) sig += ", ";
      if (p.kind == Param::Pointer) {
        sig += std::string(p.read_only ? "const " : "") + storageType(p.dtype) + "* " + p.name;
      } else {
        sig += (p.kind == Param::Meta ? std::string("flagos_meta") : p.scalar_type) + " " + p.name;
      }
    }
    return "extern \"C\" __global__ void " + bounds + name + "(" + sig + ") {\n";
  }
};

}  // namespace

std::unique_ptr<Dialect> makeCudaDialect() {
  return std::make_unique<CudaDialect>();
}

}  // namespace flagos::kernels
