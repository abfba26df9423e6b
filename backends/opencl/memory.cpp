// The memory table: device allocations behind virtual addresses (Note
// [Virtual device addresses] in address_space.h), synchronous and
// stream-ordered copies, and fills.
//
// Every device-side address is resolved to (cl_mem, offset) first, so a
// copy may start anywhere inside an allocation and end exactly at its end.
// Synchronous copies run on the device's own queue (memory.h: they are not
// ordered after stream work); asynchronous ones on the stream's queue.
// Pinned host memory (hostAlloc) is left NULL: the core then uses ordinary
// host memory, which OpenCL copies accept as is.
#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <vector>

#include "flagos_kit/calls.h"
#include "opencl.h"

namespace flagos_opencl {
namespace {

// Host bounce buffer for copies between devices (different contexts).
constexpr uint64_t kStagingChunk = uint64_t{16} << 20;

bool validKind(flagosMemcpyKind_t kind) {
  return kind == FLAGOS_MEMCPY_HOST_TO_DEVICE || kind == FLAGOS_MEMCPY_DEVICE_TO_HOST ||
         kind == FLAGOS_MEMCPY_DEVICE_TO_DEVICE;
}

// The device sides of a copy, resolved.
struct CopyPlan {
  DevicePtr dst, src;  // only the device sides are filled
  bool dst_on_device = false, src_on_device = false;
};

// Checks a copy's arguments and resolves its device side(s). Records the
// message and returns false on error.
bool planCopy(const char* call, void* dst, const void* src, uint64_t bytes, flagosMemcpyKind_t kind,
              CopyPlan* plan) {
  if (!validKind(kind)) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "opencl %s: unknown memcpy kind %d", call, kind);
    return false;
  }
  if (dst == nullptr || src == nullptr) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "opencl %s: %s is NULL", call, dst ? "src" : "dst");
    return false;
  }
  plan->dst_on_device = kind != FLAGOS_MEMCPY_DEVICE_TO_HOST;
  plan->src_on_device = kind != FLAGOS_MEMCPY_HOST_TO_DEVICE;
  if (plan->dst_on_device && !resolve(call, dst, bytes, &plan->dst)) return false;
  if (plan->src_on_device && !resolve(call, src, bytes, &plan->src)) return false;
  return true;
}

// Enqueues a copy between two ranges of one device on @p queue; *event (may
// be NULL) is the last command. Overlapping ranges of one buffer (a tensor
// copied onto a view of itself) go through a temporary buffer, since
// clEnqueueCopyBuffer refuses them.
cl_int enqueueDeviceCopy(cl_command_queue queue, const DevicePtr& dst, const DevicePtr& src,
                         uint64_t bytes, cl_event* event) {
  const bool overlap = dst.buffer == src.buffer && dst.offset < src.offset + bytes &&
                       src.offset < dst.offset + bytes;
  if (!overlap) {
    return clEnqueueCopyBuffer(queue, src.buffer, dst.buffer, src.offset, dst.offset, bytes, 0,
                               nullptr, event);
  }
  if (dst.offset == src.offset) {  // a copy onto itself changes nothing
    return clEnqueueMarkerWithWaitList(queue, 0, nullptr, event);
  }
  cl_int error = CL_SUCCESS;
  cl_mem scratch = clCreateBuffer(dst.device->context, CL_MEM_READ_WRITE, bytes, nullptr, &error);
  if (scratch == nullptr) return error;
  error =
      clEnqueueCopyBuffer(queue, src.buffer, scratch, src.offset, 0, bytes, 0, nullptr, nullptr);
  if (error == CL_SUCCESS) {
    error =
        clEnqueueCopyBuffer(queue, scratch, dst.buffer, 0, dst.offset, bytes, 0, nullptr, event);
  }
  clReleaseMemObject(scratch);  // the queued copies hold their own reference
  return error;
}

// Waits for @p event (owned), then releases it; its failure if it failed.
cl_int waitAndRelease(cl_event event) {
  cl_int error = clWaitForEvents(1, &event);
  cl_int status = CL_COMPLETE;
  clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
  clReleaseEvent(event);
  if (status < 0) return status;
  return error;
}

