// Normalization backwards: native_batch_norm_backward (training and eval,
// any layout whose spatial dims collapse) and native_layer_norm_backward
// (contiguous). Sums in double, as the forwards (norm.cpp).
#include <cmath>
#include <vector>

#include "kernels.h"

namespace flagos_host::kernels {

bool ncsView(const Tensor& t, int64_t& N, int64_t& C, int64_t& S, int64_t& sn, int64_t& sc,
             int64_t& ss);

namespace {

// native_batch_norm_backward(grad_out, input, weight?, running_mean?,
//   running_var?, save_mean?, save_invstd?) -> (grad_input, grad_weight,
//   grad_bias); scalars train, eps, output_mask[3].
flagosStatus_t batchNormBackward(flagosStream_t stream, const flagosTensor* o, int32_t no,
                                 const flagosTensor* in, int32_t ni, const flagosScalar* sc,
                                 int32_t ns) {
  if (no != 3 || ni != 7 || ns != 5) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor gy = copyTensor(in[0]), x = copyTensor(in[1]), w = copyTensor(in[2]),
         rm = copyTensor(in[3]), rv = copyTensor(in[4]), sm = copyTensor(in[5]),
         si = copyTensor(in[6]);
  Tensor gx = copyTensor(o[0]), gw = copyTensor(o[1]), gb = copyTensor(o[2]);
  const bool train = sc[0].i != 0;
  const double eps = scalarAs<double>(sc[1], 1e-5);
  const bool mx = sc[2].i && gx.data, mw = sc[3].i && gw.data, mb = sc[4].i && gb.data;
  const flagosDtype_t dt = x.dtype;
  if (!dispatchFloating(dt, [](auto) {}) || gy.dtype != dt) return FLAGOS_ERROR_NOT_SUPPORTED;
  int64_t N, C, S, xn, xc, xs, n2, c2, s2, gn, gc, gs, on = 0, oc = 0, os = 0;
  if (!ncsView(x, N, C, S, xn, xc, xs) || !ncsView(gy, n2, c2, s2, gn, gc, gs) || n2 != N ||
      c2 != C || s2 != S)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  if (mx &&
      (gx.dtype != dt || !ncsView(gx, n2, c2, s2, on, oc, os) || n2 != N || c2 != C || s2 != S))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const Tensor& mean_t = train ? sm : rm;
  if (mean_t.ndim < 0 || (train ? si : rv).ndim < 0) return FLAGOS_ERROR_NOT_SUPPORTED;
  for (const Tensor* p : {&w, &rm, &rv, &sm, &si, &gw, &gb}) {
    if (p->ndim < 0 || !p->data) continue;
    if (p->dtype != dt || p->ndim != 1 || p->shape[0] != C) return FLAGOS_ERROR_NOT_SUPPORTED;
  }
  return submit(stream, [=] {
    dispatchFloating(dt, [&](auto tag) {
      using T = decltype(tag);
      auto at1 = [](const Tensor& t, int64_t c) -> T& { return t.ptr<T>()[c * t.strides[0]]; };
      const double cnt = static_cast<double>(N * S);
      parallelFor(C, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t c = lo; c < hi; ++c) {
          const double mean =
              train ? static_cast<double>(at1(sm, c)) : static_cast<double>(at1(rm, c));
          const double invstd = train ? static_cast<double>(at1(si, c))
                                      : 1.0 / std::sqrt(static_cast<double>(at1(rv, c)) + eps);
          const double wc = w.ndim >= 0 ? static_cast<double>(at1(w, c)) : 1.0;
          const T* xp = x.ptr<T>() + c * xc;
          const T* gp = gy.ptr<T>() + c * gc;
          double sum = 0, dot = 0;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t i = 0; i < S; ++i) {
              const double g = gp[n * gn + i * gs];
              sum += g;
              dot += g * (xp[n * xn + i * xs] - mean);
            }
          if (mw) at1(gw, c) = static_cast<T>(dot * invstd);
          if (mb) at1(gb, c) = static_cast<T>(sum);
          if (!mx) continue;
          T* op = gx.ptr<T>() + c * oc;
          if (train) {
            const double k = dot * invstd * invstd / cnt, gm = sum / cnt, sc_ = invstd * wc;
            for (int64_t n = 0; n < N; ++n)
              for (int64_t i = 0; i < S; ++i) {
                const double xm = xp[n * xn + i * xs] - mean;
                op[n * on + i * os] = static_cast<T>((gp[n * gn + i * gs] - gm - xm * k) * sc_);
              }
          } else {
            const T a = static_cast<T>(invstd * wc);
            for (int64_t n = 0; n < N; ++n)
              for (int64_t i = 0; i < S; ++i) op[n * on + i * os] = gp[n * gn + i * gs] * a;
          }
        }
      });
    });
  });
}

