// Point-to-point for host-shm: one mailbox per ordered pair of ranks (a
// byte ring in the segment) and the progress loop that runs a batch of
// sends and receives (one call, or one group: Note [Groups], collectives.cpp).
//
// Note [Mailboxes]
// ~~~~~~~~~~~~~~~~
// The ring from rank s to rank d has a head (bytes ever written, stored only
// by s) and a tail (bytes ever consumed, stored only by d): single producer,
// single consumer, no locks. A message is a 16-byte header (count, dtype)
// followed by its payload padded to 16 bytes, so headers never wrap around
// the ring's end. Payloads stream through the ring in whatever pieces fit,
// so a message may be any size. After moving bytes a rank rings the peer's
// doorbell (RankControl::bell); a rank with nothing to do sleeps on its own.
// The receiver compares the header with its own count and dtype: on a
// mismatch it still consumes the whole message (the ring stays in step for
// the next one) and fails with INVALID_ARGUMENT naming both sides.
#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <string>
#include <vector>

#include "collectives.h"

namespace flagos_host::coll {
namespace {

constexpr uint32_t kMessageMagic = 0x4d534731u;  // "MSG1"
constexpr uint64_t kAlign = 16;

struct MessageHeader {
  uint64_t count;
  int32_t dtype;
  uint32_t magic;
};
static_assert(sizeof(MessageHeader) == kAlign, "headers are one alignment unit");

uint64_t padded(uint64_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

void ringWrite(char* ring, uint64_t size, uint64_t pos, const void* src, uint64_t len) {
  const uint64_t at = pos % size, first = std::min(len, size - at);
  std::memcpy(ring + at, src, first);
  std::memcpy(ring, static_cast<const char*>(src) + first, len - first);
}

void ringRead(const char* ring, uint64_t size, uint64_t pos, void* dst, uint64_t len) {
  const uint64_t at = pos % size, first = std::min(len, size - at);
  std::memcpy(dst, ring + at, first);
  std::memcpy(static_cast<char*>(dst) + first, ring, len - first);
}

// One operation of the batch and how far it got.
struct Transfer {
  const P2POp* op = nullptr;
  bool started = false;  // header written / read
  bool finished = false;
  uint64_t bytes = 0;    // payload bytes (the sender's, for a receive)
  uint64_t moved = 0;    // padded payload bytes moved so far
  bool discard = false;  // a receive whose sender disagreed
  std::string error;

  std::string describe() const {
    char text[128];
    std::snprintf(text, sizeof(text), "%s of %" PRIu64 " x %s %s rank %d",
                  op->is_send ? "send" : "recv", op->count, dtypeName(op->dtype),
                  op->is_send ? "to" : "from", op->peer);
    return text;
  }
};

class Batch {
 public:
  Batch(flagosComm_st& comm, const std::vector<P2POp>& ops) : c_(comm), seg_(*comm.segment) {
    for (const P2POp& op : ops) {
      transfers_.emplace_back();
      transfers_.back().op = &op;
    }
  }
  void run();

 private:
  bool step(Transfer& t);  // true if bytes moved
  bool sendStep(Transfer& t);
  bool recvStep(Transfer& t);
  // Earlier unfinished transfers in the same direction with the same peer
  // go first: they share the ring.
  bool blocked(size_t i) const;
  [[noreturn]] void timedOut() const;

  flagosComm_st& c_;
  shm::Segment& seg_;
  std::vector<Transfer> transfers_;
};

bool Batch::blocked(size_t i) const {
  for (size_t j = 0; j < i; ++j) {
    const Transfer& t = transfers_[j];
    if (!t.finished && t.op->is_send == transfers_[i].op->is_send &&
        t.op->peer == transfers_[i].op->peer) {
      return true;
    }
  }
  return false;
}

bool Batch::sendStep(Transfer& t) {
  const int32_t peer = t.op->peer;
  shm::RingControl& ring = seg_.ring(c_.rank, peer);
  char* data = seg_.ringData(c_.rank, peer);
  const uint64_t size = seg_.layout().ring_bytes;
  uint64_t& head = c_.sent[peer];
  uint64_t space = size - (head - ring.tail.load(std::memory_order_acquire));
  const uint64_t before = head;
  if (!t.started) {
    if (space < kAlign) return false;
    t.bytes = t.op->count * FLAGOS_DTYPE_SIZE(t.op->dtype);
    const MessageHeader header{t.op->count, t.op->dtype, kMessageMagic};
    ringWrite(data, size, head, &header, sizeof(header));
    head += kAlign;
    space -= kAlign;
    t.started = true;
  }
  const uint64_t k = std::min(space, padded(t.bytes) - t.moved);
  if (t.moved < t.bytes) {
    ringWrite(data, size, head, t.op->buffer + t.moved, std::min(k, t.bytes - t.moved));
  }
  head += k;
  t.moved += k;
  t.finished = t.moved == padded(t.bytes);
  if (head == before) return false;
  ring.head.store(head, std::memory_order_release);
  seg_.rank(peer).bell.ring();
  return true;
}

bool Batch::recvStep(Transfer& t) {
  const int32_t peer = t.op->peer;
  shm::RingControl& ring = seg_.ring(peer, c_.rank);
  const char* data = seg_.ringData(peer, c_.rank);
  const uint64_t size = seg_.layout().ring_bytes;
  uint64_t& tail = c_.received[peer];
  uint64_t avail = ring.head.load(std::memory_order_acquire) - tail;
  const uint64_t before = tail;
  if (!t.started) {
    if (avail < kAlign) return false;
    MessageHeader header;
    ringRead(data, size, tail, &header, sizeof(header));
    if (header.magic != kMessageMagic) {
      throw CommError(FLAGOS_ERROR_INTERNAL, "host-shm: recv on rank " + std::to_string(c_.rank) +
                                                 ": corrupt mailbox from rank " +
                                                 std::to_string(peer));
    }
    tail += kAlign;
    avail -= kAlign;
    t.started = true;
    t.bytes = header.count * FLAGOS_DTYPE_SIZE(header.dtype);
    if (header.count != t.op->count || header.dtype != t.op->dtype) {
      t.discard = true;
      char text[256];
      std::snprintf(text, sizeof(text),
                    "host-shm: recv on rank %d from rank %d: expected %" PRIu64
                    " x %s, but rank %d sent %" PRIu64 " x %s",
                    c_.rank, peer, t.op->count, dtypeName(t.op->dtype), peer, header.count,
                    dtypeName(header.dtype));
      t.error = text;
    }
  }
  const uint64_t k = std::min(avail, padded(t.bytes) - t.moved);
  if (!t.discard && t.moved < t.bytes) {
    ringRead(data, size, tail, t.op->buffer + t.moved, std::min(k, t.bytes - t.moved));
  }
  tail += k;
  t.moved += k;
  t.finished = t.moved == padded(t.bytes);
  if (tail == before) return false;
  ring.tail.store(tail, std::memory_order_release);
  seg_.rank(peer).bell.ring();
  return true;
}

bool Batch::step(Transfer& t) {
  return t.op->is_send ? sendStep(t) : recvStep(t);
}

void Batch::timedOut() const {
  std::vector<bool> waiting(c_.nranks, false);
  std::string pending;
  for (const Transfer& t : transfers_) {
    if (t.finished) continue;
    waiting[t.op->peer] = true;
    pending += (pending.empty() ? "" : "; ") + t.describe();
  }
  std::string peers;
  int n = 0;
  for (int32_t r = 0; r < c_.nranks; ++r) {
    if (waiting[r]) peers += (n++ ? ", " : "") + std::to_string(r);
  }
  c_.abort(kAbortTimeout, kindCode(CollectiveKind::kSendRecv));
  char text[160];
  std::snprintf(text, sizeof(text),
                "host-shm: send/recv on rank %d timed out after %lld ms: %s %s of %d did not "
                "arrive (pending: ",
                c_.rank, static_cast<long long>(c_.timeout_ms), n == 1 ? "rank" : "ranks",
                peers.c_str(), c_.nranks);
  throw CommError(FLAGOS_ERROR_TIMEOUT, text + pending + ")");
}

void Batch::run() {
  const auto timeout = std::chrono::milliseconds(c_.timeout_ms);
  shm::Counter& bell = seg_.rank(c_.rank).bell;
  auto deadline = shm::Clock::now() + timeout;
  for (;;) {
    const uint32_t seen = bell.load();
    bool progressed = false, all_done = true;
    for (size_t i = 0; i < transfers_.size(); ++i) {
      Transfer& t = transfers_[i];
      if (t.finished || blocked(i)) {
        all_done &= t.finished;
        continue;
      }
      progressed |= step(t);
      all_done &= t.finished;
    }
    if (all_done) break;
    if (progressed) {
      deadline = shm::Clock::now() + timeout;  // the timeout bounds a stall
      continue;
    }
    const shm::WaitResult result = shm::waitUntil(
        bell, [&] { return bell.load() != seen; }, &c_.abortWord(), deadline);
    if (result == shm::WaitResult::kAborted) throw c_.abortedError("send/recv");
    if (result == shm::WaitResult::kTimeout) timedOut();
  }
  for (const Transfer& t : transfers_) {
    if (!t.error.empty()) throw CommError(FLAGOS_ERROR_INVALID_ARGUMENT, t.error);
  }
}

}  // namespace

void runSendRecv(flagosComm_st& comm, uint64_t seq, const std::vector<P2POp>& ops) {
  (void)seq;  // ordering is the turn's job; mailboxes carry their own framing
  Batch(comm, ops).run();
}

}  // namespace flagos_host::coll
