// 2-D convolution (NCHW, contiguous, not transposed): float32 through oneDNN
// when the plugin has it (conv_dnnl.h), else (and for float64) im2col +
// OpenBLAS GEMM per sample and group: forward, backward data (GEMM +
// col2im), backward weight (GEMM accumulated over the batch) and bias.
// Anything else (transposed, 1-D/3-D, channels-last) answers NOT_SUPPORTED.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "conv_dnnl.h"
#include "kernels.h"

namespace flagos_host::kernels {
namespace {

inline void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k,
                 float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                 float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k,
                 double alpha, const double* a, int64_t lda, const double* b, int64_t ldb,
                 double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

struct Geom {
  int64_t N, C, H, W, OC, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, G;
  int64_t cg() const { return C / G; }
  int64_t ocg() const { return OC / G; }
  int64_t K() const { return cg() * KH * KW; }  // im2col rows
  int64_t P() const { return OH * OW; }         // im2col columns
  bool pointwise() const { return KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
  ConvShape shape() const { return {N, C, H, W, OC, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, G}; }
};

// Scalars: stride[3], padding[3], dilation[3], transposed, output_padding[3], groups.
// y may be strided when @p y_any_layout (a gradient: packed by the caller).
bool geometry(const Tensor& x, const Tensor& w, const Tensor& y, const flagosScalar* sc, int32_t ns,
              Geom& g, bool y_any_layout = false) {
  if (ns < 14 || sc[9].i != 0) return false;  // transposed
  if (x.ndim != 4 || w.ndim != 4 || y.ndim != 4) return false;
  if (!x.contiguous() || !w.contiguous() || !(y_any_layout || y.contiguous())) return false;
  g = Geom{x.shape[0], x.shape[1], x.shape[2], x.shape[3],
           w.shape[0], y.shape[2], y.shape[3], w.shape[2],
           w.shape[3], sc[0].i,    sc[1].i,    sc[3].i,
           sc[4].i,    sc[6].i,    sc[7].i,    std::max<int64_t>(1, sc[13].i)};
  return g.C % g.G == 0 && g.OC % g.G == 0 && w.shape[1] == g.cg() && y.shape[1] == g.OC &&
         g.sh > 0 && g.sw > 0 && g.dh > 0 && g.dw > 0;
}

// The output columns [lo, hi) whose input column for kernel column kw is
// inside the image (iw = ow * sw - pw + kw * dw in [0, W)).
inline void validCols(const Geom& g, int64_t kw, int64_t& lo, int64_t& hi) {
  const int64_t off = kw * g.dw - g.pw;  // iw = ow * sw + off
  lo = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
  hi = g.W - off <= 0 ? 0 : (g.W - off + g.sw - 1) / g.sw;
  lo = std::min(lo, g.OW);
  hi = std::max(lo, std::min(hi, g.OW));
}

// col[K, P] from one sample/group plane x[cg, H, W].
template <typename T>
void im2col(const T* x, const Geom& g, T* col) {
  parallelFor(g.K(), std::max<int64_t>(1, 8192 / std::max<int64_t>(g.P(), 1)),
              [&](int64_t lo, int64_t hi) {
                for (int64_t r = lo; r < hi; ++r) {
                  const int64_t c = r / (g.KH * g.KW), kh = r / g.KW % g.KH, kw = r % g.KW;
                  const T* xc = x + c * g.H * g.W;
                  T* dst = col + r * g.P();
                  for (int64_t oh = 0; oh < g.OH; ++oh) {
                    const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
                    T* d = dst + oh * g.OW;
                    if (ih < 0 || ih >= g.H) {
                      std::fill(d, d + g.OW, T(0));
                      continue;
                    }
                    const T* xr = xc + ih * g.W;
                    int64_t lo, hi;
                    validCols(g, kw, lo, hi);
                    std::fill(d, d + lo, T(0));
                    const int64_t iw0 = lo * g.sw - g.pw + kw * g.dw;
                    if (g.sw == 1) {
                      std::copy(xr + iw0, xr + iw0 + (hi - lo), d + lo);
                    } else {
                      for (int64_t ow = lo; ow < hi; ++ow) d[ow] = xr[iw0 + (ow - lo) * g.sw];
                    }
                    std::fill(d + hi, d + g.OW, T(0));
                  }
                }
              });
}

// x[cg, H, W] += col2im(col[K, P]); parallel over channels (no races).
template <typename T>
void col2im(const T* col, const Geom& g, T* x) {
  parallelFor(g.cg(), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      T* xc = x + c * g.H * g.W;
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const T* src = col + ((c * g.KH + kh) * g.KW + kw) * g.P();
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
            if (ih < 0 || ih >= g.H) continue;
            T* xr = xc + ih * g.W;
            const T* s = src + oh * g.OW;
            int64_t lo, hi;
            validCols(g, kw, lo, hi);
            const int64_t iw0 = lo * g.sw - g.pw + kw * g.dw;
            for (int64_t ow = lo; ow < hi; ++ow) xr[iw0 + (ow - lo) * g.sw] += s[ow];
          }
        }
    }
  });
}

