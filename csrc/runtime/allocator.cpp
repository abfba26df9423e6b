// The caching device allocator: per-device block pools over vendor malloc,
// stream-aware reuse, OOM recovery. Modelled on CUDA's caching allocator,
// minus expandable segments and graph pools. Data structures in
// caching_allocator.h; statistics and registration in allocator_stats.cpp.
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <tuple>

#include "runtime/backend.h"
#include "runtime/caching_allocator.h"
#include "runtime/lifecycle.h"
#include "runtime/plugin_loader.h"
#include "runtime/stream.h"

namespace flagos::detail {
namespace {

using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingAllocator::StatTypes;

// Sizes as in CUDA's allocator: small requests share 2 MiB segments, large
// ones get 20 MiB segments (or their size rounded to 2 MiB).
constexpr size_t kMinBlockSize = 512;
constexpr size_t kSmallSize = 1 << 20;
constexpr size_t kSmallBuffer = 2 << 20;
constexpr size_t kMinLargeAlloc = 10 << 20;
constexpr size_t kLargeBuffer = 20 << 20;
constexpr size_t kRoundLarge = 2 << 20;
constexpr size_t kAll = static_cast<size_t>(StatType::AGGREGATE);

size_t roundSize(size_t n) {
  return n < kMinBlockSize ? kMinBlockSize
                           : (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t segmentSize(size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

std::string formatBytes(int64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes < (1 << 20)) {
    snprintf(buf, sizeof(buf), "%.2f KiB", b / 1024.0);
  } else if (bytes < (int64_t{1} << 30)) {
    snprintf(buf, sizeof(buf), "%.2f MiB", b / 1048576.0);
  } else {
    snprintf(buf, sizeof(buf), "%.2f GiB", b / 1073741824.0);
  }
  return buf;
}

StatTypes statTypes(const BlockPool& pool) {
  StatTypes t{};
  t[kAll] = true;
  t[static_cast<size_t>(pool.small ? StatType::SMALL_POOL : StatType::LARGE_POOL)] = true;
  return t;
}

inline void update(StatArray& stat, const StatTypes& types, int64_t delta) {
  for (size_t i = 0; i < types.size(); ++i) {
    if (!types[i]) continue;
    if (delta >= 0) {
      stat[i].increase(delta);
    } else {
      stat[i].decrease(-delta);
    }
  }
}

}  // namespace

bool blockLess(const Block* a, const Block* b) {
  return std::tie(a->stream, a->size, a->ptr) < std::tie(b->stream, b->size, b->ptr);
}

c10::DataPtr CachingAllocator::allocate(size_t n) {
  const c10::DeviceIndex device = currentDevice();
  const c10::Device dev(c10::DeviceType::PrivateUse1, device);
  if (n == 0) return {nullptr, nullptr, &rawDelete, dev};
  physicalDevice(device);  // checks initialization and the index
  const c10::StreamId stream = currentStream(device).id();
  const size_t size = roundSize(n);
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceCache& dc = cache(device);
  processEvents(dc);
  BlockPool& pool = size <= kSmallSize ? dc.small : dc.large;
  Block key{device, stream, size, &pool, nullptr};
  auto it = pool.blocks.lower_bound(&key);
  Block* block = nullptr;
  BlockPool::Node node;  // Note [Recycled blocks]: the set's node, for the tail
  if (it != pool.blocks.end() && (*it)->stream == stream) {
    block = *it;
    node = pool.blocks.extract(it);
  } else {
    block = newSegment(dc, device, pool, stream, size);
  }
  const size_t rest = block->size - size;
  if (pool.small ? rest >= kMinBlockSize : rest > kSmallSize) {
    Block* tail = makeBlock(dc, device, stream, rest, &pool, block->ptr + size);
    tail->prev = block;
    tail->next = block->next;
    if (block->next) block->next->prev = tail;
    block->next = tail;
    block->size = size;
    insertFree(pool, tail, std::move(node));
  }
  block->allocated = true;
  block->requested = n;
  live_[block->ptr] = block;
  const StatTypes types = statTypes(pool);
  update(dc.stats.allocation, types, 1);
  update(dc.stats.allocated_bytes, types, block->size);
  update(dc.stats.active, types, 1);
  update(dc.stats.active_bytes, types, block->size);
  update(dc.stats.requested_bytes, types, n);
  return {block->ptr, block->ptr, &rawDelete, dev};
}

void CachingAllocator::rawDelete(void* ptr) {
  if (inForkedChild()) return;  // the parent's memory (Note [Forked children])
  cachingAllocator().free(ptr);
}

// Note [Cross-stream frees]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A block is reused only by allocations on its allocation stream, so work
// queued there before the free is ordered before any reuse. If the block
// was also used on other streams (recordStream), the free records an event
// on each of them and the block returns to its pool only once every event
// has completed. The allocator polls those events (eventQuery) on each
// allocation and never blocks on them, except in emptyCache / OOM recovery
// where the memory is about to be handed back to the vendor.
void CachingAllocator::free(void* ptr) noexcept {
  if (ptr == nullptr) return;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) {
      fprintf(stderr, "flagos: freeing a pointer the allocator does not know: %p\n", ptr);
      return;
    }
    Block* block = it->second;
    live_.erase(it);
    DeviceCache& dc = *caches_[block->device];
    block->allocated = false;
    const StatTypes types = statTypes(*block->pool);
    update(dc.stats.allocation, types, -1);
    update(dc.stats.allocated_bytes, types, -static_cast<int64_t>(block->size));
    update(dc.stats.requested_bytes, types, -static_cast<int64_t>(block->requested));
    if (block->uses.empty()) {
      freeBlock(dc, block);
      return;
    }
    const auto& st = *backend().tables.stream;
    std::vector<c10::Stream> uses = std::move(block->uses);
    block->uses.clear();
    for (const auto& s : uses) {
      flagosEvent_t ev = takeEvent(s.device_index());
      check(st.eventRecord(ev, vendorStream(s)), "eventRecord");
      dc.pending.push_back({ev, s.device_index(), block});
      block->pending_events++;
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "flagos: error while freeing device memory (block leaked): %s\n", e.what());
  }
}

void CachingAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  check(backend().tables.memory->memcpyAsync(dest, src, count, FLAGOS_MEMCPY_DEVICE_TO_DEVICE,
                                             currentVendorStream(currentDevice())),
        "memcpyAsync");
}

