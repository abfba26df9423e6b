// Internal to the runtime: the caching device allocator's data structures.
// allocator.cpp has the allocation mechanics, allocator_stats.cpp the
// statistics, the registration and the public functions of allocator.h.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/flat_hash_map.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "flagos/vendor.h"
#include "runtime/allocator.h"

namespace flagos::detail {

struct BlockPool;

// A range of one segment (one vendor malloc). Blocks of a segment form a
// doubly linked list; all share the segment's allocation stream.
struct Block {
  c10::DeviceIndex device;
  c10::StreamId stream;  // allocation stream: reuse is only on this stream
  size_t size;
  BlockPool* pool;
  char* ptr;
  size_t requested = 0;
  bool allocated = false;
  Block* prev = nullptr;
  Block* next = nullptr;
  std::vector<c10::Stream> uses;  // other streams that used it (recordStream)
  int pending_events = 0;         // freed, waiting for those streams
};

bool blockLess(const Block* a, const Block* b);

// Free blocks ordered by (stream, size, address): best fit on one stream.
struct BlockPool {
  using Set = std::set<Block*, bool (*)(const Block*, const Block*)>;
  using Node = Set::node_type;
  explicit BlockPool(bool is_small) : small(is_small), blocks(&blockLess) {}
  const bool small;
  Set blocks;
};

// A recorded event that a freed block waits for (Note [Cross-stream frees]).
struct PendingFree {
  flagosEvent_t event;
  c10::DeviceIndex event_device;  // the event's device (its stream's)
  Block* block;
};

struct DeviceCache {
  BlockPool small{true};
  BlockPool large{false};
  c10::CachingDeviceAllocator::DeviceStats stats;
  int64_t num_cache_flushes = 0;
  std::vector<PendingFree> pending;
  std::vector<flagosEvent_t> spare_events;  // recorded-and-completed, reusable
  std::vector<Block*> spare_blocks;         // Note [Recycled blocks]
};

class CachingAllocator final : public c10::DeviceAllocator {
 public:
  // allocator.cpp
  c10::DataPtr allocate(size_t n) override;
  void free(void* ptr) noexcept;  // the deleter
  static void rawDelete(void* ptr);
  c10::DeleterFnPtr raw_deleter() const override { return &rawDelete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override;
  void emptyCache(c10::MempoolId_t mempool_id) override;
  void recordStream(const c10::DataPtr& data_ptr, c10::Stream stream) override;

  // allocator_stats.cpp
  bool initialized() override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;
  MemoryStats stats(c10::DeviceIndex device);
  std::optional<c10::DeviceIndex> deviceOf(const void* ptr);

 private:
  // All below: caller holds mutex_.
  DeviceCache& cache(c10::DeviceIndex device);  // allocator_stats.cpp
  flagosEvent_t takeEvent(c10::DeviceIndex device);
  void processEvents(DeviceCache& dc, bool wait = false);
  void freeBlock(DeviceCache& dc, Block* block);
  Block* makeBlock(DeviceCache& dc, c10::DeviceIndex device, c10::StreamId stream, size_t size,
                   BlockPool* pool, char* ptr);
  void recycleBlock(DeviceCache& dc, Block* b);
  static void insertFree(BlockPool& pool, Block* block, BlockPool::Node node);
  Block* newSegment(DeviceCache& dc, c10::DeviceIndex device, BlockPool& pool, c10::StreamId stream,
                    size_t size);
  void releaseCached(DeviceCache& dc, c10::DeviceIndex device);

  std::mutex mutex_;
  std::vector<std::unique_ptr<DeviceCache>> caches_;
  // Open addressing: an allocation and a free per tiny op cost a node
  // malloc/free each in a std::unordered_map.
  ska::flat_hash_map<void*, Block*> live_;
  // segment base -> (bytes, logical device); for deviceOf.
  std::map<uintptr_t, std::pair<size_t, c10::DeviceIndex>> segments_;
};

// The one instance (leaked on purpose: tensors can be freed during static
// destruction).
CachingAllocator& cachingAllocator();

}  // namespace flagos::detail
