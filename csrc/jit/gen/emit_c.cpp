// The "c" dialect: plain C99 for the host plugin's system compiler
// (generator.h: `void NAME(void* const* args, uint64_t begin, uint64_t end)`).
#include "jit/gen/emit.h"

namespace flagos::kernels {
namespace {

const char* storageType(flagosDtype_t d) {
  switch (d) {
    case FLAGOS_DTYPE_BOOL:
    case FLAGOS_DTYPE_UINT8:
      return "uint8_t";
    case FLAGOS_DTYPE_INT8:
      return "int8_t";
    case FLAGOS_DTYPE_INT16:
      return "int16_t";
    case FLAGOS_DTYPE_INT32:
      return "int32_t";
    case FLAGOS_DTYPE_INT64:
      return "int64_t";
    case FLAGOS_DTYPE_FLOAT16:
    case FLAGOS_DTYPE_BFLOAT16:
      return "uint16_t";
    case FLAGOS_DTYPE_FLOAT32:
      return "float";
    default:
      return "double";
  }
}

// IEEE half and bfloat16 <-> float, round to nearest even (no _Float16:
// not every C compiler has it).
const char* kHalfHelpers = R"(FLAGOS_FN float flagos_h2f(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
  if (e == 0) {
    if (m == 0) { bits = s; } else {
      e = 113; while (!(m & 0x400)) { m <<= 1; --e; }
      bits = s | (e << 23) | ((m & 0x3ff) << 13);
    }
  } else if (e == 31) { bits = s | 0x7f800000 | (m << 13); }
  else { bits = s | ((e + 112) << 23) | (m << 13); }
  float f; memcpy(&f, &bits, 4); return f; }
FLAGOS_FN uint16_t flagos_f2h(float f) {
  uint32_t x; memcpy(&x, &f, 4);
  uint32_t s = (x >> 16) & 0x8000, m = x & 0x7fffff;
  int32_t e = (int32_t)((x >> 23) & 0xff);
  if (e == 255) return (uint16_t)(s | 0x7c00 | (m ? 0x200 : 0));
  e = e - 127 + 15;
  if (e >= 31) return (uint16_t)(s | 0x7c00);
  if (e <= 0) {
    if (e < -10) return (uint16_t)s;
    m |= 0x800000;
    int shift = 14 - e;
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (h & 1))) ++h;
    return (uint16_t)(s | h);
  }
  uint32_t h = s | ((uint32_t)e << 10) | (m >> 13), rem = m & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return (uint16_t)h; }
FLAGOS_FN float flagos_bf2f(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16; float f; memcpy(&f, &bits, 4); return f; }
FLAGOS_FN uint16_t flagos_f2bf(float f) {
  uint32_t x; memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
  return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16); }
)";

// Note [Fused kernel bodies]: the neutral names in C.
const char* kFusedTypes = R"(#include <stdbool.h>
typedef int8_t flagos_i8;
typedef uint8_t flagos_u8;
typedef int16_t flagos_i16;
typedef int32_t flagos_i32;
typedef int64_t flagos_i64;
#define FLAGOS_LD_F16(p, i) flagos_h2f((p)[i])
#define FLAGOS_ST_F16(p, i, v) ((p)[i] = flagos_f2h((float)(v)))
#define FLAGOS_LD_BF16(p, i) flagos_bf2f((p)[i])
#define FLAGOS_ST_BF16(p, i, v) ((p)[i] = flagos_f2bf((float)(v)))
#define flagos_rsqrt(x) (1 / sqrt(x))
/* Atomic adds (inductor's scatter stores): the plugin runs item ranges on
   several threads. GCC/clang builtins; floats by compare-and-swap on bits. */