void CachingAllocator::emptyCache(c10::MempoolId_t /*mempool_id*/) {
  if (!isInitialized()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t d = 0; d < caches_.size(); ++d) {
    if (!caches_[d]) continue;
    caches_[d]->num_cache_flushes++;
    releaseCached(*caches_[d], static_cast<c10::DeviceIndex>(d));
  }
}

void CachingAllocator::recordStream(const c10::DataPtr& data_ptr, c10::Stream stream) {
  if (data_ptr.get() == nullptr || data_ptr.get_deleter() != &rawDelete) return;
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "flagos: recordStream needs a flagos stream, got one on ", stream.device());
  vendorStream(stream);  // validates the stream
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(data_ptr.get());
  TORCH_CHECK(it != live_.end(), "flagos: recordStream: no allocated block for this pointer");
  Block* block = it->second;
  if (stream.id() == block->stream && stream.device_index() == block->device) return;
  if (std::find(block->uses.begin(), block->uses.end(), stream) == block->uses.end())
    block->uses.push_back(stream);
}

// Events are created on the recording stream's device and reused.
flagosEvent_t CachingAllocator::takeEvent(c10::DeviceIndex device) {
  DeviceCache& dc = cache(device);
  if (!dc.spare_events.empty()) {
    flagosEvent_t ev = dc.spare_events.back();
    dc.spare_events.pop_back();
    return ev;
  }
  flagosEvent_t ev = nullptr;
  check(backend().tables.stream->eventCreate(physicalDevice(device), FLAGOS_EVENT_DEFAULT, &ev),
        "eventCreate");
  return ev;
}

// Return finished cross-stream frees to their pools; `wait` blocks on them.
void CachingAllocator::processEvents(DeviceCache& dc, bool wait) {
  if (dc.pending.empty()) return;
  const auto& st = *backend().tables.stream;
  size_t kept = 0;
  for (size_t i = 0; i < dc.pending.size(); ++i) {
    const PendingFree p = dc.pending[i];
    flagosStatus_t s = wait ? st.eventSynchronize(p.event) : st.eventQuery(p.event);
    if (s == FLAGOS_ERROR_NOT_READY) {
      dc.pending[kept++] = p;
      continue;
    }
    check(s, wait ? "eventSynchronize" : "eventQuery");
    caches_[p.event_device]->spare_events.push_back(p.event);
    if (--p.block->pending_events == 0) freeBlock(dc, p.block);
  }
  dc.pending.resize(kept);
}

// Back to the pool, merged with free neighbours.
void CachingAllocator::freeBlock(DeviceCache& dc, Block* block) {
  BlockPool& pool = *block->pool;
  const StatTypes types = statTypes(pool);
  update(dc.stats.active, types, -1);
  update(dc.stats.active_bytes, types, -static_cast<int64_t>(block->size));
  auto isFree = [](Block* b) { return b && !b->allocated && b->pending_events == 0; };
  BlockPool::Node node;  // Note [Recycled blocks]
  if (isFree(block->prev)) {
    Block* prev = block->prev;
    node = pool.blocks.extract(prev);
    block->ptr = prev->ptr;
    block->size += prev->size;
    block->prev = prev->prev;
    if (block->prev) block->prev->next = block;
    recycleBlock(dc, prev);
  }
  if (isFree(block->next)) {
    Block* next = block->next;
    BlockPool::Node other = pool.blocks.extract(next);
    if (!node) node = std::move(other);
    block->size += next->size;
    block->next = next->next;
    if (block->next) block->next->prev = block;
    recycleBlock(dc, next);
  }
  block->requested = 0;
  insertFree(pool, block, std::move(node));
}

