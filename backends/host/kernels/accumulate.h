// Row accumulations the reduction and normalization kernels share
// (reduce.cpp, norm.cpp), written so that the compiler vectorizes them.
#pragma once

#include <cstdint>

namespace flagos_host::kernels {

// Note [Vectorizable accumulation]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A single `acc += x[i]` chain cannot be vectorized (floating-point adds do
// not reassociate), which held a row sum to one add per cycle. Eight
// independent double accumulators let the compiler use vector adds; the
// result differs from the serial sum only by double rounding.
template <typename T, typename A = double>
A sumFlat(const T* x, int64_t n) {
  A acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += static_cast<A>(x[i + k]);
  for (; i < n; ++i) acc[0] += static_cast<A>(x[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

template <typename T>
double dotFlat(const T* x, const T* y, int64_t n) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += static_cast<double>(x[i + k]) * y[i + k];
  for (; i < n; ++i) acc[0] += static_cast<double>(x[i]) * y[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// sum((x[i] - mu)^2) in double, vectorizable like sumFlat.
template <typename T>
double sumSquaredDeviation(const T* x, int64_t n, double mu) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) {
      const double d = static_cast<double>(x[i + k]) - mu;
      acc[k] += d * d;
    }
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - mu;
    acc[0] += d * d;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace flagos_host::kernels
