// vecmath_body.h for AVX2 + FMA (8 floats). Built with -mavx2 -mfma; runs
// only after vecmath.cpp has checked the CPU (Note [Vector math]).
#if defined(FLAGOS_HOST_VEC_X86)

#include <immintrin.h>
#include <sleef.h>

#include "vecmath_body.h"
#include "vecmath_impl.h"

namespace flagos_host::kernels::vec {
namespace {

struct Avx2 {
  using F = __m256;
  static constexpr int kWidth = 8;
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F bitAnd(F a, F b) { return _mm256_and_ps(a, b); }
  static F bitXor(F a, F b) { return _mm256_xor_ps(a, b); }
  static F exp(F x) { return Sleef_expf8_u10avx2(x); }
  static F log(F x) { return Sleef_logf8_u10avx2(x); }
  static F tanh(F x) { return Sleef_tanhf8_u10avx2(x); }
  static F sin(F x) { return Sleef_sinf8_u10avx2(x); }
  static F cos(F x) { return Sleef_cosf8_u10avx2(x); }
  static int nanMask(F v) { return _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)); }
  struct D {
    __m256d lo, hi;
  };
  static D dzero() { return {_mm256_setzero_pd(), _mm256_setzero_pd()}; }
  static void addWidened(F v, D& acc) {
    acc.lo = _mm256_add_pd(acc.lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    acc.hi = _mm256_add_pd(acc.hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  static double dsum(const D& acc) {
    alignas(32) double t[4];
    _mm256_store_pd(t, _mm256_add_pd(acc.lo, acc.hi));
    return (t[0] + t[1]) + (t[2] + t[3]);
  }
};

}  // namespace

const Kernels* avx2Kernels() {
  using B = Body<Avx2>;
  static const Kernels k = {B::apply,       B::applyGrad,           B::rowSum,      B::rowMax,
                            B::expShiftSum, B::rowSquaredDeviation, B::normalizeRow};
  return &k;
}

}  // namespace flagos_host::kernels::vec

#endif  // FLAGOS_HOST_VEC_X86
