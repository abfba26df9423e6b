// Per-device helper kernels: zeroing a strided output (beta == 0 must ignore
// NaN/Inf already there, and CLBlast may read C even then) and broadcasting
// an addmm-style `self` into the output before a GEMM with beta. One small
// OpenCL program per device, built on first use and kept with the device.
#include <algorithm>
#include <vector>

#include "blas.h"

namespace flagos_opencl::kernels {
namespace {

constexpr uint64_t kLocal = 64;

// Offsets and strides in elements; dims right-aligned into 3. Launched with
// an explicit local size along the inner dim (kLocal, Note [Launch
// geometry] in include/flagos/compiler.h): the grid is rounded up to it and
// `nj` bounds the tail, so PoCL builds one work-group function per kernel
// instead of one per output width.
constexpr const char* kSource = R"CL(
#define HELPERS(T)                                                                        \
__kernel void zero_##T(__global T* d, ulong doff, long d0, long d1, long d2, long nj) {   \
  const long j = get_global_id(0), i = get_global_id(1), b = get_global_id(2);            \
  if (j >= nj) return;                                                                    \
  d[doff + b * d0 + i * d1 + j * d2] = (T)0;                                              \
}                                                                                         \
__kernel void expand_##T(__global T* d, ulong doff, long d0, long d1, long d2,            \
                         __global const T* s, ulong soff, long s0, long s1, long s2,      \
                         long nj) {                                                       \
  const long j = get_global_id(0), i = get_global_id(1), b = get_global_id(2);            \
  if (j >= nj) return;                                                                    \
  d[doff + b * d0 + i * d1 + j * d2] = s[soff + b * s0 + i * s1 + j * s2];                \
}
HELPERS(float)
#ifdef FLAGOS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
HELPERS(double)
#endif
)CL";

}  // namespace

struct Helpers {
  bool fp64 = false;
  cl_program program = nullptr;
  cl_kernel zero[2] = {nullptr, nullptr};  // [float, double]
  cl_kernel expand[2] = {nullptr, nullptr};
  size_t local = 1;   // work-group size along the inner dim (kLocal, or the device's max)
  std::string error;  // why the build failed (kept: not retried per call)
  std::mutex mu;      // cl_kernel arguments are shared state: set + enqueue under it

  ~Helpers() {
    for (cl_kernel k : {zero[0], zero[1], expand[0], expand[1]})
      if (k != nullptr) clReleaseKernel(k);
    if (program != nullptr) clReleaseProgram(program);
  }
};

cl_program buildSmallProgram(Device* device, const char* source, const std::string& options,
                             bool* fp64, std::string* error) {
  cl_device_fp_config config = 0;
  clGetDeviceInfo(device->info.id, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof(config), &config, nullptr);
  *fp64 = config != 0;
  cl_int status = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(device->context, 1, &source, nullptr, &status);
  if (program == nullptr) {
    *error = "clCreateProgramWithSource: " + clErrorName(status);
    return nullptr;
  }
  const std::string all = options + (*fp64 ? " -DFLAGOS_FP64" : "");
  status = clBuildProgram(program, 1, &device->info.id, all.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    *error = "clBuildProgram: " + clErrorName(status) + ": " + buildLog(program, device->info.id);
    clReleaseProgram(program);
    return nullptr;
  }
  return program;
}