flagosStatus_t copyFailed(const char* call, cl_int error, uint64_t bytes) {
  return fail(isOutOfMemory(error) ? FLAGOS_ERROR_OUT_OF_MEMORY : FLAGOS_ERROR_DEVICE,
              "opencl %s: copy of %" PRIu64 " bytes failed: %s", call, bytes,
              clErrorName(error).c_str());
}

// A blocking copy between devices, through host memory in chunks.
cl_int stagedCopy(const DevicePtr& dst, const DevicePtr& src, uint64_t bytes) {
  std::vector<char> staging(std::min(bytes, kStagingChunk));
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min<uint64_t>(staging.size(), bytes - done);
    cl_int error = clEnqueueReadBuffer(src.device->sync_queue, src.buffer, CL_TRUE,
                                       src.offset + done, n, staging.data(), 0, nullptr, nullptr);
    if (error != CL_SUCCESS) return error;
    error = clEnqueueWriteBuffer(dst.device->sync_queue, dst.buffer, CL_TRUE, dst.offset + done, n,
                                 staging.data(), 0, nullptr, nullptr);
    if (error != CL_SUCCESS) return error;
    done += n;
  }
  return CL_SUCCESS;
}

// The synchronous copy of a planned range (also the fallback of
// memcpyAsync when the memory is not on the stream's device).
flagosStatus_t copyNow(const char* call, void* dst, const void* src, uint64_t bytes,
                       const CopyPlan& plan) {
  cl_int error = CL_SUCCESS;
  if (!plan.src_on_device) {  // host to device
    error = clEnqueueWriteBuffer(plan.dst.device->sync_queue, plan.dst.buffer, CL_TRUE,
                                 plan.dst.offset, bytes, src, 0, nullptr, nullptr);
  } else if (!plan.dst_on_device) {  // device to host
    error = clEnqueueReadBuffer(plan.src.device->sync_queue, plan.src.buffer, CL_TRUE,
                                plan.src.offset, bytes, dst, 0, nullptr, nullptr);
  } else if (plan.dst.device != plan.src.device) {
    error = stagedCopy(plan.dst, plan.src, bytes);
  } else {
    cl_event event = nullptr;
    error = enqueueDeviceCopy(plan.dst.device->sync_queue, plan.dst, plan.src, bytes, &event);
    if (error == CL_SUCCESS) error = waitAndRelease(event);
  }
  return error == CL_SUCCESS ? FLAGOS_SUCCESS : copyFailed(call, error, bytes);
}

// Enqueues the fill of @p count x @p size bytes at @p at. OpenCL wants the
// offset to be a multiple of the pattern size; a misaligned fill is split
// into single bytes before and after an aligned middle that uses the
// pattern rotated to start where the middle starts.
cl_int enqueueFill(cl_command_queue queue, const DevicePtr& at, const unsigned char* pattern,
                   uint32_t size, uint64_t count, cl_event* event) {
  const uint64_t bytes = count * size;
  if (std::all_of(pattern, pattern + size, [&](unsigned char b) { return b == pattern[0]; })) {
    size = 1;  // zero_() and friends: any alignment works
  }
  if (at.offset % size == 0) {
    return clEnqueueFillBuffer(queue, at.buffer, pattern, size, at.offset, bytes / size * size, 0,
                               nullptr, event);
  }
  const uint64_t head = size - at.offset % size;  // bytes before the aligned middle
  const uint64_t middle = (bytes - head) / size * size;
  unsigned char rotated[8];
  for (uint32_t i = 0; i < size; ++i) rotated[i] = pattern[(head + i) % size];
  cl_int error = CL_SUCCESS;
  for (uint64_t i = 0; i < head && error == CL_SUCCESS; ++i) {
    error = clEnqueueFillBuffer(queue, at.buffer, &pattern[i], 1, at.offset + i, 1, 0, nullptr,
                                nullptr);
  }
  if (error == CL_SUCCESS && middle > 0) {
    error = clEnqueueFillBuffer(queue, at.buffer, rotated, size, at.offset + head, middle, 0,
                                nullptr, nullptr);
  }
  for (uint64_t i = head + middle; i < bytes && error == CL_SUCCESS; ++i) {
    error = clEnqueueFillBuffer(queue, at.buffer, &pattern[i % size], 1, at.offset + i, 1, 0,
                                nullptr, nullptr);
  }
  if (error == CL_SUCCESS) error = clEnqueueMarkerWithWaitList(queue, 0, nullptr, event);
  return error;
}

