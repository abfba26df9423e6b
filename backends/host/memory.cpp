// The memory table: device allocations (served by each device's arena),
// synchronous and stream-ordered copies, fills, and pinned host memory.
//
// Device addresses are real host addresses inside an arena, so every copy is
// a memcpy; what makes the device "separate" is that the core must still go
// through these calls (and the arena's limit and bookkeeping).
#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "flagos_kit/calls.h"
#include "host.h"
#include "kernels/kernels.h"

namespace flagos_host {
namespace {

// Checks a copy's arguments: a known kind, non-NULL pointers, and the device
// side(s) inside an arena. Records the message and returns false on error.
bool checkCopy(const char* call, void* dst, const void* src, uint64_t bytes,
               flagosMemcpyKind_t kind) {
  if (kind != FLAGOS_MEMCPY_HOST_TO_DEVICE && kind != FLAGOS_MEMCPY_DEVICE_TO_HOST &&
      kind != FLAGOS_MEMCPY_DEVICE_TO_DEVICE) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host %s: unknown memcpy kind %d", call, kind);
    return false;
  }
  if (dst == nullptr || src == nullptr) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host %s: %s is NULL", call, dst ? "src" : "dst");
    return false;
  }
  const bool dst_on_device = kind != FLAGOS_MEMCPY_DEVICE_TO_HOST;
  const bool src_on_device = kind != FLAGOS_MEMCPY_HOST_TO_DEVICE;
  if ((dst_on_device && findArena(dst, bytes) == nullptr) ||
      (src_on_device && findArena(src, bytes) == nullptr)) {
    const void* bad = dst_on_device && findArena(dst, bytes) == nullptr ? dst : src;
    fail(FLAGOS_ERROR_INVALID_ARGUMENT,
         "host %s: [%p, +%" PRIu64 ") is not device memory of any host device", call, bad, bytes);
    return false;
  }
  return true;
}

// Copies of at least this many bytes are split over the kernel pool: one
// thread's memcpy reaches only part of this machine's copy bandwidth (a
// 16 MiB clone was far slower than native CPU's on two threads).
constexpr uint64_t kParallelCopyBytes = 1 << 20;
constexpr int64_t kCopyGrain = 256 << 10;

// Device-to-device copies may overlap (a tensor copied onto a view of
// itself); memmove costs nothing extra when they do not. Overlapping ranges
// are never split: the pieces would read what other pieces already wrote.
void copyBytes(void* dst, const void* src, uint64_t bytes, flagosMemcpyKind_t kind) {
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  if (bytes >= kParallelCopyBytes && (d + bytes <= s || s + bytes <= d)) {
    kernels::parallelFor(static_cast<int64_t>(bytes), kCopyGrain, [&](int64_t b, int64_t e) {
      std::memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b,
                  static_cast<size_t>(e - b));
    });
    return;
  }
  if (kind == FLAGOS_MEMCPY_DEVICE_TO_DEVICE) {
    std::memmove(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

// Writes the pattern once, then doubles the filled prefix with memcpy: a
// handful of large copies instead of count small ones.
void fillPattern(char* dst, const char* pattern, uint32_t pattern_size, uint64_t count) {
  if (pattern_size == 1) {
    std::memset(dst, pattern[0], count);
    return;
  }
  const uint64_t total = count * pattern_size;
  std::memcpy(dst, pattern, pattern_size);
  for (uint64_t filled = pattern_size; filled < total;) {
    const uint64_t n = filled < total - filled ? filled : total - filled;
    std::memcpy(dst + filled, dst, n);
    filled += n;
  }
}

// ------------------------------------------------------ pinned host memory

// Live hostAlloc blocks: size, and whether mlock succeeded (then hostFree
// must munlock). Never destroyed, like State.
struct PinnedBlocks {
  struct Block {
    uint64_t bytes;
    bool locked;
  };
  std::mutex mu;
  std::unordered_map<void*, Block> blocks;
};

PinnedBlocks& pinned() {
  static PinnedBlocks* blocks = new PinnedBlocks();
  return *blocks;
}

// memGetInfo's answer for @p device: its arena's.
void arenaInfo(Device* device, uint64_t* free_bytes, uint64_t* total_bytes) {
  device->arena->info(free_bytes, total_bytes);
}

// memFill after flagos_kit::checkFill: @p bytes (> 0) from @p dst on.
flagosStatus_t fillDevice(void* dst, const void* pattern, uint32_t pattern_size, uint64_t count,
                          uint64_t bytes, flagosStream_t stream) {
  if (findArena(dst, bytes) == nullptr) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                "host memFill: %" PRIu64 " x %u bytes at %p are not device memory", count,
                pattern_size, dst);
  }
  char value[8];  // copied now: the caller's pattern may be gone when the task runs
  std::memcpy(value, pattern, pattern_size);
  const int64_t cost = bytes > INT64_MAX ? INT64_MAX : static_cast<int64_t>(bytes);
  stream->enqueue(
      FLAGOS_TRACE_MEMSET, "Memset",
      [=] { fillPattern(static_cast<char*>(dst), value, pattern_size, count); },
      cost);  // Note [Inline execution]
  return FLAGOS_SUCCESS;
}

