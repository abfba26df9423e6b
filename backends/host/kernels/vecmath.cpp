// Run-time choice of the vector path (Note [Vector math], vecmath.h): the
// widest instruction set this CPU has, or none.
#include "vecmath.h"

#include "vecmath_impl.h"

namespace flagos_host::kernels::vec {
namespace {

struct Choice {
  const Kernels* kernels = nullptr;
  const char* name = "none";
};

// The ISA files' functions are only called once the CPU has the ISA: even
// their static initializers may use its instructions.
const Choice& choice() {
  static const Choice c = [] {
    Choice r;
#if defined(FLAGOS_HOST_VEC_X86)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
      r = {avx512Kernels(), "avx512f"};
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      r = {avx2Kernels(), "avx2"};
    }
#endif
    return r;
  }();
  return c;
}

const Kernels* chosen() {
  return choice().kernels;
}

}  // namespace

bool available() {
  return chosen() != nullptr;
}

const char* isaName() {
  return choice().name;
}

bool apply(Fn f, const float* x, float* y, int64_t n) {
  const Kernels* k = chosen();
  if (f == Fn::None || !k) return false;
  k->apply(f, x, y, n);
  return true;
}

bool applyGrad(Grad f, const float* g, const float* x, float* y, int64_t n) {
  const Kernels* k = chosen();
  if (!k) return false;
  k->applyGrad(f, g, x, y, n);
  return true;
}

bool rowSum(const float* x, int64_t n, double* sum) {
  const Kernels* k = chosen();
  if (!k) return false;
  *sum = k->rowSum(x, n);
  return true;
}

bool rowMax(const float* x, int64_t n, float* result) {
  const Kernels* k = chosen();
  if (!k) return false;
  *result = k->rowMax(x, n);
  return true;
}

bool expShiftSum(const float* x, float shift, float* y, int64_t n, double* sum) {
  const Kernels* k = chosen();
  if (!k) return false;
  *sum = k->expShiftSum(x, shift, y, n);
  return true;
}

bool rowSquaredDeviation(const float* x, int64_t n, float mu, double* sum) {
  const Kernels* k = chosen();
  if (!k) return false;
  *sum = k->rowSquaredDeviation(x, n, mu);
  return true;
}

bool normalizeRow(const float* x, int64_t n, float mean, float rstd, const float* w, const float* b,
                  float* y) {
  const Kernels* k = chosen();
  if (!k) return false;
  k->normalizeRow(x, n, mean, rstd, w, b, y);
  return true;
}

}  // namespace flagos_host::kernels::vec
