// nll_loss / nll_loss2d forward and backward as native OpenCL kernels, one
// launch each, instead of the core's composite (~16 small kernels).
//
// Note [Native nll_loss on OpenCL]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every call is a set of "rows", one per sample (nll_loss: N or 1 for a 1-D
// input; nll_loss2d: N*H*W), each picking one of C classes. A row index r
// splits into (r / (n1*n2), r / n2 % n1, r % n2) and each tensor has its
// own three row strides, so (N, C), (C) and (N, C, H, W) inputs, and any
// strides, share one pair of kernels:
//
//  - forward: one work-group of kGroup items; item i takes rows i, i +
//    kGroup, ... in order, then a fixed tree adds the partial sums. The
//    result is deterministic (no atomics on floats), and training batches
//    are small. Reductions follow ATen (LossNLL.cpp): mean divides by the
//    summed weights (0/0 = nan when every row is ignored), total_weight is 0
//    for per-sample losses over a batch, ignored rows contribute 0;
//  - backward: one item per row writes the whole row of grad_input (zeros
//    and -w[t] * grad), so nothing needs zeroing first.
//
// Targets out of range: CPU raises IndexError("Target 12 is out of
// bounds."), and a plugin status can only become a RuntimeError in the core
// (flagos::check). So both kernels record the first bad row with an atomic
// min in a per-device int (INT_MAX when none), the call reads it back (one
// small blocking read, as CPU's own check and the composite's need), and a
// bad row makes the call return FLAGOS_ERROR_FALLBACK: the core runs it on
// the host tier, whose CPU kernel raises CPU's exact error. (The core checks
// forward targets before any kernel, Note [Index bounds]; a direct
// nll_loss_backward call is the one that gets here.) The int is reset
// before returning, so later calls work. One lock per device covers the kernel arguments, the
// int and the read-back: calls on two streams take turns.
//
// The program is built from source once per device (context) and kept; the
// SDK warm-up (warmup.cpp) builds it and launches each float kernel once.
// Anything unusual (other dtypes, non-int64 targets, >2-D nll inputs,
// negative strides, overlapping outputs, empty inputs) is NOT_SUPPORTED
// before anything is enqueued, and the composite serves it.
#include <algorithm>
#include <climits>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "blas.h"