// memGetInfo's answer for @p device: what this plugin allocated of it.
void deviceMemory(Device* device, uint64_t* free_bytes, uint64_t* total_bytes) {
  const uint64_t used = std::min(device->allocated.load(), device->total_memory);
  *total_bytes = device->total_memory;
  *free_bytes = device->total_memory - used;
}

// memFill after flagos_kit::checkFill: @p bytes (> 0) from @p dst on.
flagosStatus_t fillDevice(void* dst, const void* pattern, uint32_t pattern_size, uint64_t count,
                          uint64_t bytes, flagosStream_t stream) {
  DevicePtr at;
  if (!resolve("memFill", dst, bytes, &at)) return FLAGOS_ERROR_INVALID_ARGUMENT;
  if (at.device != stream->device) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                "opencl memFill: %p is memory of device %d, the stream is on device %d", dst,
                at.device->index, stream->device->index);
  }
  const auto* value = static_cast<const unsigned char*>(pattern);
  const cl_int error = stream->enqueue([&](cl_command_queue queue, cl_event* event) {
    return enqueueFill(queue, at, value, pattern_size, count, event);
  });
  if (error != CL_SUCCESS) {
    return fail(FLAGOS_ERROR_DEVICE, "opencl memFill: clEnqueueFillBuffer failed: %s",
                clErrorName(error).c_str());
  }
  return FLAGOS_SUCCESS;
}

// malloc after flagos_kit::malloc's checks: @p bytes (> 0) on @p device.
flagosStatus_t allocate(Device* device, int32_t index, uint64_t bytes, void** ptr) {
  // Account first, so that concurrent mallocs never overshoot the limit.
  uint64_t used = device->allocated.load();
  do {
    if (bytes > device->total_memory - used) {
      return fail(FLAGOS_ERROR_OUT_OF_MEMORY,
                  "opencl device %d: out of memory: requested %" PRIu64 " bytes, %" PRIu64
                  " free of %" PRIu64,
                  index, bytes, device->total_memory - used, device->total_memory);
    }
  } while (!device->allocated.compare_exchange_weak(used, used + bytes));
  struct Unaccount {  // undoes the accounting unless dismissed
    Device* device;
    uint64_t bytes;
    ~Unaccount() {
      if (device != nullptr) device->allocated -= bytes;
    }
  } unaccount{device, bytes};

  if (bytes > device->info.max_alloc) {
    return fail(FLAGOS_ERROR_OUT_OF_MEMORY,
                "opencl device %d: out of memory: %" PRIu64
                " bytes is more than one buffer may hold (CL_DEVICE_MAX_MEM_ALLOC_SIZE = "
                "%" PRIu64 ")",
                index, bytes, device->info.max_alloc);
  }
  cl_int error = CL_SUCCESS;
  cl_mem buffer = clCreateBuffer(device->context, CL_MEM_READ_WRITE, bytes, nullptr, &error);
  if (buffer == nullptr) {
    return fail(isOutOfMemory(error) || error == CL_INVALID_BUFFER_SIZE ? FLAGOS_ERROR_OUT_OF_MEMORY
                                                                        : FLAGOS_ERROR_DEVICE,
                "opencl device %d: clCreateBuffer(%" PRIu64 " bytes) failed: %s", index, bytes,
                clErrorName(error).c_str());
  }
  // Drivers (PoCL among them) allocate lazily, at the first command that
  // uses a buffer. Migrating it to the device now makes a shortage show
  // here, as FLAGOS_ERROR_OUT_OF_MEMORY the core can act on (free its
  // cache, retry), rather than as a failed kernel later.
  cl_event touched = nullptr;
  error = clEnqueueMigrateMemObjects(device->sync_queue, 1, &buffer,
                                     CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED, 0, nullptr, &touched);
  if (error == CL_SUCCESS) error = waitAndRelease(touched);
  if (error != CL_SUCCESS) {
    clReleaseMemObject(buffer);
    return fail(isOutOfMemory(error) ? FLAGOS_ERROR_OUT_OF_MEMORY : FLAGOS_ERROR_DEVICE,
                "opencl device %d: allocating %" PRIu64 " bytes failed: %s", index, bytes,
                clErrorName(error).c_str());
  }
  const uint64_t address = device->addresses->insert(buffer, bytes);
  if (address == 0) {
    clReleaseMemObject(buffer);
    return fail(FLAGOS_ERROR_OUT_OF_MEMORY,
                "opencl device %d: out of device addresses for %" PRIu64 " bytes", index, bytes);
  }
  unaccount.device = nullptr;  // the allocation stands
  *ptr = reinterpret_cast<void*>(address);
  return FLAGOS_SUCCESS;
}

