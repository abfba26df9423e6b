// torch.special's functions for the generated tier, emitted only into
// programs that call them (emit.cpp): Note [Orthogonal polynomials],
// Note [Modified Bessel functions of order one] and Note [Normal
// distribution functions].
//
// Note [Orthogonal polynomials]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch.special's Chebyshev (four kinds, plain and shifted), Hermite (H and
// He), Laguerre and Legendre polynomials P_n(x), n an element of a second
// tensor. Each is its three-term recurrence from P_0 = 1 and P_1 (DLMF
// 18.9.1, 18.9.2 for the Chebyshev kinds, 18.9.20/21 Hermite, 18.9.13
// Laguerre, 18.9.1 Legendre), with the closed values CPU takes first, so
// results agree to rounding:
//  - the degree is n truncated to an integer; a negative one, NaN, an
//    infinity or a value past int64 gives 0 (CPU's conversion makes those
//    negative);
//  - Chebyshev at y = +-1 (y = x + x - 1 for the shifted kinds) is its
//    closed value (DLMF 18.6.1: T 1, U n+1, V 1, W 2n+1 at y = 1, times
//    (-1)^n and kinds swapped as V <-> W at y = -1), and above a degree
//    (the same thresholds as CPU's kernels) with |y| < 1 it is the
//    trigonometric form in theta = acos(y) (DLMF 18.5.1-18.5.4);
//  - Hermite of degree above 128 (float) or 512 (double) is NaN;
//  - Laguerre at x = 0 is 1, Legendre at x = +-1 is (+-1)^n;
//  - a recurrence stops once its value is NaN.
//
// Note [Modified Bessel functions of order one]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// I1(x) and the scaled exp(-|x|) I0(x), exp(-|x|) I1(x) as helpers.cpp's
// I0: the power series (DLMF 10.25.2) below 20, whose terms are all
// positive, and Hankel's asymptotic series (DLMF 10.40.1, terms
// (mu - (2k-1)^2) / (8kx) with mu = 4 nu^2) above, times exp(|x|), which
// overflows where CPU's exp(x) * chbevl(...) does (|x| near 88.7 in float,
// before the value itself would). I1 is odd (I1(-0) is +0 as on CPU) and
// NaN at +-inf (inf * 0 here, inf/inf in CPU's form); the scaled ones are 0
// at +-inf. spherical_bessel_j0 is
// sin(x)/x, its Taylor series below 1/2 and 0 at +-inf.
//
// Note [Normal distribution functions]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// erfcx(x) = exp(x^2) erfc(x) is that product below 2 (erfc is accurate
// relative to itself there, and the product overflows to inf below about
// -9.4 in float, -26.6 in double, as CPU's does), and above 2 the
// continued fraction of erfc (DLMF 7.9.2: 1 / (sqrt(pi) (x + (1/2) / (x +
// 1 / (x + (3/2) / (x + ...)))))), evaluated backward from depth 60, which
// is within a few ulps of CPU's Faddeeva-based value in double from x = 2
// on and needs no exp(x^2) (erfcx(inf) = 0). log_ndtr is CPU's formula
// over it (log(erfcx(-t) / 2) - t^2 below x = -1, log1p(-erfc(t) / 2)
// above, t = x / sqrt(2)). ndtri(p) starts from Acklam's rational
// approximation (relative error 1.2e-9) and takes two Halley steps on
// Phi(x) = p, with the tail that keeps precision: p - Phi(x) below 1/2,
// Q(x) - (1 - p) above (1 - p is exact there); 0 and 1 give -inf and inf,
// outside [0, 1] NaN.
#include <string>

#include "jit/gen/emit.h"