namespace flagos_opencl::kernels {
namespace {

constexpr int kGroup = 64;  // work-group size of both kernels (forward's local arrays)
enum Mode : cl_int { kPerSample = 0, kMean = 1, kSum = 2 };

// Forward: A = self, B = output. Backward: A = grad_input, B = grad_output.
// Both take the same arguments, so one setter serves them.
// GROUP is kGroup, passed as a build option.
constexpr const char* kSource = R"CL(
#define AT(T, base, off) ((__global T*)((__global char*)(base) + (off)))

inline long rowAt(long r, long n1, long n2, long s0, long s1, long s2) {
  const long q = r / n2;
  return (q / n1) * s0 + (q % n1) * s1 + (r % n2) * s2;
}

// Both kernels take the same arguments (setArgs below sets them).
#define NLL_ARGS(T)                                                                          \
    __global T* a_base, ulong a_off, __global long* t_base, ulong t_off,                     \
    __global T* w_base, ulong w_off, __global T* b_base, ulong b_off,                        \
    __global T* tw_base, ulong tw_off, __global int* bad,                                    \
    long rows, long n1, long n2, long classes, long as0, long as1, long as2, long ac,        \
    long ts0, long ts1, long ts2, long ws, long bs0, long bs1, long bs2,                     \
    long ignore, int mode, int has_w

#define NLL(T)                                                                               \
__kernel void nll_forward_##T(NLL_ARGS(T)) {                                                 \
  __global const T* x = AT(T, a_base, a_off);                                                \
  __global const long* t = AT(long, t_base, t_off);                                          \
  __global const T* w = AT(T, w_base, w_off);                                                \
  __global T* out = AT(T, b_base, b_off);                                                    \
  __local T part[GROUP], wpart[GROUP];                                                       \
  const int lid = get_local_id(0);                                                           \
  T sum = 0, wsum = 0;                                                                       \
  for (long r = lid; r < rows; r += GROUP) {                                                 \
    const long c = t[rowAt(r, n1, n2, ts0, ts1, ts2)];                                       \
    T v = 0;                                                                                 \
    if (c != ignore) {                                                                       \
      if (c < 0 || c >= classes) {                                                           \
        atomic_min(bad, (int)r);                                                             \
      } else {                                                                               \
        const T wc = has_w ? w[c * ws] : (T)1;                                               \
        v = -x[rowAt(r, n1, n2, as0, as1, as2) + c * ac] * wc;                               \
        wsum += wc;                                                                          \
      }                                                                                      \
    }                                                                                        \
    if (mode == 0) out[rowAt(r, n1, n2, bs0, bs1, bs2)] = v;                                 \
    sum += v;                                                                                \
  }                                                                                          \
  part[lid] = sum;                                                                           \
  wpart[lid] = wsum;                                                                         \
  barrier(CLK_LOCAL_MEM_FENCE);                                                              \
  for (int s = GROUP / 2; s > 0; s >>= 1) {                                                  \
    if (lid < s) {                                                                           \
      part[lid] += part[lid + s];                                                            \
      wpart[lid] += wpart[lid + s];                                                          \
    }                                                                                        \
    barrier(CLK_LOCAL_MEM_FENCE);                                                            \
  }                                                                                          \
  if (lid == 0) {                                                                            \
    if (mode != 0) out[0] = mode == 1 ? part[0] / wpart[0] : part[0];                        \
    *AT(T, tw_base, tw_off) = mode == 0 ? (T)0 : wpart[0];                                   \
  }                                                                                          \
}                                                                                            \
__kernel void nll_backward_##T(NLL_ARGS(T)) {                                                \
  const long r = get_global_id(0);                                                           \
  if (r >= rows) return;                                                                     \
  __global T* g = AT(T, a_base, a_off) + rowAt(r, n1, n2, as0, as1, as2);                    \
  const long c = AT(long, t_base, t_off)[rowAt(r, n1, n2, ts0, ts1, ts2)];                   \
  for (long k = 0; k < classes; ++k) g[k * ac] = 0;                                          \
  if (c == ignore) return;                                                                   \
  if (c < 0 || c >= classes) {                                                               \
    atomic_min(bad, (int)r);                                                                 \
    return;                                                                                  \
  }                                                                                          \
  __global const T* gy = AT(T, b_base, b_off);                                               \
  if (mode == 0) {                                                                           \
    const T go = gy[rowAt(r, n1, n2, bs0, bs1, bs2)];                                        \
    g[c * ac] = -(has_w ? AT(T, w_base, w_off)[c * ws] * go : go);                           \
  } else {                                                                                   \
    const T grad = -(mode == 1 ? gy[0] / *AT(T, tw_base, tw_off) : gy[0]);                   \
    g[c * ac] = has_w ? AT(T, w_base, w_off)[c * ws] * grad : grad;                          \
  }                                                                                          \
}
NLL(float)
#ifdef FLAGOS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
NLL(double)
#endif
)CL";

// The program of one device, with its kernels and the bad-row int.
struct LossProgram {
  bool fp64 = false;
  cl_program program = nullptr;
  cl_kernel forward[2] = {nullptr, nullptr};  // [float, double]
  cl_kernel backward[2] = {nullptr, nullptr};
  cl_mem bad = nullptr;  // first out-of-range row, INT_MAX when none
  std::string error;     // why the build failed: calls decline, not retried
  std::mutex mu;         // kernel arguments, `bad`, the read-back
  bool ran[2][2] = {};   // [backward][float64]: a call finished (under mu)
  bool ok() const { return forward[0] != nullptr && backward[0] != nullptr && bad != nullptr; }
};

