// mm / addmm / bmm / baddbmm on CLBlast (float32: Sgemm, float64: Dgemm;
// batches: the strided-batched variants); small ones on the plugin's own
// kernel (Note [Small GEMMs] in gemm_small.cpp), tried first.
//
// CLBlast reads row-major matrices, each transposed or not, with a leading
// dimension: operands with one unit stride map onto that in place; anything
// else (broadcast, gaps in both strides, negative strides) is NOT_SUPPORTED
// (unless small) and the core takes a later tier. A column-major output is
// handled as C^T = B^T A^T. addmm-style `self` is broadcast into the output
// first and CLBlast's beta scales it. With beta == 0 torch ignores C
// (NaN/Inf there must not leak through 0 * NaN): CLBlast >= 0.9 does not
// read C then ("Fixed a bug in level-3 routines when beta is zero and matrix
// C contains NaNs"; its direct and indirect GEMM kernels branch on
// IsZero(beta)), so only an older CLBlast gets a zeroing kernel first.
// Skipping it saves one command per mm/bmm, most of the plugin's overhead
// on small GEMMs on PoCL (Note [GEMM overhead] below).
#include <optional>
#include <utility>

#include "blas.h"

namespace flagos_opencl::kernels {
namespace {

// Note [GEMM overhead]
// ~~~~~~~~~~~~~~~~~~~~
// What flagos adds to a CLBlast GEMM: resolving three addresses (a map
// lookup each), the stream's lock, keeping CLBlast's event as the stream's
// last command, and the core's synchronize (the stream's last event plus a
// clFinish of the idle synchronous queue). Measured interleaved in one
// process against CLBlast on its own context (bench_gemm_opencl.py), the
// zeroing kernel was most of that at N = 16; without it a few microseconds
// are left there, and from N = 128 on the difference is within noise. A
// gap at N = 256 seen earlier was not the plugin: on a 2-vCPU host PoCL's
// two worker threads serialize whenever one vCPU is taken by another
// tenant (clblast_direct alone flips between a fast and a slow phase;
// `taskset -c 0` pins it to the slow one), and the old benchmark timed
// each side in one block, so a whole block fell into one phase.
//
// Where the rest at N = 16 goes (PoCL, 2 vCPUs; perf with DWARF call
// graphs of the calling thread, and its CPU time per call): the calling
// thread spends a little more per torch.mm + synchronize than the direct
// side's ctypes calls (PoCL's worker threads spend the same on both sides,
// and both sides make the same context switches). Of that, PyTorch's own
// path (Python binding, autograd, dispatcher, boxing, wrapping and freeing
// the result tensor) is the largest part, then the core's bridge (output
// allocation, shape cache, descriptors, guards, returns, freeing the
// block), and this plugin least (three address lookups, the compile and
// stream locks, the event bookkeeping). The OpenCL choices cost nothing
// measurable on PoCL; in C, interleaved, a 16^3 SGEMM + wait is the same
// within noise with or without CL_QUEUE_PROFILING_ENABLE, with or without
// CLBlast's event out-parameter, waiting on that event or calling
// clFinish, and with the extra clFinish of an idle queue (clGetEventInfo,
// retain+release and a wait on a complete event are as cheap). CLBlast's
// own per-call work (routine setup, database lookups, the launch that
// wakes PoCL's workers) is most of the calling thread's time on both
// sides (Note [Small GEMMs]). Figures: docs/benchmarks.md, "Measurements
// behind design decisions".
#if defined(CLBLAST_VERSION_MAJOR) && (CLBLAST_VERSION_MAJOR > 0 || CLBLAST_VERSION_MINOR >= 9)
constexpr bool kZeroBeforeBetaZero = false;
#else
constexpr bool kZeroBeforeBetaZero = true;  // older CLBlast computes 0 * C
#endif

struct Gemm {
  CLBlastTranspose ta, tb;
  size_t m, n, k;
  double alpha, beta;
  cl_mem a, b, c;
  size_t a_off, b_off, c_off, lda, ldb, ldc;
  size_t a_stride, b_stride, c_stride, batch;  // batch strides in elements
};

CLBlastStatusCode run(const Gemm& g, float, cl_command_queue* q, cl_event* ev) {
  const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  if (g.batch == 1)
    return CLBlastSgemm(CLBlastLayoutRowMajor, g.ta, g.tb, g.m, g.n, g.k, alpha, g.a, g.a_off,
                        g.lda, g.b, g.b_off, g.ldb, beta, g.c, g.c_off, g.ldc, q, ev);
  return CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, g.ta, g.tb, g.m, g.n, g.k, alpha, g.a,
                                    g.a_off, g.lda, g.a_stride, g.b, g.b_off, g.ldb, g.b_stride,
                                    beta, g.c, g.c_off, g.ldc, g.c_stride, g.batch, q, ev);
}

CLBlastStatusCode run(const Gemm& g, double, cl_command_queue* q, cl_event* ev) {
  if (g.batch == 1)
    return CLBlastDgemm(CLBlastLayoutRowMajor, g.ta, g.tb, g.m, g.n, g.k, g.alpha, g.a, g.a_off,
                        g.lda, g.b, g.b_off, g.ldb, g.beta, g.c, g.c_off, g.ldc, q, ev);
  return CLBlastDgemmStridedBatched(CLBlastLayoutRowMajor, g.ta, g.tb, g.m, g.n, g.k, g.alpha, g.a,
                                    g.a_off, g.lda, g.a_stride, g.b, g.b_off, g.ldb, g.b_stride,
                                    g.beta, g.c, g.c_off, g.ldc, g.c_stride, g.batch, q, ev);
}

template <int kRank, bool kWithSelf>
constexpr const char* opName() {
  return kRank == 2 ? (kWithSelf ? "addmm" : "mm") : (kWithSelf ? "baddbmm" : "bmm");
}

// The output can be written by one item per element: row- or column-major
// with a leading dimension, batches apart (inputs may overlap: batch stride
// 0). Both paths need that.
template <int kRank>
bool writableOutput(const Operand& out) {
  MatView c = matrixOf(out);
  if (!blasView(&c)) return false;
  if (kRank == 2 || out.shape[0] == 1) return true;
  const int64_t rows = c.trans ? c.cols : c.rows, cols = c.trans ? c.rows : c.cols;  // as stored
  return out.strides[0] >= (rows - 1) * static_cast<int64_t>(c.ld) + cols;
}

// Note [Small GEMMs]: NOT_SUPPORTED when the call is not small (or the
// kernel did not build), so that CLBlast takes it.
template <int kRank, bool kWithSelf>
flagosStatus_t smallGemm(const char* op, flagosStream_t stream, flagosDtype_t dt,
                         const flagosTensor* in, const Operand& out, const Operand& A,
                         const Operand& B, double alpha, double beta) {
  auto arg = [](const Operand& t) {
    const int r = t.ndim - 2;
    return MatArg{t.buffer, t.offset, kRank == 3 ? t.strides[0] : 0, t.strides[r],
                  t.strides[r + 1]};
  };
  SmallGemm g;
  g.batch = kRank == 3 ? out.shape[0] : 1;
  g.m = out.shape[kRank - 2];
  g.n = out.shape[kRank - 1];
  g.k = A.shape[kRank - 1];
  g.alpha = alpha;
  g.beta = beta;
  g.c = arg(out);
  g.a = arg(A);
  g.b = arg(B);
  g.self = g.c;  // not read when beta == 0
  if (!smallGemmFits(stream->device, g)) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (kWithSelf && beta != 0.0) {
    Region self{};
    bool copy = false;
    const flagosStatus_t st = resolveSelf(op, stream, in[0], out, &self, &copy);
    if (st != FLAGOS_SUCCESS) return st;
    g.self = MatArg{self.buffer, self.offset, self.strides[0], self.strides[1], self.strides[2]};
  }
  std::optional<CompileLock> compiling;  // a build or a first launch (Note [Small GEMMs])
  if (!smallGemmWarm(stream->device, dt)) compiling.emplace();
  SmallGemmProgram* program = smallGemmProgram(stream->device);
  if (program == nullptr) return FLAGOS_ERROR_NOT_SUPPORTED;
  cl_event first = nullptr;  // Note [Serialized compiles on PoCL]
  const cl_int error = stream->enqueue([&](cl_command_queue q, cl_event* event) {
    const cl_int e = enqueueSmallGemm(program, q, dt, g, event);
    if (e == CL_SUCCESS && compiling && *event != nullptr && clRetainEvent(*event) == CL_SUCCESS)
      first = *event;
    return e;
  });
  waitIfFirst(compiling, first);
  if (error == CL_SUCCESS) return FLAGOS_SUCCESS;
  return fail(isOutOfMemory(error) ? FLAGOS_ERROR_OUT_OF_MEMORY : FLAGOS_ERROR_DEVICE,
              "opencl %s: small-GEMM kernel failed: %s", op, clErrorName(error).c_str());
}

template <int kRank, bool kWithSelf>
flagosStatus_t gemmBody(flagosStream_t stream, const flagosTensor* o, int32_t no,
                        const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  constexpr const char* op = opName<kRank, kWithSelf>();
  constexpr int first = kWithSelf ? 1 : 0;
  if (!validStream(op, stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
  if (no != 1 || ni != first + 2 || (kWithSelf && ns < 2)) return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = o[0].dtype;
  if (!supportedDtype(stream, dt, in, ni)) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (o[0].ndim != kRank || in[first].ndim != kRank || in[first + 1].ndim != kRank)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const int64_t batch = kRank == 3 ? o[0].shape[0] : 1;
  const int64_t M = o[0].shape[kRank - 2], N = o[0].shape[kRank - 1];
  const int64_t K = in[first].shape[kRank - 1];
  if (batch == 0 || M == 0 || N == 0) return FLAGOS_SUCCESS;  // nothing to write
  if (K == 0) return FLAGOS_ERROR_NOT_SUPPORTED;  // out = beta * self: CLBlast needs k > 0
  const double beta = kWithSelf ? scalarValue(sc[0], 1.0) : 0.0;
  const double alpha = kWithSelf ? scalarValue(sc[1], 1.0) : 1.0;

  Operand out, A, B;
  const std::pair<const flagosTensor*, Operand*> operands[] = {
      {&o[0], &out}, {&in[first], &A}, {&in[first + 1], &B}};
  for (const auto& [t, dst] : operands) {
    const Resolved r = resolveOperand(op, stream, *t, dst);
    if (!r.ok()) return r.status;
  }
  if (!writableOutput<kRank>(out)) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (const flagosStatus_t st =
          smallGemm<kRank, kWithSelf>(op, stream, dt, in, out, A, B, alpha, beta);
      st != FLAGOS_ERROR_NOT_SUPPORTED)
    return st;
  // CLBlast builds its kernels on first use (any call may), and so does the
  // helper program.
  const CompileLock compiling;
  MatView c = matrixOf(out), a = matrixOf(A), b = matrixOf(B);
  int64_t sa = kRank == 3 ? A.strides[0] : 0, sb = kRank == 3 ? B.strides[0] : 0;
  cl_mem abuf = A.buffer, bbuf = B.buffer;
  size_t aoff = A.offset, boff = B.offset;
  if (!blasView(&c) || c.trans) {  // column-major output: C^T = B^T A^T
    MatView ct = transposed(matrixOf(out));
    if (!blasView(&ct) || ct.trans) return FLAGOS_ERROR_NOT_SUPPORTED;
    c = ct;
    const MatView at = transposed(a);
    a = transposed(b);
    b = at;
    std::swap(sa, sb);
    std::swap(abuf, bbuf);
    std::swap(aoff, boff);
  }
  if (!blasView(&a) || !blasView(&b)) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (a.rows != c.rows || b.cols != c.cols || a.cols != b.rows) return FLAGOS_ERROR_NOT_SUPPORTED;
  const int64_t sc_batch = kRank == 3 ? out.strides[0] : 0;

  Region self_region{};
  bool expand = false;
  if (kWithSelf && beta != 0.0) {  // addmm_: self may already be the output
    const flagosStatus_t st = resolveSelf(op, stream, in[0], out, &self_region, &expand);
    if (st != FLAGOS_SUCCESS) return st;
  }
  const bool zero = beta == 0.0 && kZeroBeforeBetaZero;
  Helpers* helpers = nullptr;
  if (zero || expand) {
    helpers = helpersFor(stream->device);
    if (helpers == nullptr) return FLAGOS_ERROR_DEVICE;
  }

  const Gemm g{clTrans(a.trans),
               clTrans(b.trans),
               static_cast<size_t>(c.rows),
               static_cast<size_t>(c.cols),
               static_cast<size_t>(a.cols),
               alpha,
               beta,
               abuf,
               bbuf,
               out.buffer,
               aoff,
               boff,
               out.offset,
               a.ld,
               b.ld,
               c.ld,
               static_cast<size_t>(sa),
               static_cast<size_t>(sb),
               static_cast<size_t>(sc_batch),
               static_cast<size_t>(batch)};
  const cl_int error = stream->enqueue([&](cl_command_queue q, cl_event* event) -> cl_int {
    cl_int e = CL_SUCCESS;
    if (zero) e = enqueueZero(helpers, q, dt, regionOf(out), nullptr);
    if (expand) e = enqueueExpand(helpers, q, dt, regionOf(out), self_region, nullptr);
    if (e != CL_SUCCESS) return e;
    return dt == FLAGOS_DTYPE_FLOAT32 ? run(g, float{}, &q, event) : run(g, double{}, &q, event);
  });
  return error == CL_SUCCESS ? FLAGOS_SUCCESS : blasFailure(op, error);
}

template <int kRank, bool kWithSelf>
flagosStatus_t gemmKernel(flagosStream_t stream, const flagosTensor* o, int32_t no,
                          const flagosTensor* in, int32_t ni, const flagosScalar* sc,
                          int32_t ns) noexcept {
  return guard(opName<kRank, kWithSelf>(),
               [&] { return gemmBody<kRank, kWithSelf>(stream, o, no, in, ni, sc, ns); });
}

}  // namespace

void addGemmKernels(void (*add)(const char*, flagosKernelFn)) {
  add("mm", gemmKernel<2, false>);
  add("addmm", gemmKernel<2, true>);
  add("bmm", gemmKernel<3, false>);
  add("baddbmm", gemmKernel<3, true>);
}

}  // namespace flagos_opencl::kernels
