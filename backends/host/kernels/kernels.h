// Native kernels of the host plugin, by semantic ID (kernel.h, ops.h).
//
// Files:
//   table.cpp     the flagosKernelTable (flagos_host_kernel_table)
//   common.cpp    owned descriptor copies, submit() onto a stream, the pool
//   pointwise.cpp unary/binary/ternary elementwise ops and their backwards
//   reduce.cpp    sum/mean/amax/amin/max/min/argmax/argmin, softmax family
//   gemm.cpp      mm/addmm/bmm/baddbmm through OpenBLAS; addmv/mv/dot as those
//   index.cpp     index_select (embedding), cat
//   norm.cpp      layer norm, batch norm forwards
//   norm_backward.cpp  batch norm / layer norm backwards
//   conv.cpp      2-D convolution fwd/bwd (oneDNN for float32, else im2col + OpenBLAS)
//   conv_dnnl.cpp the oneDNN primitives (conv_dnnl.h; stubs without oneDNN)
//   pool.cpp      max_pool2d, adaptive avg pool (fwd/bwd)
//   loss.cpp      nll_loss fwd/bwd
//   embedding.cpp embedding_dense_backward
//   misc.cpp      bitwise/logical not, isposinf/isneginf, tril/triu, any/all
//   iter.h        the strided iterator of pointwise.cpp and index.cpp
//   accumulate.h  vectorizable row sums, dots and squared deviations
//   vecmath.h     SLEEF vector math (exp, erf, gelu, softmax rows...), per ISA:
//                 vecmath_body.h written once, vecmath_avx2/avx512.cpp built
//                 for each, vecmath.cpp picks one at run time
//
// Note [Host kernels run on the stream]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A kernel checks what it can handle (dtypes, ranks) synchronously and
// returns FLAGOS_ERROR_NOT_SUPPORTED at once when it cannot (the core then
// takes the next tier); otherwise it copies the descriptors (they die when
// the call returns) and enqueues the computation on the stream's worker, so
// it is ordered with the copies and kernels queued before it.
#pragma once

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "../host.h"
#include "flagos/kernel.h"

// The plugin's kernel table; entry.cpp puts it into flagosVendorTables.
const flagosKernelTable* flagos_host_kernel_table(void);

// Note [Kernels with an output_mask]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// native_batch_norm_backward, native_layer_norm_backward and
// convolution_backward return undefined tensors for output_mask entries that
// are false. The core passes those outputs with data == NULL (and no
// shape); these kernels skip them.

namespace flagos_host::kernels {

// An owned copy of a flagosTensor.
struct Tensor {
  char* data = nullptr;
  flagosDtype_t dtype = 0;
  int32_t ndim = 0;
  int64_t shape[FLAGOS_MAX_DIMS];
  int64_t strides[FLAGOS_MAX_DIMS];  // in elements

  Tensor() : shape{}, strides{} {}
  // For copyTensor, which writes every slot: no zero fill first (a `rep
  // stos` that cost more than the copy on a tiny kernel's call path).
  struct Unfilled {};
  explicit Tensor(Unfilled) {}

  bool defined() const { return data != nullptr || ndim >= 0; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  int64_t size(int d) const { return shape[d]; }
  bool contiguous() const {
    int64_t expect = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && strides[i] != expect) return false;
      expect *= shape[i];
    }
    return true;
  }
  template <typename T>
  T* ptr() const {
    return reinterpret_cast<T*>(data);
  }
};

Tensor copyTensor(const flagosTensor& t);

// Note [Strided operands]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A kernel that wants row-major data takes a strided operand by packing it
// into scratch (packContiguous: @p t then points at the packed copy) and
// writes a strided output through scratch (outputContiguous, then
// scatterContiguous). One copy each, on the stream.
template <typename Fn>
void forEachIndex(const Tensor& t, Fn&& fn) {  // fn(element offset), row-major order
  const int64_t n = t.numel();
  int64_t index[FLAGOS_MAX_DIMS] = {};
  int64_t offset = 0;
  for (int64_t k = 0; k < n; ++k) {
    fn(offset);
    for (int d = t.ndim - 1; d >= 0; --d) {
      offset += t.strides[d];
      if (++index[d] < t.shape[d]) break;
      offset -= t.strides[d] * t.shape[d];
      index[d] = 0;
    }
  }
}
template <typename T>
void packContiguous(Tensor& t, std::vector<T>& scratch) {
  if (t.contiguous()) return;
  scratch.resize(t.numel());
  T* dst = scratch.data();
  const T* src = t.ptr<T>();
  forEachIndex(t, [&](int64_t off) { *dst++ = src[off]; });
  t.data = reinterpret_cast<char*>(scratch.data());
  int64_t st = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.strides[d] = st;
    st *= t.shape[d];
  }
}
template <typename T>
T* outputContiguous(const Tensor& t, std::vector<T>& scratch) {
  if (t.contiguous()) return t.ptr<T>();
  scratch.resize(t.numel());
  return scratch.data();
}
template <typename T>
void scatterContiguous(const Tensor& t, const std::vector<T>& scratch) {
  if (t.contiguous()) return;
  const T* src = scratch.data();
  T* dst = t.ptr<T>();
  forEachIndex(t, [&](int64_t off) { dst[off] = *src++; });
}
// Whether two descriptors have the same shape (strides may differ).
inline bool sameShape(const flagosTensor& a, const flagosTensor& b) {
  if (a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i)
    if (a.shape[i] != b.shape[i]) return false;
  return true;
}
// An output scatterContiguous can write: no element twice (stride 0).
inline bool writable(const Tensor& t) {
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[d] > 1 && t.strides[d] == 0) return false;
  return true;
}

