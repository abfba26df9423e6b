// Note [Fused kernels]: the frame around a body inductor's flagos backend
// wrote, and the helpers both dialects give such bodies.
#include "jit/gen/fused.h"

#include <sstream>
#include <stdexcept>

namespace flagos::kernels {

namespace {

// @p text without its NaN tests (x != x), for integer types.
std::string integerArg(std::string text) {
  for (const char* nan : {"a != a", "b != b"}) {
    for (size_t at = text.find(nan); at != std::string::npos; at = text.find(nan, at))
      text.replace(at, 6, "0");
  }
  return text;
}

}  // namespace

std::string fusedHelpers(bool fp64) {
  // Chan et al.'s combine of two (mean, m2, weight) partials; one element
  // x is the partial (x, 0, 1), so the serial update is the same call.
  const std::string welford =
      "FLAGOS_FN void flagos_welford_combineS(T* mean, T* m2, T* w, T mb, T m2b, T wb) {\n"
      "  if (wb == (T)0) return;\n"
      "  const T wn = *w + wb, delta = mb - *mean, r = wb / wn;\n"
      "  *mean += delta * r; *m2 += m2b + delta * delta * *w * r; *w = wn; }\n";
  // Whether (b, ib) beats (a, ia): torch's argmax/argmin pick the first
  // NaN, else the first extremum (partials arrive out of order, so ties
  // compare indices).
  const std::string arg =
      "FLAGOS_FN int flagos_argmax_betterS(T a, FLAGOS_I64 ia, T b, FLAGOS_I64 ib) {\n"
      "  if (a != a) return b != b && ib < ia;\n"
      "  if (b != b) return 1;\n"
      "  return b > a || (b == a && ib < ia); }\n"
      "FLAGOS_FN int flagos_argmin_betterS(T a, FLAGOS_I64 ia, T b, FLAGOS_I64 ib) {\n"
      "  if (a != a) return b != b && ib < ia;\n"
      "  if (b != b) return 1;\n"
      "  return b < a || (b == a && ib < ia); }\n";
  // Python's floor division and modulo (torch's // and remainder).
  const std::string pymod =
      "FLAGOS_FN T flagos_fpymodS(T a, T b) {\n"
      "  const T r = fmod(a, b);\n"
      "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }\n";
  std::string out =
      "FLAGOS_FN FLAGOS_I64 flagos_ifloordiv(FLAGOS_I64 a, FLAGOS_I64 b) {\n"
      "  if (b == 0) return 0;\n"
      "  const FLAGOS_I64 q = a / b;\n"
      "  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }\n"
      "FLAGOS_FN FLAGOS_I64 flagos_ipymod(FLAGOS_I64 a, FLAGOS_I64 b) {\n"
      "  if (b == 0) return 0;\n"
      "  const FLAGOS_I64 r = a % b;\n"
      "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }\n";
  out += instantiate(welford + arg + pymod, "float", "f") +
         instantiate(integerArg(arg), "FLAGOS_I64", "i");
  if (fp64) out += instantiate(welford + arg + pymod, "double", "d");
  return out;
}

std::string fusedSerialMacros() {
  return "#define FLAGOS_RLOOP(r, n) for (FLAGOS_I64 r = 0; r < (n); ++r)\n"
         "#define FLAGOS_GROUP_LEADER 1\n"
         "#define FLAGOS_STORE_OK 1\n"
         "#define FLAGOS_GROUP_SUM(S, v) (v)\n"
         "#define FLAGOS_GROUP_PROD(S, v) (v)\n"
         "#define FLAGOS_GROUP_MAX(S, v) (v)\n"
         "#define FLAGOS_GROUP_MIN(S, v) (v)\n"
         "#define FLAGOS_GROUP_WELFORD(S, mean, m2, w)\n"
         "#define FLAGOS_GROUP_ARGMAX(S, v, i)\n"
         "#define FLAGOS_GROUP_ARGMIN(S, v, i)\n";
}

Source emitFused(const FusedKernel& k, const Dialect& dl) {
  bool bounded = false;
  for (const Param& p : k.params) bounded |= p.kind == Param::Scalar && p.name == "xnumel";
  if (!bounded) throw std::invalid_argument("fused kernel '" + k.name + "' has no xnumel");
  if (k.mode == FusedMode::GroupReduction) {
    if (!dl.hasGroups())
      throw std::invalid_argument("fused kernel '" + k.name +
                                  "': this language has no work-groups");
    if (k.group < 1 || (k.group & (k.group - 1)) != 0)
      throw std::invalid_argument("fused kernel '" + k.name +
                                  "': the group size must be a power of two");
    if (k.rows < 1) throw std::invalid_argument("fused kernel '" + k.name + "': rows < 1");
  }
  std::ostringstream s;
  s << "/* flagos fused kernel (Note [Fused kernels]) */\n"
    << dl.fusedPrelude(k.mode, k.group, k.rows, k.fp64) << dl.fusedOpen(k.name, k.params, k.mode)
    << k.body << dl.fusedClose(k.name, k.params);
  return Source{s.str(), k.name, dl.buildOptions(true)};
}

}  // namespace flagos::kernels
