// The caching device allocator of the flagos device (registered as
// PrivateUse1's allocator) and what the rest of the core asks of it.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Storage.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <optional>

namespace flagos {

// The registered allocator (also c10::GetAllocator(kPrivateUse1)).
c10::DeviceAllocator* deviceAllocator();

// The figures _memory_stats() reports (README in csrc/python).
struct MemoryStats {
  int64_t allocated = 0;  // bytes in live allocations (block sizes)
  int64_t reserved = 0;   // bytes obtained from the vendor, cached or not
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
  int64_t num_allocs = 0;
  int64_t num_frees = 0;
  int64_t num_device_mallocs = 0;
  int64_t num_device_frees = 0;
  int64_t num_ooms = 0;
  int64_t num_cache_flushes = 0;  // OOM-triggered flushes + empty_cache() calls
  int64_t active_blocks = 0;      // allocated, or freed but pending on a stream
  int64_t cached_blocks = 0;      // free blocks in the pools
};
MemoryStats memoryStats(c10::DeviceIndex device);

// The logical device whose memory contains `ptr` (any address inside an
// allocation), or nullopt. GIL-free; used by getDeviceFromPtr.
std::optional<c10::DeviceIndex> deviceOfPointer(const void* ptr);

// Grow or shrink `storage` to `new_bytes`: allocate, copy the common prefix
// with a device-to-device copy on the current stream, swap. Never touches
// device memory from the host (UntypedStorage.resize_, Tensor.resize_).
void resizeStorageBytes(const c10::Storage& storage, size_t new_bytes);

}  // namespace flagos
