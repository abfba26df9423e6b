// embedding_dense_backward: grad_weight[index[i]] += grad_output[i], rows at
// padding_idx left zero. scale_grad_by_freq answers NOT_SUPPORTED.
#include <algorithm>
#include <string>

#include "../host.h"
#include "kernels.h"

namespace flagos_host::kernels {
namespace {

// embedding_dense_backward(grad_output, indices) -> out; scalars
// num_weights, padding_idx, scale_grad_by_freq.
flagosStatus_t embeddingBackward(flagosStream_t stream, const flagosTensor* o, int32_t no,
                                 const flagosTensor* in, int32_t ni, const flagosScalar* sc,
                                 int32_t ns) {
  if (no != 1 || ni != 2 || ns != 3 || sc[2].i != 0) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor gy = copyTensor(in[0]), idx = copyTensor(in[1]), gw = copyTensor(o[0]);
  const flagosDtype_t dt = gw.dtype;
  if (!dispatchFloating(dt, [](auto) {}) || gy.dtype != dt || !gy.contiguous() ||
      !idx.contiguous() || !gw.contiguous() || gw.ndim != 2 ||
      (idx.dtype != FLAGOS_DTYPE_INT64 && idx.dtype != FLAGOS_DTYPE_INT32))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const int64_t D = gw.shape[1], V = gw.shape[0], pad = sc[1].i;
  if (gy.numel() != idx.numel() * D) return FLAGOS_ERROR_NOT_SUPPORTED;
  return submit(stream, [=] {
    dispatchFloating(dt, [&](auto tag) {
      using T = decltype(tag);
      T* w = gw.ptr<T>();
      std::fill(w, w + gw.numel(), T(0));
      const int64_t n = idx.numel();
      for (int64_t i = 0; i < n; ++i) {
        const int64_t k =
            idx.dtype == FLAGOS_DTYPE_INT64 ? idx.ptr<int64_t>()[i] : idx.ptr<int32_t>()[i];
        if (k == pad) continue;
        if (k < 0 || k >= V)
          throw TaskError(FLAGOS_ERROR_INVALID_ARGUMENT,
                          "embedding_backward: index " + std::to_string(k) + " is out of bounds");
        const T* g = gy.ptr<T>() + i * D;
        T* r = w + k * D;
        for (int64_t j = 0; j < D; ++j) r[j] += g[j];
      }
    });
  });
}

}  // namespace

void addEmbeddingKernels(void (*add)(const char*, flagosKernelFn)) {
  add("embedding_dense_backward", embeddingBackward);
}

}  // namespace flagos_host::kernels