void build(Device* device, LossProgram* p) {
  p->program =
      buildSmallProgram(device, kSource, "-DGROUP=" + std::to_string(kGroup), &p->fp64, &p->error);
  if (p->program == nullptr) return;
  cl_int error = CL_SUCCESS;
  const char* types[2] = {"float", "double"};
  for (int t = 0; t < (p->fp64 ? 2 : 1); ++t) {
    for (auto [kernel, name] :
         {std::pair{&p->forward[t], "nll_forward_"}, std::pair{&p->backward[t], "nll_backward_"}}) {
      *kernel = clCreateKernel(p->program, (std::string(name) + types[t]).c_str(), &error);
      size_t most = 0;
      if (*kernel != nullptr)
        clGetKernelWorkGroupInfo(*kernel, device->info.id, CL_KERNEL_WORK_GROUP_SIZE, sizeof(most),
                                 &most, nullptr);
      if (most < static_cast<size_t>(kGroup)) {
        p->error = "kernel " + std::string(name) + types[t] + ": " + clErrorName(error) +
                   ", work-group size " + std::to_string(most) + " < " + std::to_string(kGroup);
        p->forward[0] = p->backward[0] = nullptr;  // not ok(): every call declines
        return;
      }
    }
  }
  const cl_int none = INT_MAX;
  p->bad = clCreateBuffer(device->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof(none),
                          const_cast<cl_int*>(&none), &error);
  if (p->bad == nullptr) p->error = "clCreateBuffer: " + clErrorName(error);
}

// A tensor's buffer and byte offset.
struct Arg {
  cl_mem buffer = nullptr;
  cl_ulong offset = 0;
};

// Resolves @p t on @p stream's device (resolveBytes); the kernels take
// every stride as it is, so none may be negative.
flagosStatus_t resolveArg(const char* op, flagosStream_t stream, const flagosTensor& t, Arg* out) {
  for (int d = 0; d < t.ndim; ++d)
    if (t.strides[d] < 0) return FLAGOS_ERROR_NOT_SUPPORTED;
  uint64_t offset = 0;
  const Resolved r = resolveBytes(op, stream, t, &out->buffer, &offset);
  out->offset = offset;
  return r.status;
}

// No two elements of @p t share memory (outputs written by many items).
bool nonOverlapping(const flagosTensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims that step
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[d] > 1) dims.emplace_back(t.strides[d], t.shape[d]);
  std::sort(dims.begin(), dims.end());
  int64_t reach = 1;  // elements spanned by the smaller dims
  for (const auto& [stride, size] : dims) {
    if (stride < reach) return false;
    reach = stride * size;
  }
  return true;
}

bool sameShape(const flagosTensor& t, std::initializer_list<int64_t> shape) {
  if (t.ndim != static_cast<int32_t>(shape.size())) return false;
  int d = 0;
  for (const int64_t s : shape)
    if (t.shape[d++] != s) return false;
  return true;
}

int64_t numel(const flagosTensor& t) {
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.shape[d];
  return n;
}

// One call's rows and strides (Note [Native nll_loss on OpenCL]).
struct Geometry {
  int64_t rows = 1, n1 = 1, n2 = 1, classes = 1;
  int64_t as[3] = {0, 0, 0}, ac = 0;  // self / grad_input
  int64_t ts[3] = {0, 0, 0}, ws = 0;  // target, weight
  int64_t bs[3] = {0, 0, 0};          // per-sample output / grad_output
  int64_t ignore = -100;
  cl_int mode = kSum;
  cl_int has_w = 0;
};

// Rows of @p a ((C), (N, C) or, for 2d, (N, C, H, W)) and @p target's row
// strides; false when the shapes do not fit (the core has checked them, so
// this is only a guard).
bool rowsOf(bool two_d, const flagosTensor& a, const flagosTensor& target, Geometry* g) {
  if (two_d) {
    if (a.ndim != 4 || !sameShape(target, {a.shape[0], a.shape[2], a.shape[3]})) return false;
    g->rows = a.shape[0] * a.shape[2] * a.shape[3];
    g->n1 = a.shape[2];
    g->n2 = a.shape[3];
    g->classes = a.shape[1];
    g->as[0] = a.strides[0], g->as[1] = a.strides[2], g->as[2] = a.strides[3];
    g->ac = a.strides[1];
    for (int d = 0; d < 3; ++d) g->ts[d] = target.strides[d];
    return true;
  }
  if (a.ndim == 1) {
    if (target.ndim != 0) return false;
    g->classes = a.shape[0];
    g->ac = a.strides[0];
    return true;
  }
  if (a.ndim != 2 || !sameShape(target, {a.shape[0]})) return false;
  g->rows = a.shape[0];
  g->classes = a.shape[1];
  g->as[0] = a.strides[0];
  g->ac = a.strides[1];
  g->ts[0] = target.strides[0];
  return true;
}

