// Random operators as generated kernels: Philox4x32-10 in every dialect and
// the distributions over it (Note [Random numbers on the device]).
//
// Note [Random numbers on the device]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every random kernel computes its elements from the flagos generator's
// (seed, offset) alone, so the numbers do not depend on the backend, the
// work-group size, the vector width or the thread count:
//
//  - element i of a call (i: its row-major index in the output's shape,
//    whatever the strides) takes one Philox4x32-10 block (Salmon et al.,
//    "Parallel random numbers: as easy as 1, 2, 3", SC'11) with
//    key = (seed & 0xffffffff, seed >> 32) and
//    counter = (n & 0xffffffff, n >> 32, 0, 0), n = offset + i (mod 2^64);
//    its four words w0..w3 are the element's only randomness;
//  - the call advances the generator's offset by its elements, rounded up
//    to a multiple of 4 (runtime/generator.h), under the generator's lock,
//    so consecutive calls never share a counter;
//  - uniform floats take the top bits of w0 (24 for float32, 11 for
//    float16, 8 for bfloat16: u = (w0 >> (32 - d)) * 2^-d in [0, 1));
//    float64 takes 53 bits of (w0, w1) (and (w2, w3) for a second one);
//  - normals: Box-Muller on the pair (u1, u2) = (1 - u(w0), u(w1))
//    (float64: the two 53-bit uniforms): sqrt(-2 log u1) cos(2 pi u2);
//  - Bernoulli(p): w0 >> 8 < p * 2^24 (exact: no rounding in the compare);
//  - integers: ATen's range reduction, w0 % range (w0 w1 as 64 bits when
//    the range or the dtype needs them: random_(from, to) from a range of
//    2^28 on, as ATen's uniform_int_from_to).
//
// Bit-identical results need identical arithmetic on every compiler: the
// helpers below use only +, -, *, / and sqrt (correctly rounded: C,
// CUDA's defaults, OpenCL with -cl-fp32-correctly-rounded-divide-sqrt),
// rint/ceil/ldexp and bit casts (exact), never a libm or builtin
// transcendental (each library rounds its own way); log, cos/sin and exp
// are polynomials here, and contraction into fma is off (C: ISO mode and
// -ffp-contract=off; OpenCL: the FP_CONTRACT pragma; CUDA: --fmad=false).
#include <cmath>
#include <cstdint>

#include "jit/gen/emit.h"
#include "jit/gen/recipe.h"
#include "jit/gen/source_template.h"

