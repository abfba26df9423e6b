// Fused kernels: the loops torch.compile's inductor fuses (pointwise chains,
// reductions with their prologue and epilogue), compiled for the active
// plugin's language.
//
// Note [Fused kernels]
// ~~~~~~~~~~~~~~~~~~~~
// Inductor's flagos backend (python/flagos_torchfl/inductor/) lowers its
// loop IR to a kernel *body* in a neutral C subset (Note [Fused kernel
// bodies]); the Dialect of the plugin's language wraps it in a frame (the
// signature with compiler.h's argument conventions, the work-item index,
// the reduction loop and its combine) and puts its prelude before it. So
// the language questions stay in the Dialect classes the generated tier
// uses, and one body serves OpenCL C and C. The program is compiled through
// the compiler slot and kept in the kernel cache like a custom kernel
// (Note [Custom kernels]), under its own key tag.
//
// A kernel runs one of three ways (FusedMode): one work item per element
// (pointwise), one work item per output row with a serial reduction loop
// (every dialect; the right layout when adjacent rows are adjacent in
// memory), or a segment of a work-group per output row, the segment's lanes
// striding over the row and combining in local memory (dialects with
// work-groups; the right layout when a row is contiguous). A work-group holds
// several short rows (`rows` segments of `group` lanes), since a work-group
// costs PoCL more than its lanes do. The launch geometry follows: global =
// xnumel (times group, rounded up to whole work-groups), local = group x rows.
//
// Note [Fused kernel bodies]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// What a body may use, in either language:
//  - the work item `xindex` (FLAGOS_I64) and the parameters by name:
//    pointers index as arrays of their storage type, scalars are int64;
//  - types float, double (when fp64), bool, flagos_i8, flagos_u8,
//    flagos_i16, flagos_i32, flagos_i64; C-style casts;
//  - 16-bit floats only through FLAGOS_LD_F16(p, i) / FLAGOS_ST_F16(p, i, v)
//    and FLAGOS_LD_BF16 / FLAGOS_ST_BF16 (compute in float);
//  - math by the C99 <tgmath.h> names (exp, tanh, erf, floor, fmod, ...:
//    type-generic in both languages), the generator's helpers
//    (flagos_maxf, flagos_imax, ...: commonHelpers), flagos_rsqrt, and the
//    fused helpers: flagos_welford_combine{f,d}, flagos_arg{max,min}_better{f,d,i};
//  - reductions: FLAGOS_RLOOP(r, n) { ... } walks this work item's share of
//    [0, n); FLAGOS_GROUP_<OP>(S, v) (OP: SUM PROD MAX MIN; S: f d i) is the
//    value combined over the work-group, FLAGOS_GROUP_WELFORD(S, mean, m2,
//    weight) and FLAGOS_GROUP_ARG{MAX,MIN}(S, v, idx) combine in place;
//    FLAGOS_GROUP_LEADER is true in one item of the segment (stores of reduced
//    values); other stores are guarded by FLAGOS_STORE_OK (a segment past
//    the last row computes the last row again and stores nothing). Outside
//    GroupReduction the combines are identities and both guards are 1.
//  - no return: the C frame loops over work items.
#pragma once

#include <string>
#include <vector>

#include "jit/gen/emit.h"
#include "jit/gen/generator.h"

namespace flagos::kernels {

struct FusedKernel {
  std::string name;           // entry point
  std::vector<Param> params;  // Pointer and Scalar (int64) params, in launch order; one
                              // Scalar named "xnumel" bounds xindex
  std::string body;           // Note [Fused kernel bodies]
  FusedMode mode = FusedMode::Pointwise;
  int group = 1;      // GroupReduction: lanes per row (a segment), a power of two
  int rows = 1;       // GroupReduction: rows (segments) per work-group
  bool fp64 = false;  // the body uses double
};

// The whole program for @p dl; throws std::invalid_argument for a malformed
// kernel (no xnumel parameter, a group size that is not a power of two, a
// group reduction in a dialect without work-groups).
Source emitFused(const FusedKernel& kernel, const Dialect& dl);

}  // namespace flagos::kernels
