// The work-group code every dialect with work-groups shares (OpenCL C and
// CUDA C): the combine helpers of reductions (Note [Work-group combine
// helpers], emit.h) and the frame of fused group reductions (Note [Fused
// kernel bodies], fused.h), written once over a GroupSpelling.
#include <utility>
#include <vector>

#include "jit/gen/emit.h"

namespace flagos::kernels {

// Note [Work-group combine helpers] (emit.h) for one type: the first level
// folds runs of 8 values into s[lanes + 1 ...], the second (lane 0) those
// into s[lanes], which every lane then reads; the next call writes s[lane]
// before its first barrier, so no trailing barrier is needed.
std::string groupHelpers(const GroupSpelling& g, const std::string& t, const std::string& suffix) {
  const bool floating = t != g.i64;
  const std::string max = floating ? "flagos_max" + suffix : "flagos_imax";
  const std::string min = floating ? "flagos_min" + suffix : "flagos_imin";
  const std::string ptr = g.local_ptr + t + "*";
  std::string out;
  for (const auto& [op, expr] :
       std::vector<std::pair<std::string, std::string>>{{"sum", "r + s[k]"},
                                                        {"prod", "r * s[k]"},
                                                        {"max", max + "(r, s[k])"},
                                                        {"min", min + "(r, s[k])"}}) {
    const std::string seg = "flagos_segment_" + op + "_" + suffix;
    out += g.fn + t + " " + seg + "(" + t + " v, " + ptr + " s, int lane, int n) {\n" +
           "  const int m = (n + 7) / 8;\n"
           "  s[lane] = v;\n  " +
           g.barrier + "\n  if (lane < m) {\n    " + t +
           " r = s[lane * 8];\n"
           "    for (int k = lane * 8 + 1; k < lane * 8 + 8 && k < n; ++k) r = " +
           expr + ";\n    s[n + 1 + lane] = r;\n  }\n  " + g.barrier +
           "\n  if (lane == 0) {\n    " + t +
           " r = s[n + 1];\n"
           "    for (int k = n + 2; k < n + 1 + m; ++k) r = " +
           expr + ";\n    s[n] = r;\n  }\n  " + g.barrier + "\n  return s[n]; }\n" + g.fn + t +
           " flagos_group_" + op + "_" + suffix + "(" + t + " v, " + ptr + " s) {\n  return " +
           seg + "(v, s, (int)" + g.local_id + ", (int)" + g.local_size + "); }\n";
  }
  return out;
}

// GroupReduction: the items of a group stride over the row, then combine.
std::string fusedGroupMacros() {
  return R"(#define FLAGOS_LOCAL (FLAGOS_GROUP * FLAGOS_ROWS)
#define FLAGOS_RLOOP(r, n) for (FLAGOS_I64 r = flagos_lid; r < (n); r += FLAGOS_GROUP)
#define FLAGOS_GROUP_LEADER (flagos_lid == 0 && flagos_valid)
#define FLAGOS_STORE_OK flagos_valid
#define FLAGOS_SEG(s) ((s) + flagos_seg * FLAGOS_GROUP)
#define FLAGOS_GROUP_SUM(S, v) flagos_group_sum##S((v), FLAGOS_SEG(flagos_scratch_##S))
#define FLAGOS_GROUP_PROD(S, v) flagos_group_prod##S((v), FLAGOS_SEG(flagos_scratch_##S))
#define FLAGOS_GROUP_MAX(S, v) flagos_group_max##S((v), FLAGOS_SEG(flagos_scratch_##S))
#define FLAGOS_GROUP_MIN(S, v) flagos_group_min##S((v), FLAGOS_SEG(flagos_scratch_##S))
#define FLAGOS_GROUP_WELFORD(S, mean, m2, w) flagos_group_welford##S(&(mean), &(m2), &(w), FLAGOS_SEG(flagos_scratch_##S))
#define FLAGOS_GROUP_ARGMAX(S, v, i) flagos_group_argmax##S(&(v), &(i), FLAGOS_SEG(flagos_scratch_##S), FLAGOS_SEG(flagos_scratch_i + 2 * FLAGOS_LOCAL))
#define FLAGOS_GROUP_ARGMIN(S, v, i) flagos_group_argmin##S(&(v), &(i), FLAGOS_SEG(flagos_scratch_##S), FLAGOS_SEG(flagos_scratch_i + 2 * FLAGOS_LOCAL))
)";
}