namespace flagos::kernels {
namespace {

struct RandomRow {
  RandomOp op;
  int float_scalars;  // leading scalars passed as floats (the rest: int64)
  int int_scalars;    // then int64 scalars before the generator's pair
};

const std::vector<std::pair<std::string, RandomRow>>& randomRows() {
  static const std::vector<std::pair<std::string, RandomRow>> kRows = {
      {"uniform", {RandomOp::Uniform, 2, 0}},
      {"normal", {RandomOp::Normal, 2, 0}},
      {"log_normal", {RandomOp::LogNormal, 2, 0}},
      {"exponential", {RandomOp::Exponential, 1, 0}},
      {"cauchy", {RandomOp::Cauchy, 2, 0}},
      {"geometric", {RandomOp::Geometric, 1, 0}},
      {"bernoulli_scalar", {RandomOp::BernoulliScalar, 1, 0}},
      {"bernoulli_tensor", {RandomOp::BernoulliTensor, 0, 0}},
      {"native_dropout", {RandomOp::Dropout, 1, 1}},
      {"random_from_to", {RandomOp::RandomFromTo, 0, 2}},
      {"random", {RandomOp::Random, 0, 0}},
  };
  return kRows;
}

const RandomRow* rowOf(const std::string& id) {
  for (const auto& r : randomRows())
    if (r.first == id) return &r.second;
  return nullptr;
}

bool reject(std::string* why_not, const std::string& why) {
  if (why_not) *why_not = why;
  return false;
}

double floatValue(const flagosScalar& s) {
  return isFloating(s.dtype) ? s.f : static_cast<double>(s.i);
}
int64_t intValue(const flagosScalar& s) {
  return isFloating(s.dtype) ? static_cast<int64_t>(s.f) : s.i;
}

// Mantissa digits of a floating dtype (std::numeric_limits<T>::digits).
int digitsOf(flagosDtype_t d) {
  switch (d) {
    case FLAGOS_DTYPE_FLOAT16:
      return 11;
    case FLAGOS_DTYPE_BFLOAT16:
      return 8;
    case FLAGOS_DTYPE_FLOAT64:
      return 53;
    default:
      return 24;
  }
}

// The inclusive range of an integral dtype.
void intRange(flagosDtype_t d, int64_t* lo, int64_t* hi) {
  switch (d) {
    case FLAGOS_DTYPE_BOOL:
      *lo = 0, *hi = 1;
      return;
    case FLAGOS_DTYPE_UINT8:
      *lo = 0, *hi = 255;
      return;
    case FLAGOS_DTYPE_INT8:
      *lo = -128, *hi = 127;
      return;
    case FLAGOS_DTYPE_INT16:
      *lo = -32768, *hi = 32767;
      return;
    case FLAGOS_DTYPE_INT32:
      *lo = INT32_MIN, *hi = INT32_MAX;
      return;
    default:
      *lo = INT64_MIN, *hi = INT64_MAX;
  }
}

// The deterministic math (Note [Random numbers on the device]). Written
// over FLAGOS_FN, FLAGOS_U32/U64 and the dialect's bit casts flagos_f2u,
// flagos_u2f (and flagos_d2u, flagos_u2d with fp64).
const char* kPhilox = R"(/* Philox4x32-10 (Salmon et al., SC'11). The high word of a 32 x 32-bit
   product: CUDA's instruction; elsewhere a 64-bit product (PoCL's mul_hi
   was 3x slower in the dropout kernel). */
#if defined(__CUDACC__)
#define FLAGOS_MULHI(a, b) __umulhi((FLAGOS_U32)(a), (FLAGOS_U32)(b))
#else
#define FLAGOS_MULHI(a, b) ((FLAGOS_U32)(((FLAGOS_U64)(a) * (FLAGOS_U32)(b)) >> 32))
#endif
typedef struct { FLAGOS_U32 v0, v1, v2, v3; } flagos_philox_t;
FLAGOS_FN flagos_philox_t flagos_philox(FLAGOS_U32 c0, FLAGOS_U32 c1, FLAGOS_U32 c2, FLAGOS_U32 c3,
                                        FLAGOS_U32 k0, FLAGOS_U32 k1) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const FLAGOS_U32 hi0 = FLAGOS_MULHI(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const FLAGOS_U32 hi1 = FLAGOS_MULHI(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
  }
  flagos_philox_t w; w.v0 = c0; w.v1 = c1; w.v2 = c2; w.v3 = c3; return w; }
/* The block of stream element n under seed. */
FLAGOS_FN flagos_philox_t flagos_philox_at(FLAGOS_U64 seed, FLAGOS_U64 n) {
  return flagos_philox((FLAGOS_U32)n, (FLAGOS_U32)(n >> 32), 0u, 0u, (FLAGOS_U32)seed,
                       (FLAGOS_U32)(seed >> 32)); }
/* Uniform floats in [0, 1) from the top bits. */
FLAGOS_FN float flagos_rng_uf(FLAGOS_U32 x) { return (float)(x >> 8) * 5.9604644775390625e-08f; }
/* log(x), x >= 0 normal: x = m 2^e, m in [sqrt(1/2), sqrt(2)], log m = 2 atanh(s). */
FLAGOS_FN float flagos_rng_logf(float x) {
  const FLAGOS_U32 b = flagos_f2u(x);
  const float m1 = flagos_u2f((b & 0x007fffffu) | 0x3f800000u);
  const int big = m1 > 1.41421356f;
  const int e = (int)(b >> 23) - 127 + big;
  const float m = big ? m1 * 0.5f : m1;
  const float s = (m - 1.0f) / (m + 1.0f), z = s * s;
  float p = 0.09090909090909091f;
  p = p * z + 0.1111111111111111f;
  p = p * z + 0.14285714285714285f;
  p = p * z + 0.2f;
  p = p * z + 0.3333333333333333f;
  const float s2 = s + s, lm = s2 + s2 * (z * p), fe = (float)e;
  const float r = fe * 0.693145751953125f + (fe * 1.428606765330187e-06f + lm);
  return x == 0.0f ? -INFINITY : r; }
/* cos and sin of a in [-pi/4, pi/4] (Taylor), then of quarter turns t. */
FLAGOS_FN float flagos_rng_cospf(float a) {
  const float z = a * a;
  float p = -2.755731922398589e-07f;
  p = p * z + 2.48015873015873e-05f;
  p = p * z - 0.001388888888888889f;
  p = p * z + 0.041666666666666664f;
  p = p * z - 0.5f;
  return p * z + 1.0f; }
FLAGOS_FN float flagos_rng_sinpf(float a) {
  const float z = a * a;
  float p = 2.7557319223985893e-06f;
  p = p * z - 0.0001984126984126984f;
  p = p * z + 0.008333333333333333f;
  p = p * z - 0.16666666666666666f;
  return a + (a * z) * p; }
/* cos(pi/2 t): q = rint(t) and t - q are exact for the t used here. */
FLAGOS_FN float flagos_rng_cosqtf(float t) {
  const float q = rint(t), a = (t - q) * 1.5707963267948966f;
  const int k = (int)q & 3;
  const float c = flagos_rng_cospf(a), s = flagos_rng_sinpf(a);
  return k == 0 ? c : k == 1 ? -s : k == 2 ? -c : s; }
/* tan(pi/2 t), t in [-1, 1]. */
FLAGOS_FN float flagos_rng_tanqtf(float t) {
  const float q = rint(t), a = (t - q) * 1.5707963267948966f;
  const float c = flagos_rng_cospf(a), s = flagos_rng_sinpf(a);
  return ((int)q & 1) ? -c / s : s / c; }
/* exp(x): 2^k e^r, |r| <= log(2)/2, Cody-Waite reduction. */
FLAGOS_FN float flagos_rng_expf(float x0) {
  const float x = x0 > 88.72283935546875f ? 88.72283935546875f
                  : x0 < -103.97208404541016f ? -103.97208404541016f : x0;
  const float k = rint(x * 1.4426950408889634f);
  const float r = (x - k * 0.693145751953125f) - k * 1.428606765330187e-06f;
  float p = 2.7557319223985893e-06f;
  p = p * r + 2.48015873015873e-05f;
  p = p * r + 0.0001984126984126984f;
  p = p * r + 0.001388888888888889f;
  p = p * r + 0.008333333333333333f;
  p = p * r + 0.041666666666666664f;
  p = p * r + 0.16666666666666666f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float v = ldexp(p, (int)k);
  return x0 != x0 ? x0 : x0 > 88.72283935546875f ? INFINITY
         : x0 < -103.97208404541016f ? 0.0f : v; }
)";

