// The memory table (memory.h): plain device allocations (cuMemAlloc, never
// managed memory) behind the core's caching allocator, pinned host memory,
// copies through unified addressing (cuMemcpy finds the direction from the
// pointers), and fills on the copy engine (cuMemsetD8/16/32) or a kernel.
#include <cinttypes>
#include <cstring>

#include "cuda_plugin.h"
#include "flagos_kit/calls.h"

namespace flagos_cuda {
namespace {

bool validKind(flagosMemcpyKind_t kind) {
  return kind == FLAGOS_MEMCPY_HOST_TO_DEVICE || kind == FLAGOS_MEMCPY_DEVICE_TO_HOST ||
         kind == FLAGOS_MEMCPY_DEVICE_TO_DEVICE;
}

// The checks both copies make: pointers, kind, and that each device side is
// inside a live allocation. @p device gets the device whose context runs it.
flagosStatus_t checkCopy(const char* call, void* dst, const void* src, uint64_t bytes,
                         flagosMemcpyKind_t kind, Device** device) {
  if (dst == nullptr || src == nullptr) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "cuda %s: dst or src is NULL", call);
  }
  if (!validKind(kind)) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "cuda %s: unknown copy kind %d", call, kind);
  }
  Device* dst_device = nullptr;
  Device* src_device = nullptr;
  if (kind != FLAGOS_MEMCPY_DEVICE_TO_HOST &&
      !isDeviceRange(call, dst, bytes, nullptr, &dst_device)) {
    return FLAGOS_ERROR_INVALID_ARGUMENT;
  }
  if (kind != FLAGOS_MEMCPY_HOST_TO_DEVICE &&
      !isDeviceRange(call, src, bytes, nullptr, &src_device)) {
    return FLAGOS_ERROR_INVALID_ARGUMENT;
  }
  *device = src_device != nullptr ? src_device : dst_device;
  return FLAGOS_SUCCESS;
}

void deviceMemory(Device* device, uint64_t* free_bytes, uint64_t* total_bytes) {
  size_t free = 0, total = 0;
  if (useContext(*device, "memGetInfo") == FLAGOS_SUCCESS &&
      cu().cuMemGetInfo(&free, &total) == CUDA_SUCCESS && total > 0) {
    *free_bytes = free;
    *total_bytes = total;
    return;
  }
  *total_bytes = device->total_memory;  // memory.h: total > 0
  *free_bytes = 0;
}

// memFill after flagos_kit::checkFill: @p bytes (> 0) from @p dst on.
flagosStatus_t fillDevice(void* dst, const void* pattern, uint32_t pattern_size, uint64_t count,
                          uint64_t bytes, flagosStream_t stream) {
  if (!isDeviceRange("memFill", dst, bytes, stream->device)) {
    return FLAGOS_ERROR_INVALID_ARGUMENT;
  }
  uint64_t value = 0;  // read now: the core passes a temporary
  std::memcpy(&value, pattern, pattern_size);
  flagosStatus_t st = useContext(*stream->device, "memFill");
  if (st != FLAGOS_SUCCESS) return st;
  const auto address = reinterpret_cast<CUdeviceptr>(dst);
  // The copy engine's memsets need their element alignment; 8-byte
  // patterns and misaligned ones take a kernel (fill.cpp).
  if (pattern_size == 8 || address % pattern_size != 0) {
    return fillKernel(stream, dst, value, pattern_size, count);
  }
  TraceMark mark = traceBegin(stream, FLAGOS_TRACE_MEMSET, "Memset");
  CUresult r = CUDA_SUCCESS;
  if (pattern_size == 1) {
    r = cu().cuMemsetD8Async(address, static_cast<unsigned char>(value), count, stream->stream);
  } else if (pattern_size == 2) {
    r = cu().cuMemsetD16Async(address, static_cast<unsigned short>(value), count, stream->stream);
  } else {
    r = cu().cuMemsetD32Async(address, static_cast<unsigned int>(value), count, stream->stream);
  }
  traceEnd(stream, mark);
  return check(r, "memFill", "cuMemsetAsync");
}

// malloc after flagos_kit::malloc's checks: @p bytes (> 0) on @p device.
flagosStatus_t allocate(Device* device, int32_t index, uint64_t bytes, void** ptr) {
  if (bytes > device->total_memory) {
    return fail(FLAGOS_ERROR_OUT_OF_MEMORY,
                "cuda malloc: %" PRIu64 " bytes requested, device %d has %" PRIu64, bytes, index,
                device->total_memory);
  }
  flagosStatus_t st = useContext(*device, "malloc");
  if (st != FLAGOS_SUCCESS) return st;
  CUdeviceptr address = 0;
  st = check(cu().cuMemAlloc(&address, bytes), "malloc", "cuMemAlloc");
  if (st != FLAGOS_SUCCESS) return st;
  {
    std::lock_guard<std::mutex> lock(device->memory_mutex);
    device->live[static_cast<uintptr_t>(address)] = bytes;
  }
  *ptr = reinterpret_cast<void*>(address);
  return FLAGOS_SUCCESS;
}

