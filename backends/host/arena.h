// One host device's memory: a reserved address range and a first-fit
// allocator over it. See Note [Host arena] in arena.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "flagos/status.h"

namespace flagos_host {

class Arena {
 public:
  // Every block starts on this boundary and its size is a multiple of it.
  static constexpr uint64_t kAlignment = 256;

  // Reserves @p limit bytes (rounded down to kAlignment) for @p device.
  // Returns nullptr after recording the error when the range cannot be
  // reserved.
  static std::unique_ptr<Arena> create(int32_t device, uint64_t limit);
  ~Arena();

  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // FLAGOS_ERROR_OUT_OF_MEMORY (with free/total in the message) when no free
  // block is large enough.
  flagosStatus_t allocate(uint64_t bytes, void** ptr);
  // FLAGOS_ERROR_INVALID_ARGUMENT for an address allocate() did not return.
  flagosStatus_t release(void* ptr);
  void info(uint64_t* free_bytes, uint64_t* total_bytes);

  // Does [ptr, ptr + bytes) lie inside the reserved range? One past the end
  // counts as inside, as memory.h requires. Lock-free: the range is fixed.
  bool contains(const void* ptr, uint64_t bytes) const {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    const auto b = reinterpret_cast<uintptr_t>(base_);
    return p >= b && p - b <= size_ && bytes <= size_ - (p - b);
  }
  uint64_t size() const { return size_; }

 private:
  Arena(int32_t device, char* base, uint64_t size, uint64_t mapped);
  void releasePages(uint64_t block_begin, uint64_t block_end, uint64_t freed_begin,
                    uint64_t freed_end);

  const int32_t device_;
  char* const base_;
  const uint64_t size_;    // bytes handed out at most
  const uint64_t mapped_;  // bytes reserved (size_ rounded up to pages)

  std::mutex mu_;
  std::map<uint64_t, uint64_t> free_;            // offset -> size, sorted, never adjacent
  std::unordered_map<uint64_t, uint64_t> used_;  // offset -> size
  uint64_t free_bytes_;
};

}  // namespace flagos_host