// A tree over a segment's FLAGOS_GROUP lanes in group memory (@p s: the
// segment's slice; a second and third array follow FLAGOS_LOCAL apart);
// every item of the work-group calls it (it has barriers) and gets its
// segment's result.
std::string fusedGroupHelpers(const GroupSpelling& g, const std::string& t, const std::string& sfx,
                              const std::string& max, const std::string& min) {
  const std::string ptr = g.local_ptr + t + "*",
                    lid = "  const unsigned l = (unsigned)" + g.local_id + " % FLAGOS_GROUP";
  std::string s;
  const std::pair<const char*, std::string> ops[] = {
      {"sum", "a + b"}, {"prod", "a * b"}, {"max", max + "(a, b)"}, {"min", min + "(a, b)"}};
  for (const auto& [op, combine] : ops) {
    s += g.fn + t + " flagos_group_" + op + sfx + "(" + t + " v, " + ptr + " s) {\n" + lid +
         ";\n  s[l] = v; " + g.barrier +
         "\n  for (unsigned h = FLAGOS_GROUP / 2; h > 0; h >>= 1) {\n    if (l < h) { const " + t +
         " a = s[l], b = s[l + h]; s[l] = " + combine + "; }\n    " + g.barrier +
         "\n  }\n  v = s[0]; " + g.barrier + " return v; }\n";
  }
  for (const char* arg : {"argmax", "argmin"}) {
    s += g.fn + "void flagos_group_" + arg + sfx + "(" + t + "* v, " + g.i64 + "* i, " + ptr +
         " s, " + g.local_ptr + g.i64 + "* si) {\n" + lid + ";\n  s[l] = *v; si[l] = *i; " +
         g.barrier +
         "\n  for (unsigned h = FLAGOS_GROUP / 2; h > 0; h >>= 1) {\n    if (l < h && flagos_" +
         arg + "_better" + sfx +
         "(s[l], si[l], s[l + h], si[l + h])) { s[l] = s[l + h]; si[l] = si[l + h]; }\n    " +
         g.barrier + "\n  }\n  *v = s[0]; *i = si[0]; " + g.barrier + " }\n";
  }
  if (sfx != "i") {
    s += g.fn + "void flagos_group_welford" + sfx + "(" + t + "* mean, " + t + "* m2, " + t +
         "* w, " + ptr + " s) {\n" + lid +
         ", G = FLAGOS_LOCAL;\n"
         "  s[l] = *mean; s[G + l] = *m2; s[2 * G + l] = *w; " +
         g.barrier +
         "\n  for (unsigned h = FLAGOS_GROUP / 2; h > 0; h >>= 1) {\n"
         "    if (l < h) {\n      " +
         t + " m = s[l], q = s[G + l], n = s[2 * G + l];\n      flagos_welford_combine" + sfx +
         "(&m, &q, &n, s[l + h], s[G + l + h], s[2 * G + l + h]);\n"
         "      s[l] = m; s[G + l] = q; s[2 * G + l] = n;\n    }\n    " +
         g.barrier + "\n  }\n  *mean = s[0]; *m2 = s[G]; *w = s[2 * G]; " + g.barrier + " }\n";
  }
  return s;
}

std::string fusedGroupPrelude(const GroupSpelling& g, int group, int rows, bool fp64) {
  std::string s = "#define FLAGOS_GROUP " + std::to_string(group) + "\n#define FLAGOS_ROWS " +
                  std::to_string(rows) + "\n" + fusedGroupMacros();
  s += fusedGroupHelpers(g, "float", "f", "flagos_maxf", "flagos_minf") +
       fusedGroupHelpers(g, g.i64, "i", "flagos_imax", "flagos_imin");
  if (fp64) s += fusedGroupHelpers(g, "double", "d", "flagos_maxd", "flagos_mind");
  return s;
}

// Group arrays live at kernel scope (OpenCL C 1.2, 6.5.2); each segment of
// the work-group lends its slice to the helpers. A segment past the last row
// does not return (Note [No return before a barrier], emit_opencl.cpp): it
// takes the last row again (xindex is clamped) and FLAGOS_STORE_OK keeps it
// from storing.
std::string fusedGroupOpen(const GroupSpelling& g) {
  return "  " + g.local_decl + "float flagos_scratch_f[3 * FLAGOS_LOCAL];\n  " + g.local_decl +
         g.i64 + " flagos_scratch_i[3 * FLAGOS_LOCAL];\n#ifdef FLAGOS_FUSED_FP64\n  " +
         g.local_decl + "double flagos_scratch_d[3 * FLAGOS_LOCAL];\n#endif\n  const " + g.i64 +
         " flagos_lid = (" + g.i64 + ")(" + g.local_id + " % FLAGOS_GROUP);\n  const " + g.i64 +
         " flagos_seg = (" + g.i64 + ")(" + g.local_id + " / FLAGOS_GROUP);\n  const " + g.i64 +
         " flagos_row = (" + g.i64 + ")" + g.group_id + " * FLAGOS_ROWS + flagos_seg;\n" +
         "  const bool flagos_valid = flagos_row < xnumel;\n  const " + g.i64 +
         " xindex = flagos_valid ? flagos_row : xnumel - 1;\n";
}

}  // namespace flagos::kernels
