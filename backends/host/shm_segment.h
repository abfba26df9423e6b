// The shared-memory segment behind one host-shm communicator: its name
// (from the unique id), its layout, and how ranks join it. See
// Note [Segment lifecycle] in shm_segment.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "flagos/collectives.h"
#include "shm_sync.h"

namespace flagos_host::shm {

constexpr int32_t kMaxRanks = 64;

// Creates a fresh id: "flgshm1\0", 16 random bytes, the creator's pid.
// Returns false with @p error set when no randomness is available.
bool makeId(flagosUniqueId* id, std::string* error);
// The segment name an id stands for ("/flagos-shm-<pid>-<32 hex digits>"),
// or false when @p id was not made by makeId.
bool segmentName(const flagosUniqueId& id, std::string* name);

// What a rank is about to run, published before each collective so that
// ranks can check they agree (Note [Collective protocol], collectives_algo.cpp).
struct OpDesc {
  uint64_t seq = 0;    // the communicator's operation number
  uint64_t count = 0;  // the count argument of the call
  int32_t kind = 0;    // a CollectiveKind (collectives.h)
  int32_t dtype = 0;
  int32_t op = -1;  // reduction, or -1
  int32_t root = -1;
};

// Written by its rank, read by all.
struct alignas(64) RankControl {
  Counter phase;   // collective barrier phases this rank has passed
  Counter bell;    // rung by peers whenever a mailbox to/from this rank moved
  OpDesc desc[2];  // the current collective's descriptor, by seq parity
};

// One sender-to-receiver mailbox: a byte ring of Layout::ring_bytes.
struct alignas(64) RingControl {
  std::atomic<uint64_t> head{0};  // bytes the sender has written, ever
  char pad_[56];
  std::atomic<uint64_t> tail{0};  // bytes the receiver has consumed, ever
};

enum SegmentState : uint32_t { kCreating = 0, kReady = 1 };
constexpr uint64_t kJoinFailed = 1ull << 63;  // in SegmentHeader::join

struct SegmentHeader {
  std::atomic<uint32_t> state{kCreating};  // kCreating is zero: what ftruncate leaves
  uint32_t version = 0;
  uint64_t magic = 0;
  int32_t nranks = 0;
  int32_t creator_pid = 0;
  uint64_t chunk_bytes = 0;
  uint64_t ring_bytes = 0;
  uint64_t total_bytes = 0;
  std::atomic<uint64_t> join{0};  // ranks joined, | kJoinFailed once one gave up
  Counter join_bell;              // rung by every joiner
  // 0, or why the communicator was aborted: see abortWord() in collectives.h.
  std::atomic<uint32_t> abort_word{0};
  std::atomic<int32_t> pids[kMaxRanks];  // 0 until rank r joined
};

// Byte offsets inside the segment, a function of nranks only, so that every
// rank computes the same layout (the creator also records it in the header
// and joiners check it: plugins of different versions refuse to mix).
struct Layout {
  int32_t nranks = 0;
  uint64_t chunk_bytes = 0;  // one collective staging buffer (two per rank)
  uint64_t ring_bytes = 0;   // one mailbox's data
  uint64_t ranks_offset = 0;
  uint64_t coll_offset = 0;
  uint64_t rings_offset = 0;
  uint64_t ring_stride = 0;
  uint64_t total_bytes = 0;

  static Layout forRanks(int32_t nranks);
};

class Segment {
 public:
  // Opens or creates segment @p name and joins it as @p rank of @p nranks,
  // waiting up to @p timeout for every rank. Returns SUCCESS with *out set,
  // or TIMEOUT / INVALID_ARGUMENT / DEVICE after recording the message.
  static flagosStatus_t join(const std::string& name, int32_t nranks, int32_t rank,
                             std::chrono::milliseconds timeout, std::unique_ptr<Segment>* out);
  ~Segment();  // unmaps
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  const Layout& layout() const { return layout_; }
  SegmentHeader& header() { return *reinterpret_cast<SegmentHeader*>(base_); }
  RankControl& rank(int32_t r) {
    return reinterpret_cast<RankControl*>(base_ + layout_.ranks_offset)[r];
  }
  // Collective staging buffer @p b (0 or 1) of rank @p r.
  char* collBuffer(int32_t r, int b) {
    return base_ + layout_.coll_offset + (2 * static_cast<uint64_t>(r) + b) * layout_.chunk_bytes;
  }
  // The mailbox from rank @p src to rank @p dst: control, then data.
  RingControl& ring(int32_t src, int32_t dst) {
    return *reinterpret_cast<RingControl*>(ringBase(src, dst));
  }
  char* ringData(int32_t src, int32_t dst) { return ringBase(src, dst) + sizeof(RingControl); }

 private:
  Segment(char* base, const Layout& layout) : base_(base), layout_(layout) {}
  char* ringBase(int32_t src, int32_t dst) {
    return base_ + layout_.rings_offset +
           (static_cast<uint64_t>(src) * layout_.nranks + dst) * layout_.ring_stride;
  }

  char* base_;
  Layout layout_;
};

}  // namespace flagos_host::shm
