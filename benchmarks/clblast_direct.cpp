// CLBlast SGEMM straight on OpenCL, without flagos: the baseline of
// bench_gemm_opencl.py ("GEMM via flagos vs direct CLBlast").
//
//   clblast_direct M N K [iters] [warmup]
//
// C (M x N) = A (M x K) @ B (K x N), row-major, contiguous, on the first
// OpenCL device (GPUs before others, like the plugin). Each timed call is
// followed by clFinish, as torch.mm + synchronize is on the flagos side.
// Prints one JSON line: {"m", "n", "k", "iters", "p50_ms", "min_ms",
// "mean_ms", "gflops", "device"}.
#include <CL/cl.h>
#include <clblast_c.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

int die(const char* what, int code) {
  std::fprintf(stderr, "clblast_direct: %s failed (%d)\n", what, code);
  return 1;
}

// The first GPU/accelerator of any platform, else the first device at all.
bool pickDevice(cl_device_id* out) {
  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) return false;
  std::vector<cl_platform_id> platforms(np);
  clGetPlatformIDs(np, platforms.data(), nullptr);
  const cl_device_type types[] = {CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR,
                                  CL_DEVICE_TYPE_ALL};
  for (cl_device_type type : types)
    for (cl_platform_id p : platforms)
      if (clGetDeviceIDs(p, type, 1, out, nullptr) == CL_SUCCESS) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s M N K [iters=20] [warmup=3]\n", argv[0]);
    return 2;
  }
  const size_t m = std::strtoull(argv[1], nullptr, 10), n = std::strtoull(argv[2], nullptr, 10),
               k = std::strtoull(argv[3], nullptr, 10);
  const int iters = argc > 4 ? std::atoi(argv[4]) : 20, warmup = argc > 5 ? std::atoi(argv[5]) : 3;
  cl_device_id device;
  if (!pickDevice(&device)) {
    std::fprintf(stderr, "clblast_direct: no OpenCL device\n");
    return 77;
  }
  char name[256] = {0};
  clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof(name) - 1, name, nullptr);
  cl_int e = CL_SUCCESS;
  cl_context ctx = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &e);
  if (e != CL_SUCCESS) return die("clCreateContext", e);
  cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &e);
  if (e != CL_SUCCESS) return die("clCreateCommandQueue", e);

  std::vector<float> ha(m * k), hb(k * n);
  for (size_t i = 0; i < ha.size(); ++i) ha[i] = static_cast<float>(i % 17) / 17.0f - 0.5f;
  for (size_t i = 0; i < hb.size(); ++i) hb[i] = static_cast<float>(i % 13) / 13.0f - 0.5f;
  const cl_mem_flags rw = CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR;
  cl_mem a = clCreateBuffer(ctx, rw, ha.size() * 4, ha.data(), &e);
  cl_mem b = clCreateBuffer(ctx, rw, hb.size() * 4, hb.data(), &e);
  cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, m * n * 4, nullptr, &e);
  if (e != CL_SUCCESS) return die("clCreateBuffer", e);

  auto once = [&] {
    const CLBlastStatusCode s =
        CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, m, n, k, 1.0f,
                     a, 0, k, b, 0, n, 0.0f, c, 0, n, &q, nullptr);
    clFinish(q);
    return s;
  };
  for (int i = 0; i < warmup; ++i)  // the first call compiles CLBlast's kernels
    if (const int s = once(); s != CLBlastSuccess) return die("CLBlastSgemm", s);
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    once();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double mean = 0;
  for (double v : ms) mean += v / ms.size();
  const double p50 = sorted[sorted.size() / 2];
  std::printf(
      "{\"m\": %zu, \"n\": %zu, \"k\": %zu, \"iters\": %d, \"p50_ms\": %.4f, \"min_ms\": %.4f, "
      "\"mean_ms\": %.4f, \"gflops\": %.2f, \"device\": \"%s\"}\n",
      m, n, k, iters, p50, sorted.front(), mean, 2.0 * m * n * k / (p50 * 1e6), name);
  clReleaseMemObject(a);
  clReleaseMemObject(b);
  clReleaseMemObject(c);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
  return 0;
}
