// Small GEMMs on a kernel of the plugin's own instead of CLBlast.
//
// Note [Small GEMMs]
// ~~~~~~~~~~~~~~~~~~
// A GEMM of a few thousand multiply-adds is all launch: before its kernel
// runs, CLBlast spends a large share of a 16^3 SGEMM + wait on PoCL on the
// calling thread (routine set-up, database lookups, a fresh cl_kernel,
// argument checks). This kernel object is built once per device and only gets
// its arguments set, and it reads any strides, so transposed operands and a
// broadcast addmm `self` need no extra kernel (CLBlast's path broadcasts self
// into the output first: two launches).
//
// One work-item computes kRows consecutive rows of one output column: the
// B element is loaded once per k and used kRows times, and neighbouring
// items (dim 0 = columns) read neighbouring B and C elements, which is what
// PoCL's work-group vectorizer and a GPU's coalescing want. Inner offsets are
// ints (longs were markedly slower on PoCL at 96^3), so a call whose in-matrix
// offsets could pass 2^31 goes to CLBlast; the bases are longs. Work-groups
// are always kGroup items wide: PoCL compiles a work-group function per
// local size on first launch, so one size means one compile (done by the
// SDK warm-up), and after a kernel's first launch its calls take no compile
// lock (background builds hold that lock for whole LLVM runs; CLBlast's
// calls keep taking it, as it may compile on any call).
//
// Measured interleaved against CLBlast SGEMM + wait, in C on PoCL's CPU
// device (2 vCPUs): the kernel is ahead at 16^3, 48^3, 64^3 and 32x256 @
// 256x10, and with B transposed it stays ahead to 128^3; but around 2^20
// multiply-adds CLBlast's tiled kernels catch up (64x64 @ 64x256, 128^3).
// Through torch (bench_gemm_opencl.py) the kernel lost to direct CLBlast
// at 64x64 @ 64x256 by more than CLBlast through flagos does, and was even
// with it at 64^3 (docs/benchmarks.md, "Measurements behind design
// decisions"). So the default limit is 2^18
// multiply-adds (batch * M * N * K, 64^3); FLAGOS_OPENCL_SMALL_GEMM moves
// it (0: CLBlast always). Measured on PoCL only: on a GPU CLBlast's tuned
// kernels may win earlier, and the limit is the knob for that.
#include <atomic>
#include <climits>
#include <string>

#include "blas.h"

namespace flagos_opencl::kernels {
namespace {

constexpr int kRows = 8;    // output rows per work-item
constexpr int kGroup = 32;  // work-items per work-group, along the columns

// z = batch index. C, A, B, S: buffer, element offset, batch / row / column
// strides. S is addmm's self seen with C's shape (strides 0 where it
// broadcasts), read only when beta != 0 (torch ignores self then, NaN too).
constexpr const char* kSource = R"CL(
#define SMALL_GEMM(T)                                                                      \
__kernel void gemm_small_##T(__global T* c, ulong c0, long cb, long cm, long cn,           \
                             __global const T* a, ulong a0, long ab, long am, long ak,     \
                             __global const T* b, ulong b0, long bb, long bk, long bn,     \
                             __global const T* s, ulong s0, long sb, long sm, long sn,     \
                             int M, int N, int K, T alpha, T beta) {                       \
  const int j = get_global_id(0), i0 = get_global_id(1) * ROWS;                            \
  const long z = get_global_id(2);                                                         \
  if (j >= N) return;                                                                      \
  const int rows = min(M - i0, ROWS);                                                      \
  const __global T* pa = a + a0 + z * ab + i0 * am;                                        \
  const __global T* pb = b + b0 + z * bb + j * bn;                                         \
  const int ra = (int)am, ka = (int)ak, kb = (int)bk; /* fit: checked by the caller */     \
  T acc[ROWS];                                                                             \
  for (int r = 0; r < ROWS; ++r) acc[r] = 0;                                               \
  if (rows == ROWS) {                                                                      \
    for (int k = 0; k < K; ++k) {                                                          \
      const T v = pb[k * kb];                                                              \
      for (int r = 0; r < ROWS; ++r) acc[r] += pa[r * ra + k * ka] * v;                    \
    }                                                                                      \
  } else {                                                                                 \
    for (int k = 0; k < K; ++k) {                                                          \
      const T v = pb[k * kb];                                                              \
      for (int r = 0; r < ROWS; ++r)                                                       \
        if (r < rows) acc[r] += pa[r * ra + k * ka] * v;                                   \
    }                                                                                      \
  }                                                                                        \
  for (int r = 0; r < rows; ++r) {                                                         \
    const long i = i0 + r;                                                                 \
    T out = alpha * acc[r];                                                                \
    if (beta != 0) out += beta * s[s0 + z * sb + i * sm + j * sn];                         \
    c[c0 + z * cb + i * cm + j * cn] = out;                                                \
  }                                                                                        \
}
SMALL_GEMM(float)
#ifdef FLAGOS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
SMALL_GEMM(double)
#endif
)CL";

}  // namespace

struct SmallGemmProgram {
  bool fp64 = false;
  cl_program program = nullptr;
  cl_kernel kernel[2] = {nullptr, nullptr};  // [float, double]
  std::string error;                   // why the build failed: calls go to CLBlast, not retried
  std::mutex mu;                       // kernel arguments are shared state: set + enqueue under it
  std::atomic<bool> launched[2] = {};  // per kernel: its work-group function exists
};