const char* kPhiloxDouble = R"(FLAGOS_FN double flagos_rng_ud(FLAGOS_U32 hi, FLAGOS_U32 lo) {
  return (double)((((FLAGOS_U64)hi << 32) | lo) >> 11) * 1.1102230246251565e-16; }
FLAGOS_FN double flagos_rng_logd(double x) {
  const FLAGOS_U64 b = flagos_d2u(x);
  const double m1 = flagos_u2d((b & 0x000fffffffffffffUL) | 0x3ff0000000000000UL);
  const int big = m1 > 1.4142135623730951;
  const int e = (int)(b >> 52) - 1023 + big;
  const double m = big ? m1 * 0.5 : m1;
  const double s = (m - 1.0) / (m + 1.0), z = s * s;
  double p = 0.043478260869565216;
  p = p * z + 0.047619047619047616;
  p = p * z + 0.05263157894736842;
  p = p * z + 0.058823529411764705;
  p = p * z + 0.06666666666666667;
  p = p * z + 0.07692307692307693;
  p = p * z + 0.09090909090909091;
  p = p * z + 0.1111111111111111;
  p = p * z + 0.14285714285714285;
  p = p * z + 0.2;
  p = p * z + 0.3333333333333333;
  const double s2 = s + s, lm = s2 + s2 * (z * p), fe = (double)e;
  const double r = fe * 6.93147180369123816490e-01 + (fe * 1.90821492927058770002e-10 + lm);
  return x == 0.0 ? -INFINITY : r; }