// Per-sample tensor (output / grad_output) of the rows: (N) or (N, H, W).
bool perSampleStrides(bool two_d, const flagosTensor& a, const flagosTensor& b, Geometry* g) {
  if (two_d) {
    if (!sameShape(b, {a.shape[0], a.shape[2], a.shape[3]})) return false;
    for (int d = 0; d < 3; ++d) g->bs[d] = b.strides[d];
    return true;
  }
  if (!sameShape(b, {a.shape[0]})) return false;
  g->bs[0] = b.strides[0];
  return true;
}

cl_int setArgs(cl_kernel k, const Arg (&tensors)[5], cl_mem bad, const Geometry& g) {
  cl_uint i = 0;
  cl_int e = CL_SUCCESS;
  for (const Arg& t : tensors) {
    e |= clSetKernelArg(k, i++, sizeof(cl_mem), &t.buffer);
    e |= clSetKernelArg(k, i++, sizeof(cl_ulong), &t.offset);
  }
  e |= clSetKernelArg(k, i++, sizeof(cl_mem), &bad);
  const cl_long longs[] = {g.rows,  g.n1,    g.n2,    g.classes, g.as[0], g.as[1],
                           g.as[2], g.ac,    g.ts[0], g.ts[1],   g.ts[2], g.ws,
                           g.bs[0], g.bs[1], g.bs[2], g.ignore};
  for (const cl_long v : longs) e |= clSetKernelArg(k, i++, sizeof(v), &v);
  e |= clSetKernelArg(k, i++, sizeof(cl_int), &g.mode);
  e |= clSetKernelArg(k, i++, sizeof(cl_int), &g.has_w);
  return e == CL_SUCCESS ? CL_SUCCESS : CL_INVALID_KERNEL_ARGS;
}

// Sets the arguments and enqueues; p->mu held.
cl_int enqueueLoss(LossProgram* p, bool backward, flagosDtype_t dt, cl_command_queue q,
                   const Arg (&tensors)[5], const Geometry& g, cl_event* event) {
  const int ti = dt == FLAGOS_DTYPE_FLOAT64 ? 1 : 0;
  cl_kernel k = backward ? p->backward[ti] : p->forward[ti];
  const cl_int e = setArgs(k, tensors, p->bad, g);
  if (e != CL_SUCCESS) return e;
  const size_t local = kGroup;
  const size_t global = backward ? (static_cast<size_t>(g.rows) + kGroup - 1) / kGroup * kGroup
                                 : static_cast<size_t>(kGroup);
  return clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, &local, 0, nullptr, event);
}

