// kernelLaunch, the compiler table's last member: kernel objects, their
// arguments and the enqueue on a stream.
//
// Note [Device pointer arguments]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A device address is (cl_mem, byte offset) behind the scenes (Note
// [Virtual device addresses] in address_space.h), and OpenCL 1.2 cannot
// pass a pointer into the middle of a buffer: clSetKernelArg takes the
// cl_mem only, and sub-buffers need offsets aligned to
// CL_DEVICE_MEM_BASE_ADDR_ALIGN, which tensor views do not respect. So the
// contract for kernels the generator emits is: every FLAGOS_ARG_DEVICE_PTR
// argument becomes TWO OpenCL kernel arguments,
//
//     __global T* name_base, ulong name_offset      // offset in BYTES
//
// and the kernel starts with
//
//     __global T* name = (__global T*)((__global char*)name_base + name_offset);
//
// FLAGOS_ARG_BYTES arguments stay one argument each. kernelLaunch checks
// that the kernel takes exactly as many arguments as that rule makes. A
// NULL device address becomes (NULL, 0).
//
// Kernel objects are created once per (program, name) and kept in the
// program: clSetKernelArg on one kernel object is not thread-safe and the
// arguments are read at enqueue time, so setting them and enqueueing happen
// under the program's lock.
//
// Work sizes: with local == NULL the driver chooses the work-group size and
// any global size works. With local given, OpenCL 1.2 needs global to be a
// multiple of local in each dimension: global is rounded up, so generated
// kernels must compare their index with the real size, passed as an
// argument. A zero global size launches nothing.
#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <string>

#include "opencl.h"

namespace flagos_opencl {
namespace {

// The kernel object for @p name, created on first use. mu held.
flagosStatus_t findKernel(flagosProgram_t program, const char* name,
                          flagosProgram_st::Kernel** out) {
  auto it = program->kernels.find(name);
  if (it != program->kernels.end()) {
    *out = &it->second;
    return FLAGOS_SUCCESS;
  }
  cl_int error = CL_SUCCESS;
  flagosProgram_st::Kernel kernel;
  kernel.kernel = clCreateKernel(program->program, name, &error);
  if (kernel.kernel == nullptr) {
    return fail(
        error == CL_INVALID_KERNEL_NAME ? FLAGOS_ERROR_INVALID_ARGUMENT : FLAGOS_ERROR_DEVICE,
        "opencl kernelLaunch: no kernel '%s' in the program: %s", name, clErrorName(error).c_str());
  }
  error = clGetKernelInfo(kernel.kernel, CL_KERNEL_NUM_ARGS, sizeof(kernel.num_args),
                          &kernel.num_args, nullptr);
  if (error != CL_SUCCESS) {
    clReleaseKernel(kernel.kernel);
    return fail(FLAGOS_ERROR_DEVICE, "opencl kernelLaunch: CL_KERNEL_NUM_ARGS of '%s': %s", name,
                clErrorName(error).c_str());
  }
  *out = &program->kernels.emplace(name, kernel).first->second;
  return FLAGOS_SUCCESS;
}

// Sets the OpenCL arguments of @p kernel from the flagos ones (Note [Device
// pointer arguments]). Records the message and returns its status on error.
flagosStatus_t setArguments(const Device& device, cl_kernel kernel, const char* name,
                            const flagosKernelArg* args, int32_t num_args) {
  cl_uint index = 0;
  for (int32_t i = 0; i < num_args; ++i, ++index) {
    const flagosKernelArg& arg = args[i];
    const void* address = nullptr;  // a DEVICE_PTR's
    const flagosStatus_t checked = flagos_kit::checkKernelArg(name, i, arg, &address);
    if (checked != FLAGOS_SUCCESS) return checked;
    cl_int error = CL_SUCCESS;
    if (arg.kind == FLAGOS_ARG_DEVICE_PTR) {
      DevicePtr at;
      if (address != nullptr && !resolve("kernelLaunch", address, 0, &at)) {
        return FLAGOS_ERROR_INVALID_ARGUMENT;
      }
      if (address != nullptr && at.device != &device) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                    "opencl kernelLaunch: '%s' argument %d is memory of device %d, the program "
                    "is built for device %d",
                    name, i, at.device->index, device.index);
      }
      const cl_ulong offset = at.offset;
      error = clSetKernelArg(kernel, index, sizeof(cl_mem), &at.buffer);
      if (error == CL_SUCCESS) error = clSetKernelArg(kernel, ++index, sizeof(offset), &offset);
    } else {  // BYTES
      error = clSetKernelArg(kernel, index, arg.size, arg.value);
    }
    if (error != CL_SUCCESS) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "opencl kernelLaunch: '%s' argument %d (OpenCL argument %u) rejected: %s", name,
                  i, index, clErrorName(error).c_str());
    }
  }
  return FLAGOS_SUCCESS;
}

}  // namespace