FLAGOS_FN double flagos_rng_cospd(double a) {
  const double z = a * a;
  double p = -1.5619206968586225e-16;
  p = p * z + 4.779477332387385e-14;
  p = p * z - 1.1470745597729725e-11;
  p = p * z + 2.08767569878681e-09;
  p = p * z - 2.755731922398589e-07;
  p = p * z + 2.48015873015873e-05;
  p = p * z - 0.001388888888888889;
  p = p * z + 0.041666666666666664;
  p = p * z - 0.5;
  return p * z + 1.0; }
FLAGOS_FN double flagos_rng_sinpd(double a) {
  const double z = a * a;
  double p = 2.8114572543455206e-15;
  p = p * z - 7.647163731819816e-13;
  p = p * z + 1.6059043836821613e-10;
  p = p * z - 2.505210838544172e-08;
  p = p * z + 2.7557319223985893e-06;
  p = p * z - 0.0001984126984126984;
  p = p * z + 0.008333333333333333;
  p = p * z - 0.16666666666666666;
  return a + (a * z) * p; }
FLAGOS_FN double flagos_rng_cosqtd(double t) {
  const double q = rint(t), a = (t - q) * 1.5707963267948966;
  const int k = (int)q & 3;
  const double c = flagos_rng_cospd(a), s = flagos_rng_sinpd(a);
  return k == 0 ? c : k == 1 ? -s : k == 2 ? -c : s; }
FLAGOS_FN double flagos_rng_tanqtd(double t) {
  const double q = rint(t), a = (t - q) * 1.5707963267948966;
  const double c = flagos_rng_cospd(a), s = flagos_rng_sinpd(a);
  return ((int)q & 1) ? -c / s : s / c; }
FLAGOS_FN double flagos_rng_expd(double x0) {
  const double x = x0 > 709.782712893384 ? 709.782712893384
                   : x0 < -745.1332191019412 ? -745.1332191019412 : x0;
  const double k = rint(x * 1.4426950408889634);
  const double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
  double p = 1.6059043836821613e-10;
  p = p * r + 2.08767569878681e-09;
  p = p * r + 2.505210838544172e-08;
  p = p * r + 2.755731922398589e-07;
  p = p * r + 2.7557319223985893e-06;
  p = p * r + 2.48015873015873e-05;
  p = p * r + 0.0001984126984126984;
  p = p * r + 0.001388888888888889;
  p = p * r + 0.008333333333333333;
  p = p * r + 0.041666666666666664;
  p = p * r + 0.16666666666666666;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const double v = ldexp(p, (int)k);
  return x0 != x0 ? x0 : x0 > 709.782712893384 ? INFINITY : x0 < -745.1332191019412 ? 0.0 : v; }
)";

// Per float type (T, S as instantiate() reads them): the distributions.
// `u` and `u2` are the element's first and second uniforms.
const char* kDistributions = R"(FLAGOS_FN T flagos_rng_normalS(T u, T u2) {
  return sqrt((T)-2 * flagos_rng_logS((T)1 - u)) * flagos_rng_cosqtS((T)4 * u2); }
/* log1p(x) from log: exact for the rounding of 1 + x (Goldberg). */
FLAGOS_FN T flagos_rng_log1pS(T x) {
  const T y = (T)1 + x;
  return y == (T)1 ? x : flagos_rng_logS(y) * (x / (y - (T)1)); }
)";

std::string str(int64_t v) {
  return std::to_string(v);
}

// The body of every random kernel: the element's block, what the operator
// computes from it (${prologue}), the store.
constexpr const char* kRandomFrame =
    R"(${offsets}  const flagos_philox_t w = flagos_philox_at((FLAGOS_U64)s${seed}, (FLAGOS_U64)s${offset} + (FLAGOS_U64)gid);
