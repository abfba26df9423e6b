// The caching allocator's statistics (torch.accelerator.memory.*, the
// _memory_stats binding), its registration for PrivateUse1, and the
// functions of allocator.h.
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "runtime/backend.h"
#include "runtime/caching_allocator.h"
#include "runtime/stream.h"

namespace flagos {
namespace detail {
namespace {

using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kAll = static_cast<size_t>(StatType::AGGREGATE);

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  return device < 0 ? currentDevice() : device;
}

std::vector<StatArray*> statArrays(DeviceStats& s) {
  return {&s.allocation,      &s.segment,        &s.active,       &s.inactive_split,
          &s.allocated_bytes, &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes,
          &s.requested_bytes};
}

}  // namespace

DeviceCache& CachingAllocator::cache(c10::DeviceIndex device) {
  const c10::DeviceIndex count = deviceCount();
  checkDeviceIndex(device);
  if (caches_.size() < static_cast<size_t>(count)) caches_.resize(count);
  if (!caches_[device]) caches_[device] = std::make_unique<DeviceCache>();
  return *caches_[device];
}

bool CachingAllocator::initialized() {
  return isInitialized();
}

DeviceStats CachingAllocator::getDeviceStats(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache(resolve(device)).stats;
}

void CachingAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceCache& dc = cache(resolve(device));
  DeviceStats& s = dc.stats;
  for (StatArray* a : statArrays(s))
    for (auto& stat : *a) stat.reset_accumulated();
  s.num_alloc_retries = s.num_ooms = s.num_sync_all_streams = 0;
  s.num_device_alloc = s.num_device_free = 0;
  dc.num_cache_flushes = 0;
}

void CachingAllocator::resetPeakStats(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (StatArray* a : statArrays(cache(resolve(device)).stats))
    for (auto& stat : *a) stat.reset_peak();
}

std::pair<size_t, size_t> CachingAllocator::getMemoryInfo(c10::DeviceIndex device) {
  uint64_t free_bytes = 0, total = 0;
  check(backend().tables.memory->memGetInfo(physicalDevice(resolve(device)), &free_bytes, &total),
        "memGetInfo");
  return {free_bytes, total};
}

MemoryStats CachingAllocator::stats(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceCache& dc = cache(resolve(device));
  const DeviceStats& s = dc.stats;
  MemoryStats m;
  m.allocated = s.allocated_bytes[kAll].current;
  m.reserved = s.reserved_bytes[kAll].current;
  m.peak_allocated = s.allocated_bytes[kAll].peak;
  m.peak_reserved = s.reserved_bytes[kAll].peak;
  m.num_allocs = s.allocation[kAll].allocated;
  m.num_frees = s.allocation[kAll].freed;
  m.num_device_mallocs = s.num_device_alloc;
  m.num_device_frees = s.num_device_free;
  m.num_ooms = s.num_ooms;
  m.num_cache_flushes = dc.num_cache_flushes;
  m.active_blocks = s.active[kAll].current;
  m.cached_blocks = static_cast<int64_t>(dc.small.blocks.size() + dc.large.blocks.size());
  return m;
}

std::optional<c10::DeviceIndex> CachingAllocator::deviceOf(const void* ptr) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = segments_.upper_bound(p);
  if (it == segments_.begin()) return std::nullopt;
  --it;
  if (p >= it->first + it->second.first) return std::nullopt;
  return it->second.second;
}

CachingAllocator& cachingAllocator() {
  static auto* instance = new CachingAllocator();
  return *instance;
}

namespace {
const bool g_registered = [] {
  c10::SetAllocator(c10::DeviceType::PrivateUse1, &cachingAllocator());
  return true;
}();
}  // namespace

}  // namespace detail

c10::DeviceAllocator* deviceAllocator() {
  return &detail::cachingAllocator();
}

MemoryStats memoryStats(c10::DeviceIndex device) {
  return detail::cachingAllocator().stats(device);
}

std::optional<c10::DeviceIndex> deviceOfPointer(const void* ptr) {
  return detail::cachingAllocator().deviceOf(ptr);
}

void resizeStorageBytes(const c10::Storage& storage, size_t new_bytes) {
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  const c10::Device device = storage.device();
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1,
              "flagos: resizeStorageBytes needs a flagos storage, got one on ", device);
  const c10::DeviceGuard guard(device);
  auto& allocator = detail::cachingAllocator();
  c10::DataPtr fresh = allocator.allocate(new_bytes);
  const size_t common = std::min(storage.nbytes(), new_bytes);
  const c10::DataPtr& old = storage.data_ptr();
  if (common > 0 && old.get() != nullptr) {
    const c10::Stream stream = currentStream(device.index());
    check(backend().tables.memory->memcpyAsync(
              fresh.get(), old.get(), common, FLAGOS_MEMCPY_DEVICE_TO_DEVICE, vendorStream(stream)),
          "memcpyAsync");
    // The old block dies below while the copy may still be queued.
    allocator.recordStream(old, stream);
  }
  storage.set_data_ptr_noswap(std::move(fresh));
  storage.set_nbytes(new_bytes);
}

}  // namespace flagos