namespace flagos::kernels {

std::string specialFunctionHelpers(bool fp64) {
  const std::string text =
      "/* Note [Orthogonal polynomials] */\n"
      "FLAGOS_FN FLAGOS_I64 flagos_sf_degreeS(T n) {\n"
      "  return (n > (T)-1 && n < (T)9.2e18) ? (FLAGOS_I64)n : (FLAGOS_I64)-1; }\n"
      "/* Chebyshev of the first to fourth kind (0..3) at y; above degree trig,\n"
      "   |y| < 1 takes the closed form. */\n"
      "FLAGOS_FN T flagos_sf_chebyshevS(T y, T nf, int kind, FLAGOS_I64 trig) {\n"
      "  const FLAGOS_I64 n = flagos_sf_degreeS(nf);\n"
      "  if (n < 0) return (T)0;\n"
      "  const T sign = (n % 2) ? (T)-1 : (T)1, n1 = (T)(n + 1), n21 = (T)(n + n + 1);\n"
      "  if (fabs(y) == (T)1) {\n"
      "    if (kind == 0) return y > (T)0 ? (T)1 : sign;\n"
      "    if (kind == 1) return y > (T)0 ? n1 : sign * n1;\n"
      "    if (kind == 2) return y > (T)0 ? (T)1 : sign * n21;\n"
      "    return y > (T)0 ? n21 : sign;\n"
      "  }\n"
      "  if (n > trig && fabs(y) < (T)1) {\n"
      "    const T t = acos(y);\n"
      "    if (kind == 0) return cos((T)n * t);\n"
      "    if (kind == 1) return sin(t) != (T)0 ? sin(n1 * t) / sin(t) : n1 * cos(n1 * t) / y;\n"
      "    if (kind == 2)\n"
      "      return sin(t / (T)2) != (T)1 ? cos(((T)n + (T)0.5) * t) / cos(t / (T)2) : sign * "
      "n21;\n"
      "    return cos(t / (T)2) != (T)1 ? sin(((T)n + (T)0.5) * t) / sin(t / (T)2)\n"
      "                                 : (y > (T)0 ? n21 : sign);\n"
      "  }\n"
      "  T p = (T)1;\n"
      "  T q = kind == 0 ? y : kind == 1 ? y + y : kind == 2 ? y + y - (T)1 : y + y + (T)1;\n"
      "  if (n == 0) return p;\n"
      "  for (FLAGOS_I64 k = 2; k <= n && q == q; ++k) {\n"
      "    const T r = (y + y) * q - p; p = q; q = r; }\n"
      "  return q; }\n"
      "FLAGOS_FN T flagos_sf_chebyshev_tS(T x, T n) { return flagos_sf_chebyshevS(x, n, 0, 6); }\n"
      "FLAGOS_FN T flagos_sf_chebyshev_uS(T x, T n) { return flagos_sf_chebyshevS(x, n, 1, 8); }\n"
      "FLAGOS_FN T flagos_sf_chebyshev_vS(T x, T n) { return flagos_sf_chebyshevS(x, n, 2, 8); }\n"
      "FLAGOS_FN T flagos_sf_chebyshev_wS(T x, T n) { return flagos_sf_chebyshevS(x, n, 3, 8); }\n"
      "FLAGOS_FN T flagos_sf_shifted_tS(T x, T n) {\n"
      "  return flagos_sf_chebyshevS(x + x - (T)1, n, 0, 6); }\n"
      "FLAGOS_FN T flagos_sf_shifted_uS(T x, T n) {\n"
      "  return flagos_sf_chebyshevS(x + x - (T)1, n, 1, 6); }\n"
      "FLAGOS_FN T flagos_sf_shifted_vS(T x, T n) {\n"
      "  return flagos_sf_chebyshevS(x + x - (T)1, n, 2, 6); }\n"
      "FLAGOS_FN T flagos_sf_shifted_wS(T x, T n) {\n"
      "  return flagos_sf_chebyshevS(x + x - (T)1, n, 3, 4); }\n"
      "FLAGOS_FN T flagos_sf_hermite_hS(T x, T nf) {\n"
      "  const FLAGOS_I64 n = flagos_sf_degreeS(nf);\n"
      "  if (n < 0) return (T)0;\n"
      "  if (n == 0) return (T)1;\n"
      "  if (n == 1) return x + x;\n"
      "  if (n > (sizeof(T) == 8 ? 512 : 128)) return (T)NAN;\n"
      "  T p = (T)1, q = x + x;\n"
      "  for (FLAGOS_I64 k = 2; k < n + n; k += 2) {\n"
      "    const T r = (x + x) * q - (T)k * p; p = q; q = r; }\n"
      "  return q; }\n"
      "FLAGOS_FN T flagos_sf_hermite_heS(T x, T nf) {\n"
      "  const FLAGOS_I64 n = flagos_sf_degreeS(nf);\n"
      "  if (n < 0) return (T)0;\n"
      "  if (n == 0) return (T)1;\n"
      "  if (n == 1) return x;\n"
      "  if (n > (sizeof(T) == 8 ? 512 : 128)) return (T)NAN;\n"
      "  T p = (T)1, q = x;\n"
      "  for (FLAGOS_I64 k = 1; k < n; ++k) { const T r = x * q - (T)k * p; p = q; q = r; }\n"
      "  return q; }\n"
      "FLAGOS_FN T flagos_sf_laguerre_lS(T x, T nf) {\n"
      "  const FLAGOS_I64 n = flagos_sf_degreeS(nf);\n"
      "  if (n < 0) return (T)0;\n"
      "  if (fabs(x) == (T)0 || n == 0) return (T)1;\n"
      "  T p = (T)1, q = (T)1 - x;\n"
      "  for (FLAGOS_I64 k = 1; k < n && q == q; ++k) {\n"
      "    const T r = (((T)(k + k) + ((T)1 - x)) * q - (T)k * p) / (T)(k + 1); p = q; q = r; }\n"
      "  return q; }\n"
      "FLAGOS_FN T flagos_sf_legendre_pS(T x, T nf) {\n"
      "  const FLAGOS_I64 n = flagos_sf_degreeS(nf);\n"
      "  if (n < 0) return (T)0;\n"
      "  if (fabs(x) == (T)1) return (x > (T)0 || n % 2 == 0) ? (T)1 : (T)-1;\n"
      "  if (n == 0) return (T)1;\n"
      "  T p = (T)1, q = x;\n"
      "  for (FLAGOS_I64 k = 1; k < n && q == q; ++k) {\n"
      "    const T r = ((T)(k + k + 1) * x * q - (T)k * p) / (T)(k + 1); p = q; q = r; }\n"
      "  return q; }\n";
  const std::string bessel =
      "/* Note [Modified Bessel functions of order one]: the sum of Hankel's\n"
      "   series for I_nu (mu = 4 nu^2) at |x| >= 20. */\n"
      "FLAGOS_FN T flagos_sf_hankelS(T ax, T mu) {\n"
      "  T inv = (T)1 / ((T)8 * ax), term = (T)1, sum = (T)1;\n"
      "  for (int k = 1; k < 30; ++k) {\n"
      "    term *= -(mu - (T)(2 * k - 1) * (T)(2 * k - 1)) * inv / (T)k; sum += term;\n"
      "    if (fabs(term) < (T)1e-17 * fabs(sum)) break; }\n"
      "  return sum / ((T)2.5066282746310002 * sqrt(ax)); }\n"
      "/* I_nu(|x|) for nu = 0, 1, times exp(-|x|) when scaled. */\n"
      "FLAGOS_FN T flagos_sf_besseliS(T x, int nu, int scaled) {\n"
      "  const T ax = fabs(x);\n"
      "  if (ax < (T)20) {\n"
      "    const T h = ax / (T)2, q = h * h;\n"
      "    T term = nu ? h : (T)1, sum = term;\n"
      "    for (int k = 1; k < 100 && term > sum * (T)1e-17; ++k) {\n"
      "      term *= q / ((T)k * (T)(k + nu)); sum += term; }\n"
      "    return scaled ? sum * exp(-ax) : sum;\n"
      "  }\n"
      "  const T sum = flagos_sf_hankelS(ax, nu ? (T)4 : (T)0);\n"
      "  return scaled ? sum : exp(ax) * sum; }\n"
      "FLAGOS_FN T flagos_sf_i1S(T x) {\n"
      "  const T r = flagos_sf_besseliS(x, 1, 0); return x < (T)0 ? -r : r; }\n"
      "FLAGOS_FN T flagos_sf_i0eS(T x) { return flagos_sf_besseliS(x, 0, 1); }\n"
      "/* I0 overflowing where CPU's does (helpers.cpp's i0 keeps finite values longer). */\n"
      "FLAGOS_FN T flagos_sf_i0S(T x) { return flagos_sf_besseliS(x, 0, 0); }\n"
      "FLAGOS_FN T flagos_sf_i1eS(T x) {\n"
      "  const T r = flagos_sf_besseliS(x, 1, 1); return x < (T)0 ? -r : r; }\n"
      "FLAGOS_FN T flagos_sf_spherical_j0S(T x) {\n"
      "  if (isinf(x)) return (T)0;\n"
      "  if (fabs(x) < (T)0.5) {\n"
      "    const T q = x * x;\n"
      "    T term = (T)1, sum = (T)1;\n"
      "    for (int k = 1; k < 10; ++k) { term *= -q / ((T)(2 * k) * (T)(2 * k + 1)); sum += term; "
      "}\n"
      "    return sum;\n"
      "  }\n"
      "  return sin(x) / x; }\n";
  const std::string normal =
      "/* Note [Normal distribution functions] */\n"
      "FLAGOS_FN T flagos_sf_erfcxS(T x) {\n"
      "  if (x != x) return x;\n"
      "  if (x < (T)2) return exp(x * x) * erfc(x);\n"
      "  T t = x;\n"
      "  for (int k = 60; k > 0; --k) t = x + ((T)k * (T)0.5) / t;\n"
      "  return (T)1 / ((T)1.7724538509055160273 * t); }\n"
      "FLAGOS_FN T flagos_sf_log_ndtrS(T x) {\n"
      "  const T t = x * (T)0.70710678118654752440;\n"
      "  if (x < (T)-1) return log(flagos_sf_erfcxS(-t) / (T)2) - t * t;\n"
      "  return log1p(-erfc(t) / (T)2); }\n"
      "FLAGOS_FN T flagos_sf_ndtriS(T p) {\n"
      "  if (!(p >= (T)0 && p <= (T)1)) return (T)NAN;\n"
      "  if (p == (T)0) return -(T)INFINITY;\n"
      "  if (p == (T)1) return (T)INFINITY;\n"
      "  const T lo = (T)0.02425;\n"
      "  T x;\n"
      "  if (p < lo || p > (T)1 - lo) {\n"
      "    const T q = sqrt((T)-2 * (p < lo ? log(p) : log1p(-p)));\n"
      "    x = ((((((T)-7.784894002430293e-03 * q + (T)-3.223964580411365e-01) * q +\n"
      "          (T)-2.400758277161838e+00) * q + (T)-2.549732539343734e+00) * q +\n"
      "          (T)4.374664141464968e+00) * q + (T)2.938163982698783e+00) /\n"
      "        ((((((T)7.784695709041462e-03 * q + (T)3.224671290700398e-01) * q +\n"
      "           (T)2.445134137142996e+00) * q + (T)3.754408661907416e+00) * q) + (T)1);\n"
      "    if (p > (T)1 - lo) x = -x;\n"
      "  } else {\n"
      "    const T q = p - (T)0.5, r = q * q;\n"
      "    x = ((((((T)-3.969683028665376e+01 * r + (T)2.209460984245205e+02) * r +\n"
      "          (T)-2.759285104469687e+02) * r + (T)1.383577518672690e+02) * r +\n"
      "          (T)-3.066479806614716e+01) * r + (T)2.506628277459239e+00) * q /\n"
      "        ((((((T)-5.447609879822406e+01 * r + (T)1.615858368580409e+02) * r +\n"
      "           (T)-1.556989798598866e+02) * r + (T)6.680131188771972e+01) * r +\n"
      "           (T)-1.328068155288572e+01) * r + (T)1);\n"
      "  }\n"
      "  for (int k = 0; k < 2; ++k) {\n"
      "    const T e = p <= (T)0.5 ? erfc(-x * (T)0.70710678118654752440) / (T)2 - p\n"
      "                            : ((T)1 - p) - erfc(x * (T)0.70710678118654752440) / (T)2;\n"
      "    const T u = e * (T)2.5066282746310005024 * exp(x * x / (T)2);\n"
      "    x = x - u / ((T)1 + x * u / (T)2);\n"
      "  }\n"
      "  return x; }\n";
  std::string out = instantiate(text + bessel + normal, "float", "f");
  if (fp64) out += instantiate(text + bessel + normal, "double", "d");
  return out;
}

}  // namespace flagos::kernels