${prologue}  ${store}
)";
constexpr const char* kUniform = R"(  const ${C} lo = ${lo}, hi = ${hi};
  const ${C} v = lo + (hi - lo) * ${u};
)";
// CUDA's guard: log(u1) never 0 (and no underflow in the dtype).
constexpr const char* kExponential = R"(  const ${C} u1 = (${C})1 - ${u};
  const ${C} lg = u1 >= (${C})1 - ${half_eps} ? -${half_eps} : flagos_rng_log${x}(u1);
)";
constexpr const char* kGeometric =
    R"(  const ${C} g = ceil(flagos_rng_log${x}((${C})1 - ${u}) / flagos_rng_log1p${x}(-${p}));
)";
// ATen's native_dropout: mask ~ Bernoulli(1 - p), out = x * mask * scale.
// Selects and bitwise ops only: a loop with control flow in its body does
// not vectorize.
constexpr const char* kDropout = R"(  const ${F} keep_p = (${F})1 - s0;
  const int train = ${train};
  const int keep = (int)((${F})(w.v0 >> 8) < keep_p * (${F})16777216) | !train;
  const ${F} inv = keep_p == (${F})0 ? (${F})0 : (${F})1 / keep_p;
  const ${C} scale = (${C})(train ? inv : (${F})1);
  const ${C} x = (${C})${x};
  ${store_mask}
)";
// ATen's uniform_int_from_to: 64 random bits from a range of 2^28 on (32
// bits leave up to 2^28 / 2^32 of skew), else w0 alone.
constexpr const char* kRandomFromTo = R"(  const FLAGOS_U64 range = (FLAGOS_U64)s1 - (FLAGOS_U64)s0;
  const FLAGOS_U64 r = range >= ((FLAGOS_U64)1 << 28)
      ? ((((FLAGOS_U64)w.v0 << 32) | w.v1) % range) : (FLAGOS_U64)(w.v0 % (FLAGOS_U32)range);
)";

}  // namespace

std::string randomHelpers(bool fp64) {
  std::string s = kPhilox + instantiate(kDistributions, "float", "f");
  if (fp64) s += kPhiloxDouble + instantiate(kDistributions, "double", "d");
  return s;
}

bool makeRandomRecipe(const OpInfo& op, Recipe* r, std::string* why_not) {
  const RandomRow* row = rowOf(op.id);
  if (!row) return reject(why_not, "random operator '" + op.id + "' has no generator recipe");
  const size_t want = static_cast<size_t>(row->float_scalars + row->int_scalars + 1);
  if (op.scalars.size() != want || op.scalars.back() != "generator") {
    return reject(why_not,
                  op.id + ": expected " + str((int64_t)want - 1) + " scalars, then the generator");
  }
  r->kind = RecipeKind::Random;
  r->random_op = row->op;
  r->random_float_scalars = row->float_scalars;
  return true;
}

int randomScalarCount(const Recipe& recipe) {
  // The catalog's scalars, the generator counting twice (seed, offset).
  return static_cast<int>(recipe.scalars.size()) + 1;
}

bool randomFloatScalar(const Recipe& recipe, int k) {
  return k < recipe.random_float_scalars;
}

