// Virtual device addresses: see Note [Virtual device addresses] in
// address_space.h.
#include "address_space.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "opencl.h"

namespace flagos_opencl {
namespace {

constexpr uint64_t kWindowBytes = uint64_t{1} << 40;  // 1 TiB of addresses per device

uint64_t roundUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace

std::unique_ptr<AddressSpace> AddressSpace::create(int32_t device, uint64_t min_bytes) {
  // A smaller window only when the address space is limited (ulimit -v):
  // it must still hold the device's memory with room for the gaps.
  const uint64_t floor = roundUp(min_bytes, kAlignment) * 2;
  for (uint64_t size = kWindowBytes; size >= floor && size >= kAlignment; size /= 2) {
    void* base = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base != MAP_FAILED) return std::unique_ptr<AddressSpace>(new AddressSpace(base, size));
  }
  fail(FLAGOS_ERROR_DEVICE,
       "opencl init: cannot reserve an address window for device %d (%s; at least %llu bytes)",
       device, std::strerror(errno), static_cast<unsigned long long>(floor));
  return nullptr;
}

AddressSpace::AddressSpace(void* base, uint64_t size)
    : base_(reinterpret_cast<uint64_t>(base)), size_(size) {
  // Address 0 of the window is never handed out, so no allocation has the
  // window's own base (harmless, but it keeps "base_ + 0" out of reach).
  free_.emplace(base_ + kAlignment, size_ - kAlignment);
}

AddressSpace::~AddressSpace() {
  releaseAll();
  munmap(reinterpret_cast<void*>(base_), size_);
}

uint64_t AddressSpace::insert(cl_mem buffer, uint64_t bytes) {
  const uint64_t span = roundUp(bytes, kAlignment) + kAlignment;  // + the gap
  if (span < bytes) return 0;                                     // overflow: cannot fit anyway
  std::unique_lock<std::shared_mutex> lock(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < span) continue;
    const uint64_t address = it->first;
    const uint64_t rest = it->second - span;
    free_.erase(it);
    if (rest > 0) free_.emplace(address + span, rest);
    live_.emplace(address, Allocation{buffer, bytes});
    return address;
  }
  return 0;
}

cl_mem AddressSpace::erase(uint64_t base, uint64_t* bytes) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = live_.find(base);
  if (it == live_.end()) return nullptr;
  const Allocation allocation = it->second;
  live_.erase(it);
  // Give the span back and merge it with free neighbours.
  uint64_t start = base;
  uint64_t length = roundUp(allocation.bytes, kAlignment) + kAlignment;
  auto next = free_.lower_bound(start);
  if (next != free_.end() && start + length == next->first) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      length += prev->second;
      free_.erase(prev);
    }
  }
  free_.emplace(start, length);
  if (bytes != nullptr) *bytes = allocation.bytes;
  return allocation.buffer;
}

bool AddressSpace::find(uint64_t address, uint64_t bytes, cl_mem* buffer, uint64_t* offset) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = live_.upper_bound(address);  // first allocation starting after address
  if (it == live_.begin()) return false;
  --it;  // the last allocation starting at or before address
  const uint64_t within = address - it->first;
  if (within > it->second.bytes || bytes > it->second.bytes - within) return false;
  *buffer = it->second.buffer;
  *offset = within;
  return true;
}

void AddressSpace::releaseAll() {
  std::unique_lock<std::shared_mutex> lock(mu_);
  for (auto& entry : live_) clReleaseMemObject(entry.second.buffer);
  live_.clear();
  free_.clear();
  free_.emplace(base_ + kAlignment, size_ - kAlignment);
}

}  // namespace flagos_opencl