namespace {

void build(Device* device, SmallGemmProgram* p) {
  p->program =
      buildSmallProgram(device, kSource, "-DROWS=" + std::to_string(kRows), &p->fp64, &p->error);
  if (p->program == nullptr) return;
  const char* names[2] = {"gemm_small_float", "gemm_small_double"};
  for (int t = 0; t < (p->fp64 ? 2 : 1); ++t) {
    cl_int error = CL_SUCCESS;
    p->kernel[t] = clCreateKernel(p->program, names[t], &error);
    size_t most = 0;
    if (p->kernel[t] != nullptr)
      clGetKernelWorkGroupInfo(p->kernel[t], device->info.id, CL_KERNEL_WORK_GROUP_SIZE,
                               sizeof(most), &most, nullptr);
    if (most < static_cast<size_t>(kGroup)) {
      p->error = std::string(names[t]) + ": " + clErrorName(error) + ", work-group size " +
                 std::to_string(most) + " < " + std::to_string(kGroup);
      p->kernel[0] = nullptr;  // every call goes to CLBlast
      return;
    }
  }
}

// Offsets of one matrix's elements from its base: (rows-1)*rs + (cols-1)*cs.
bool fitsInt(int64_t rows, int64_t rs, int64_t cols, int64_t cs) {
  if (rs >= INT_MAX || cs >= INT_MAX) return false;  // and the products below cannot overflow
  return (rows - 1) * rs + (cols - 1) * cs < INT_MAX;
}

template <typename T>
cl_int setArgs(cl_kernel k, const SmallGemm& g) {
  cl_uint arg = 0;
  cl_int e = CL_SUCCESS;
  for (const MatArg* m : {&g.c, &g.a, &g.b, &g.self}) {
    const cl_ulong off = m->offset;
    const cl_long strides[3] = {m->batch, m->rows, m->cols};
    e |= clSetKernelArg(k, arg++, sizeof(cl_mem), &m->buffer);
    e |= clSetKernelArg(k, arg++, sizeof(off), &off);
    for (const cl_long s : strides) e |= clSetKernelArg(k, arg++, sizeof(s), &s);
  }
  const cl_int sizes[3] = {static_cast<cl_int>(g.m), static_cast<cl_int>(g.n),
                           static_cast<cl_int>(g.k)};
  for (const cl_int s : sizes) e |= clSetKernelArg(k, arg++, sizeof(s), &s);
  const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
  e |= clSetKernelArg(k, arg++, sizeof(T), &alpha);
  e |= clSetKernelArg(k, arg++, sizeof(T), &beta);
  return e == CL_SUCCESS ? CL_SUCCESS : CL_INVALID_KERNEL_ARGS;
}

}  // namespace

bool smallGemmFits(const Device* device, const SmallGemm& g) {
  if (g.batch > INT_MAX || g.m > INT_MAX || g.n > INT_MAX || g.k > INT_MAX) return false;
  uint64_t work = 0;  // batch * M * N * K, which four factors below 2^31 can overflow
  if (__builtin_mul_overflow(static_cast<uint64_t>(g.batch) * g.m, static_cast<uint64_t>(g.n) * g.k,
                             &work) ||
      work > device->small_gemm_macs)
    return false;
  // The kernel steps A by kRows rows and K columns, B by K rows, in ints.
  return fitsInt(kRows, g.a.rows, g.k, g.a.cols) && fitsInt(g.k, g.b.rows, 1, 0);
}

SmallGemmProgram* smallGemmProgram(Device* device) {
  SmallGemmProgram* p = perContext(device, build);
  return p->kernel[0] == nullptr ? nullptr : p;
}

cl_int enqueueSmallGemm(SmallGemmProgram* p, cl_command_queue q, flagosDtype_t dt,
                        const SmallGemm& g, cl_event* event) {
  const bool f64 = dt == FLAGOS_DTYPE_FLOAT64;
  cl_kernel k = p->kernel[f64 ? 1 : 0];
  if (k == nullptr) return CL_INVALID_KERNEL;
  std::lock_guard<std::mutex> lock(p->mu);
  const cl_int e = f64 ? setArgs<double>(k, g) : setArgs<float>(k, g);
  if (e != CL_SUCCESS) return e;
  const size_t global[3] = {static_cast<size_t>((g.n + kGroup - 1) / kGroup * kGroup),
                            static_cast<size_t>((g.m + kRows - 1) / kRows),
                            static_cast<size_t>(g.batch)};
  const size_t local[3] = {kGroup, 1, 1};
  const cl_int e2 = clEnqueueNDRangeKernel(q, k, 3, nullptr, global, local, 0, nullptr, event);
  if (e2 == CL_SUCCESS) p->launched[f64 ? 1 : 0].store(true, std::memory_order_release);
  return e2;
}

bool smallGemmWarm(Device* device, flagosDtype_t dt) {
  const SmallGemmProgram* p = perContext<SmallGemmProgram>(device, nullptr);
  return p != nullptr &&
         p->launched[dt == FLAGOS_DTYPE_FLOAT64 ? 1 : 0].load(std::memory_order_acquire);
}

void warmUpSmallGemm(Device* device, cl_command_queue queue, flagosDtype_t dt, cl_mem buffer) {
  SmallGemmProgram* p = smallGemmProgram(device);
  if (p == nullptr) return;
  SmallGemm g;  // 2x2 @ 2x2 inside the warm-up's zeroed buffer
  g.m = g.n = g.k = g.batch = 2;
  g.beta = 0.0;
  g.c = {buffer, 0, 4, 2, 1};
  g.a = g.b = g.self = {buffer, 8, 0, 2, 1};
  if (enqueueSmallGemm(p, queue, dt, g, nullptr) == CL_SUCCESS) clFinish(queue);
}

}  // namespace flagos_opencl::kernels