#define FLAGOS_ATOMIC_ADD(S, p, v) flagos_atomic_add_##S((p), (v))
static inline void flagos_atomic_add_i32(int32_t* p, int32_t v) {
  __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline void flagos_atomic_add_i64(int64_t* p, int64_t v) {
  __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline void flagos_atomic_add_f(float* p, float v) {
  uint32_t old = __atomic_load_n((uint32_t*)p, __ATOMIC_RELAXED), next; float f;
  do { memcpy(&f, &old, 4); f += v; memcpy(&next, &f, 4); }
  while (!__atomic_compare_exchange_n((uint32_t*)p, &old, next, 1, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)); }
static inline void flagos_atomic_add_d(double* p, double v) {
  uint64_t old = __atomic_load_n((uint64_t*)p, __ATOMIC_RELAXED), next; double f;
  do { memcpy(&f, &old, 8); f += v; memcpy(&next, &f, 8); }
  while (!__atomic_compare_exchange_n((uint64_t*)p, &old, next, 1, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)); }
)";

// Note [Vector math in generated C]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A loop calling libm's scalar exp/tanh/log stays scalar: sigmoid and
// tanh-gelu ran many times slower than a copy. Declared with GCC's
// `simd` attribute (as glibc's own math-vector.h does under -ffast-math),
// these functions get vectorized by the loop vectorizer into calls of
// glibc's vector math library libmvec (_ZGVdN8v_expf: 1-4 ulp, the
// variant of the target ISA; linked through libm's AS_NEEDED libmvec), and
// only with -fno-math-errno (buildOptions; nothing reads errno) and -O3.
// That brings them close to a copy (docs/benchmarks.md, "Measurements
// behind design decisions"). SLEEF's GNU-ABI library exports the same
// names, but loaded next to libmvec (which -lm pulls in) its IFUNCs crashed
// the process; a polynomial exp of our own vectorized too but ran sigmoid
// slower than libmvec. glibc >= 2.35 has every function below; elsewhere
// (clang, other libcs, other CPUs) the code is the same, only scalar.
const char* kVectorMath =
    R"(#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define FLAGOS_VEC(fn) __attribute__((simd("notinbranch"))) float fn##f(float); \
                       __attribute__((simd("notinbranch"))) double fn(double);
#define FLAGOS_VEC2(fn) __attribute__((simd("notinbranch"))) float fn##f(float, float); \
                        __attribute__((simd("notinbranch"))) double fn(double, double);
FLAGOS_VEC(exp) FLAGOS_VEC(exp2) FLAGOS_VEC(exp10) FLAGOS_VEC(expm1) FLAGOS_VEC(log)
FLAGOS_VEC(log2) FLAGOS_VEC(log10) FLAGOS_VEC(log1p) FLAGOS_VEC(sin) FLAGOS_VEC(cos)
FLAGOS_VEC(tan) FLAGOS_VEC(asin) FLAGOS_VEC(acos) FLAGOS_VEC(atan) FLAGOS_VEC(sinh)
FLAGOS_VEC(cosh) FLAGOS_VEC(tanh) FLAGOS_VEC(asinh) FLAGOS_VEC(acosh) FLAGOS_VEC(atanh)
FLAGOS_VEC(erf) FLAGOS_VEC(erfc) FLAGOS_VEC(cbrt) FLAGOS_VEC2(pow) FLAGOS_VEC2(atan2)
FLAGOS_VEC2(hypot)
#undef FLAGOS_VEC
#undef FLAGOS_VEC2
#endif
)";

// The bit casts of the random helpers (random.cpp).
const char* kBitCasts =
    R"(FLAGOS_FN uint32_t flagos_f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