// native_layer_norm_backward(grad_out, input, mean, rstd, weight?, bias?)
//   -> (grad_input, grad_weight, grad_bias); scalars len(normalized_shape),
//   output_mask[3].
flagosStatus_t layerNormBackward(flagosStream_t stream, const flagosTensor* o, int32_t no,
                                 const flagosTensor* in, int32_t ni, const flagosScalar* sc,
                                 int32_t ns) {
  if (no != 3 || ni != 6 || ns != 4) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor gy = copyTensor(in[0]), x = copyTensor(in[1]), mean = copyTensor(in[2]),
         rstd = copyTensor(in[3]), w = copyTensor(in[4]);
  Tensor gx = copyTensor(o[0]), gw = copyTensor(o[1]), gb = copyTensor(o[2]);
  const bool mx = sc[1].i && gx.data, mw = sc[2].i && gw.data, mb = sc[3].i && gb.data;
  const flagosDtype_t dt = x.dtype;
  if (!dispatchFloating(dt, [](auto) {}) || gy.dtype != dt || mean.dtype != dt || rstd.dtype != dt)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  // gy and x may be strided (packed on the stream: Note [Strided operands]).
  for (const Tensor* p : {&mean, &rstd})
    if (!p->contiguous()) return FLAGOS_ERROR_NOT_SUPPORTED;
  const int axis = x.ndim - static_cast<int>(sc[0].i);
  if (axis < 0) return FLAGOS_ERROR_NOT_SUPPORTED;
  int64_t M = 1, N = 1;
  for (int d = 0; d < x.ndim; ++d) (d < axis ? M : N) *= x.shape[d];
  if (mean.numel() != M || gy.numel() != M * N) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (w.ndim >= 0 && (w.dtype != dt || !w.contiguous() || w.numel() != N))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  if (mx && (gx.dtype != dt || gx.numel() != M * N || !writable(gx)))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  for (const Tensor* p : {&gw, &gb})
    if (p->data && (p->dtype != dt || !p->contiguous() || p->numel() != N))
      return FLAGOS_ERROR_NOT_SUPPORTED;
  return submit(stream, [=]() mutable {
    dispatchFloating(dt, [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> gy_rows, x_rows, gx_rows;
      packContiguous(gy, gy_rows);
      packContiguous(x, x_rows);
      const Tensor gx_given = gx;  // like x: maybe strided, written through scratch
      if (mx) gx.data = reinterpret_cast<char*>(outputContiguous(gx_given, gx_rows));
      const T* wp = w.ndim >= 0 ? w.ptr<T>() : nullptr;
      if (mx) {
        parallelFor(M, std::max<int64_t>(1, 16384 / std::max<int64_t>(N, 1)),
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t r = lo; r < hi; ++r) {
                        const T* xr = x.ptr<T>() + r * N;
                        const T* gr = gy.ptr<T>() + r * N;
                        const double mu = mean.ptr<T>()[r], rs = rstd.ptr<T>()[r];
                        double a = 0, b = 0;
                        for (int64_t i = 0; i < N; ++i) {
                          const double g = wp ? gr[i] * static_cast<double>(wp[i]) : gr[i];
                          a += g;
                          b += g * (xr[i] - mu) * rs;
                        }
                        a /= N;
                        b /= N;
                        T* out = gx.ptr<T>() + r * N;
                        for (int64_t i = 0; i < N; ++i) {
                          const double g = wp ? gr[i] * static_cast<double>(wp[i]) : gr[i];
                          out[i] = static_cast<T>(rs * (g - a - (xr[i] - mu) * rs * b));
                        }
                      }
                    });
        scatterContiguous(gx_given, gx_rows);
      }
      if (mw || mb) {
        constexpr int64_t kBlock = 64;
        parallelFor((N + kBlock - 1) / kBlock, 1, [&](int64_t lo, int64_t hi) {
          std::vector<double> sw(kBlock), sb(kBlock);
          for (int64_t blk = lo; blk < hi; ++blk) {
            const int64_t j0 = blk * kBlock, j1 = std::min(N, j0 + kBlock);
            std::fill(sw.begin(), sw.end(), 0.0);
            std::fill(sb.begin(), sb.end(), 0.0);
            for (int64_t r = 0; r < M; ++r) {
              const T* xr = x.ptr<T>() + r * N;
              const T* gr = gy.ptr<T>() + r * N;
              const double mu = mean.ptr<T>()[r], rs = rstd.ptr<T>()[r];
              for (int64_t j = j0; j < j1; ++j) {
                sw[j - j0] += gr[j] * (xr[j] - mu) * rs;
                sb[j - j0] += gr[j];
              }
            }
            for (int64_t j = j0; j < j1; ++j) {
              if (mw) gw.ptr<T>()[j] = static_cast<T>(sw[j - j0]);
              if (mb) gb.ptr<T>()[j] = static_cast<T>(sb[j - j0]);
            }
          }
        });
      }
    });
  });
}

}  // namespace

void addNormBackwardKernels(void (*add)(const char*, flagosKernelFn)) {
  add("batch_norm_backward", batchNormBackward);
  add("layer_norm_backward", layerNormBackward);
}

}  // namespace flagos_host::kernels
