// The collective algorithms of host-shm, run on a stream worker in the
// communicator's turn (Note [Operation order], collectives.h).
//
// Note [Collective protocol]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each rank owns two staging buffers of Layout::chunk_bytes in the segment
// and a phase counter. "arrive" bumps this rank's counter; "wait for phase
// p" waits until every rank's counter reached p. All ranks run the same
// sequence of arrivals for the same operation, so phase numbers line up.
//
//  * Header: each rank writes an OpDesc (kind, count, dtype, operator,
//    root) into desc[seq & 1], arrives, waits for everyone, and compares
//    all descriptors. Every rank reads the same descriptors, so on a
//    mismatch all of them fail with INVALID_ARGUMENT and the communicator
//    stays usable (each made exactly one arrival). The header also orders
//    this operation after every rank finished reading the previous one's
//    buffers.
//  * Data: tensors move in steps of one chunk per rank, alternating the two
//    buffers. allReduce step: copy my chunk in, arrive (W), wait W; reduce my
//    1/N slice across all N buffers into my own buffer (no one else reads
//    that slice), arrive (R), wait R; copy every rank's reduced slice out,
//    arrive (D). Rewriting buffer b at step s+2 needs every rank to be done
//    with step s, which waiting for R (or W) of step s+1 already implies:
//    double buffering makes the consumed barrier free.
//  * Timeouts: every wait has the communicator's timeout. On expiry the rank
//    names the ranks whose counters are behind, sets the shared abort word
//    (so the others fail at once instead of each waiting out its timeout)
//    and fails with TIMEOUT. Every wait also checks the abort word.
#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <string>
#include <vector>

#include "collectives.h"

namespace flagos_host::coll {
namespace {

class Run {
 public:
  Run(flagosComm_st& comm, uint64_t seq, const CollArgs& args)
      : c_(comm), seg_(*comm.segment), args_(args), seq_(seq) {}

  // Note [Collective protocol], the header: throws INVALID_ARGUMENT when the
  // ranks called different operations.
  void header();
  void arrive() {
    ++c_.phase;
    seg_.rank(c_.rank).phase.publish(c_.phase);
  }
  // Waits until rank @p only (or every rank, if -1) passed phase @p p.
  void wait(uint32_t p, int32_t only = -1);

  flagosComm_st& c_;
  shm::Segment& seg_;
  const CollArgs& args_;
  const uint64_t seq_;

