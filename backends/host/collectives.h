// Internal header of the host plugin's collectives ("host-shm"): a
// communicator of processes on one machine, one rank each, talking through
// a POSIX shared-memory segment (shm_segment.h).
//
// Files:
//   collectives.cpp         the table: ids, communicators, operation order
//   collectives_calls.cpp   the data-moving calls: argument checks, groups
//   collectives_algo.cpp    the collective algorithms, run on stream workers
//   collectives_p2p.cpp     send/recv mailboxes and the group progress loop
//   collectives_reduce.cpp  the element-wise reductions, per dtype and operator
//
// Note [Operation order]
// ~~~~~~~~~~~~~~~~~~~~~~
// Like NCCL, every rank must call the collectives of a communicator in the
// same order. Each call takes the next sequence number of its communicator
// (under the communicator's mutex, while it enqueues, so a stream never
// holds a later operation before an earlier one), and the task that runs it
// on the stream worker first waits for its turn: operations of one
// communicator run one at a time and in call order, whatever streams they
// were issued on. The worker-side state (phase counter, mailbox positions) is
// therefore touched by one thread at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "flagos_kit/collective_kind.h"
#include "host.h"
#include "shm_segment.h"

namespace flagos_host::coll {

constexpr uint32_t kCommMagic = 0x434f4d4du;  // "COMM"
constexpr int64_t kDefaultTimeoutMs = 300000;

// The kinds host-shm runs (flagos_kit/collective_kind.h: the core's comm
// plane names the same), as the int32 the shared segment and the abort word
// carry.
using flagos_kit::CollectiveKind;
constexpr int32_t kindCode(CollectiveKind kind) {
  return static_cast<int32_t>(kind);
}
const char* opName(int32_t kind);
const char* dtypeName(flagosDtype_t dtype);
const char* redOpName(flagosRedOp_t op);

// A failure of an operation running on a stream worker, with the status the
// stream reports for it.
using CommError = TaskError;

// Why a communicator was aborted, packed into SegmentHeader::abort_word:
// reason << 24 | kind << 16 | rank.
enum AbortReason : uint32_t { kAbortCalled = 1, kAbortTimeout = 2 };
inline uint32_t abortWord(AbortReason reason, int32_t kind, int32_t rank) {
  return static_cast<uint32_t>(reason) << 24 | static_cast<uint32_t>(kind & 0xff) << 16 |
         static_cast<uint32_t>(rank & 0xffff);
}

// One send or receive, as queued by send()/recv().
struct P2POp {
  bool is_send = false;
  int32_t peer = 0;
  char* buffer = nullptr;  // const for sends
  uint64_t count = 0;
  flagosDtype_t dtype = 0;
};

}  // namespace flagos_host::coll

struct flagosComm_st {
  using Segment = flagos_host::shm::Segment;

  uint32_t magic = flagos_host::coll::kCommMagic;
  int32_t rank = 0;
  int32_t nranks = 0;
  int32_t device = 0;
  int64_t timeout_ms = flagos_host::coll::kDefaultTimeoutMs;  // every wait on a peer
  std::unique_ptr<Segment> segment;

  // Note [Operation order]: call side, under mu.
  std::mutex mu;
  std::condition_variable cv;
  uint64_t next_seq = 0;  // sequence number of the next call
  uint64_t turn = 0;      // the sequence number allowed to run now
  uint64_t finished = 0;  // operations whose task has ended (commDestroy waits)
  bool running = false;   // the operation whose turn it is has started

  // Worker side: only the operation whose turn it is touches these.
  uint32_t phase = 0;              // this rank's collective phase counter
  std::vector<uint64_t> sent;      // bytes written into each peer's mailbox
  std::vector<uint64_t> received;  // bytes consumed from each peer's mailbox

  // The abort word in shared memory: every wait checks it.
  std::atomic<uint32_t>& abortWord() { return segment->header().abort_word; }
  bool aborted() { return abortWord().load(std::memory_order_acquire) != 0; }
  // Sets the abort word unless it is set already; wakes nobody (waiters poll).
  void abort(flagos_host::coll::AbortReason reason, int32_t kind);
  // The error an operation reports once the communicator is aborted.
  flagos_host::coll::CommError abortedError(const char* what);
};

namespace flagos_host::coll {

// Runs on the stream worker, in turn (collectives_algo.cpp). Each throws
// CommError on failure.
struct CollArgs {
  int32_t kind = 0;
  const char* send = nullptr;
  char* recv = nullptr;
  uint64_t count = 0;
  flagosDtype_t dtype = 0;
  flagosRedOp_t op = -1;
  int32_t root = -1;
};
void runCollective(flagosComm_st& comm, uint64_t seq, const CollArgs& args);

// Runs a batch of sends and receives with non-blocking progress, so that a
// ring of sends and receives in one group cannot deadlock
// (collectives_p2p.cpp). Throws CommError.
void runSendRecv(flagosComm_st& comm, uint64_t seq, const std::vector<P2POp>& ops);

// dst[i] = op(srcs[0][i], ..., srcs[nsrcs-1][i]) for i < n. dst may alias a
// source; dst need not be aligned (collectives_reduce.cpp). AVG divides the
// sum by nsrcs.
void reduceInto(char* dst, const char* const* srcs, int32_t nsrcs, uint64_t n, flagosDtype_t dtype,
                flagosRedOp_t op);
// Can reduceInto handle @p dtype?
bool reducible(flagosDtype_t dtype);

// The table entry.cpp hands out (collectives.cpp).
const flagosCollectiveTable* collectiveTable();
// Fills the data-moving members of @p t (collectives_calls.cpp).
void fillCalls(flagosCollectiveTable* t);

// Checks @p comm for @p call; records INVALID_ARGUMENT's message if bad.
bool validComm(const char* call, flagosComm_t comm);

// What a queued operation runs, on the stream worker, in its turn.
using OpBody = std::function<void(flagosComm_st& comm, uint64_t seq)>;
// Takes the communicator's next sequence number and enqueues @p body on
// @p stream (Note [Operation order]). The caller has checked the arguments.
flagosStatus_t submit(flagosComm_t comm, flagosStream_t stream, int32_t kind, OpBody body);

}  // namespace flagos_host::coll
