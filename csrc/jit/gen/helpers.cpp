// The helper functions every generated program starts with (emit.h).
#include <cctype>

#include "jit/gen/emit.h"

namespace flagos::kernels {

std::string instantiate(const std::string& text, const std::string& type,
                        const std::string& suffix) {
  std::string s;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool edge_before = i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1]));
    const bool edge_after =
        i + 1 == text.size() || !std::isalnum(static_cast<unsigned char>(text[i + 1]));
    if (c == 'T' && edge_before && edge_after) {
      s += type;
    } else if (c == 'S' && edge_after && i >= 1 &&
               (std::islower(static_cast<unsigned char>(text[i - 1])) ||
                std::isdigit(static_cast<unsigned char>(text[i - 1])))) {
      s += suffix;
    } else {
      s += c;
    }
  }
  return s;
}

std::string commonHelpers(bool fp64) {
  std::string out =
      "FLAGOS_FN FLAGOS_I64 flagos_imax(FLAGOS_I64 a, FLAGOS_I64 b) { return a > b ? a : b; }\n"
      "FLAGOS_FN FLAGOS_I64 flagos_imin(FLAGOS_I64 a, FLAGOS_I64 b) { return a < b ? a : b; }\n"
      "FLAGOS_FN FLAGOS_I64 flagos_iabs(FLAGOS_I64 a) { return a < 0 ? -a : a; }\n"
      // Integer fmod/remainder by zero: CUDA's result (CPU raises, which
      // would need a device read): all ones for every type narrower than 64
      // bits, and 0xffffffff or -1 by the dividend's sign for int64.
      "FLAGOS_FN FLAGOS_I64 flagos_imod(FLAGOS_I64 a, FLAGOS_I64 b) {\n"
      "  if (b == 0) return a >= 0 ? (FLAGOS_I64)0xffffffff : (FLAGOS_I64)-1;\n"
      "  return b == -1 ? 0 : a % b; }\n"
      "FLAGOS_FN FLAGOS_I64 flagos_ipow(FLAGOS_I64 b, FLAGOS_I64 e) {\n"
      "  if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;\n"
      "  FLAGOS_U64 r = 1, x = (FLAGOS_U64)b;  /* unsigned: wraps like torch */\n"
      "  while (e) { if (e & 1) r *= x; x *= x; e >>= 1; }\n"
      "  return (FLAGOS_I64)r; }\n";
  // Float helpers, once per float type: T and S are the type and suffix.
  const std::string per_type =
      "/* max/min propagate NaN like torch. */\n"
      "FLAGOS_FN T flagos_maxS(T a, T b) { return (a != a || a > b) ? a : b; }\n"
      "FLAGOS_FN T flagos_minS(T a, T b) { return (a != a || a < b) ? a : b; }\n"
      "FLAGOS_FN T flagos_sigmoidS(T x) { return (T)1 / ((T)1 + exp(-x)); }\n"
      "/* pow with a scalar exponent: PyTorch's pow_tensor_scalar cases. */\n"
      "FLAGOS_FN T flagos_powsS(T x, T e) {\n"
      "  if (e == (T)2) return x * x;\n"
      "  if (e == (T)3) return x * x * x;\n"
      "  if (e == (T)0.5) return sqrt(x);\n"
      "  if (e == (T)-0.5) return (T)1 / sqrt(x);\n"
      "  if (e == (T)-1) return (T)1 / x;\n"
      "  if (e == (T)-2) return (T)1 / (x * x);\n"
      "  return pow(x, e); }\n"
      "/* Giles' approximation, then two Newton steps on erf. */\n"
      "FLAGOS_FN T flagos_erfinvS(T y) {\n"
      "  if (y != y || y < (T)-1 || y > (T)1) return (T)NAN;\n"
      "  if (y == (T)1 || y == (T)-1) return y * (T)INFINITY;\n"
      "  T w = -log(((T)1 - y) * ((T)1 + y)), p;\n"
      "  if (w < (T)5) {\n"
      "    w = w - (T)2.5; p = (T)2.81022636e-08; p = (T)3.43273939e-07 + p * w;\n"
      "    p = (T)-3.5233877e-06 + p * w; p = (T)-4.39150654e-06 + p * w;\n"
      "    p = (T)0.00021858087 + p * w; p = (T)-0.00125372503 + p * w;\n"
      "    p = (T)-0.00417768164 + p * w; p = (T)0.246640727 + p * w; p = (T)1.50140941 + p * w;\n"
      "  } else {\n"
      "    w = sqrt(w) - (T)3; p = (T)-0.000200214257; p = (T)0.000100950558 + p * w;\n"
      "    p = (T)0.00134934322 + p * w; p = (T)-0.00367342844 + p * w;\n"
      "    p = (T)0.00573950773 + p * w; p = (T)-0.0076224613 + p * w;\n"
      "    p = (T)0.00943887047 + p * w; p = (T)1.00167406 + p * w; p = (T)2.83297682 + p * w;\n"
      "  }\n"
      "  T x = p * y;\n"
      "  for (int k = 0; k < 2; ++k) {\n"
      "    T d = (T)1.1283791670955126 * exp(-x * x);\n"
      "    if (d != (T)0) x -= (erf(x) - y) / d;\n"
      "  }\n"
      "  return x; }\n"
      "/* torch's calc_digamma: reflection, recurrence to x >= 10, series. */\n"
      "FLAGOS_FN T flagos_digammaS(T x) {\n"
      "  if (x == (T)0) return copysign((T)INFINITY, -x);\n"
      "  T result = 0;\n"
      "  if (x < (T)0) {\n"
      "    if (x == trunc(x)) return (T)NAN;\n"
      "    /* tan has period pi: tan(pi (x - rint(x))), with the offset from the\n"
      "       nearest integer exact and |pi r| <= pi/2, keeps its digits where\n"
      "       tan(pi x) lost them far from 0 and next to the poles */\n"
      "    result = -(T)3.14159265358979323846 / tan((T)3.14159265358979323846 * (x - rint(x)));\n"
      "    x = (T)1 - x;\n"
      "  }\n"
      "  while (x < (T)10) { result -= (T)1 / x; x += (T)1; }\n"
      "  T y = 0;\n"
      "  if (x < (T)1e17) {\n"
      "    T z = (T)1 / (x * x);\n"
      "    y = (T)8.33333333333333333333E-2; y = y * z - (T)2.10927960927960927961E-2;\n"
      "    y = y * z + (T)7.57575757575757575758E-3; y = y * z - (T)4.16666666666666666667E-3;\n"
      "    y = y * z + (T)3.96825396825396825397E-3; y = y * z - (T)8.33333333333333333333E-3;\n"
      "    y = y * z + (T)8.33333333333333333333E-2; y = z * y;\n"
      "  }\n"
      "  return result + log(x) - (T)0.5 / x - y; }\n"
      "/* Modified Bessel I0: power series below 20, asymptotic series above\n"
      "   (exp split in two halves so float does not overflow early). */\n"
      "FLAGOS_FN T flagos_i0S(T x) {\n"
      "  x = fabs(x);\n"
      "  if (x < (T)20) {\n"
      "    T q = x * x / (T)4, term = 1, sum = 1;\n"
      "    for (int k = 1; k < 100 && term > sum * (T)1e-17; ++k) {\n"
      "      term *= q / ((T)k * (T)k); sum += term; }\n"
      "    return sum;\n"
      "  }\n"
      "  T inv = (T)1 / ((T)8 * x), term = 1, sum = 1;\n"
      "  for (int k = 1; k < 30; ++k) {\n"
      "    term *= (T)(2 * k - 1) * (T)(2 * k - 1) * inv / (T)k; sum += term; }\n"
      "  T root = exp(x / (T)2);\n"
      "  /* sqrt(2 pi) sqrt(x), not sqrt(2 pi x): that overflows for x near max */\n"
      "  return root * (root / ((T)2.5066282746310002 * sqrt(x))) * sum; }\n";
  // Note [Zeta by Euler-Maclaurin]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // The Hurwitz zeta function zeta(s, q) = sum over k >= 0 of (q + k)^-s
  // (DLMF 25.11.1), for special_zeta and the polygamma functions of order
  // n >= 2 (DLMF 25.11.12). The first terms are summed directly until the
  // base a = q + N is at least 9 and N at least 9 (or a term no longer
  // changes the sum); the rest is Euler-Maclaurin's formula at a (DLMF
  // 2.10.1 applied to x^-s): a^(1-s)/(s-1) - a^-s/2 (the last direct term
  // counted half) + sum over j of B_2j/(2j)! s(s+1)...(s+2j-2) a^(1-s-2j),
  // twelve Bernoulli terms at most, stopping when one no longer changes the
  // sum. The domain follows CPU: s = 1 is +inf, s < 1 NaN; q <= 0 is +inf at
  // the poles (q a whole number) and NaN unless s is whole. float takes the
  // double routine where the target has double, as CPU computes float zeta
  // in double.
  const std::string zeta =
      "/* Note [Zeta by Euler-Maclaurin] */\n"
      "FLAGOS_FN T flagos_zetaS(T s, T q) {\n"
      "  if (s != s || q != q) return (T)NAN;\n"
      "  if (s == (T)1) return (T)INFINITY;\n"
      "  if (s < (T)1) return (T)NAN;\n"
      "  if (q <= (T)0) {\n"
      "    if (q == floor(q)) return (T)INFINITY;\n"
      "    if (s != floor(s)) return (T)NAN;\n"
      "  }\n"
      "  const T eps = sizeof(T) == 8 ? (T)1.1102230246251565e-16 : (T)5.9604645e-08;\n"
      "  T a = q, b = pow(q, -s), sum = b;\n"
      "  for (int k = 1; k < 9 || a <= (T)9; ++k) {\n"
      "    a += (T)1; b = pow(a, -s); sum += b;\n"
      "    if (fabs(b) < eps * fabs(sum)) return sum;\n"
      "  }\n"
      "  sum += b * a / (s - (T)1) - (T)0.5 * b;\n"
      "  const T c[12] = {(T)8.333333333333333e-2, (T)-1.388888888888889e-3,\n"
      "    (T)3.306878306878307e-05, (T)-8.267195767195768e-07, (T)2.08767569878681e-08,\n"
      "    (T)-5.284190138687493e-10, (T)1.3382536530684679e-11, (T)-3.3896802963225827e-13,\n"
      "    (T)8.586062056277845e-15, (T)-2.174868698558062e-16, (T)5.5090028283602295e-18,\n"
      "    (T)-1.3954464685812522e-19};\n"
      "  T rising = s, power = b / a;\n"
      "  for (int j = 0; j < 12; ++j) {\n"
      "    const T term = c[j] * rising * power;\n"
      "    sum += term;\n"
      "    if (fabs(term) < eps * fabs(sum)) break;\n"
      "    rising *= (s + (T)(2 * j + 1)) * (s + (T)(2 * j + 2));\n"
      "    power /= a * a;\n"
      "  }\n"
      "  return sum; }\n";
  const std::string polygamma =
      "/* trigamma: reflection below 1/2 (DLMF 5.15.6), six steps of the\n"
      "   recurrence (5.15.5), then the asymptotic series (5.15.8). */\n"
      "FLAGOS_FN T flagos_trigammaS(T x) {\n"
      "  const T pi = (T)3.14159265358979323846;\n"
      "  T sign = 1, result = 0;\n"
      "  if (x < (T)0.5) {\n"
      "    const T sp = sin(pi * x);\n"
      "    sign = -1; result -= pi * pi / (sp * sp); x = (T)1 - x;\n"
      "  }\n"
      "  for (int i = 0; i < 6; ++i) { result += (T)1 / (x * x); x += (T)1; }\n"
      "  const T ixx = (T)1 / (x * x);\n"
      "  result += ((T)1 + (T)1 / ((T)2 * x) +\n"
      "             ixx * ((T)1 / (T)6 - ixx * ((T)1 / (T)30 - ixx * ((T)1 / (T)42)))) / x;\n"
      "  return sign * result; }\n"
      "/* polygamma(n, x), n >= 2: (-1)^(n+1) n! zeta(n + 1, x) (DLMF 25.11.12). */\n"
      "FLAGOS_FN T flagos_polygammaS(T n, T x) {\n"
      "  if (n == (T)0) return flagos_digammaS(x);\n"
      "  if (n == (T)1) return flagos_trigammaS(x);\n"
      "  const T sign = fmod(n, (T)2) != (T)0 ? (T)1 : (T)-1;\n"
      "  return sign * exp(lgamma(n + (T)1)) * flagos_zetaS(n + (T)1, x); }\n";
  out += instantiate(per_type, "float", "f");
  if (fp64) {
    out += instantiate(zeta, "double", "d");
    out += "FLAGOS_FN float flagos_zetaf(float s, float q) { return (float)flagos_zetad(s, q); }\n";
  } else {
    out += instantiate(zeta, "float", "f");
  }
  out += instantiate(polygamma, "float", "f");
  // Note [Fast paths of the generator's math] (lower.cpp): float erf.
  out +=
      "FLAGOS_FN float flagos_erf32(float x) {\n"
      "  const float ax = fabs(x), t = 1.0f / (1.0f + 0.3275911f * ax);\n"
      "  const float r = (((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t\n"
      "                   - 0.284496736f) * t + 0.254829592f;\n"
      "  return copysign(1.0f - r * t * exp(-ax * ax), x); }\n";
  if (fp64) out += instantiate(per_type, "double", "d") + instantiate(polygamma, "double", "d");
  return out;
}

}  // namespace flagos::kernels
