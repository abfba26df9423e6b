// The memory table (memory.h). Device memory here is host memory from
// aligned_alloc; an SDK's malloc/free/copy calls replace the bodies. The
// plugin keeps its own map of live allocations so that it can reject a
// foreign pointer as INVALID_ARGUMENT (an SDK usually does this for you).
#include <cstdlib>
#include <cstring>

#include "flagos_kit/calls.h"
#include "skeleton.h"

namespace flagos_skeleton {
namespace {

constexpr uint64_t kAlignment = 256;  // memory.h: 256-byte aligned

bool validKind(flagosMemcpyKind_t kind) {
  return kind == FLAGOS_MEMCPY_HOST_TO_DEVICE || kind == FLAGOS_MEMCPY_DEVICE_TO_HOST ||
         kind == FLAGOS_MEMCPY_DEVICE_TO_DEVICE;
}

// The checks both copies make: pointers, kind, and that the device side(s)
// are inside live allocations.
flagosStatus_t checkCopy(const char* call, void* dst, const void* src, uint64_t bytes,
                         flagosMemcpyKind_t kind) {
  if (dst == nullptr || src == nullptr) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "skeleton %s: dst or src is NULL", call);
  }
  if (!validKind(kind)) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "skeleton %s: unknown copy kind %d", call, kind);
  }
  const bool dst_on_device = kind != FLAGOS_MEMCPY_DEVICE_TO_HOST;
  const bool src_on_device = kind != FLAGOS_MEMCPY_HOST_TO_DEVICE;
  if ((dst_on_device && !isDeviceRange(call, dst, bytes)) ||
      (src_on_device && !isDeviceRange(call, src, bytes))) {
    return FLAGOS_ERROR_INVALID_ARGUMENT;
  }
  return FLAGOS_SUCCESS;
}

// memGetInfo's answer for @p device (SDK: its mem-info call).
void deviceMemory(Device* device, uint64_t* free_bytes, uint64_t* total_bytes) {
  std::lock_guard<std::mutex> lock(device->mu);
  *total_bytes = kCapacity;
  *free_bytes = kCapacity - device->allocated;
}

// memFill after flagos_kit::checkFill: @p bytes (> 0) from @p dst on.
flagosStatus_t fillDevice(void* dst, const void* pattern, uint32_t pattern_size, uint64_t count,
                          uint64_t bytes, flagosStream_t stream) {
  if (dst == nullptr || !isDeviceRange("memFill", dst, bytes)) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "skeleton memFill: dst is not device memory");
  }
  uint64_t value = 0;  // read now: the core passes a temporary
  std::memcpy(&value, pattern, pattern_size);
  stream->enqueue([=] {
    auto* out = static_cast<unsigned char*>(dst);
    for (uint64_t i = 0; i < count; ++i) std::memcpy(out + i * pattern_size, &value, pattern_size);
    return FLAGOS_SUCCESS;
  });
  return FLAGOS_SUCCESS;
}

// malloc after flagos_kit::malloc's checks: @p bytes (> 0) on @p device.
flagosStatus_t allocate(Device* device, int32_t /*index*/, uint64_t bytes, void** ptr) {
  std::lock_guard<std::mutex> lock(device->mu);
  if (bytes > kCapacity - device->allocated) {
    return fail(FLAGOS_ERROR_OUT_OF_MEMORY,
                "skeleton malloc: %llu bytes requested, %llu of %llu free",
                static_cast<unsigned long long>(bytes),
                static_cast<unsigned long long>(kCapacity - device->allocated),
                static_cast<unsigned long long>(kCapacity));
  }
  const uint64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr)
    return fail(FLAGOS_ERROR_OUT_OF_MEMORY, "skeleton malloc: host is out of memory");
  device->live[reinterpret_cast<uintptr_t>(p)] = bytes;
  device->allocated += bytes;
  *ptr = p;
  return FLAGOS_SUCCESS;
}

// The memory table (memory.h), one static member per entry.
struct MemoryCalls {
  static constexpr auto malloc = flagos_kit::malloc<findDevice, allocate>;

  static flagosStatus_t free(int32_t index, void* ptr) noexcept {
    return guard("free", [&] {
      Device* device = findDevice("free", index);
      if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      std::lock_guard<std::mutex> lock(device->mu);
      const auto it = device->live.find(reinterpret_cast<uintptr_t>(ptr));
      if (it == device->live.end()) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "skeleton free: %p was not returned by malloc",
                    ptr);
      }
      device->allocated -= it->second;
      device->live.erase(it);
      std::free(ptr);
      return FLAGOS_SUCCESS;
    });
  }

  static flagosStatus_t memcpy(void* dst, const void* src, uint64_t bytes,
                               flagosMemcpyKind_t kind) noexcept {
    return guard("memcpy", [&] {
      if (bytes == 0) return FLAGOS_SUCCESS;  // memory.h: pointers not looked at
      const flagosStatus_t checked = checkCopy("memcpy", dst, src, bytes, kind);
      if (checked != FLAGOS_SUCCESS) return checked;
      std::memmove(dst, src, bytes);
      return FLAGOS_SUCCESS;
    });
  }

  static flagosStatus_t memcpyAsync(void* dst, const void* src, uint64_t bytes,
                                    flagosMemcpyKind_t kind, flagosStream_t stream) noexcept {
    return guard("memcpyAsync", [&] {
      if (!flagos_kit::validStream("memcpyAsync", stream)) {
        return FLAGOS_ERROR_INVALID_ARGUMENT;
      }
      if (bytes == 0) return FLAGOS_SUCCESS;
      const flagosStatus_t checked = checkCopy("memcpyAsync", dst, src, bytes, kind);
      if (checked != FLAGOS_SUCCESS) return checked;
      stream->enqueue([=] {
        std::memmove(dst, src, bytes);
        return FLAGOS_SUCCESS;
      });
      return FLAGOS_SUCCESS;
    });
  }

  static constexpr auto memFill = flagos_kit::memFill<fillDevice>;

  // Checks the arguments, then deviceMemory() fills them in (calls.h).
  static constexpr auto memGetInfo = flagos_kit::memGetInfo<findDevice, deviceMemory>;
  // hostAlloc / hostFree: optional, not given (the core uses ordinary host
  // memory; flagos_kit::memoryTable leaves them NULL).
};

}  // namespace

bool isDeviceRange(const char* call, const void* ptr, uint64_t bytes) noexcept {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  for (int32_t index = 0;; ++index) {
    Device* device = findDevice(call, index);
    if (device == nullptr) break;
    std::lock_guard<std::mutex> lock(device->mu);
    auto it = device->live.upper_bound(p);  // first allocation starting after p
    if (it == device->live.begin()) continue;
    --it;
    if (p - it->first <= it->second && bytes <= it->first + it->second - p) return true;
  }
  fail(FLAGOS_ERROR_INVALID_ARGUMENT, "skeleton %s: [%p, +%llu) is not inside a live allocation",
       call, ptr, static_cast<unsigned long long>(bytes));
  return false;
}

const flagosMemoryTable* memoryTable() {
  return flagos_kit::memoryTable<MemoryCalls>();
}

}  // namespace flagos_skeleton