FLAGOS_FN float flagos_u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
FLAGOS_FN uint64_t flagos_d2u(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
FLAGOS_FN double flagos_u2d(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
)";

class CDialect : public Dialect {
 public:
  std::string int64Type() const override { return "int64_t"; }
  std::string prelude(bool fp64) const override {
    // tgmath.h: exp(float) is expf, as OpenCL's overloads; the vector
    // declarations come before its macros.
    return std::string("#include <stdint.h>\n#include <string.h>\n#include <math.h>\n") +
           kVectorMath +
           "#include <tgmath.h>\n"
           "#define FLAGOS_I64 int64_t\n#define FLAGOS_U64 uint64_t\n"
           "#define FLAGOS_FN static inline\n#define FLAGOS_U32 uint32_t\n" +
           kHalfHelpers + kBitCasts + commonHelpers(true);
  }
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
                   uint64_t) const override {
    const std::string s = header(name, params);
    if (items == Items::Range) {
      return s + "  const int64_t rbegin = (int64_t)begin;\n" +
             "  const int64_t rend = (int64_t)end < meta.work ? (int64_t)end : meta.work;\n";
    }
    // The bound in the loop's condition, not a test in its body: a loop
    // whose body is conditional does not vectorize the calls in it (Note
    // [Vector math in generated C]).
    return s + "  const uint64_t stop = (int64_t)end < meta.work ? end : (uint64_t)meta.work;\n" +
           "  for (uint64_t item = begin; item < stop; ++item) {\n" +
           "  const int64_t gid = (int64_t)item;\n";
  }
  bool hasRanges() const override { return true; }
  std::string simdLoop(const std::string& reductions) const override {
    return "#pragma omp simd" + (reductions.empty() ? "" : " reduction(" + reductions + ")");
  }
  const char* skip() const override { return "continue"; }
  // Serial: torch CPU's order, so duplicate indices give torch's result.
  bool parallelScatters() const override { return false; }
  // The host plugin's cc runs -O2, whose cost model does not vectorize
  // loops that need alias checks or call vector math: -O3, and Note
  // [Vector math in generated C] and the `omp simd` loops of reductions
  // (Note [Reduction strategies]) need the other two. Generic kernels too:
  // they run every new shape until its specialized kernel is ready.
  std::string buildOptions(bool) const override { return "-O3 -fno-math-errno -fopenmp-simd"; }
  // -std=c99 already keeps a * b + c apart; said again for compilers
  // whose default differs. -fno-trapping-math changes no value: it lets
  // GCC compute both arms of a select (a division among them), without
  // which a loop with one does not vectorize (dropout and randn among them,
  // several times slower when scalar).
  std::string strictFloatOptions() const override { return "-ffp-contract=off -fno-trapping-math"; }
  std::string close(const std::string& name, const std::vector<Param>& params,
                    Items items) const override {
    return std::string(items == Items::Range ? "" : "  }\n") + "}\nconst int " + name +
           "_num_args = " + std::to_string(params.size()) + ";\n";
  }

  std::string fusedPrelude(FusedMode, int, int, bool) const override {
    return prelude(true) + kFusedTypes + fusedHelpers(true) + fusedSerialMacros();
  }
  std::string fusedOpen(const std::string& name, const std::vector<Param>& params,
                        FusedMode) const override {
    // The bound in the loop's condition (Note [Vector math in generated C]).
    return header(name, params) +
           "  const uint64_t flagos_stop = (int64_t)end < xnumel ? end : (uint64_t)xnumel;\n"
           "  for (uint64_t flagos_item = begin; flagos_item < flagos_stop; ++flagos_item) {\n"
           "  const int64_t xindex = (int64_t)flagos_item;\n";
  }
  std::string fusedClose(const std::string& name, const std::vector<Param>& params) const override {
    return close(name, params, Items::PerItem);
  }

 private:
  // The entry point, and each parameter read from args[k].
  static std::string header(const std::string& name, const std::vector<Param>& params) {
    std::string s = "void " + name + "(void* const* args, uint64_t begin, uint64_t end) {\n";
    for (size_t k = 0; k < params.size(); ++k) {
      const Param& p = params[k];
      std::string arg = "args[" + std::to_string(k) + "]";
      if (p.kind == Param::Pointer) {
        std::string t = storageType(p.dtype);
        s += "  " + std::string(p.read_only ? "const " : "") + t + "* " + p.name + " = *(" + t +
             "* const*)" + arg + ";\n";
      } else {
        std::string t = p.kind == Param::Meta ? "flagos_meta" : p.scalar_type;
        s += "  " + t + " " + p.name + "; memcpy(&" + p.name + ", " + arg + ", sizeof " + p.name +
             ");\n";
      }
    }
    return s;
  }
};

}  // namespace

std::unique_ptr<Dialect> makeCDialect() {
  return std::make_unique<CDialect>();
}

}  // namespace flagos::kernels
