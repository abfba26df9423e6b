// Normalization: native_layer_norm forward (any input layout) and
// native_batch_norm forward in training mode (any layout whose spatial dims
// collapse into one, i.e. NCHW and channels-last). Statistics in double
// (float layer-norm rows: Note [Vectorized layer norm rows]).
#include <cmath>
#include <type_traits>

#include "accumulate.h"
#include "kernels.h"
#include "vecmath.h"

namespace flagos_host::kernels {
namespace {

// Note [Vectorized layer norm rows]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A float row's statistics and output through the vector math (vecmath.h):
// the mean and the squared deviations as float partials of at most 16
// terms a lane totalled in double, as PyTorch's cascade sums, instead of
// the double-per-element loops below, which the baseline x86-64 build
// leaves two lanes wide (layer_norm 4096x1024 ran below native CPU).
// False where the CPU has no vector path.
bool vectorRow(const float* x, int64_t n, double eps, const float* w, const float* b, float* y,
               float* mean, float* rstd) {
  double sum = 0;
  if (n == 0 || !vec::rowSum(x, n, &sum)) return false;
  const double mu = sum / static_cast<double>(n);
  double ssd = 0;
  vec::rowSquaredDeviation(x, n, static_cast<float>(mu), &ssd);
  const float m = static_cast<float>(mu);
  const float rt = static_cast<float>(1.0 / std::sqrt(ssd / static_cast<double>(n) + eps));
  vec::normalizeRow(x, n, m, rt, w, b, y);
  *mean = m;
  *rstd = rt;
  return true;
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps)
//   -> (out, mean, rstd). Scalars: len(normalized_shape), eps.
flagosStatus_t layerNorm(flagosStream_t stream, const flagosTensor* o, int32_t no,
                         const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 3 || ni != 3 || ns != 2) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor x = copyTensor(in[0]), w = copyTensor(in[1]), b = copyTensor(in[2]);
  Tensor out = copyTensor(o[0]), mean = copyTensor(o[1]), rstd = copyTensor(o[2]);
  const flagosDtype_t dt = x.dtype;
  if (!dispatchFloating(dt, [](auto) {}) || out.dtype != dt || mean.dtype != dt || rstd.dtype != dt)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  // A strided input (ConvNeXt's layer norm over a permuted view) is packed
  // on the stream (Note [Strided operands]); outputs are fresh and row-major.
  if (!out.contiguous() || !mean.contiguous() || !rstd.contiguous())
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const int axis = x.ndim - static_cast<int>(sc[0].i);
  if (axis < 0) return FLAGOS_ERROR_NOT_SUPPORTED;
  int64_t M = 1, N = 1;
  for (int d = 0; d < x.ndim; ++d) (d < axis ? M : N) *= x.shape[d];
  for (const Tensor* p : {&w, &b}) {
    if (p->ndim < 0) continue;  // absent
    if (p->dtype != dt || !p->contiguous() || p->numel() != N) return FLAGOS_ERROR_NOT_SUPPORTED;
  }
  const double eps = scalarAs<double>(sc[1], 1e-5);
  return submit(stream, [x, w, b, out, mean, rstd, M, N, eps, dt]() mutable {
    dispatchFloating(dt, [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> x_rows;
      packContiguous(x, x_rows);
      const T* wp = w.ndim >= 0 ? w.ptr<T>() : nullptr;
      const T* bp = b.ndim >= 0 ? b.ptr<T>() : nullptr;
      parallelFor(M, std::max<int64_t>(1, 16384 / std::max<int64_t>(N, 1)),
                  [&](int64_t lo, int64_t hi) {
                    for (int64_t r = lo; r < hi; ++r) {
                      const T* xr = x.ptr<T>() + r * N;
                      T* yr = out.ptr<T>() + r * N;
                      if constexpr (std::is_same_v<T, float>) {
                        // See Note [Vectorized layer norm rows]
                        if (vectorRow(xr, N, eps, wp, bp, yr, mean.ptr<T>() + r, rstd.ptr<T>() + r))
                          continue;
                      }
                      const double mu = N ? sumFlat<T>(xr, N) / N : 0;
                      const double var = N ? sumSquaredDeviation(xr, N, mu) / N : 0;
                      const double rs = 1.0 / std::sqrt(var + eps);
                      const T m = static_cast<T>(mu), rt = static_cast<T>(rs);
                      if (wp && bp) {  // the common case, as one branch-free loop
                        for (int64_t i = 0; i < N; ++i) yr[i] = (xr[i] - m) * rt * wp[i] + bp[i];
                      } else {
                        for (int64_t i = 0; i < N; ++i) {
                          T v = (xr[i] - m) * rt;
                          if (wp) v *= wp[i];
                          if (bp) v += bp[i];
                          yr[i] = v;
                        }
                      }
                      mean.ptr<T>()[r] = m;
                      rstd.ptr<T>()[r] = rt;
                    }
                  });
    });
  });
}

// A (N, C, S) view of an N-d tensor with channels in dim 1; false when the
// spatial dims do not collapse.
bool ncs(const Tensor& t, int64_t& N, int64_t& C, int64_t& S, int64_t& sn, int64_t& sc,
         int64_t& ss) {
  if (t.ndim < 2) return false;
  N = t.shape[0];
  C = t.shape[1];
  sn = t.strides[0];
  sc = t.strides[1];
  S = 1;
  ss = 1;
  bool first = true;
  for (int d = t.ndim - 1; d >= 2; --d) {
    if (t.shape[d] == 1) continue;
    if (first) {
      ss = t.strides[d];
      first = false;
    } else if (t.strides[d] != ss * S) {
      return false;
    }
    S *= t.shape[d];
  }
  return true;
}

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?,
//   training, momentum, eps) -> (out, save_mean, save_invstd); in training
//   mode the running stats (when given) are updated in place.
flagosStatus_t batchNorm(flagosStream_t stream, const flagosTensor* o, int32_t no,
                         const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 3 || ni != 5 || ns != 3) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor x = copyTensor(in[0]), w = copyTensor(in[1]), b = copyTensor(in[2]);
  Tensor rm = copyTensor(in[3]), rv = copyTensor(in[4]);
  Tensor out = copyTensor(o[0]), sm = copyTensor(o[1]), si = copyTensor(o[2]);
  const flagosDtype_t dt = x.dtype;
  if (!dispatchFloating(dt, [](auto) {}) || out.dtype != dt) return FLAGOS_ERROR_NOT_SUPPORTED;
  const bool training = sc[0].i != 0;
  const double momentum = scalarAs<double>(sc[1], 0.1), eps = scalarAs<double>(sc[2], 1e-5);
  int64_t N, C, S, xn, xc, xs, on, oc, os, n2, c2, s2;
  if (!ncs(x, N, C, S, xn, xc, xs) || !ncs(out, n2, c2, s2, on, oc, os) || n2 != N || c2 != C ||
      s2 != S)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  for (const Tensor* p : {&w, &b, &rm, &rv}) {
    if (p->ndim < 0) continue;
    if (p->dtype != dt || p->ndim != 1 || p->shape[0] != C) return FLAGOS_ERROR_NOT_SUPPORTED;
  }
  // Eval mode: ATen's CPU kernel returns empty save_mean/save_invstd while
  // the meta kernel (so the core) allocates them with C elements; leave eval
  // to the host tier so that results match the CPU exactly.
  if (!training) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (training && (sm.dtype != dt || si.dtype != dt || sm.numel() != C || si.numel() != C))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  return submit(stream, [=] {
    dispatchFloating(dt, [&](auto tag) {
      using T = decltype(tag);
      auto at1 = [](const Tensor& t, int64_t c) -> T& { return t.ptr<T>()[c * t.strides[0]]; };
      const int64_t count = N * S;
      parallelFor(C, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t c = lo; c < hi; ++c) {
          const T* xc_ = x.ptr<T>() + c * xc;
          double mean, invstd;
          if (training) {
            double s = 0;
            for (int64_t n = 0; n < N; ++n)
              for (int64_t i = 0; i < S; ++i) s += xc_[n * xn + i * xs];
            mean = count ? s / count : 0;
            double ss = 0;
            for (int64_t n = 0; n < N; ++n)
              for (int64_t i = 0; i < S; ++i) {
                const double d = xc_[n * xn + i * xs] - mean;
                ss += d * d;
              }
            const double var = count ? ss / count : 0;
            invstd = 1.0 / std::sqrt(var + eps);
            at1(sm, c) = static_cast<T>(mean);
            at1(si, c) = static_cast<T>(invstd);
            if (rm.ndim >= 0)
              at1(rm, c) = static_cast<T>((1 - momentum) * at1(rm, c) + momentum * mean);
            if (rv.ndim >= 0) {
              const double unbiased = count > 1 ? ss / (count - 1) : var;
              at1(rv, c) = static_cast<T>((1 - momentum) * at1(rv, c) + momentum * unbiased);
            }
          } else {
            mean = at1(rm, c);
            invstd = 1.0 / std::sqrt(static_cast<double>(at1(rv, c)) + eps);
          }
          const double scale = (w.ndim >= 0 ? static_cast<double>(at1(w, c)) : 1.0) * invstd;
          const double shift = (b.ndim >= 0 ? static_cast<double>(at1(b, c)) : 0.0) - mean * scale;
          const T a = static_cast<T>(scale), bb = static_cast<T>(shift);
          T* oc_ = out.ptr<T>() + c * oc;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t i = 0; i < S; ++i) oc_[n * on + i * os] = xc_[n * xn + i * xs] * a + bb;
        }
      });
    });
  });
}

}  // namespace

bool ncsView(const Tensor& t, int64_t& N, int64_t& C, int64_t& S, int64_t& sn, int64_t& sc,
             int64_t& ss) {
  return ncs(t, N, C, S, sn, sc, ss);
}

void addNormKernels(void (*add)(const char*, flagosKernelFn)) {
  add("layer_norm", layerNorm);
  add("batch_norm", batchNorm);
}

}  // namespace flagos_host::kernels
