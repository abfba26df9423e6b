// The collectives table of the host plugin ("host-shm"): unique ids,
// communicators over a shared-memory segment, operation order and the table
// itself. The calls that move data check their arguments and enqueue in
// collectives_calls.cpp; the algorithms are in collectives_algo.cpp and
// collectives_p2p.cpp.
#include "collectives.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "flagos_kit/env.h"

namespace flagos_host::coll {

const char* opName(int32_t kind) {
  return flagos_kit::collectiveName(static_cast<CollectiveKind>(kind));
}

const char* dtypeName(flagosDtype_t dtype) {
  static const struct {
    flagosDtype_t dtype;
    const char* name;
  } kNames[] = {{FLAGOS_DTYPE_BOOL, "bool"},           {FLAGOS_DTYPE_UINT8, "uint8"},
                {FLAGOS_DTYPE_INT8, "int8"},           {FLAGOS_DTYPE_INT16, "int16"},
                {FLAGOS_DTYPE_INT32, "int32"},         {FLAGOS_DTYPE_INT64, "int64"},
                {FLAGOS_DTYPE_FLOAT16, "float16"},     {FLAGOS_DTYPE_BFLOAT16, "bfloat16"},
                {FLAGOS_DTYPE_FLOAT32, "float32"},     {FLAGOS_DTYPE_FLOAT64, "float64"},
                {FLAGOS_DTYPE_COMPLEX64, "complex64"}, {FLAGOS_DTYPE_COMPLEX128, "complex128"}};
  for (const auto& entry : kNames) {
    if (entry.dtype == dtype) return entry.name;
  }
  return "(unknown dtype)";
}

const char* redOpName(flagosRedOp_t op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg"};
  return op >= FLAGOS_RED_SUM && op <= FLAGOS_RED_AVG ? kNames[op] : "-";
}

}  // namespace flagos_host::coll

using flagos_host::fail;
using flagos_host::guard;
using namespace flagos_host::coll;

void flagosComm_st::abort(AbortReason reason, int32_t kind) {
  uint32_t expected = 0;
  abortWord().compare_exchange_strong(expected, flagos_host::coll::abortWord(reason, kind, rank));
}

CommError flagosComm_st::abortedError(const char* what) {
  const uint32_t word = abortWord().load(std::memory_order_acquire);
  const auto reason = static_cast<AbortReason>(word >> 24);
  const int32_t by = static_cast<int32_t>(word & 0xffff);
  char message[256];
  if (reason == kAbortTimeout) {
    std::snprintf(message, sizeof(message),
                  "host-shm: %s on rank %d failed: the communicator was aborted because rank %d "
                  "timed out in %s",
                  what, rank, by, opName(static_cast<int32_t>(word >> 16 & 0xff)));
    return CommError(FLAGOS_ERROR_TIMEOUT, message);
  }
  std::snprintf(message, sizeof(message),
                "host-shm: %s on rank %d failed: the communicator was aborted (commAbort on rank "
                "%d)",
                what, rank, by);
  return CommError(FLAGOS_ERROR_DEVICE, message);
}

namespace flagos_host::coll {
namespace {

// The timeout of a communicator whose caller passed none (timeout_ms <= 0).
bool defaultTimeout(int64_t* ms, std::string* error) {
  *ms = kDefaultTimeoutMs;
  const auto text = flagos_kit::envValue("FLAGOS_HOST_COMM_TIMEOUT_MS");  // blank: unset
  if (!text) return true;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text->c_str(), &end, 10);
  if (errno != 0 || end == text->c_str() || *end != '\0' || value <= 0) {
    *error = "FLAGOS_HOST_COMM_TIMEOUT_MS='" + *text + "' is not a positive number of milliseconds";
    return false;
  }
  *ms = value;
  return true;
}

}  // namespace

bool validComm(const char* call, flagosComm_t comm) {
  if (comm == nullptr) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host-shm %s: comm is NULL", call);
    return false;
  }
  if (comm->magic != kCommMagic) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host-shm %s: %p is not a live communicator", call,
         static_cast<void*>(comm));
    return false;
  }
  return true;
}

namespace {

// Waits until it is operation @p seq's turn (Note [Operation order]). The
// timeout counts only while no earlier operation runs (a running one has
// timeouts of its own): it catches an earlier operation stuck in the queue
// of a stream that does not progress.
void waitTurn(flagosComm_st& comm, uint64_t seq, int32_t kind) {
  const char* what = opName(kind);
  const auto timeout = std::chrono::milliseconds(comm.timeout_ms);
  auto deadline = shm::Clock::now() + timeout;
  std::unique_lock<std::mutex> lock(comm.mu);
  while (comm.turn != seq) {
    if (comm.aborted()) throw comm.abortedError(what);
    if (comm.running) deadline = shm::Clock::now() + timeout;
    if (shm::Clock::now() >= deadline) {
      comm.abort(kAbortTimeout, kind);
      throw CommError(FLAGOS_ERROR_TIMEOUT,
                      "host-shm: " + std::string(what) + " on rank " + std::to_string(comm.rank) +
                          " waited " + std::to_string(comm.timeout_ms) +
                          " ms for this rank's previous operation on the communicator (queued "
                          "on a stream that does not progress?)");
    }
    comm.cv.wait_for(lock, shm::kPollSlice);
  }
}

}  // namespace