namespace {

std::unique_ptr<Helpers> build(Device* device) {
  auto h = std::make_unique<Helpers>();
  h->local = static_cast<size_t>(
      std::max<uint64_t>(1, std::min<uint64_t>(kLocal, device->info.max_work_group_size)));
  h->program = buildSmallProgram(device, kSource, "", &h->fp64, &h->error);
  if (h->program == nullptr) return h;
  cl_int error = CL_SUCCESS;
  const char* types[2] = {"float", "double"};
  for (int t = 0; t < (h->fp64 ? 2 : 1); ++t) {
    h->zero[t] = clCreateKernel(h->program, (std::string("zero_") + types[t]).c_str(), &error);
    if (error == CL_SUCCESS)
      h->expand[t] =
          clCreateKernel(h->program, (std::string("expand_") + types[t]).c_str(), &error);
    if (error != CL_SUCCESS) {
      h->error = "clCreateKernel: " + clErrorName(error);
      return h;
    }
  }
  return h;
}

Helpers* ready(Device* device) {
  std::lock_guard<std::mutex> lock(device->kernels_mutex);
  if (!device->kernels_state) device->kernels_state = std::shared_ptr<Helpers>(build(device));
  return static_cast<Helpers*>(device->kernels_state.get());
}

cl_int launch(Helpers* h, cl_kernel k, cl_command_queue q, const Region& dst, const Region* src,
              cl_event* event) {
  std::lock_guard<std::mutex> lock(h->mu);
  cl_uint arg = 0;
  auto region = [&](const Region& r) {
    const cl_ulong off = r.offset;
    cl_int e = clSetKernelArg(k, arg++, sizeof(cl_mem), &r.buffer);
    e |= clSetKernelArg(k, arg++, sizeof(off), &off);
    for (int d = 0; d < 3; ++d) {
      const cl_long s = r.strides[d];
      e |= clSetKernelArg(k, arg++, sizeof(s), &s);
    }
    return e;
  };
  cl_int error = region(dst);
  if (src != nullptr) error |= region(*src);
  const cl_long nj = dst.shape[2];
  error |= clSetKernelArg(k, arg++, sizeof(nj), &nj);
  if (error != CL_SUCCESS) return CL_INVALID_KERNEL_ARGS;
  const size_t local[3] = {h->local, 1, 1};
  const size_t global[3] = {(static_cast<size_t>(nj) + h->local - 1) / h->local * h->local,
                            static_cast<size_t>(dst.shape[1]), static_cast<size_t>(dst.shape[0])};
  return clEnqueueNDRangeKernel(q, k, 3, nullptr, global, local, 0, nullptr, event);
}

int typeIndex(flagosDtype_t dt) {
  return dt == FLAGOS_DTYPE_FLOAT64 ? 1 : 0;
}

}  // namespace

Helpers* helpersFor(Device* device) {
  Helpers* h = ready(device);
  if (h->zero[0] == nullptr) {
    fail(FLAGOS_ERROR_DEVICE, "opencl kernels: helper program for device %d: %s", device->index,
         h->error.c_str());
    return nullptr;
  }
  return h;
}

bool hasFp64(Device* device) {
  return ready(device)->fp64;
}

cl_int enqueueZero(Helpers* h, cl_command_queue q, flagosDtype_t dt, const Region& dst,
                   cl_event* event) {
  return launch(h, h->zero[typeIndex(dt)], q, dst, nullptr, event);
}

cl_int enqueueExpand(Helpers* h, cl_command_queue q, flagosDtype_t dt, const Region& dst,
                     const Region& src, cl_event* event) {
  return launch(h, h->expand[typeIndex(dt)], q, dst, &src, event);
}

Region regionOf(const Operand& out) {
  Region r{out.buffer, out.offset, {1, 1, 1}, {0, 0, 0}};
  for (int d = 0; d < out.ndim; ++d) {
    r.shape[3 - out.ndim + d] = out.shape[d];
    r.strides[3 - out.ndim + d] = out.strides[d];
  }
  return r;
}

namespace {

// Region of @p self broadcast to @p out's shape; false if it does not broadcast.
bool broadcastRegion(const Operand& self, const Operand& out, Region* r) {
  if (self.ndim > out.ndim) return false;
  const Region o = regionOf(out);
  *r = Region{self.buffer, self.offset, {o.shape[0], o.shape[1], o.shape[2]}, {0, 0, 0}};
  for (int d = 0; d < self.ndim; ++d) {
    const int od = 3 - self.ndim + d;
    if (self.shape[d] != 1 && self.shape[d] != o.shape[od]) return false;
    r->strides[od] = self.shape[d] == 1 ? 0 : self.strides[d];
  }
  return true;
}

// self and out are the same elements in the same order (in-place addmm_).
bool sameElements(const Operand& self, const Operand& out) {
  if (self.buffer != out.buffer || self.offset != out.offset || self.ndim != out.ndim) return false;
  for (int d = 0; d < self.ndim; ++d)
    if (self.shape[d] != out.shape[d] || self.strides[d] != out.strides[d]) return false;
  return true;
}

}  // namespace

flagosStatus_t resolveSelf(const char* op, flagosStream_t stream, const flagosTensor& self,
                           const Operand& out, Region* region, bool* expand) {
  Operand s;
  const Resolved r = resolveOperand(op, stream, self, &s);
  if (!r.ok()) return r.status;
  if (!broadcastRegion(s, out, region)) return FLAGOS_ERROR_NOT_SUPPORTED;
  *expand = !sameElements(s, out);
  return FLAGOS_SUCCESS;
}

}  // namespace flagos_opencl::kernels