// The memory table (memory.h), one static member per entry.
struct MemoryCalls {
  static constexpr auto malloc = flagos_kit::malloc<findDevice, allocate>;

  static flagosStatus_t free(int32_t index, void* ptr) noexcept {
    return guard("free", [&] {
      Device* device = findDevice("free", index);
      if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      {
        std::lock_guard<std::mutex> lock(device->memory_mutex);
        const auto it = device->live.find(reinterpret_cast<uintptr_t>(ptr));
        if (it == device->live.end()) {
          return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                      "cuda free: %p is not an allocation of device %d", ptr, index);
        }
        device->live.erase(it);
      }
      flagosStatus_t st = useContext(*device, "free");
      if (st != FLAGOS_SUCCESS) return st;
      return check(cu().cuMemFree(reinterpret_cast<CUdeviceptr>(ptr)), "free", "cuMemFree");
    });
  }

  static flagosStatus_t memcpy(void* dst, const void* src, uint64_t bytes,
                               flagosMemcpyKind_t kind) noexcept {
    return guard("memcpy", [&] {
      if (bytes == 0) return FLAGOS_SUCCESS;  // memory.h: pointers not looked at
      Device* device = nullptr;
      flagosStatus_t st = checkCopy("memcpy", dst, src, bytes, kind, &device);
      if (st == FLAGOS_SUCCESS) st = useContext(*device, "memcpy");
      if (st != FLAGOS_SUCCESS) return st;
      return check(cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(dst),
                                 reinterpret_cast<CUdeviceptr>(src), bytes),
                   "memcpy", "cuMemcpy");
    });
  }

  static flagosStatus_t memcpyAsync(void* dst, const void* src, uint64_t bytes,
                                    flagosMemcpyKind_t kind, flagosStream_t stream) noexcept {
    return guard("memcpyAsync", [&] {
      if (!flagos_kit::validStream("memcpyAsync", stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      if (bytes == 0) return FLAGOS_SUCCESS;
      Device* device = nullptr;
      flagosStatus_t st = checkCopy("memcpyAsync", dst, src, bytes, kind, &device);
      if (st == FLAGOS_SUCCESS) st = useContext(*stream->device, "memcpyAsync");
      if (st != FLAGOS_SUCCESS) return st;
      TraceMark mark = traceBegin(stream, FLAGOS_TRACE_MEMCPY, flagos_kit::trace::memcpyName(kind));
      st = check(cu().cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                                    reinterpret_cast<CUdeviceptr>(src), bytes, stream->stream),
                 "memcpyAsync", "cuMemcpyAsync");
      traceEnd(stream, mark);
      return st;
    });
  }

  static constexpr auto memFill = flagos_kit::memFill<fillDevice>;

  static constexpr auto memGetInfo = flagos_kit::memGetInfo<findDevice, deviceMemory>;

  // Portable: usable with every device's streams.
  static flagosStatus_t hostAlloc(uint64_t bytes, void** ptr) noexcept {
    return guard("hostAlloc", [&] {
      if (ptr == nullptr || bytes == 0) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "cuda hostAlloc: ptr NULL or 0 bytes");
      }
      *ptr = nullptr;
      Device* device = findDevice("hostAlloc", 0);
      if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      flagosStatus_t st = useContext(*device, "hostAlloc");
      if (st != FLAGOS_SUCCESS) return st;
      return check(cu().cuMemHostAlloc(ptr, bytes, CU_MEMHOSTALLOC_PORTABLE), "hostAlloc",
                   "cuMemHostAlloc");
    });
  }

  static flagosStatus_t hostFree(void* ptr) noexcept {
    return guard("hostFree", [&] {
      Device* device = findDevice("hostFree", 0);
      if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      if (ptr == nullptr) return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "cuda hostFree: NULL");
      flagosStatus_t st = useContext(*device, "hostFree");
      if (st != FLAGOS_SUCCESS) return st;
      return check(cu().cuMemFreeHost(ptr), "hostFree", "cuMemFreeHost");
    });
  }
};

}  // namespace

const flagosMemoryTable* memoryTable() {
  return flagos_kit::memoryTable<MemoryCalls>();
}

}  // namespace flagos_cuda