// Enqueue @p work on @p stream (see the Note above). Returns
// FLAGOS_ERROR_INVALID_ARGUMENT for a bad handle. An idle stream runs small
// work at once on the caller (Note [Inline execution], ../stream.cpp); the
// size is @p cost if >= 0, else the bytes of the tensors copyTensor copied
// since the last submit on this thread.
// A template so that work run inline is never copied into a std::function.
int64_t takeSubmitCost(int64_t cost);  // @p cost, or the bytes counted since the last submit
template <class Work>
flagosStatus_t submit(flagosStream_t stream, Work&& work, int64_t cost = -1) {
  cost = takeSubmitCost(cost);
  if (!validStream("kernel", stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
  stream->enqueue(FLAGOS_TRACE_KERNEL, flagos_kit::trace::takeName("kernel"),
                  std::forward<Work>(work), cost);
  return FLAGOS_SUCCESS;
}

// Runs body(begin, end) over [0, n) in chunks of at least @p grain on the
// kernel thread pool (and the calling thread). Serial below 2 * grain.
// A template so that the serial case (every small kernel) calls @p body
// directly: a std::function around a capturing lambda is a heap allocation.
void parallelForPool(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);
template <class Body>
void parallelFor(int64_t n, int64_t grain, const Body& body) {
  if (n <= 0) return;
  grain = grain < 1 ? 1 : grain;
  static const unsigned cores = std::thread::hardware_concurrency();  // a syscall: once
  if (n < 2 * grain || cores < 2) {
    body(int64_t{0}, n);
    return;
  }
  parallelForPool(n, grain, body);
}

// Typed dispatch over float32/float64; returns false for other dtypes.
template <typename F>
bool dispatchFloating(flagosDtype_t dtype, F&& f) {
  if (dtype == FLAGOS_DTYPE_FLOAT32) {
    f(float{});
    return true;
  }
  if (dtype == FLAGOS_DTYPE_FLOAT64) {
    f(double{});
    return true;
  }
  return false;
}

// float32/float64/int32/int64.
template <typename F>
bool dispatchNumeric(flagosDtype_t dtype, F&& f) {
  if (dispatchFloating(dtype, f)) return true;
  if (dtype == FLAGOS_DTYPE_INT32) {
    f(int32_t{});
    return true;
  }
  if (dtype == FLAGOS_DTYPE_INT64) {
    f(int64_t{});
    return true;
  }
  return false;
}

// A scalar argument as T (absent -> fallback value).
template <typename T>
T scalarAs(const flagosScalar& s, T fallback = T{}) {
  if (s.dtype == 0) return fallback;
  if (s.dtype == FLAGOS_DTYPE_FLOAT64 || s.dtype == FLAGOS_DTYPE_FLOAT32)
    return static_cast<T>(s.f);
  return static_cast<T>(s.i);
}

// Kernel entry points, one per family file.
void addPointwiseKernels(void (*add)(const char*, flagosKernelFn));
void addReduceKernels(void (*add)(const char*, flagosKernelFn));
void addGemmKernels(void (*add)(const char*, flagosKernelFn));
void addIndexKernels(void (*add)(const char*, flagosKernelFn));
void addNormKernels(void (*add)(const char*, flagosKernelFn));
void addNormBackwardKernels(void (*add)(const char*, flagosKernelFn));
void addConvKernels(void (*add)(const char*, flagosKernelFn));
void addPoolKernels(void (*add)(const char*, flagosKernelFn));
void addLossKernels(void (*add)(const char*, flagosKernelFn));
void addEmbeddingKernels(void (*add)(const char*, flagosKernelFn));
void addMiscKernels(void (*add)(const char*, flagosKernelFn));

}  // namespace flagos_host::kernels
