// The "opencl-c" dialect: OpenCL C 1.2 kernels. Device pointers arrive as
// (base, byte offset) pairs (backends/opencl/launch.cpp, Note [Device
// pointer arguments]); the plugin may round the global size up, so every
// kernel compares its id with meta.work.
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
    return "__kernel void " + name + "(" + sig + ") {\n" + setup +
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
};

}  // namespace

std::unique_ptr<Dialect> makeOpenCLDialect() {
  return std::make_unique<OpenCLDialect>();
}

}  // namespace flagos::kernels
