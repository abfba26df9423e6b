// The native kernels' part of the SDK warm-up (Note [SDK warm-up] in
// ../warmup.cpp): the helper program, CLBlast's GEMM/GEMV programs, the
// small-GEMM program (gemm_small.cpp) and the nll loss program (loss.cpp),
// each built and launched once on tiny buffers of the warm-up's own, so
// that the caller's first mm/addmm/bmm/mv/nll_loss finds them built
// (CLBlast caches programs per context and precision, PoCL compiles a
// kernel's work-group function on its first launch).
#include <cstdio>

#include "blas.h"

namespace flagos_opencl::kernels {
namespace {

constexpr size_t kN = 8;                   // 8x8 matrices
constexpr size_t kElements = 2 * kN * kN;  // room for a batch of 2

// Three zeroed buffers of kElements elements of @p bytes each.
struct Buffers {
  cl_mem a = nullptr, b = nullptr, c = nullptr;
  Buffers(Device* device, cl_command_queue queue, size_t bytes) {
    cl_int error = CL_SUCCESS;
    for (cl_mem* m : {&a, &b, &c}) {
      *m = clCreateBuffer(device->context, CL_MEM_READ_WRITE, kElements * bytes, nullptr, &error);
      if (*m == nullptr) return;
      const cl_uchar zero = 0;
      clEnqueueFillBuffer(queue, *m, &zero, 1, 0, kElements * bytes, 0, nullptr, nullptr);
    }
    clFinish(queue);
  }
  ~Buffers() {
    for (cl_mem m : {a, b, c})
      if (m != nullptr) clReleaseMemObject(m);
  }
  bool ok() const { return a != nullptr && b != nullptr && c != nullptr; }
};

void helperLaunches(Device* device, cl_command_queue queue, flagosDtype_t dt, cl_mem buffer) {
  Helpers* h = helpersFor(device);
  if (h == nullptr) return;
  const Region dst{buffer, 0, {1, kN, kN}, {0, kN, 1}};
  const Region src{buffer, kN * kN, {1, kN, kN}, {0, 0, 1}};  // a broadcast row
  if (enqueueZero(h, queue, dt, dst, nullptr) == CL_SUCCESS &&
      enqueueExpand(h, queue, dt, dst, src, nullptr) == CL_SUCCESS) {
    clFinish(queue);
  }
}

template <typename T>
void gemmLaunch(const Buffers& m, cl_command_queue queue, CLBlastTranspose ta,
                CLBlastTranspose tb) {
  cl_command_queue q = queue;
  if constexpr (sizeof(T) == 4) {
    CLBlastSgemm(CLBlastLayoutRowMajor, ta, tb, kN, kN, kN, 1.0f, m.a, 0, kN, m.b, 0, kN, 0.0f, m.c,
                 0, kN, &q, nullptr);
  } else {
    CLBlastDgemm(CLBlastLayoutRowMajor, ta, tb, kN, kN, kN, 1.0, m.a, 0, kN, m.b, 0, kN, 0.0, m.c,
                 0, kN, &q, nullptr);
  }
  clFinish(queue);
}

}  // namespace

void warmUpKernels(Device* device, cl_command_queue queue, const WarmupStep& step) {
  const CLBlastTranspose transposes[4][2] = {{CLBlastTransposeNo, CLBlastTransposeNo},
                                             {CLBlastTransposeNo, CLBlastTransposeYes},
                                             {CLBlastTransposeYes, CLBlastTransposeNo},
                                             {CLBlastTransposeYes, CLBlastTransposeYes}};
  const char* names[4] = {"NN", "NT", "TN", "TT"};
  char what[64];
  bool fp64 = false;
  {
    Buffers f(device, queue, sizeof(float));
    if (!f.ok()) return;
    if (!step("helper program (float kernels)", [&] {
          helperLaunches(device, queue, FLAGOS_DTYPE_FLOAT32, f.c);
          fp64 = hasFp64(device);  // built by now
        }))
      return;
    for (int t = 0; t < 4; ++t) {
      std::snprintf(what, sizeof(what), "CLBlast SGEMM %s", names[t]);
      if (!step(what, [&] { gemmLaunch<float>(f, queue, transposes[t][0], transposes[t][1]); }))
        return;
    }
    for (const CLBlastTranspose t : {CLBlastTransposeNo, CLBlastTransposeYes}) {
      if (!step(t == CLBlastTransposeNo ? "CLBlast SGEMV N" : "CLBlast SGEMV T", [&] {
            cl_command_queue q = queue;
            CLBlastSgemv(CLBlastLayoutRowMajor, t, kN, kN, 1.0f, f.a, 0, kN, f.b, 0, 1, 0.0f, f.c,
                         0, 1, &q, nullptr);
            clFinish(queue);
          }))
        return;
    }
    if (!step("CLBlast SGEMM strided-batched NN", [&] {
          cl_command_queue q = queue;
          CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo,
                                     kN, kN, kN, 1.0f, f.a, 0, kN, kN * kN, f.b, 0, kN, kN * kN,
                                     0.0f, f.c, 0, kN, kN * kN, 2, &q, nullptr);
          clFinish(queue);
        }))
      return;
    if (!step("small-GEMM program (float kernel)",
              [&] { warmUpSmallGemm(device, queue, FLAGOS_DTYPE_FLOAT32, f.c); }))
      return;
    if (!step("loss program (float nll forward/backward)", [&] { warmUpLoss(device, queue); }))
      return;
  }
  if (!fp64) return;
  Buffers d(device, queue, sizeof(double));
  if (!d.ok()) return;
  for (int t = 0; t < 4; ++t) {
    std::snprintf(what, sizeof(what), "CLBlast DGEMM %s", names[t]);
    if (!step(what, [&] { gemmLaunch<double>(d, queue, transposes[t][0], transposes[t][1]); }))
      return;
  }
  if (!step("helper program (double kernels)",
            [&] { helperLaunches(device, queue, FLAGOS_DTYPE_FLOAT64, d.c); }))
    return;
  step("small-GEMM program (double kernel)",
       [&] { warmUpSmallGemm(device, queue, FLAGOS_DTYPE_FLOAT64, d.c); });
}

}  // namespace flagos_opencl::kernels
