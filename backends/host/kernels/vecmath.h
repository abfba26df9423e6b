// Vectorized float32 math over contiguous arrays: SLEEF's AVX-512F or AVX2
// functions (the 1-ULP variants PyTorch's own CPU kernels call; erf as
// PyTorch computes it), chosen at run time, with libm as the fallback.
//
// Note [Vector math]
// ~~~~~~~~~~~~~~~~~~
// The scalar kernels call std::exp/std::erf per element, which leaves the
// large pointwise ops several times slower than native CPU. These
// functions process 8 or 16 floats per instruction. The bodies are written
// once (vecmath_body.h) and built per ISA in their own translation units
// (vecmath_avx2.cpp with -mavx2 -mfma, vecmath_avx512.cpp with -mavx512f),
// so the rest of the plugin stays portable; `available()` is false when the
// CPU has neither, or the build found no SLEEF, and callers then keep their
// scalar loop. Every function allows y == x (in place).
#pragma once

#include <cstdint>

namespace flagos_host::kernels::vec {

enum class Fn {
  None,
  Exp,
  Log,
  Tanh,
  Erf,
  Sin,
  Cos,
  Sigmoid,   // 1 / (1 + exp(-x))
  Silu,      // x * sigmoid(x)
  Gelu,      // 0.5 x (1 + erf(x / sqrt 2))
  GeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  Count,     // not a function: the number of the above
};

// True when the vector path runs on this CPU; isaName(): "avx512f",
// "avx2" or "none" (doctor and the tests report it).
bool available();
const char* isaName();

// y[i] = f(x[i]) for i < n. Returns false (and writes nothing) when the
// vector path is not available or f is None.
bool apply(Fn f, const float* x, float* y, int64_t n);

// The backwards of the activations above: y[i] = g[i] * d f(x[i]) / dx.
enum class Grad { GeluBackward, GeluTanhBackward, SiluBackward, Count /* their number */ };
bool applyGrad(Grad f, const float* g, const float* x, float* y, int64_t n);

// The sum of x[0..n) (float partial sums of at most 16 terms a lane, as
// PyTorch's cascade sum; the total in double).
bool rowSum(const float* x, int64_t n, double* sum);

// The softmax row helpers: the maximum of x[0..n) (NaN if any is NaN,
// -inf for n == 0), and y[i] = exp(x[i] - shift) returning the sum of those
// values in double (y may be null: the sum only).
bool rowMax(const float* x, int64_t n, float* result);
bool expShiftSum(const float* x, float shift, float* y, int64_t n, double* sum);

// The layer-norm row helpers: sum((x[i] - mu)^2) (float partials of at most
// 16 terms a lane, the total in double), and y[i] = (x[i] - mean) * rstd
// (* w[i] where w, + b[i] where b; either may be null).
bool rowSquaredDeviation(const float* x, int64_t n, float mu, double* sum);
bool normalizeRow(const float* x, int64_t n, float mean, float rstd, const float* w, const float* b,
                  float* y);

}  // namespace flagos_host::kernels::vec