bool randomSupports(const Recipe& recipe, const Call& call, std::string* why_not) {
  const std::string& id = recipe.id;
  if (call.num_scalars != randomScalarCount(recipe)) {
    return reject(why_not, id + ": scalar count differs from the catalog's");
  }
  const flagosScalar* s = call.scalars;
  const flagosScalar& seed = s[call.num_scalars - 2];
  const flagosScalar& offset = s[call.num_scalars - 1];
  if (seed.dtype == 0 || offset.dtype == 0) return reject(why_not, id + ": no generator state");
  const flagosDtype_t out = call.outputs[0].dtype;
  auto value = [&](int k) { return floatValue(s[k]); };
  auto present = [&](int k) { return s[k].dtype != 0; };
  // Arguments CPU rejects: declined, so that the host tier raises its error.
  switch (recipe.random_op) {
    case RandomOp::Uniform:
      if (!isFloating(out)) return reject(why_not, id + ": not a floating output");
      if (!(value(0) <= value(1)) || std::isinf(value(0)) || std::isinf(value(1)))
        return reject(why_not, id + ": from > to or not finite");
      return true;
    case RandomOp::Normal:
    case RandomOp::LogNormal:
      if (!isFloating(out)) return reject(why_not, id + ": not a floating output");
      if (!(value(1) >= 0) || (recipe.random_op == RandomOp::LogNormal && !(value(1) > 0)))
        return reject(why_not, id + ": std out of range");
      return true;
    case RandomOp::Exponential:
      if (!isFloating(out)) return reject(why_not, id + ": not a floating output");
      if (!(value(0) > 0) || std::isinf(value(0))) return reject(why_not, id + ": lambda <= 0");
      return true;
    case RandomOp::Cauchy:
      if (!isFloating(out)) return reject(why_not, id + ": not a floating output");
      if (!(value(1) > 0)) return reject(why_not, id + ": sigma <= 0");
      return true;
    case RandomOp::Geometric:
      if (!(value(0) > 0 && value(0) < 1)) return reject(why_not, id + ": p not in (0, 1)");
      return true;
    case RandomOp::BernoulliScalar:
      if (!(value(0) >= 0 && value(0) <= 1)) return reject(why_not, id + ": p not in [0, 1]");
      return true;
    case RandomOp::BernoulliTensor:
      if (call.num_inputs != 1 || !isFloating(call.inputs[0].dtype))
        return reject(why_not, id + ": p is not a floating tensor");
      return true;
    case RandomOp::Dropout:
      if (call.num_outputs != 2 || call.num_inputs != 1 || !isFloating(call.inputs[0].dtype) ||
          call.outputs[0].dtype != call.inputs[0].dtype ||
          call.outputs[1].dtype != FLAGOS_DTYPE_BOOL)
        return reject(why_not, id + ": expected a floating input, its output and a bool mask");
      if (!(value(0) >= 0 && value(0) <= 1)) return reject(why_not, id + ": p not in [0, 1]");
      return true;
    case RandomOp::RandomFromTo: {
      // random_.to has no `from` (0); random_.from's `to` may be None.
      if (!present(1)) return reject(why_not, id + ": 'to' is None");
      const int64_t from = present(0) ? intValue(s[0]) : 0, to = intValue(s[1]);
      if (from >= to) return reject(why_not, id + ": from >= to");
      if (isFloating(out)) {
        const int64_t lim = int64_t{1} << digitsOf(out);
        if (from < -lim || to - 1 > lim) return reject(why_not, id + ": range beyond the dtype");
      } else {
        int64_t lo, hi;
        intRange(out, &lo, &hi);
        if (from < lo || to - 1 > hi) return reject(why_not, id + ": range beyond the dtype");
      }
      if (static_cast<uint64_t>(to) - static_cast<uint64_t>(from) > (uint64_t{1} << 63))
        return reject(why_not, id + ": range wider than 2^63");
      return true;
    }
    case RandomOp::Random:
      return true;
  }
  return false;
}