flagosStatus_t kernelLaunch(flagosProgram_t program, const char* name, const flagosKernelArg* args,
                            int32_t num_args, int32_t work_dim, const uint64_t* global,
                            const uint64_t* local, flagosStream_t stream) noexcept {
  return guard("kernelLaunch", [&] {
    const flagosStatus_t checked =
        flagos_kit::checkLaunch(program, stream, name, args, num_args, work_dim, global, local);
    if (checked != FLAGOS_SUCCESS) return checked;
    if (program->device != stream->device) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "opencl kernelLaunch: program of device %d launched on a stream of device %d",
                  program->device->index, stream->device->index);
    }
    size_t global_size[3] = {1, 1, 1}, local_size[3] = {1, 1, 1};
    bool empty = false;
    for (int32_t d = 0; d < work_dim; ++d) {
      local_size[d] = local != nullptr ? static_cast<size_t>(local[d]) : 1;
      global_size[d] =
          static_cast<size_t>((global[d] + local_size[d] - 1) / local_size[d] * local_size[d]);
      empty = empty || global[d] == 0;
    }

    // Note [Launches without the compile lock]: only a new work size (or a
    // new kernel object) may compile. With a local size given, that is the
    // work size; the global size matters only past 32 bits (PoCL's "small
    // grid" specialization). Without one, PoCL picks it per global size.
    std::array<size_t, 6> shape{};
    for (int32_t d = 0; d < work_dim; ++d) {
      shape[d] = local == nullptr ? global_size[d] : global_size[d] > UINT32_MAX ? 1 : 0;
      shape[3 + d] = local != nullptr ? local_size[d] : 0;
    }
    bool known = false;
    {
      std::lock_guard<std::mutex> lock(program->mu);
      auto it = program->kernels.find(name);
      known = it != program->kernels.end() &&
              std::find(it->second.launched.begin(), it->second.launched.end(), shape) !=
                  it->second.launched.end();
    }
    std::optional<CompileLock> compiling;
    if (!known) compiling.emplace();  // (before program->mu: the lock order)

    std::unique_lock<std::mutex> lock(program->mu);
    flagosProgram_st::Kernel* kernel = nullptr;
    const flagosStatus_t found = findKernel(program, name, &kernel);
    if (found != FLAGOS_SUCCESS) return found;
    cl_uint expected = 0;
    for (int32_t i = 0; i < num_args; ++i)
      expected += args[i].kind == FLAGOS_ARG_DEVICE_PTR ? 2 : 1;
    if (expected != kernel->num_args) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "opencl kernelLaunch: wrong argument count for '%s': %d arguments make %u "
                  "OpenCL arguments (each DEVICE_PTR is two: base and byte offset), the kernel "
                  "takes %u",
                  name, num_args, expected, kernel->num_args);
    }
    const flagosStatus_t status =
        setArguments(*program->device, kernel->kernel, name, args, num_args);
    if (status != FLAGOS_SUCCESS || empty) return status;
    cl_event first = nullptr;                // Note [Serialized compiles on PoCL]
    flagos_kit::trace::threadName() = name;  // the record's name (trace.cpp copies it at once)
    const cl_int error = stream->enqueue([&](cl_command_queue queue, cl_event* event) {
      const cl_int e = clEnqueueNDRangeKernel(
          queue, kernel->kernel, static_cast<cl_uint>(work_dim), nullptr, global_size,
          local != nullptr ? local_size : nullptr, 0, nullptr, event);
      if (e == CL_SUCCESS && compiling && *event != nullptr && clRetainEvent(*event) == CL_SUCCESS)
        first = *event;
      return e;
    });
    flagos_kit::trace::threadName() = nullptr;  // taken by a traced enqueue, else dropped
    if (error == CL_SUCCESS) {
      if (!known && kernel->launched.size() < flagosProgram_st::Kernel::kLaunchShapes)
        kernel->launched.push_back(shape);
      lock.unlock();  // other launches of the program need not wait for this one
      waitIfFirst(compiling, first);
      return FLAGOS_SUCCESS;
    }
    const bool bad_shape = error == CL_INVALID_WORK_GROUP_SIZE ||
                           error == CL_INVALID_WORK_ITEM_SIZE ||
                           error == CL_INVALID_GLOBAL_WORK_SIZE || error == CL_INVALID_KERNEL_ARGS;
    return fail(bad_shape              ? FLAGOS_ERROR_INVALID_ARGUMENT
                : isOutOfMemory(error) ? FLAGOS_ERROR_OUT_OF_MEMORY
                                       : FLAGOS_ERROR_DEVICE,
                "opencl kernelLaunch: '%s' failed to launch: %s", name, clErrorName(error).c_str());
  });
}

}  // namespace flagos_opencl
