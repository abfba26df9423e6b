// Data movement by index: index_select (and so embedding) and cat. Both copy
// strided slices with the shared iterator, by element size, so every dtype
// works.
#include <cstring>
#include <string>
#include <vector>

#include "../host.h"
#include "iter.h"
#include "kernels.h"

namespace flagos_host::kernels {
namespace {

// dst[...] = src[...] for two views of the same shape.
void copyView(const Tensor& dst, const Tensor& src, int esz) {
  const Tensor* ts[2] = {&dst, &src};
  const int es[2] = {esz, esz};
  auto it = makeIter<2>(ts, es);
  forEach<2>(it, dst.numel(), [&](char** p, int64_t n, const int64_t* s) {
    if (s[0] == esz && s[1] == esz) {
      std::memmove(p[0], p[1], static_cast<size_t>(n * esz));
      return;
    }
    for (int64_t i = 0; i < n; ++i) std::memcpy(p[0] + i * s[0], p[1] + i * s[1], esz);
  });
}

// The view of `t` with dim `d` narrowed to [start, start + len).
Tensor narrow(const Tensor& t, int d, int64_t start, int64_t len, int esz) {
  Tensor v = t;
  v.data = t.data + start * t.strides[d] * esz;
  v.shape[d] = len;
  return v;
}

// index_select(self, index, dim): out.select(dim, j) = self.select(dim, index[j]).
flagosStatus_t indexSelect(flagosStream_t stream, const flagosTensor* o, int32_t no,
                           const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 1 || ni != 2 || ns != 1 || o[0].dtype != in[0].dtype || o[0].ndim != in[0].ndim ||
      in[1].ndim > 1 || (in[1].dtype != FLAGOS_DTYPE_INT64 && in[1].dtype != FLAGOS_DTYPE_INT32))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor out = copyTensor(o[0]), self = copyTensor(in[0]), index = copyTensor(in[1]);
  const int dim = out.ndim == 0 ? 0 : static_cast<int>(sc[0].i);
  const int esz = static_cast<int>(FLAGOS_DTYPE_SIZE(out.dtype));
  if (out.ndim == 0) return FLAGOS_ERROR_NOT_SUPPORTED;
  return submit(stream, [out, self, index, dim, esz] {
    const int64_t n = index.numel(), limit = self.shape[dim];
    const int64_t istride = index.ndim ? index.strides[0] : 0;
    for (int64_t j = 0; j < n; ++j) {
      int64_t k = index.dtype == FLAGOS_DTYPE_INT64 ? index.ptr<int64_t>()[j * istride]
                                                    : index.ptr<int32_t>()[j * istride];
      if (k < 0 || k >= limit)  // CPU's index_select does not wrap negative indices
        throw TaskError(FLAGOS_ERROR_INVALID_ARGUMENT, "index_select: index " + std::to_string(k) +
                                                           " is out of bounds for size " +
                                                           std::to_string(limit));
      copyView(narrow(out, dim, j, 1, esz), narrow(self, dim, k, 1, esz), esz);
    }
  });
}

// cat(tensors, dim). Legacy rule: 1-D empty inputs are skipped.
flagosStatus_t cat(flagosStream_t stream, const flagosTensor* o, int32_t no, const flagosTensor* in,
                   int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 1 || ns != 1 || o[0].ndim == 0) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor out = copyTensor(o[0]);
  const int dim = static_cast<int>(sc[0].i);
  std::vector<Tensor> parts;
  for (int i = 0; i < ni; ++i) {
    if (in[i].ndim == 1 && in[i].shape[0] == 0 && out.ndim != 1) continue;
    if (in[i].dtype != out.dtype || in[i].ndim != out.ndim) return FLAGOS_ERROR_NOT_SUPPORTED;
    parts.push_back(copyTensor(in[i]));
  }
  const int esz = static_cast<int>(FLAGOS_DTYPE_SIZE(out.dtype));
  return submit(stream, [out, parts, dim, esz] {
    int64_t offset = 0;
    for (const Tensor& p : parts) {
      const int64_t len = p.shape[dim];
      if (len > 0) copyView(narrow(out, dim, offset, len, esz), p, esz);
      offset += len;
    }
  });
}

}  // namespace

void addIndexKernels(void (*add)(const char*, flagosKernelFn)) {
  add("index_select", indexSelect);
  add("cat", cat);
}

}  // namespace flagos_host::kernels
