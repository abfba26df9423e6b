// vecmath_body.h for AVX-512F (16 floats): the width PyTorch's own CPU
// kernels use where the CPU has it (SLEEF's exp runs faster per element
// than its AVX2 form here). Built with -mavx512f; runs only after
// vecmath.cpp has checked the CPU (Note [Vector math]).
#if defined(FLAGOS_HOST_VEC_X86)

#include <immintrin.h>
#include <sleef.h>

#include <limits>

#include "vecmath_body.h"
#include "vecmath_impl.h"

namespace flagos_host::kernels::vec {
namespace {

struct Avx512 {
  using F = __m512;
  static constexpr int kWidth = 16;
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  // Float and/xor need AVX-512DQ; the integer forms are AVX-512F.
  static F bitAnd(F a, F b) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
  }
  static F bitXor(F a, F b) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
  }
  // Note [Inline exp]
  // ~~~~~~~~~~~~~~~~~
  // Cephes' expf (Cody-Waite reduction, degree-5 polynomial; within 2 ULP of
  // the correctly rounded result over the whole float range, denormal
  // results included through scalef), inlined. SLEEF's out-of-line call made
  // the compiler spill every live vector around it: GELU ran at half of
  // native CPU's speed with it.
  static F exp(F x) {
    const F n = _mm512_roundscale_ps(_mm512_mul_ps(x, set1(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    F r = _mm512_fnmadd_ps(n, set1(0.693359375f), x);  // n * ln2, in two parts
    r = _mm512_fnmadd_ps(n, set1(-2.12194440e-4f), r);
    F p = set1(1.9875691500e-4f);
    p = fmadd(p, r, set1(1.3981999507e-3f));
    p = fmadd(p, r, set1(8.3334519073e-3f));
    p = fmadd(p, r, set1(4.1665795894e-2f));
    p = fmadd(p, r, set1(1.6666665459e-1f));
    p = fmadd(p, r, set1(5.0000001201e-1f));
    p = fmadd(p, mul(r, r), add(r, set1(1.0f)));
    F y = _mm512_scalef_ps(p, n);  // p * 2^n, NaN stays NaN
    // Past the ends (and +-inf, where r above is NaN): CPU's inf and 0.
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, set1(88.72283935546875f), _CMP_GT_OQ), y,
                             set1(std::numeric_limits<float>::infinity()));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, set1(-103.972084f), _CMP_LT_OQ), y,
                                _mm512_setzero_ps());
  }
  static F log(F x) { return Sleef_logf16_u10avx512f(x); }
  static F tanh(F x) { return Sleef_tanhf16_u10avx512f(x); }
  static F sin(F x) { return Sleef_sinf16_u10avx512f(x); }
  static F cos(F x) { return Sleef_cosf16_u10avx512f(x); }
  static int nanMask(F v) { return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q); }
  struct D {
    __m512d lo, hi;
  };
  static D dzero() { return {_mm512_setzero_pd(), _mm512_setzero_pd()}; }
  static void addWidened(F v, D& acc) {
    acc.lo = _mm512_add_pd(acc.lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    acc.hi = _mm512_add_pd(
        acc.hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  }
  static double dsum(const D& acc) {
    alignas(64) double t[8];
    _mm512_store_pd(t, _mm512_add_pd(acc.lo, acc.hi));
    return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
  }
};

}  // namespace

const Kernels* avx512Kernels() {
  using B = Body<Avx512>;
  static const Kernels k = {B::apply,       B::applyGrad,           B::rowSum,      B::rowMax,
                            B::expShiftSum, B::rowSquaredDeviation, B::normalizeRow};
  return &k;
}

}  // namespace flagos_host::kernels::vec

#endif  // FLAGOS_HOST_VEC_X86