 private:
  std::string describe(const shm::OpDesc& d) const;
};

std::string Run::describe(const shm::OpDesc& d) const {
  char text[160];
  int n = std::snprintf(text, sizeof(text), "%s #%" PRIu64 " of %" PRIu64 " x %s", opName(d.kind),
                        d.seq, d.count, dtypeName(d.dtype));
  if (d.op >= 0) n += std::snprintf(text + n, sizeof(text) - n, " (%s)", redOpName(d.op));
  if (d.root >= 0) std::snprintf(text + n, sizeof(text) - n, " root %d", d.root);
  return text;
}

void Run::header() {
  shm::OpDesc mine;
  mine.seq = seq_;
  mine.count = args_.count;
  mine.kind = args_.kind;
  mine.dtype = args_.dtype;
  mine.op = args_.op;
  mine.root = args_.root;
  seg_.rank(c_.rank).desc[seq_ & 1] = mine;
  arrive();
  wait(c_.phase);
  std::string list;
  bool differ = false;
  for (int32_t r = 0; r < c_.nranks; ++r) {
    const shm::OpDesc& d = seg_.rank(r).desc[seq_ & 1];
    differ |= d.seq != mine.seq || d.count != mine.count || d.kind != mine.kind ||
              d.dtype != mine.dtype || d.op != mine.op || d.root != mine.root;
    if (r < 16) list += (r ? "; rank " : "rank ") + std::to_string(r) + ": " + describe(d);
  }
  if (!differ) return;
  if (c_.nranks > 16) list += "; ...";
  throw CommError(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "host-shm: " + std::string(opName(args_.kind)) + " on rank " +
                      std::to_string(c_.rank) + ": the ranks called different operations: " + list);
}

void Run::wait(uint32_t p, int32_t only) {
  const auto timeout = std::chrono::milliseconds(c_.timeout_ms);
  const auto deadline = shm::Clock::now() + timeout;
  auto& abort = c_.abortWord();
  for (int32_t r = only < 0 ? 0 : only; r < (only < 0 ? c_.nranks : only + 1); ++r) {
    if (r == c_.rank) continue;
    shm::Counter& counter = seg_.rank(r).phase;
    const shm::WaitResult result = shm::waitUntil(
        counter, [&] { return shm::reached(counter.load(), p); }, &abort, deadline);
    if (result == shm::WaitResult::kReady) continue;
    if (result == shm::WaitResult::kAborted) throw c_.abortedError(opName(args_.kind));
    std::string behind;
    int n = 0;
    for (int32_t q = 0; q < c_.nranks; ++q) {
      if ((only < 0 || q == only) && !shm::reached(seg_.rank(q).phase.load(), p)) {
        behind += (n++ ? ", " : "") + std::to_string(q);
      }
    }
    c_.abort(kAbortTimeout, args_.kind);
    char text[256];
    std::snprintf(text, sizeof(text),
                  "host-shm: %s #%" PRIu64 " (%" PRIu64
                  " x %s) on rank %d timed out after %lld "
                  "ms: %s %s of %d did not arrive",
                  opName(args_.kind), seq_, args_.count, dtypeName(args_.dtype), c_.rank,
                  static_cast<long long>(c_.timeout_ms), n == 1 ? "rank" : "ranks", behind.c_str(),
                  c_.nranks);
    throw CommError(FLAGOS_ERROR_TIMEOUT, text);
  }
}

// [begin, end) of slice @p j when @p n elements are split into @p parts.
uint64_t sliceBegin(uint64_t n, int32_t j, int32_t parts) {
  return n * static_cast<uint64_t>(j) / static_cast<uint64_t>(parts);
}

// allReduce, and reduce (only the root copies the result out).
void reduceAll(Run& run) {
  const CollArgs& a = run.args_;
  const int32_t N = run.c_.nranks, me = run.c_.rank;
  const uint64_t size = FLAGOS_DTYPE_SIZE(a.dtype);
  const uint64_t per_step = run.seg_.layout().chunk_bytes / size;
  const bool copy_out = a.kind == kindCode(CollectiveKind::kAllReduce) || me == a.root;
  std::vector<const char*> srcs(N);
  for (uint64_t off = 0, s = 0; off < a.count; off += per_step, ++s) {
    const int b = static_cast<int>(s & 1);
    const uint64_t n = std::min(per_step, a.count - off);
    std::memcpy(run.seg_.collBuffer(me, b), a.send + off * size, n * size);
    run.arrive();
    run.wait(run.c_.phase);
    const uint64_t lo = sliceBegin(n, me, N), hi = sliceBegin(n, me + 1, N);
    for (int32_t r = 0; r < N; ++r) srcs[r] = run.seg_.collBuffer(r, b) + lo * size;
    reduceInto(run.seg_.collBuffer(me, b) + lo * size, srcs.data(), N, hi - lo, a.dtype, a.op);
    run.arrive();
    run.wait(run.c_.phase);
    if (copy_out) {
      for (int32_t r = 0; r < N; ++r) {
        const uint64_t rlo = sliceBegin(n, r, N), rhi = sliceBegin(n, r + 1, N);
        std::memcpy(a.recv + (off + rlo) * size, run.seg_.collBuffer(r, b) + rlo * size,
                    (rhi - rlo) * size);
      }
    }
    run.arrive();
  }
}

void broadcastAll(Run& run) {
  const CollArgs& a = run.args_;
  const int32_t me = run.c_.rank;
  const uint64_t size = FLAGOS_DTYPE_SIZE(a.dtype);
  const uint64_t per_step = run.seg_.layout().chunk_bytes / size;
  const uint32_t base = run.c_.phase;  // step s: W = base + 2s + 1, D = base + 2s + 2
  if (me == a.root && a.send != a.recv && a.count > 0) {
    std::memmove(a.recv, a.send, a.count * size);
  }
  for (uint64_t off = 0, s = 0; off < a.count; off += per_step, ++s) {
    const int b = static_cast<int>(s & 1);
    const uint64_t n = std::min(per_step, a.count - off);
    char* buffer = run.seg_.collBuffer(a.root, b);
    if (me == a.root) {
      if (s >= 2) run.wait(base + 2 * static_cast<uint32_t>(s - 2) + 2);  // buffer b read by all
      std::memcpy(buffer, a.send + off * size, n * size);
      run.arrive();
    } else {
      run.arrive();
      run.wait(run.c_.phase, a.root);
      std::memcpy(a.recv + off * size, buffer, n * size);
    }
    run.arrive();
  }
}

void allGatherAll(Run& run) {
  const CollArgs& a = run.args_;
  const int32_t N = run.c_.nranks, me = run.c_.rank;
  const uint64_t size = FLAGOS_DTYPE_SIZE(a.dtype);
  const uint64_t per_step = run.seg_.layout().chunk_bytes / size;
  for (uint64_t off = 0, s = 0; off < a.count; off += per_step, ++s) {
    const int b = static_cast<int>(s & 1);
    const uint64_t n = std::min(per_step, a.count - off);
    std::memcpy(run.seg_.collBuffer(me, b), a.send + off * size, n * size);
    run.arrive();
    run.wait(run.c_.phase);
    for (int32_t r = 0; r < N; ++r) {
      std::memcpy(a.recv + (r * a.count + off) * size, run.seg_.collBuffer(r, b), n * size);
    }
    run.arrive();
  }
}

// reduceScatter and allToAll: my buffer holds one piece per destination
// rank; rank r takes piece r of every buffer and reduces (or places) them.
void scatterAll(Run& run) {
  const CollArgs& a = run.args_;
  const int32_t N = run.c_.nranks, me = run.c_.rank;
  const uint64_t size = FLAGOS_DTYPE_SIZE(a.dtype);
  const uint64_t piece = run.seg_.layout().chunk_bytes / size / N;  // elements
  std::vector<const char*> srcs(N);
  for (uint64_t off = 0, s = 0; off < a.count; off += piece, ++s) {
    const int b = static_cast<int>(s & 1);
    const uint64_t n = std::min(piece, a.count - off);
    char* mine = run.seg_.collBuffer(me, b);
    for (int32_t j = 0; j < N; ++j) {
      std::memcpy(mine + j * piece * size, a.send + (j * a.count + off) * size, n * size);
    }
    run.arrive();
    run.wait(run.c_.phase);
    for (int32_t r = 0; r < N; ++r) srcs[r] = run.seg_.collBuffer(r, b) + me * piece * size;
    if (a.kind == kindCode(CollectiveKind::kReduceScatter)) {
      reduceInto(a.recv + off * size, srcs.data(), N, n, a.dtype, a.op);
    } else {
      for (int32_t r = 0; r < N; ++r) {
        std::memcpy(a.recv + (r * a.count + off) * size, srcs[r], n * size);
      }
    }
    run.arrive();
  }
}

}  // namespace

void runCollective(flagosComm_st& comm, uint64_t seq, const CollArgs& args) {
  Run run(comm, seq, args);
  run.header();
  switch (args.kind) {
    case kindCode(CollectiveKind::kAllReduce):
    case kindCode(CollectiveKind::kReduce):
      reduceAll(run);
      break;
    case kindCode(CollectiveKind::kBroadcast):
      broadcastAll(run);
      break;
    case kindCode(CollectiveKind::kAllGather):
      allGatherAll(run);
      break;
    case kindCode(CollectiveKind::kReduceScatter):
    case kindCode(CollectiveKind::kAllToAll):
      scatterAll(run);
      break;
    default:
      throw CommError(FLAGOS_ERROR_INTERNAL, "host-shm: unknown collective kind");
  }
}

}  // namespace flagos_host::coll
