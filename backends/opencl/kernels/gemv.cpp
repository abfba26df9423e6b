// mv / addmv (CLBlast Sgemv/Dgemv) and dot (Sdot/Ddot). Same rules as
// gemm.cpp: the matrix must be row- or column-major with a leading
// dimension, vectors need a positive increment (CLBlast's are unsigned), and
// beta == 0 zeroes the output first.
#include "blas.h"

namespace flagos_opencl::kernels {
namespace {

// Increment of a 1-D operand; 0 when it is not usable (broadcast, n > 1).
size_t incOf(const Operand& v) {
  if (v.shape[0] <= 1) return 1;
  return static_cast<size_t>(v.strides[0]);
}

struct Gemv {
  CLBlastTranspose t;
  size_t m, n;  // of the stored row-major matrix
  double alpha, beta;
  cl_mem a, x, y;
  size_t a_off, lda, x_off, x_inc, y_off, y_inc;
};

CLBlastStatusCode run(const Gemv& g, float, cl_command_queue* q, cl_event* ev) {
  return CLBlastSgemv(CLBlastLayoutRowMajor, g.t, g.m, g.n, static_cast<float>(g.alpha), g.a,
                      g.a_off, g.lda, g.x, g.x_off, g.x_inc, static_cast<float>(g.beta), g.y,
                      g.y_off, g.y_inc, q, ev);
}
CLBlastStatusCode run(const Gemv& g, double, cl_command_queue* q, cl_event* ev) {
  return CLBlastDgemv(CLBlastLayoutRowMajor, g.t, g.m, g.n, g.alpha, g.a, g.a_off, g.lda, g.x,
                      g.x_off, g.x_inc, g.beta, g.y, g.y_off, g.y_inc, q, ev);
}

template <bool kWithSelf>
flagosStatus_t gemvBody(flagosStream_t stream, const flagosTensor* o, int32_t no,
                        const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  constexpr const char* op = kWithSelf ? "addmv" : "mv";
  constexpr int first = kWithSelf ? 1 : 0;
  if (!validStream(op, stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
  if (no != 1 || ni != first + 2 || (kWithSelf && ns < 2)) return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = o[0].dtype;
  if (!supportedDtype(stream, dt, in, ni)) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (o[0].ndim != 1 || in[first].ndim != 2 || in[first + 1].ndim != 1)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const int64_t M = in[first].shape[0], N = in[first].shape[1];
  if (M == 0) return FLAGOS_SUCCESS;
  if (N == 0) return FLAGOS_ERROR_NOT_SUPPORTED;  // out = beta * self: CLBlast needs n > 0
  const double beta = kWithSelf ? scalarValue(sc[0], 1.0) : 0.0;
  const double alpha = kWithSelf ? scalarValue(sc[1], 1.0) : 1.0;

  Operand out, A, x;
  for (const auto& [t, dst] : {std::pair<const flagosTensor*, Operand*>{&o[0], &out},
                               std::pair<const flagosTensor*, Operand*>{&in[first], &A},
                               std::pair<const flagosTensor*, Operand*>{&in[first + 1], &x}}) {
    const Resolved r = resolveOperand(op, stream, *t, dst);
    if (!r.ok()) return r.status;
  }
  MatView a = matrixOf(A);
  if (!blasView(&a)) return FLAGOS_ERROR_NOT_SUPPORTED;
  const size_t x_inc = incOf(x), y_inc = incOf(out);
  if (x_inc == 0 || y_inc == 0) return FLAGOS_ERROR_NOT_SUPPORTED;

  Region self_region{};
  bool expand = false;
  if (kWithSelf && beta != 0.0) {  // addmm_: self may already be the output
    const flagosStatus_t st = resolveSelf(op, stream, in[0], out, &self_region, &expand);
    if (st != FLAGOS_SUCCESS) return st;
  }
  Helpers* helpers = nullptr;
  if (beta == 0.0 || expand) {
    helpers = helpersFor(stream->device);
    if (helpers == nullptr) return FLAGOS_ERROR_DEVICE;
  }
  // A transposed view is stored N x M: y = stored^T x.
  const Gemv g{clTrans(a.trans),
               static_cast<size_t>(a.trans ? N : M),
               static_cast<size_t>(a.trans ? M : N),
               alpha,
               beta,
               A.buffer,
               x.buffer,
               out.buffer,
               A.offset,
               a.ld,
               x.offset,
               x_inc,
               out.offset,
               y_inc};
  const cl_int error = stream->enqueue([&](cl_command_queue q, cl_event* event) -> cl_int {
    cl_int e = CL_SUCCESS;
    if (beta == 0.0) e = enqueueZero(helpers, q, dt, regionOf(out), nullptr);
    if (expand) e = enqueueExpand(helpers, q, dt, regionOf(out), self_region, nullptr);
    if (e != CL_SUCCESS) return e;
    return dt == FLAGOS_DTYPE_FLOAT32 ? run(g, float{}, &q, event) : run(g, double{}, &q, event);
  });
  return error == CL_SUCCESS ? FLAGOS_SUCCESS : blasFailure(op, error);
}

flagosStatus_t dotBody(flagosStream_t stream, const flagosTensor* o, int32_t no,
                       const flagosTensor* in, int32_t ni) {
  if (!validStream("dot", stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
  if (no != 1 || ni != 2) return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = o[0].dtype;
  if (!supportedDtype(stream, dt, in, ni)) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (o[0].ndim != 0 || in[0].ndim != 1 || in[1].ndim != 1 || in[0].shape[0] != in[1].shape[0])
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const int64_t n = in[0].shape[0];
  Operand out, x, y;
  Resolved r = resolveOperand("dot", stream, o[0], &out);
  if (r.ok() && n > 0) r = resolveOperand("dot", stream, in[0], &x);
  if (r.ok() && n > 0) r = resolveOperand("dot", stream, in[1], &y);
  if (!r.ok()) return r.status;
  Helpers* helpers = nullptr;
  if (n == 0 && (helpers = helpersFor(stream->device)) == nullptr) return FLAGOS_ERROR_DEVICE;
  const size_t x_inc = n > 0 ? incOf(x) : 1, y_inc = n > 0 ? incOf(y) : 1;
  if (x_inc == 0 || y_inc == 0) return FLAGOS_ERROR_NOT_SUPPORTED;
  const cl_int error = stream->enqueue([&](cl_command_queue q, cl_event* event) -> cl_int {
    if (n == 0) return enqueueZero(helpers, q, dt, regionOf(out), event);  // empty sum
    const size_t count = static_cast<size_t>(n);
    if (dt == FLAGOS_DTYPE_FLOAT32)
      return CLBlastSdot(count, out.buffer, out.offset, x.buffer, x.offset, x_inc, y.buffer,
                         y.offset, y_inc, &q, event);
    return CLBlastDdot(count, out.buffer, out.offset, x.buffer, x.offset, x_inc, y.buffer, y.offset,
                       y_inc, &q, event);
  });
  return error == CL_SUCCESS ? FLAGOS_SUCCESS : blasFailure("dot", error);
}

template <bool kWithSelf>
flagosStatus_t gemvKernel(flagosStream_t stream, const flagosTensor* o, int32_t no,
                          const flagosTensor* in, int32_t ni, const flagosScalar* sc,
                          int32_t ns) noexcept {
  const CompileLock compiling;  // CLBlast builds its kernels on first use
  return guard(kWithSelf ? "addmv" : "mv",
               [&] { return gemvBody<kWithSelf>(stream, o, no, in, ni, sc, ns); });
}

flagosStatus_t dotKernel(flagosStream_t stream, const flagosTensor* o, int32_t no,
                         const flagosTensor* in, int32_t ni, const flagosScalar*,
                         int32_t) noexcept {
  const CompileLock compiling;
  return guard("dot", [&] { return dotBody(stream, o, no, in, ni); });
}

}  // namespace

void addGemvKernels(void (*add)(const char*, flagosKernelFn)) {
  add("mv", gemvKernel<false>);
  add("addmv", gemvKernel<true>);
  add("dot", dotKernel);
}

}  // namespace flagos_opencl::kernels
