// 2-D pooling on contiguous NCHW (or CHW) planes: max_pool2d with indices
// (forward, backward), avg_pool2d (forward, backward) and
// _adaptive_avg_pool2d (forward, backward). Output shapes come from the
// core's meta pass; parallel over the N*C planes.
#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels.h"

namespace flagos_host::kernels {
namespace {

struct Planes {
  int64_t NC, H, W, OH, OW;
};

bool planes(const Tensor& x, const Tensor& y, Planes& p) {
  if ((x.ndim != 4 && x.ndim != 3) || y.ndim != x.ndim || !x.contiguous() || !y.contiguous())
    return false;
  const int d = x.ndim - 2;
  p.NC = x.numel() / std::max<int64_t>(1, x.shape[d] * x.shape[d + 1]);
  p.H = x.shape[d];
  p.W = x.shape[d + 1];
  p.OH = y.shape[d];
  p.OW = y.shape[d + 1];
  return x.numel() > 0 && y.numel() == p.NC * p.OH * p.OW;
}

// Scalars: kernel_size[2], stride[2] (0: = kernel), padding[2], ...
void window(const flagosScalar* sc, int64_t& kh, int64_t& kw, int64_t& sh, int64_t& sw, int64_t& ph,
            int64_t& pw) {
  kh = sc[0].i;
  kw = sc[1].i;
  sh = sc[2].i ? sc[2].i : kh;
  sw = sc[3].i ? sc[3].i : kw;
  ph = sc[4].i;
  pw = sc[5].i;
}

// max_pool2d_with_indices(self) -> (out, indices); scalars kernel[2],
// stride[2], padding[2], dilation[2], ceil_mode.
flagosStatus_t maxPool(flagosStream_t stream, const flagosTensor* o, int32_t no,
                       const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 2 || ni != 1 || ns != 9) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor x = copyTensor(in[0]), y = copyTensor(o[0]), ix = copyTensor(o[1]);
  Planes p;
  if (!dispatchFloating(x.dtype, [](auto) {}) || y.dtype != x.dtype ||
      ix.dtype != FLAGOS_DTYPE_INT64 || !planes(x, y, p) || !ix.contiguous())
    return FLAGOS_ERROR_NOT_SUPPORTED;
  int64_t kh, kw, sh, sw, ph, pw;
  window(sc, kh, kw, sh, sw, ph, pw);
  const int64_t dh = sc[6].i, dw = sc[7].i;
  return submit(stream, [=] {
    dispatchFloating(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      parallelFor(p.NC, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t c = lo; c < hi; ++c) {
          const T* xp = x.ptr<T>() + c * p.H * p.W;
          T* yp = y.ptr<T>() + c * p.OH * p.OW;
          int64_t* ip = ix.ptr<int64_t>() + c * p.OH * p.OW;
          // The window's rows and columns clipped to the plane once (no
          // bounds test per element), scanned as CPU's kernel does: the
          // first maximum, or the last NaN, and the window's first element
          // when all are -inf.
          for (int64_t oh = 0; oh < p.OH; ++oh) {
            int64_t h0 = oh * sh - ph;
            const int64_t h1 = std::min(h0 + (kh - 1) * dh + 1, p.H);
            while (h0 < 0) h0 += dh;
            for (int64_t ow = 0; ow < p.OW; ++ow) {
              int64_t w0 = ow * sw - pw;
              const int64_t w1 = std::min(w0 + (kw - 1) * dw + 1, p.W);
              while (w0 < 0) w0 += dw;
              T best = -std::numeric_limits<T>::infinity();
              int64_t arg = h0 * p.W + w0;
              for (int64_t h = h0; h < h1; h += dh) {
                const T* row = xp + h * p.W;
                for (int64_t w = w0; w < w1; w += dw) {
                  const T v = row[w];
                  if (v > best || v != v) {
                    best = v;
                    arg = h * p.W + w;
                  }
                }
              }
              yp[oh * p.OW + ow] = best;
              ip[oh * p.OW + ow] = arg;
            }
          }
        }
      });
    });
  });
}