std::string randomBody(const Recipe& r, const Signature& sig, bool baked, const Dialect& dl,
                       bool fp64) {
  const std::string i64 = dl.int64Type();
  const int nsc = static_cast<int>(sig.scalar_dtypes.size());
  const flagosDtype_t out = sig.operands[0].dtype;
  const bool dbl = out == FLAGOS_DTYPE_FLOAT64 || (r.random_op == RandomOp::Dropout &&
                                                   sig.operands[2].dtype == FLAGOS_DTYPE_FLOAT64);
  const std::string ct = dbl ? "double" : "float", sx = dbl ? "d" : "f";
  const std::string ft = fp64 ? "double" : "float";  // the float scalars' type
  std::vector<std::string> index;
  const std::string offsets = elementOffsets(sig, baked, i64, &index);
  // The element's uniforms in the compute type: u from w0 (w0 w1 for
  // double), u2 from w1 (w2 w3).
  const std::string u = dbl ? "flagos_rng_ud(w.v0, w.v1)" : "flagos_rng_uf(w.v0)";
  const std::string u2 = dbl ? "flagos_rng_ud(w.v2, w.v3)" : "flagos_rng_uf(w.v1)";
  auto fs = [&](int k) { return "((" + ct + ")s" + str(k) + ")"; };
  std::string prologue, value;
  switch (r.random_op) {
    case RandomOp::Uniform: {
      const int d = digitsOf(out);
      std::string uu = u;
      if (!dbl && d != 24) {
        uu = "((float)(w.v0 >> " + str(32 - d) + ") * " +
             (d == 11 ? "0.00048828125f" : "0.00390625f") + ")";
      }
      prologue = fillTemplate(kUniform, {{"C", ct}, {"lo", fs(0)}, {"hi", fs(1)}, {"u", uu}});
      value = "(v < hi ? v : lo)";
      break;
    }
    case RandomOp::Normal:
      value = fs(0) + " + " + fs(1) + " * flagos_rng_normal" + sx + "(" + u + ", " + u2 + ")";
      break;
    case RandomOp::LogNormal:
      value = "flagos_rng_exp" + sx + "(" + fs(0) + " + " + fs(1) + " * flagos_rng_normal" + sx +
              "(" + u + ", " + u2 + "))";
      break;
    case RandomOp::Exponential: {
      const std::string half_eps = out == FLAGOS_DTYPE_FLOAT64    ? "1.1102230246251565e-16"
                                   : out == FLAGOS_DTYPE_FLOAT16  ? "0.00048828125f"
                                   : out == FLAGOS_DTYPE_BFLOAT16 ? "0.00390625f"
                                                                  : "5.9604644775390625e-08f";
      prologue =
          fillTemplate(kExponential, {{"C", ct}, {"u", u}, {"half_eps", half_eps}, {"x", sx}});
      value = "(" + ct + ")-1 / " + fs(0) + " * lg";
      break;
    }
    case RandomOp::Cauchy:
      value = fs(0) + " + " + fs(1) + " * flagos_rng_tanqt" + sx + "((" + ct + ")2 * " + u +
              " - (" + ct + ")1)";
      break;
    case RandomOp::Geometric:
      prologue = fillTemplate(kGeometric, {{"C", ct}, {"x", sx}, {"u", u}, {"p", fs(0)}});
      value = "(g < (" + ct + ")1 ? (" + ct + ")1 : g)";
      break;
    case RandomOp::BernoulliScalar:
      value = "((" + ft + ")(w.v0 >> 8) < s0 * (" + ft + ")16777216)";
      break;
    case RandomOp::BernoulliTensor: {
      const flagosDtype_t pd = sig.operands[1].dtype;
      const std::string pt = pd == FLAGOS_DTYPE_FLOAT64 ? "double" : "float";
      value = "((" + pt + ")(w.v0 >> 8) < (" + pt + ")" + dl.load(pd, "p1", index[1]) + " * (" +
              pt + ")16777216)";
      break;
    }
    case RandomOp::Dropout: {
      const bool has_train = sig.scalar_dtypes[1] != 0;
      prologue = fillTemplate(
          kDropout, {{"F", ft},
                     {"train", has_train ? "s1 != 0" : "1"},
                     {"C", ct},
                     {"x", dl.load(sig.operands[2].dtype, "p2", index[2])},
                     {"store_mask", dl.store(FLAGOS_DTYPE_BOOL, "p1", index[1], "keep")}});
      value = "x * (" + ct + ")keep * scale";
      break;
    }
    case RandomOp::RandomFromTo:
      prologue = kRandomFromTo;
      value = "(" + i64 + ")((FLAGOS_U64)s0 + r)";
      break;
    case RandomOp::Random: {
      // ATen's uniform_int: random64 for int64 and double, else 32 bits.
      const std::string w64 = "((((FLAGOS_U64)w.v0 << 32) | w.v1))";
      if (out == FLAGOS_DTYPE_BOOL) {
        value = "(w.v0 & 1u)";
      } else if (isFloating(out)) {
        const int d = digitsOf(out);
        const std::string m = "(((FLAGOS_U64)1 << " + str(d) + ") + 1)";
        value = "(" + i64 + ")(" + (d == 53 ? w64 : "(FLAGOS_U64)w.v0") + " % " + m + ")";
      } else {
        int64_t lo, hi;
        intRange(out, &lo, &hi);
        const std::string m = "((FLAGOS_U64)" + str(hi) + "UL + 1)";
        value = "(" + i64 + ")(" + (out == FLAGOS_DTYPE_INT64 ? w64 : "(FLAGOS_U64)w.v0") + " % " +
                m + ")";
      }
      break;
    }
  }
  if (out == FLAGOS_DTYPE_BOOL) value = "((" + value + ") != 0)";
  // The element's block: Note [Random numbers on the device].
  return fillTemplate(kRandomFrame, {{"offsets", offsets},
                                     {"seed", str(nsc - 2)},
                                     {"offset", str(nsc - 1)},
                                     {"prologue", prologue},
                                     {"store", dl.store(out, "p0", index[0], value)}});
}

}  // namespace flagos::kernels