// Checks the call; fills the tensors (A, target, weight, B, total_weight)
// and the geometry, or returns the status to give up with.
flagosStatus_t prepare(const char* op, bool backward, bool two_d, flagosStream_t stream,
                       const flagosTensor* o, int32_t no, const flagosTensor* in, int32_t ni,
                       const flagosScalar* sc, int32_t ns, Arg (&args)[5], Geometry* g) {
  if (!validStream(op, stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
  if (no != (backward ? 1 : 2) || ni != (backward ? 5 : 3) || ns != 2)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  // Forward: (self, target, weight) -> (output, total_weight).
  // Backward: (grad_output, self, target, weight, total_weight) -> grad_input.
  const flagosTensor& a = backward ? o[0] : in[0];
  const flagosTensor& target = backward ? in[2] : in[1];
  const flagosTensor& weight = backward ? in[3] : in[2];
  const flagosTensor& b = backward ? in[0] : o[0];
  const flagosTensor& tw = backward ? in[4] : o[1];
  const flagosDtype_t dt = a.dtype;
  if (dt != FLAGOS_DTYPE_FLOAT32 && dt != FLAGOS_DTYPE_FLOAT64) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (b.dtype != dt || tw.dtype != dt || (weight.data != nullptr && weight.dtype != dt) ||
      (backward && in[1].dtype != dt) || target.dtype != FLAGOS_DTYPE_INT64)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const int64_t reduction = sc[0].i;
  if (reduction < 0 || reduction > 2) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (!rowsOf(two_d, a, target, g) || g->rows <= 0 || g->rows >= INT_MAX || g->classes <= 0 ||
      numel(tw) != 1 || !nonOverlapping(backward ? a : b))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const bool per_sample = reduction == 0 && a.ndim >= 2;
  g->mode = per_sample ? kPerSample : reduction == 1 ? kMean : kSum;
  g->ignore = sc[1].i;
  if (per_sample ? !perSampleStrides(two_d, a, b, g) : numel(b) != 1)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  if (weight.data != nullptr) {
    if (!sameShape(weight, {g->classes})) return FLAGOS_ERROR_NOT_SUPPORTED;
    g->has_w = 1;
    g->ws = weight.strides[0];
  }
  const flagosTensor* tensors[5] = {&a, &target, &weight, &b, &tw};
  for (int i = 0; i < 5; ++i) {
    if (tensors[i] == &weight && weight.data == nullptr) continue;  // (NULL, 0)
    const flagosStatus_t st = resolveArg(op, stream, *tensors[i], &args[i]);
    if (st != FLAGOS_SUCCESS) return st;
  }
  return FLAGOS_SUCCESS;
}

flagosStatus_t lossBody(const char* op, bool backward, bool two_d, flagosStream_t stream,
                        const flagosTensor* o, int32_t no, const flagosTensor* in, int32_t ni,
                        const flagosScalar* sc, int32_t ns) {
  Arg args[5];
  Geometry g;
  const flagosStatus_t st = prepare(op, backward, two_d, stream, o, no, in, ni, sc, ns, args, &g);
  if (st != FLAGOS_SUCCESS) return st;
  const flagosDtype_t dt = backward ? o[0].dtype : in[0].dtype;
  std::optional<CompileLock> compiling(std::in_place);  // a build, a first launch
  LossProgram* p = perContext(stream->device, build);
  if (!p->ok() || (dt == FLAGOS_DTYPE_FLOAT64 && p->forward[1] == nullptr)) {
    return fail(FLAGOS_ERROR_NOT_SUPPORTED, "opencl %s: loss program unavailable: %s", op,
                p->error.c_str());
  }
  std::lock_guard<std::mutex> lock(p->mu);
  cl_int bad_row = INT_MAX;
  cl_event read = nullptr;
  cl_int error = stream->enqueue([&](cl_command_queue q, cl_event* event) -> cl_int {
    cl_int e = enqueueLoss(p, backward, dt, q, args, g, nullptr);
    if (e == CL_SUCCESS)
      e = clEnqueueReadBuffer(q, p->bad, CL_FALSE, 0, sizeof(bad_row), &bad_row, 0, nullptr, event);
    if (e == CL_SUCCESS && clRetainEvent(*event) == CL_SUCCESS) read = *event;
    return e;
  });
  // Waiting needs no compile lock, but a first launch keeps it until its
  // kernel ran (Note [Serialized compiles on PoCL]).
  bool& ran = p->ran[backward ? 1 : 0][dt == FLAGOS_DTYPE_FLOAT64 ? 1 : 0];
  if (ran) compiling.reset();
  if (error == CL_SUCCESS && read == nullptr) error = CL_INVALID_EVENT;
  if (read != nullptr) {
    // Wait only for our read, outside the stream's lock.
    clFlush(stream->queue);
    const cl_int waited = clWaitForEvents(1, &read);
    clReleaseEvent(read);
    if (error == CL_SUCCESS) error = waited;
    ran = ran || waited == CL_SUCCESS;
  }
  compiling.reset();
  if (error != CL_SUCCESS) {
    return fail(isOutOfMemory(error) ? FLAGOS_ERROR_OUT_OF_MEMORY : FLAGOS_ERROR_DEVICE,
                "opencl %s: %s", op, clErrorName(error).c_str());
  }
  if (bad_row == INT_MAX) return FLAGOS_SUCCESS;
  // A target out of range: reset the int, let the host tier raise CPU's error.
  const cl_int none = INT_MAX;
  clEnqueueWriteBuffer(stream->queue, p->bad, CL_TRUE, 0, sizeof(none), &none, 0, nullptr, nullptr);
  return fail(FLAGOS_ERROR_FALLBACK, "opencl %s: row %d has a target out of range", op, bad_row);
}

template <bool kBackward, bool kTwoD>
flagosStatus_t lossKernel(flagosStream_t stream, const flagosTensor* o, int32_t no,
                          const flagosTensor* in, int32_t ni, const flagosScalar* sc,
                          int32_t ns) noexcept {
  constexpr const char* op = kTwoD ? (kBackward ? "nll_loss2d_backward" : "nll_loss2d")
                                   : (kBackward ? "nll_loss_backward" : "nll_loss");
  return guard(op, [&] { return lossBody(op, kBackward, kTwoD, stream, o, no, in, ni, sc, ns); });
}

}  // namespace

void addLossKernels(void (*add)(const char*, flagosKernelFn)) {
  add("nll_loss", lossKernel<false, false>);
  add("nll_loss_backward", lossKernel<true, false>);
  add("nll_loss2d", lossKernel<false, true>);
  add("nll_loss2d_backward", lossKernel<true, true>);
}

void warmUpLoss(Device* device, cl_command_queue queue) {
  LossProgram* p = perContext(device, build);
  if (!p->ok()) return;
  constexpr int64_t kRows = 4, kClasses = 4;
  cl_int error = CL_SUCCESS;
  cl_mem values =
      clCreateBuffer(device->context, CL_MEM_READ_WRITE,
                     (2 * kRows * kClasses + kRows + 1) * sizeof(float), nullptr, &error);
  cl_mem targets =
      clCreateBuffer(device->context, CL_MEM_READ_WRITE, kRows * sizeof(cl_long), nullptr, &error);
  if (values != nullptr && targets != nullptr) {
    const cl_uchar zero = 0;  // zeros: valid targets, finite values
    clEnqueueFillBuffer(queue, values, &zero, 1, 0, (2 * kRows * kClasses + kRows + 1) * 4, 0,
                        nullptr, nullptr);
    clEnqueueFillBuffer(queue, targets, &zero, 1, 0, kRows * sizeof(cl_long), 0, nullptr, nullptr);
    Geometry g;
    g.rows = kRows;
    g.classes = kClasses;
    g.as[0] = kClasses;
    g.ac = 1;
    g.ts[0] = 1;
    g.bs[0] = 1;
    g.mode = kMean;
    const cl_ulong x = 0, gx = kRows * kClasses * 4, out = 2 * gx, tw = out + kRows * 4;
    const Arg fwd[5] = {{values, x}, {targets, 0}, {nullptr, 0}, {values, out}, {values, tw}};
    const Arg bwd[5] = {{values, gx}, {targets, 0}, {nullptr, 0}, {values, out}, {values, tw}};
    std::lock_guard<std::mutex> lock(p->mu);
    if (enqueueLoss(p, false, FLAGOS_DTYPE_FLOAT32, queue, fwd, g, nullptr) == CL_SUCCESS)
      enqueueLoss(p, true, FLAGOS_DTYPE_FLOAT32, queue, bwd, g, nullptr);
    clFinish(queue);
  }
  if (values != nullptr) clReleaseMemObject(values);
  if (targets != nullptr) clReleaseMemObject(targets);
}

}  // namespace flagos_opencl::kernels
