// Note [Host arena]
// ~~~~~~~~~~~~~~~~~
// Each host device owns one contiguous range of address space, reserved at
// init() with mmap(MAP_NORESERVE): reserving costs no memory, pages are
// materialized on first touch, and the range's size is the device's memory
// limit. Inside it a first-fit allocator hands out 256-byte-aligned blocks:
//  - free_ maps offset -> size of every free block, sorted by offset, and no
//    two free blocks are adjacent (release() merges a freed block with its
//    free neighbours), so the list stays short and large requests succeed
//    after many small ones were freed;
//  - used_ maps offset -> size of every live block, so release() can reject
//    an address that malloc never returned;
//  - when a freed range covers whole pages (at least kReleaseThreshold
//    bytes), madvise(MADV_DONTNEED) gives the pages back to the kernel, so
//    the process's RSS drops like a real device's memory would free up.
// The core's caching allocator calls malloc/free rarely, so a linear
// first-fit scan under one mutex is plenty; a vendor with a real device
// replaces this file with calls into its SDK.
#include "arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <iterator>

#include "host.h"

namespace flagos_host {
namespace {

// Freed ranges smaller than this keep their pages (not worth a syscall).
constexpr uint64_t kReleaseThreshold = 64 * 1024;

uint64_t pageSize() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

uint64_t roundUp(uint64_t value, uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

uint64_t roundDown(uint64_t value, uint64_t multiple) {
  return value / multiple * multiple;
}

}  // namespace

std::unique_ptr<Arena> Arena::create(int32_t device, uint64_t limit) {
  const uint64_t size = roundDown(limit, kAlignment);
  if (size == 0) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host device %d: memory limit %" PRIu64 " is too small",
         device, limit);
    return nullptr;
  }
  const uint64_t mapped = roundUp(size, pageSize());
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    fail(FLAGOS_ERROR_DEVICE, "host device %d: cannot reserve %" PRIu64 " bytes: %s", device,
         mapped, std::strerror(errno));
    return nullptr;
  }
  return std::unique_ptr<Arena>(new Arena(device, static_cast<char*>(base), size, mapped));
}

Arena::Arena(int32_t device, char* base, uint64_t size, uint64_t mapped)
    : device_(device), base_(base), size_(size), mapped_(mapped), free_bytes_(size) {
  free_.emplace(0, size);
}

Arena::~Arena() {
  munmap(base_, mapped_);
}

flagosStatus_t Arena::allocate(uint64_t bytes, void** ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes <= size_) {  // also keeps roundUp from overflowing
    const uint64_t need = roundUp(bytes, kAlignment);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < need) continue;
      const uint64_t offset = it->first;
      const uint64_t rest = it->second - need;
      free_.erase(it);
      if (rest > 0) free_.emplace(offset + need, rest);
      used_.emplace(offset, need);
      free_bytes_ -= need;
      *ptr = base_ + offset;
      return FLAGOS_SUCCESS;
    }
  }
  uint64_t largest = 0;
  for (const auto& block : free_) largest = std::max(largest, block.second);
  return fail(FLAGOS_ERROR_OUT_OF_MEMORY,
              "host device %d: out of memory: requested %" PRIu64 " bytes, %" PRIu64
              " free of %" PRIu64 " (largest free block %" PRIu64 ")",
              device_, bytes, free_bytes_, size_, largest);
}

flagosStatus_t Arena::release(void* ptr) {
  const char* p = static_cast<const char*>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  auto used = p >= base_ && p < base_ + size_ ? used_.find(p - base_) : used_.end();
  if (used == used_.end()) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                "host free: %p was not returned by malloc on host device %d (or was freed)", ptr,
                device_);
  }
  const uint64_t offset = used->first;
  const uint64_t bytes = used->second;
  used_.erase(used);
  free_bytes_ += bytes;

  // Merge with the free neighbours so that free_ never holds adjacent blocks.
  uint64_t begin = offset;
  uint64_t end = offset + bytes;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && next->first == end) {
    end += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == begin) {
      begin = prev->first;
      free_.erase(prev);
    }
  }
  free_.emplace(begin, end - begin);
  // Under the lock: once unlocked, allocate() may hand these pages out again.
  releasePages(begin, end, offset, offset + bytes);
  return FLAGOS_SUCCESS;
}

// Gives back the whole pages of the free block [block_begin, block_end) that
// the just-freed range [freed_begin, freed_end) touches. Pages wholly in the
// rest of the block were given back when that part was freed.
void Arena::releasePages(uint64_t block_begin, uint64_t block_end, uint64_t freed_begin,
                         uint64_t freed_end) {
  const uint64_t page = pageSize();
  const uint64_t lo = roundUp(std::max(block_begin, roundDown(freed_begin, page)), page);
  const uint64_t hi = roundDown(std::min(block_end, roundUp(freed_end, page)), page);
  if (hi > lo && hi - lo >= kReleaseThreshold) {
    madvise(base_ + lo, hi - lo, MADV_DONTNEED);  // best effort: a failure only costs RSS
  }
}

void Arena::info(uint64_t* free_bytes, uint64_t* total_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  *free_bytes = free_bytes_;
  *total_bytes = size_;
}

}  // namespace flagos_host