flagosStatus_t submit(flagosComm_t comm, flagosStream_t stream, int32_t kind, OpBody body) {
  std::lock_guard<std::mutex> lock(comm->mu);  // enqueue in sequence order
  const uint64_t seq = comm->next_seq++;
  stream->enqueue([comm, seq, kind, body] {
    struct Finish {
      flagosComm_st* c;
      bool ran = false;
      ~Finish() {
        std::lock_guard<std::mutex> lock(c->mu);
        if (ran) {
          ++c->turn;
          c->running = false;
        }
        ++c->finished;
        c->cv.notify_all();
      }
    } finish{comm};
    waitTurn(*comm, seq, kind);
    finish.ran = true;
    {
      std::lock_guard<std::mutex> lock(comm->mu);
      comm->running = true;
    }
    if (comm->aborted()) throw comm->abortedError(opName(kind));
    body(*comm, seq);
  });
  return FLAGOS_SUCCESS;
}

namespace {

// ------------------------------------------------------------ lifecycle ---

flagosStatus_t getUniqueId(flagosUniqueId* id) noexcept {
  return guard("getUniqueId", [&] {
    if (id == nullptr) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host-shm getUniqueId: id is NULL");
    }
    std::string error;
    if (!shm::makeId(id, &error)) {
      return fail(FLAGOS_ERROR_DEVICE, "host-shm getUniqueId: %s", error.c_str());
    }
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t commInitRank(flagosComm_t* comm, int32_t nranks, const flagosUniqueId* id,
                            int32_t rank, int32_t device, int64_t timeout_ms) noexcept {
  return guard("commInitRank", [&] {
    if (comm == nullptr) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host-shm commInitRank: comm is NULL");
    }
    *comm = nullptr;
    if (nranks < 1 || nranks > shm::kMaxRanks) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "host-shm commInitRank: nranks %d is not in 1..%d (ranks of one machine)", nranks,
                  shm::kMaxRanks);
    }
    if (rank < 0 || rank >= nranks) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host-shm commInitRank: rank %d is not in 0..%d",
                  rank, nranks - 1);
    }
    std::string name;
    if (id == nullptr || !shm::segmentName(*id, &name)) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "host-shm commInitRank: the id was not made by host-shm getUniqueId");
    }
    if (findDevice("commInitRank", device) == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
    int64_t timeout = timeout_ms;
    if (timeout <= 0) {
      std::string error;
      if (!defaultTimeout(&timeout, &error)) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host-shm commInitRank: %s", error.c_str());
      }
    }
    // Deadlines are steady_clock::now() + timeout: keep "forever" (INT64_MAX)
    // from overflowing the clock; a year is forever enough.
    timeout = std::min<int64_t>(timeout, int64_t{365} * 24 * 3600 * 1000);
    auto created = std::make_unique<flagosComm_st>();
    created->rank = rank;
    created->nranks = nranks;
    created->device = device;
    created->timeout_ms = timeout;
    created->sent.assign(nranks, 0);
    created->received.assign(nranks, 0);
    const flagosStatus_t status = shm::Segment::join(
        name, nranks, rank, std::chrono::milliseconds(timeout), &created->segment);
    if (status != FLAGOS_SUCCESS) return status;
    *comm = created.release();
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t commDestroy(flagosComm_t comm) noexcept {
  return guard("commDestroy", [&] {
    if (!validComm("commDestroy", comm)) return FLAGOS_ERROR_INVALID_ARGUMENT;
    {
      // Every queued operation ends (each wait on a peer has a timeout).
      std::unique_lock<std::mutex> lock(comm->mu);
      comm->cv.wait(lock, [&] { return comm->finished == comm->next_seq; });
    }
    comm->magic = 0;
    delete comm;
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t commAbort(flagosComm_t comm) noexcept {
  return guard("commAbort", [&] {
    if (!validComm("commAbort", comm)) return FLAGOS_ERROR_INVALID_ARGUMENT;
    comm->abort(kAbortCalled, 0);
    comm->cv.notify_all();
    return FLAGOS_SUCCESS;
  });
}

}  // namespace

const flagosCollectiveTable* collectiveTable() {
  static const flagosCollectiveTable table = [] {
    flagosCollectiveTable t{};
    t.struct_size = sizeof(t);
    t.library_name = "host-shm";
    t.getUniqueId = getUniqueId;
    t.commInitRank = commInitRank;
    t.commDestroy = commDestroy;
    t.commAbort = commAbort;
    fillCalls(&t);  // allReduce ... allToAll, send/recv, groups
    return t;
  }();
  return &table;
}

}  // namespace flagos_host::coll
