// nll_loss forward/backward over (N, C) or (C) log-probabilities with int64
// class targets, optional class weights and ignore_index. Reductions follow
// ATen: 0 none, 1 mean (divided by the summed weights), 2 sum.
#include <algorithm>
#include <string>

#include "../host.h"

#include "kernels.h"

namespace flagos_host::kernels {
namespace {

constexpr int64_t kNone = 0, kMean = 1;

// nll_loss_forward(self, target, weight?) -> (output, total_weight);
// scalars reduction, ignore_index.
flagosStatus_t nllLoss(flagosStream_t stream, const flagosTensor* o, int32_t no,
                       const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 2 || ni != 3 || ns != 2) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor x = copyTensor(in[0]), t = copyTensor(in[1]), w = copyTensor(in[2]);
  Tensor out = copyTensor(o[0]), tw = copyTensor(o[1]);
  const flagosDtype_t dt = x.dtype;
  if (!dispatchFloating(dt, [](auto) {}) || out.dtype != dt || tw.dtype != dt ||
      t.dtype != FLAGOS_DTYPE_INT64 || (x.ndim != 1 && x.ndim != 2) ||
      (w.ndim >= 0 && w.dtype != dt))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const int64_t red = sc[0].i, ignore = sc[1].i;
  if (red == kNone && x.ndim == 2 && out.ndim != 1) return FLAGOS_ERROR_NOT_SUPPORTED;
  return submit(stream, [=] {
    dispatchFloating(dt, [&](auto tag) {
      using T = decltype(tag);
      const int64_t N = x.ndim == 2 ? x.shape[0] : 1, C = x.shape[x.ndim - 1];
      const int64_t xs0 = x.ndim == 2 ? x.strides[0] : 0, xs1 = x.strides[x.ndim - 1];
      const int64_t ts = t.ndim ? t.strides[0] : 0;
      double sum = 0, wsum = 0;
      for (int64_t i = 0; i < N; ++i) {
        const int64_t c = t.ptr<int64_t>()[i * ts];
        double v = 0;
        if (c != ignore) {
          if (c < 0 || c >= C)
            throw TaskError(FLAGOS_ERROR_INVALID_ARGUMENT,
                            "nll_loss: target " + std::to_string(c) + " is out of bounds");
          const double wc = w.ndim >= 0 ? static_cast<double>(w.ptr<T>()[c * w.strides[0]]) : 1.0;
          v = -wc * static_cast<double>(x.ptr<T>()[i * xs0 + c * xs1]);
          wsum += wc;
        }
        if (red == kNone && x.ndim == 2) out.ptr<T>()[i * out.strides[0]] = static_cast<T>(v);
        sum += v;
      }
      if (!(red == kNone && x.ndim == 2))
        out.ptr<T>()[0] = static_cast<T>(red == kMean ? sum / wsum : sum);
      // ATen's CPU kernel leaves total_weight at 0 for per-sample losses
      // (reduction none over a batch); found by FLAGOS_AUTOCOMPARE.
      const bool per_sample = red == kNone && x.ndim == 2;
      tw.ptr<T>()[0] = static_cast<T>(per_sample ? 0.0 : wsum);
    });
  });
}

// nll_loss_backward(grad_output, self, target, weight?, total_weight)
//   -> grad_input; scalars reduction, ignore_index.
flagosStatus_t nllLossBackward(flagosStream_t stream, const flagosTensor* o, int32_t no,
                               const flagosTensor* in, int32_t ni, const flagosScalar* sc,
                               int32_t ns) {
  if (no != 1 || ni != 5 || ns != 2) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor gy = copyTensor(in[0]), t = copyTensor(in[2]), w = copyTensor(in[3]),
         tw = copyTensor(in[4]);
  Tensor gx = copyTensor(o[0]);
  const flagosDtype_t dt = gx.dtype;
  if (!dispatchFloating(dt, [](auto) {}) || gy.dtype != dt || tw.dtype != dt ||
      t.dtype != FLAGOS_DTYPE_INT64 || (gx.ndim != 1 && gx.ndim != 2) || !gx.contiguous() ||
      (w.ndim >= 0 && w.dtype != dt))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const int64_t red = sc[0].i, ignore = sc[1].i;
  return submit(stream, [=] {
    dispatchFloating(dt, [&](auto tag) {
      using T = decltype(tag);
      const int64_t N = gx.ndim == 2 ? gx.shape[0] : 1, C = gx.shape[gx.ndim - 1];
      std::fill(gx.ptr<T>(), gx.ptr<T>() + gx.numel(), T(0));
      const bool per = red == kNone && gx.ndim == 2;
      double scale = per ? 0 : static_cast<double>(gy.ptr<T>()[0]);
      if (red == kMean) scale /= static_cast<double>(tw.ptr<T>()[0]);
      const int64_t ts = t.ndim ? t.strides[0] : 0;
      for (int64_t i = 0; i < N; ++i) {
        const int64_t c = t.ptr<int64_t>()[i * ts];
        if (c == ignore || c < 0 || c >= C) continue;
        const double wc = w.ndim >= 0 ? static_cast<double>(w.ptr<T>()[c * w.strides[0]]) : 1.0;
        const double g = per ? static_cast<double>(gy.ptr<T>()[i * gy.strides[0]]) : scale;
        gx.ptr<T>()[i * C + c] = static_cast<T>(-wc * g);
      }
    });
  });
}

}  // namespace

void addLossKernels(void (*add)(const char*, flagosKernelFn)) {
  add("nll_loss", nllLoss);
  add("nll_loss_backward", nllLossBackward);
}

}  // namespace flagos_host::kernels