// convolution(input, weight, bias?) -> out
flagosStatus_t convForward(flagosStream_t stream, const flagosTensor* o, int32_t no,
                           const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 1 || ni != 3) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor x = copyTensor(in[0]), w = copyTensor(in[1]), b = copyTensor(in[2]), y = copyTensor(o[0]);
  Geom g;
  const flagosDtype_t dt = x.dtype;
  if (!dispatchFloating(dt, [](auto) {}) || w.dtype != dt || y.dtype != dt ||
      !geometry(x, w, y, sc, ns, g))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  if (b.ndim >= 0 && (b.dtype != dt || b.numel() != g.OC || b.ndim != 1))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  return submit(stream, [=] {
    dispatchFloating(dt, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float>) {
        if (dnnlConvForward(g.shape(), x.ptr<T>(), w.ptr<T>(), b.ndim >= 0 ? b.ptr<T>() : nullptr,
                            y.ptr<T>()))
          return;
      }
      std::vector<T> col(g.pointwise() ? 0 : g.K() * g.P());
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t gi = 0; gi < g.G; ++gi) {
          const T* xs = x.ptr<T>() + (n * g.C + gi * g.cg()) * g.H * g.W;
          T* ys = y.ptr<T>() + (n * g.OC + gi * g.ocg()) * g.P();
          const T* cp = xs;
          if (!g.pointwise()) {
            im2col(xs, g, col.data());
            cp = col.data();
          }
          T beta = 0;
          if (b.ndim >= 0) {
            for (int64_t oc = 0; oc < g.ocg(); ++oc)
              std::fill(ys + oc * g.P(), ys + (oc + 1) * g.P(),
                        b.ptr<T>()[(gi * g.ocg() + oc) * b.strides[0]]);
            beta = 1;
          }
          gemm(CblasNoTrans, CblasNoTrans, g.ocg(), g.P(), g.K(), T(1),
               w.ptr<T>() + gi * g.ocg() * g.K(), g.K(), cp, g.P(), beta, ys, g.P());
        }
    });
  });
}