// malloc after flagos_kit::malloc's checks: @p bytes (> 0) on @p device.
flagosStatus_t allocate(Device* device, int32_t /*index*/, uint64_t bytes, void** ptr) {
  return device->arena->allocate(bytes, ptr);
}

// The memory table (memory.h), one static member per entry.
struct MemoryCalls {
  static constexpr auto malloc = flagos_kit::malloc<findDevice, allocate>;

  static flagosStatus_t free(int32_t device, void* ptr) noexcept {
    return guard("free", [&] {
      if (ptr == nullptr) return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host free: ptr is NULL");
      Device* d = findDevice("free", device);
      return d == nullptr ? FLAGOS_ERROR_INVALID_ARGUMENT : d->arena->release(ptr);
    });
  }

  // Synchronous: memory.h says the core has synchronized the producing stream
  // already, so this is not ordered after queued work.
  static flagosStatus_t memcpy(void* dst, const void* src, uint64_t bytes,
                               flagosMemcpyKind_t kind) noexcept {
    return guard("memcpy", [&] {
      if (bytes == 0) return FLAGOS_SUCCESS;
      if (!checkCopy("memcpy", dst, src, bytes, kind)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      copyBytes(dst, src, bytes, kind);
      return FLAGOS_SUCCESS;
    });
  }

  static flagosStatus_t memcpyAsync(void* dst, const void* src, uint64_t bytes,
                                    flagosMemcpyKind_t kind, flagosStream_t stream) noexcept {
    return guard("memcpyAsync", [&] {
      if (!validStream("memcpyAsync", stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      if (bytes == 0) return FLAGOS_SUCCESS;
      if (!checkCopy("memcpyAsync", dst, src, bytes, kind)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      const int64_t cost = bytes > INT64_MAX ? INT64_MAX : static_cast<int64_t>(bytes);
      stream->enqueue(
          FLAGOS_TRACE_MEMCPY, flagos_kit::trace::memcpyName(kind),
          [=] { copyBytes(dst, src, bytes, kind); }, cost);  // Note [Inline execution]
      return FLAGOS_SUCCESS;
    });
  }

  static constexpr auto memFill = flagos_kit::memFill<fillDevice>;

  static constexpr auto memGetInfo = flagos_kit::memGetInfo<findDevice, arenaInfo>;  // calls.h

  static flagosStatus_t hostAlloc(uint64_t bytes, void** ptr) noexcept {
    return guard("hostAlloc", [&] {
      if (ptr == nullptr) return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host hostAlloc: ptr is NULL");
      *ptr = nullptr;
      if (bytes == 0) return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host hostAlloc: bytes is 0");
      void* block = nullptr;
      if (posix_memalign(&block, static_cast<size_t>(sysconf(_SC_PAGESIZE)), bytes) != 0) {
        return fail(FLAGOS_ERROR_OUT_OF_MEMORY,
                    "host hostAlloc: out of host memory: requested %" PRIu64 " bytes", bytes);
      }
      // Best effort: RLIMIT_MEMLOCK is often small, and unlocked memory works
      // just the same here (the "device" is this CPU).
      const bool locked = mlock(block, bytes) == 0;
      std::lock_guard<std::mutex> lock(pinned().mu);
      pinned().blocks.emplace(block, PinnedBlocks::Block{bytes, locked});
      *ptr = block;
      return FLAGOS_SUCCESS;
    });
  }

  static flagosStatus_t hostFree(void* ptr) noexcept {
    return guard("hostFree", [&] {
      PinnedBlocks::Block block{};
      {
        std::lock_guard<std::mutex> lock(pinned().mu);
        auto it = pinned().blocks.find(ptr);
        if (it == pinned().blocks.end()) {
          return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                      "host hostFree: %p was not returned by hostAlloc (or was freed)", ptr);
        }
        block = it->second;
        pinned().blocks.erase(it);
      }
      if (block.locked) munlock(ptr, block.bytes);
      std::free(ptr);
      return FLAGOS_SUCCESS;
    });
  }
};

}  // namespace

const flagosMemoryTable* memoryTable() {
  return flagos_kit::memoryTable<MemoryCalls>();
}

}  // namespace flagos_host
