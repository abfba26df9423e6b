// The per-ISA function tables behind vecmath.h; only vecmath.cpp calls them,
// after checking the CPU (Note [Vector math]).
#pragma once

#include <cstdint>

#include "vecmath.h"

namespace flagos_host::kernels::vec {

struct Kernels {
  void (*apply)(Fn f, const float* x, float* y, int64_t n);
  void (*applyGrad)(Grad f, const float* g, const float* x, float* y, int64_t n);
  double (*rowSum)(const float* x, int64_t n);
  float (*rowMax)(const float* x, int64_t n);
  double (*expShiftSum)(const float* x, float shift, float* y, int64_t n);
  double (*rowSquaredDeviation)(const float* x, int64_t n, float mu);
  void (*normalizeRow)(const float* x, int64_t n, float mean, float rstd, const float* w,
                       const float* b, float* y);
};

const Kernels* avx2Kernels();    // vecmath_avx2.cpp
const Kernels* avx512Kernels();  // vecmath_avx512.cpp

}  // namespace flagos_host::kernels::vec
