// torch.special's functions for the generated tier, emitted only into
// programs that call them (emit.cpp): Note [Orthogonal polynomials] and
// Note [Modified Bessel functions of order one].
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
  std::string out = instantiate(text + bessel, "float", "f");
  if (fp64) out += instantiate(text + bessel, "double", "d");
  return out;
}

}  // namespace flagos::kernels
