// Pinned host memory: the vendor's hostAlloc when the plugin has one, else
// ordinary aligned memory (pin_memory() then only marks it). No caching:
// host allocations are cheap next to device ones, and a block used by a
// non_blocking copy is only released once that copy has run.
#include "runtime/host_allocator.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "runtime/backend.h"
#include "runtime/lifecycle.h"
#include "runtime/stream.h"

namespace flagos {
namespace {

void rawDelete(void* ptr);

// Note [Pinned blocks outlive their tensors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A non_blocking copy from (or into) pinned memory is only queued when the
// copy returns. record_event() records a vendor event on the copy's stream;
// when the tensor dies first, free() keeps the block (marked `freed`) until
// all its events have completed, polling them on later calls.
class PinnedAllocator final : public at::HostAllocator {
 public:
  at::DataPtr allocate(size_t n) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return {nullptr, nullptr, &rawDelete, cpu};
    std::lock_guard<std::mutex> lock(mutex_);
    releaseFinished(/*wait=*/false);
    void* ptr = nullptr;
    const bool vendor = isInitialized() && backend().tables.memory->hostAlloc != nullptr;
    if (vendor) {
      check(backend().tables.memory->hostAlloc(n, &ptr), "hostAlloc");
    } else {
      TORCH_CHECK_WITH(OutOfMemoryError, posix_memalign(&ptr, 64, n) == 0,
                       "flagos: out of pinned host memory: tried to allocate ", n, " bytes");
    }
    blocks_[reinterpret_cast<uintptr_t>(ptr)] = Block{n, vendor};
    stats_.allocations.increase(1);
    stats_.allocated_bytes.increase(n);
    stats_.active_requests.increase(1);
    stats_.active_bytes.increase(n);
    stats_.num_host_alloc++;
    return {ptr, ptr, &rawDelete, cpu};
  }

  void free(void* ptr) noexcept {
    if (ptr == nullptr) return;
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
      if (it == blocks_.end()) return;
      it->second.freed = true;
      stats_.active_requests.decrease(1);
      stats_.active_bytes.decrease(it->second.size);
      releaseFinished(/*wait=*/false);
    } catch (const std::exception& e) {
      fprintf(stderr, "flagos: error while freeing pinned memory: %s\n", e.what());
    }
  }

  bool record_event(void* /*ptr*/, void* ctx, c10::Stream stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(ctx));
    if (it == blocks_.end() || !isInitialized()) return false;
    const auto& st = *backend().tables.stream;
    auto& events = it->second.events;
    pruneCompleted(events);
    flagosEvent_t ev = nullptr;
    check(st.eventCreate(physicalDevice(stream.device_index()), FLAGOS_EVENT_DEFAULT, &ev),
          "eventCreate");
    flagosStatus_t s = st.eventRecord(ev, vendorStream(stream));
    if (s != FLAGOS_SUCCESS) st.eventDestroy(ev);
    check(s, "eventRecord");
    events.push_back(ev);
    return true;
  }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mutex_);
    releaseFinished(/*wait=*/true);
  }

  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto* s : {&stats_.allocations, &stats_.allocated_bytes, &stats_.active_requests,
                    &stats_.active_bytes})
      s->reset_accumulated();
    stats_.num_host_alloc = stats_.num_host_free = 0;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto* s : {&stats_.allocations, &stats_.allocated_bytes, &stats_.active_requests,
                    &stats_.active_bytes})
      s->reset_peak();
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &rawDelete; }

  bool contains(const void* ptr) {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) return false;
    --it;
    return !it->second.freed && p < it->first + it->second.size;
  }

 private:
  struct Block {
    size_t size = 0;
    bool vendor = false;
    bool freed = false;
    std::vector<flagosEvent_t> events;  // Note [Pinned blocks outlive their tensors]
  };

  // Caller holds mutex_. Drops completed events.
  void pruneCompleted(std::vector<flagosEvent_t>& events, bool wait = false) {
    const auto& st = *backend().tables.stream;
    size_t kept = 0;
    for (flagosEvent_t ev : events) {
      flagosStatus_t s = wait ? st.eventSynchronize(ev) : st.eventQuery(ev);
      if (s == FLAGOS_ERROR_NOT_READY) {
        events[kept++] = ev;
      } else {
        st.eventDestroy(ev);
      }
    }
    events.resize(kept);
  }

  // Caller holds mutex_. Releases freed blocks whose events completed.
  void releaseFinished(bool wait) {
    for (auto it = blocks_.begin(); it != blocks_.end();) {
      Block& b = it->second;
      if (b.freed && !b.events.empty()) pruneCompleted(b.events, wait);
      if (!b.freed || !b.events.empty()) {
        ++it;
        continue;
      }
      void* ptr = reinterpret_cast<void*>(it->first);
      if (b.vendor) {
        check(backend().tables.memory->hostFree(ptr), "hostFree");
      } else {
        std::free(ptr);
      }
      stats_.allocations.decrease(1);
      stats_.allocated_bytes.decrease(b.size);
      stats_.num_host_free++;
      it = blocks_.erase(it);
    }
  }

  std::mutex mutex_;
  std::map<uintptr_t, Block> blocks_;
  at::HostStats stats_;
};

// Leaked on purpose, like the device allocator.
PinnedAllocator* const g_pinned = new PinnedAllocator();
void rawDelete(void* ptr) {
  if (inForkedChild()) return;  // the parent's memory (Note [Forked children])
  g_pinned->free(ptr);
}

const bool g_registered = [] {
  at::setHostAllocator(c10::DeviceType::PrivateUse1, g_pinned);
  return true;
}();

}  // namespace

at::HostAllocator* pinnedAllocator() {
  return g_pinned;
}

bool isPinnedPtr(const void* ptr) {
  return ptr != nullptr && g_pinned->contains(ptr);
}

bool recordPinnedUse(const c10::DataPtr& data_ptr, c10::Stream stream) {
  if (data_ptr.get_deleter() != &rawDelete) return false;
  return g_pinned->record_event(data_ptr.get(), data_ptr.get_context(), stream);
}

}  // namespace flagos