// max_pool2d_with_indices_backward(grad_output, self, indices) -> grad_input
flagosStatus_t maxPoolBackward(flagosStream_t stream, const flagosTensor* o, int32_t no,
                               const flagosTensor* in, int32_t ni, const flagosScalar*, int32_t) {
  if (no != 1 || ni != 3) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor gy = copyTensor(in[0]), ix = copyTensor(in[2]), gx = copyTensor(o[0]);
  Planes p;
  if (!dispatchFloating(gx.dtype, [](auto) {}) || gy.dtype != gx.dtype ||
      ix.dtype != FLAGOS_DTYPE_INT64 || !planes(gx, gy, p) || !ix.contiguous())
    return FLAGOS_ERROR_NOT_SUPPORTED;
  return submit(stream, [=] {
    dispatchFloating(gx.dtype, [&](auto tag) {
      using T = decltype(tag);
      parallelFor(p.NC, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t c = lo; c < hi; ++c) {
          T* gp = gx.ptr<T>() + c * p.H * p.W;
          std::fill(gp, gp + p.H * p.W, T(0));
          const T* g = gy.ptr<T>() + c * p.OH * p.OW;
          const int64_t* ip = ix.ptr<int64_t>() + c * p.OH * p.OW;
          for (int64_t k = 0; k < p.OH * p.OW; ++k)
            if (ip[k] >= 0) gp[ip[k]] += g[k];
        }
      });
    });
  });
}

// Adaptive windows: [floor(o*I/O), ceil((o+1)*I/O)).
inline int64_t startIdx(int64_t o, int64_t O, int64_t I) {
  return (o * I) / O;
}
inline int64_t endIdx(int64_t o, int64_t O, int64_t I) {
  return ((o + 1) * I + O - 1) / O;
}

// _adaptive_avg_pool2d(self) -> out
flagosStatus_t adaptiveAvg(flagosStream_t stream, const flagosTensor* o, int32_t no,
                           const flagosTensor* in, int32_t ni, const flagosScalar*, int32_t) {
  if (no != 1 || ni != 1) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor x = copyTensor(in[0]), y = copyTensor(o[0]);
  Planes p;
  if (!dispatchFloating(x.dtype, [](auto) {}) || y.dtype != x.dtype || !planes(x, y, p))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  return submit(stream, [=] {
    dispatchFloating(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      parallelFor(p.NC, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t c = lo; c < hi; ++c) {
          const T* xp = x.ptr<T>() + c * p.H * p.W;
          for (int64_t oh = 0; oh < p.OH; ++oh)
            for (int64_t ow = 0; ow < p.OW; ++ow) {
              const int64_t h0 = startIdx(oh, p.OH, p.H), h1 = endIdx(oh, p.OH, p.H);
              const int64_t w0 = startIdx(ow, p.OW, p.W), w1 = endIdx(ow, p.OW, p.W);
              T s = 0;
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) s += xp[h * p.W + w];
              y.ptr<T>()[(c * p.OH + oh) * p.OW + ow] = s / static_cast<T>((h1 - h0) * (w1 - w0));
            }
        }
      });
    });
  });
}

// _adaptive_avg_pool2d_backward(grad_output, self) -> grad_input
flagosStatus_t adaptiveAvgBackward(flagosStream_t stream, const flagosTensor* o, int32_t no,
                                   const flagosTensor* in, int32_t ni, const flagosScalar*,
                                   int32_t) {
  if (no != 1 || ni != 2) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor gy = copyTensor(in[0]), gx = copyTensor(o[0]);
  Planes p;
  if (!dispatchFloating(gx.dtype, [](auto) {}) || gy.dtype != gx.dtype || !planes(gx, gy, p))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  return submit(stream, [=] {
    dispatchFloating(gx.dtype, [&](auto tag) {
      using T = decltype(tag);
      parallelFor(p.NC, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t c = lo; c < hi; ++c) {
          T* gp = gx.ptr<T>() + c * p.H * p.W;
          std::fill(gp, gp + p.H * p.W, T(0));
          for (int64_t oh = 0; oh < p.OH; ++oh)
            for (int64_t ow = 0; ow < p.OW; ++ow) {
              const int64_t h0 = startIdx(oh, p.OH, p.H), h1 = endIdx(oh, p.OH, p.H);
              const int64_t w0 = startIdx(ow, p.OW, p.W), w1 = endIdx(ow, p.OW, p.W);
              const T g =
                  gy.ptr<T>()[(c * p.OH + oh) * p.OW + ow] / static_cast<T>((h1 - h0) * (w1 - w0));
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) gp[h * p.W + w] += g;
            }
        }
      });
    });
  });
}

}  // namespace

void addPoolKernels(void (*add)(const char*, flagosKernelFn)) {
  add("max_pool2d", maxPool);
  add("max_pool2d_backward", maxPoolBackward);
  add("adaptive_avg_pool2d", adaptiveAvg);
  add("adaptive_avg_pool2d_backward", adaptiveAvgBackward);
}

}  // namespace flagos_host::kernels