// convolution_backward(grad_output, input, weight) -> grad_input?,
// grad_weight?, grad_bias? (scalars as forward, then output_mask[3]).
flagosStatus_t convBackward(flagosStream_t stream, const flagosTensor* o, int32_t no,
                            const flagosTensor* in, int32_t ni, const flagosScalar* sc,
                            int32_t ns) {
  if (no != 3 || ni != 3 || ns != 17) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor gy = copyTensor(in[0]), x = copyTensor(in[1]), w = copyTensor(in[2]);
  Tensor gx = copyTensor(o[0]), gw = copyTensor(o[1]), gb = copyTensor(o[2]);
  bool mx = sc[14].i && gx.data, mw = sc[15].i && gw.data, mb = sc[16].i && gb.data;
  Geom g;
  const flagosDtype_t dt = x.dtype;
  if (!dispatchFloating(dt, [](auto) {}) || w.dtype != dt || gy.dtype != dt ||
      !geometry(x, w, gy, sc, ns, g, true))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  if ((mx && (gx.dtype != dt || !gx.contiguous() || gx.numel() != x.numel())) ||
      (mw && (gw.dtype != dt || !gw.contiguous() || gw.numel() != w.numel())) ||
      (mb && (gb.dtype != dt || gb.numel() != g.OC || !gb.contiguous())))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  return submit(stream, [=]() mutable {
    dispatchFloating(dt, [&](auto tag) {
      using T = decltype(tag);
      std::vector<T>
          packed;  // gy in NCHW when it arrives strided (the gradient of a sum: stride 0)
      if (!gy.contiguous()) {
        packed.resize(gy.numel());
        int64_t k = 0;
        for (int64_t a = 0; a < gy.shape[0]; ++a)
          for (int64_t b2 = 0; b2 < gy.shape[1]; ++b2)
            for (int64_t c = 0; c < gy.shape[2]; ++c)
              for (int64_t d = 0; d < gy.shape[3]; ++d)
                packed[k++] = gy.ptr<T>()[a * gy.strides[0] + b2 * gy.strides[1] +
                                          c * gy.strides[2] + d * gy.strides[3]];
        gy.data = reinterpret_cast<char*>(packed.data());
        int64_t st = 1;
        for (int d = 3; d >= 0; --d) {
          gy.strides[d] = st;
          st *= gy.shape[d];
        }
      }
      if constexpr (std::is_same_v<T, float>) {
        if (mx && dnnlConvBackwardData(g.shape(), gy.ptr<T>(), w.ptr<T>(), gx.ptr<T>())) mx = false;
        if (mw && dnnlConvBackwardWeights(g.shape(), x.ptr<T>(), gy.ptr<T>(), gw.ptr<T>(),
                                          mb ? gb.ptr<T>() : nullptr))
          mw = mb = false;
      }
      std::vector<T> col(mx || mw ? g.K() * g.P() : 0);
      if (mx) std::memset(gx.data, 0, sizeof(T) * gx.numel());
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t gi = 0; gi < g.G; ++gi) {
          const T* gys = gy.ptr<T>() + (n * g.OC + gi * g.ocg()) * g.P();
          const int64_t xoff = (n * g.C + gi * g.cg()) * g.H * g.W;
          const T* wg = w.ptr<T>() + gi * g.ocg() * g.K();
          if (mw) {
            const T* cp = x.ptr<T>() + xoff;
            if (!g.pointwise()) {
              im2col(cp, g, col.data());
              cp = col.data();
            }
            gemm(CblasNoTrans, CblasTrans, g.ocg(), g.K(), g.P(), T(1), gys, g.P(), cp, g.P(),
                 n ? T(1) : T(0), gw.ptr<T>() + gi * g.ocg() * g.K(), g.K());
          }
          if (mx) {
            if (g.pointwise()) {
              gemm(CblasTrans, CblasNoTrans, g.K(), g.P(), g.ocg(), T(1), wg, g.K(), gys, g.P(),
                   T(0), gx.ptr<T>() + xoff, g.P());
            } else {
              gemm(CblasTrans, CblasNoTrans, g.K(), g.P(), g.ocg(), T(1), wg, g.K(), gys, g.P(),
                   T(0), col.data(), g.P());
              col2im(col.data(), g, gx.ptr<T>() + xoff);
            }
          }
        }
      if (mb) {
        parallelFor(g.OC, 1, [&](int64_t lo, int64_t hi) {
          for (int64_t oc = lo; oc < hi; ++oc) {
            double s = 0;
            for (int64_t n = 0; n < g.N; ++n) {
              const T* p = gy.ptr<T>() + (n * g.OC + oc) * g.P();
              for (int64_t i = 0; i < g.P(); ++i) s += p[i];
            }
            gb.ptr<T>()[oc] = static_cast<T>(s);
          }
        });
      }
    });
  });
}

}  // namespace

void addConvKernels(void (*add)(const char*, flagosKernelFn)) {
  add("convolution_direct", convForward);
  add("convolution_backward_direct", convBackward);  // Note [Kernels with an output_mask]
}

}  // namespace flagos_host::kernels