// The memory table (memory.h), one static member per entry; no hostAlloc /
// hostFree (the core uses ordinary host memory).
struct MemoryCalls {
  static constexpr auto malloc = flagos_kit::malloc<findDevice, allocate>;

  static flagosStatus_t free(int32_t index, void* ptr) noexcept {
    return guard("free", [&] {
      if (ptr == nullptr) return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "opencl free: ptr is NULL");
      Device* device = findDevice("free", index);
      if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      uint64_t bytes = 0;
      cl_mem buffer = device->addresses->erase(reinterpret_cast<uint64_t>(ptr), &bytes);
      if (buffer == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                    "opencl free: %p was not returned by malloc on device %d (or was freed)", ptr,
                    index);
      }
      // Commands still queued on the buffer hold their own reference.
      clReleaseMemObject(buffer);
      device->allocated -= bytes;
      return FLAGOS_SUCCESS;
    });
  }

  static flagosStatus_t memcpy(void* dst, const void* src, uint64_t bytes,
                               flagosMemcpyKind_t kind) noexcept {
    return guard("memcpy", [&] {
      if (bytes == 0) return FLAGOS_SUCCESS;
      CopyPlan plan;
      if (!planCopy("memcpy", dst, src, bytes, kind, &plan)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      return copyNow("memcpy", dst, src, bytes, plan);
    });
  }

  // Enqueued on the stream when the device side(s) live on the stream's
  // device. Otherwise (memory of another device: another context) the stream
  // is drained first and the copy runs synchronously: ordered as asked, only
  // not asynchronous.
  static flagosStatus_t memcpyAsync(void* dst, const void* src, uint64_t bytes,
                                    flagosMemcpyKind_t kind, flagosStream_t stream) noexcept {
    return guard("memcpyAsync", [&] {
      if (!validStream("memcpyAsync", stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      if (bytes == 0) return FLAGOS_SUCCESS;
      CopyPlan plan;
      if (!planCopy("memcpyAsync", dst, src, bytes, kind, &plan)) {
        return FLAGOS_ERROR_INVALID_ARGUMENT;
      }
      const bool local = (!plan.dst_on_device || plan.dst.device == stream->device) &&
                         (!plan.src_on_device || plan.src.device == stream->device);
      if (!local) {
        const flagosStatus_t drained = stream->synchronize();
        if (drained != FLAGOS_SUCCESS) return drained;
        return copyNow("memcpyAsync", dst, src, bytes, plan);
      }
      const cl_int error = stream->enqueue([&](cl_command_queue queue, cl_event* event) {
        if (!plan.src_on_device) {
          // The host buffer must stay unchanged until the stream passes the
          // copy: memory.h makes that the core's job.
          return clEnqueueWriteBuffer(queue, plan.dst.buffer, CL_FALSE, plan.dst.offset, bytes, src,
                                      0, nullptr, event);
        }
        if (!plan.dst_on_device) {
          return clEnqueueReadBuffer(queue, plan.src.buffer, CL_FALSE, plan.src.offset, bytes, dst,
                                     0, nullptr, event);
        }
        return enqueueDeviceCopy(queue, plan.dst, plan.src, bytes, event);
      });
      return error == CL_SUCCESS ? FLAGOS_SUCCESS : copyFailed("memcpyAsync", error, bytes);
    });
  }

  static constexpr auto memFill = flagos_kit::memFill<fillDevice>;

  static constexpr auto memGetInfo = flagos_kit::memGetInfo<findDevice, deviceMemory>;  // calls.h
};

}  // namespace

const flagosMemoryTable* memoryTable() {
  return flagos_kit::memoryTable<MemoryCalls>();
}

}  // namespace flagos_opencl