// Note [Recycled blocks]
// ~~~~~~~~~~~~~~~~~~~~~~
// A tiny op allocates and frees one small block: the allocation splits it
// off a free block and the free merges it back, which cost three heap
// allocations and three frees a call (the Block of the tail, and a
// std::set node on each insert). The set's nodes are moved between its
// entries (extract / insert of the node handle) and Block structs are kept
// on a short free list per device, so the steady state allocates nothing.
Block* CachingAllocator::makeBlock(DeviceCache& dc, c10::DeviceIndex device, c10::StreamId stream,
                                   size_t size, BlockPool* pool, char* ptr) {
  if (dc.spare_blocks.empty()) return new Block{device, stream, size, pool, ptr};
  Block* b = dc.spare_blocks.back();
  dc.spare_blocks.pop_back();
  *b = Block{device, stream, size, pool, ptr};
  return b;
}

void CachingAllocator::recycleBlock(DeviceCache& dc, Block* b) {
  if (dc.spare_blocks.size() < 64) {
    dc.spare_blocks.push_back(b);
  } else {
    delete b;
  }
}

void CachingAllocator::insertFree(BlockPool& pool, Block* block, BlockPool::Node node) {
  if (node) {
    node.value() = block;
    pool.blocks.insert(std::move(node));
  } else {
    pool.blocks.insert(block);
  }
}

Block* CachingAllocator::newSegment(DeviceCache& dc, c10::DeviceIndex device, BlockPool& pool,
                                    c10::StreamId stream, size_t size) {
  const auto& memory = *backend().tables.memory;
  const int32_t physical = physicalDevice(device);
  size_t bytes = segmentSize(size);
  void* ptr = nullptr;
  flagosStatus_t st = memory.malloc(physical, bytes, &ptr);
  if (st == FLAGOS_ERROR_OUT_OF_MEMORY) {
    // Free every cached segment of this device and try once more.
    dc.stats.num_alloc_retries++;
    dc.num_cache_flushes++;
    releaseCached(dc, device);
    st = memory.malloc(physical, bytes, &ptr);
    if (st == FLAGOS_ERROR_OUT_OF_MEMORY && bytes > size) {
      // Near the limit, a segment of just the request may still fit.
      bytes = size;
      st = memory.malloc(physical, bytes, &ptr);
    }
  }
  if (st == FLAGOS_ERROR_OUT_OF_MEMORY) {
    dc.stats.num_ooms++;
    std::ostringstream msg;
    msg << "flagos: out of memory on device " << static_cast<int>(device) << " (" << backend().name
        << "): tried to allocate " << formatBytes(size) << "; allocated "
        << formatBytes(dc.stats.allocated_bytes[kAll].current) << ", reserved "
        << formatBytes(dc.stats.reserved_bytes[kAll].current);
    uint64_t free_bytes = 0, total = 0;
    if (memory.memGetInfo(physical, &free_bytes, &total) == FLAGOS_SUCCESS)
      msg << ", free " << formatBytes(free_bytes) << " of " << formatBytes(total) << " total";
    const std::string vendor = lastError(backend().tables);
    if (!vendor.empty()) msg << " (" << backend().name << ": " << vendor << ")";
    TORCH_CHECK_WITH(OutOfMemoryError, false, msg.str());
  }
  check(st, "malloc");
  segments_[reinterpret_cast<uintptr_t>(ptr)] = {bytes, device};
  const StatTypes types = statTypes(pool);
  update(dc.stats.segment, types, 1);
  update(dc.stats.reserved_bytes, types, bytes);
  dc.stats.num_device_alloc++;
  return makeBlock(dc, device, stream, bytes, &pool, static_cast<char*>(ptr));
}

// Hand every whole free segment of the device back to the vendor.
//
// Note [Freeing device memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The vendor's free() requires that every stream has passed the block,
// so pending events are waited for and the device is synchronized first
// (as cudaFree does implicitly).
void CachingAllocator::releaseCached(DeviceCache& dc, c10::DeviceIndex device) {
  processEvents(dc, /*wait=*/true);
  std::vector<Block*> whole;
  for (BlockPool* pool : {&dc.small, &dc.large}) {
    for (Block* b : pool->blocks)
      if (!b->prev && !b->next) whole.push_back(b);
  }
  if (whole.empty()) return;
  const auto& tables = backend().tables;
  const int32_t physical = physicalDevice(device);
  check(tables.device->synchronize(physical), "synchronize");
  for (Block* b : whole) {
    b->pool->blocks.erase(b);
    check(tables.memory->free(physical, b->ptr), "free");
    segments_.erase(reinterpret_cast<uintptr_t>(b->ptr));
    const StatTypes types = statTypes(*b->pool);
    update(dc.stats.segment, types, -1);
    update(dc.stats.reserved_bytes, types, -static_cast<int64_t>(b->size));
    dc.stats.num_device_free++;
    recycleBlock(dc, b);
  }
}

}  // namespace flagos::detail
