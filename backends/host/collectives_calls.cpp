// The calls of the host-shm collectives table that move data: argument
// checks (done at the call, so a bad call returns its status at once and
// queues nothing), then the work is enqueued on the caller's stream
// (submit(), collectives.cpp). Also the groups of sends and receives.
#include <cinttypes>
#include <map>
#include <utility>

#include "collectives.h"

namespace flagos_host::coll {
namespace {

// The checks every operation shares: handles, the stream's device, the
// dtype's size and @p elements * size not overflowing. Writes the byte size
// of one element to *size.
flagosStatus_t checkCommon(const char* call, flagosComm_t comm, flagosStream_t stream,
                           flagosDtype_t dtype, uint64_t elements, uint64_t* size) {
  if (!validComm(call, comm)) return FLAGOS_ERROR_INVALID_ARGUMENT;
  if (!validStream(call, stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
  if (stream->device != comm->device) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                "host-shm %s: the stream is on device %d, the communicator on device %d", call,
                stream->device, comm->device);
  }
  *size = FLAGOS_DTYPE_SIZE(dtype);
  if (dtypeName(dtype)[0] == '(' || *size == 0) {  // "(unknown dtype)"
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host-shm %s: unknown dtype %d", call, dtype);
  }
  if (elements > UINT64_MAX / comm->nranks / *size) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host-shm %s: %" PRIu64 " elements is too many",
                call, elements);
  }
  if (comm->aborted()) {
    const CommError error = comm->abortedError(call);
    return fail(error.status(), "%s", error.what());
  }
  return FLAGOS_SUCCESS;
}

flagosStatus_t checkReduction(const char* call, flagosDtype_t dtype, flagosRedOp_t op) {
  if (op < FLAGOS_RED_SUM || op > FLAGOS_RED_AVG) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host-shm %s: unknown reduction operator %d", call,
                op);
  }
  if (!reducible(dtype)) {
    return fail(FLAGOS_ERROR_NOT_SUPPORTED, "host-shm %s: cannot reduce %s", call,
                dtypeName(dtype));
  }
  return FLAGOS_SUCCESS;
}

flagosStatus_t checkRoot(const char* call, flagosComm_t comm, int32_t root) {
  if (root < 0 || root >= comm->nranks) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host-shm %s: root %d is not a rank of 0..%d", call,
                root, comm->nranks - 1);
  }
  return FLAGOS_SUCCESS;
}

// [ptr, ptr + bytes) must be device memory of a host device (empty ranges
// pass, NULL included).
flagosStatus_t checkBuffer(const char* call, const char* what, const void* ptr, uint64_t bytes) {
  if (bytes == 0 || findArena(ptr, bytes) != nullptr) return FLAGOS_SUCCESS;
  return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
              "host-shm %s: %s [%p, +%" PRIu64 ") is not device memory of a host device", call,
              what, ptr, bytes);
}

flagosStatus_t submitCollective(flagosComm_t comm, flagosStream_t stream, const CollArgs& args) {
  return submit(comm, stream, args.kind,
                [args](flagosComm_st& c, uint64_t seq) { runCollective(c, seq, args); });
}

// ---------------------------------------------------------------- groups ---

// Sends and receives issued between groupStart and groupEnd on this thread.
struct Group {
  int depth = 0;
  struct Entry {
    flagosComm_t comm;
    flagosStream_t stream;
    P2POp op;
  };
  std::vector<Entry> entries;
};
thread_local Group t_group;

flagosStatus_t submitSendRecv(flagosComm_t comm, flagosStream_t stream, std::vector<P2POp> ops) {
  return submit(
      comm, stream, kindCode(CollectiveKind::kSendRecv),
      [ops = std::move(ops)](flagosComm_st& c, uint64_t seq) { runSendRecv(c, seq, ops); });
}

flagosStatus_t queueP2P(const char* call, const P2POp& op, flagosComm_t comm,
                        flagosStream_t stream) {
  uint64_t size = 0;
  flagosStatus_t status = checkCommon(call, comm, stream, op.dtype, op.count, &size);
  if (status != FLAGOS_SUCCESS) return status;
  if (op.peer < 0 || op.peer >= comm->nranks) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host-shm %s: peer %d is not a rank of 0..%d", call,
                op.peer, comm->nranks - 1);
  }
  status = checkBuffer(call, op.is_send ? "sendbuf" : "recvbuf", op.buffer, op.count * size);
  if (status != FLAGOS_SUCCESS) return status;
  if (t_group.depth > 0) {
    t_group.entries.push_back({comm, stream, op});
    return FLAGOS_SUCCESS;
  }
  return submitSendRecv(comm, stream, {op});
}

flagosStatus_t allReduce(const void* sendbuf, void* recvbuf, uint64_t count, flagosDtype_t dtype,
                         flagosRedOp_t op, flagosComm_t comm, flagosStream_t stream) noexcept {
  return guard("allReduce", [&] {
    uint64_t size = 0;
    flagosStatus_t s = checkCommon("allReduce", comm, stream, dtype, count, &size);
    if (s == FLAGOS_SUCCESS) s = checkReduction("allReduce", dtype, op);
    if (s == FLAGOS_SUCCESS) s = checkBuffer("allReduce", "sendbuf", sendbuf, count * size);
    if (s == FLAGOS_SUCCESS) s = checkBuffer("allReduce", "recvbuf", recvbuf, count * size);
    if (s != FLAGOS_SUCCESS) return s;
    return submitCollective(
        comm, stream,
        {kindCode(CollectiveKind::kAllReduce), static_cast<const char*>(sendbuf),
         static_cast<char*>(recvbuf), count, dtype, op, -1});
  });
}

flagosStatus_t broadcast(const void* sendbuf, void* recvbuf, uint64_t count, flagosDtype_t dtype,
                         int32_t root, flagosComm_t comm, flagosStream_t stream) noexcept {
  return guard("broadcast", [&] {
    uint64_t size = 0;
    flagosStatus_t s = checkCommon("broadcast", comm, stream, dtype, count, &size);
    if (s == FLAGOS_SUCCESS) s = checkRoot("broadcast", comm, root);
    if (s == FLAGOS_SUCCESS && comm->rank == root) {
      s = checkBuffer("broadcast", "sendbuf", sendbuf, count * size);
    }
    if (s == FLAGOS_SUCCESS) s = checkBuffer("broadcast", "recvbuf", recvbuf, count * size);
    if (s != FLAGOS_SUCCESS) return s;
    return submitCollective(
        comm, stream,
        {kindCode(CollectiveKind::kBroadcast), static_cast<const char*>(sendbuf),
         static_cast<char*>(recvbuf), count, dtype, -1, root});
  });
}

flagosStatus_t reduce(const void* sendbuf, void* recvbuf, uint64_t count, flagosDtype_t dtype,
                      flagosRedOp_t op, int32_t root, flagosComm_t comm,
                      flagosStream_t stream) noexcept {
  return guard("reduce", [&] {
    uint64_t size = 0;
    flagosStatus_t s = checkCommon("reduce", comm, stream, dtype, count, &size);
    if (s == FLAGOS_SUCCESS) s = checkReduction("reduce", dtype, op);
    if (s == FLAGOS_SUCCESS) s = checkRoot("reduce", comm, root);
    if (s == FLAGOS_SUCCESS) s = checkBuffer("reduce", "sendbuf", sendbuf, count * size);
    if (s == FLAGOS_SUCCESS && comm->rank == root) {
      s = checkBuffer("reduce", "recvbuf", recvbuf, count * size);
    }
    if (s != FLAGOS_SUCCESS) return s;
    return submitCollective(comm, stream,
                            {kindCode(CollectiveKind::kReduce), static_cast<const char*>(sendbuf),
                             static_cast<char*>(recvbuf), count, dtype, op, root});
  });
}

flagosStatus_t allGather(const void* sendbuf, void* recvbuf, uint64_t sendcount,
                         flagosDtype_t dtype, flagosComm_t comm, flagosStream_t stream) noexcept {
  return guard("allGather", [&] {
    uint64_t size = 0;
    flagosStatus_t s = checkCommon("allGather", comm, stream, dtype, sendcount, &size);
    if (s == FLAGOS_SUCCESS) s = checkBuffer("allGather", "sendbuf", sendbuf, sendcount * size);
    if (s == FLAGOS_SUCCESS) {
      s = checkBuffer("allGather", "recvbuf", recvbuf, comm->nranks * sendcount * size);
    }
    if (s != FLAGOS_SUCCESS) return s;
    return submitCollective(
        comm, stream,
        {kindCode(CollectiveKind::kAllGather), static_cast<const char*>(sendbuf),
         static_cast<char*>(recvbuf), sendcount, dtype, -1, -1});
  });
}

flagosStatus_t reduceScatter(const void* sendbuf, void* recvbuf, uint64_t recvcount,
                             flagosDtype_t dtype, flagosRedOp_t op, flagosComm_t comm,
                             flagosStream_t stream) noexcept {
  return guard("reduceScatter", [&] {
    uint64_t size = 0;
    flagosStatus_t s = checkCommon("reduceScatter", comm, stream, dtype, recvcount, &size);
    if (s == FLAGOS_SUCCESS) s = checkReduction("reduceScatter", dtype, op);
    if (s == FLAGOS_SUCCESS) {
      s = checkBuffer("reduceScatter", "sendbuf", sendbuf, comm->nranks * recvcount * size);
    }
    if (s == FLAGOS_SUCCESS) s = checkBuffer("reduceScatter", "recvbuf", recvbuf, recvcount * size);
    if (s != FLAGOS_SUCCESS) return s;
    return submitCollective(
        comm, stream,
        {kindCode(CollectiveKind::kReduceScatter), static_cast<const char*>(sendbuf),
         static_cast<char*>(recvbuf), recvcount, dtype, op, -1});
  });
}

flagosStatus_t allToAll(const void* sendbuf, void* recvbuf, uint64_t count, flagosDtype_t dtype,
                        flagosComm_t comm, flagosStream_t stream) noexcept {
  return guard("allToAll", [&] {
    uint64_t size = 0;
    flagosStatus_t s = checkCommon("allToAll", comm, stream, dtype, count, &size);
    if (s == FLAGOS_SUCCESS) {
      s = checkBuffer("allToAll", "sendbuf", sendbuf, comm->nranks * count * size);
    }
    if (s == FLAGOS_SUCCESS) {
      s = checkBuffer("allToAll", "recvbuf", recvbuf, comm->nranks * count * size);
    }
    if (s != FLAGOS_SUCCESS) return s;
    return submitCollective(comm, stream,
                            {kindCode(CollectiveKind::kAllToAll), static_cast<const char*>(sendbuf),
                             static_cast<char*>(recvbuf), count, dtype, -1, -1});
  });
}

flagosStatus_t send(const void* sendbuf, uint64_t count, flagosDtype_t dtype, int32_t peer,
                    flagosComm_t comm, flagosStream_t stream) noexcept {
  return guard("send", [&] {
    P2POp op{true, peer, static_cast<char*>(const_cast<void*>(sendbuf)), count, dtype};
    return queueP2P("send", op, comm, stream);
  });
}

flagosStatus_t recv(void* recvbuf, uint64_t count, flagosDtype_t dtype, int32_t peer,
                    flagosComm_t comm, flagosStream_t stream) noexcept {
  return guard("recv", [&] {
    P2POp op{false, peer, static_cast<char*>(recvbuf), count, dtype};
    return queueP2P("recv", op, comm, stream);
  });
}

flagosStatus_t groupStart() noexcept {
  return guard("groupStart", [&] {
    ++t_group.depth;
    return FLAGOS_SUCCESS;
  });
}

// Note [Groups]
// ~~~~~~~~~~~~~
// groupStart/groupEnd nest per thread. Sends and receives in a group are
// held back; the outermost groupEnd submits them as one batch per
// (communicator, stream), in call order, and each batch makes progress on
// all its operations at once (collectives_p2p.cpp), which is what makes a
// ring of sends and receives, or an all-to-all of them, safe. Collectives
// called inside a group are not held back: every rank calls them in the
// same order anyway, so they run as they are called.
flagosStatus_t groupEnd() noexcept {
  return guard("groupEnd", [&] {
    if (t_group.depth == 0) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host-shm groupEnd: no group was started");
    }
    if (--t_group.depth > 0) return FLAGOS_SUCCESS;
    std::vector<Group::Entry> entries = std::move(t_group.entries);
    t_group.entries.clear();
    std::vector<std::pair<flagosComm_t, flagosStream_t>> order;  // first-use order
    std::map<std::pair<flagosComm_t, flagosStream_t>, std::vector<P2POp>> batches;
    for (const Group::Entry& e : entries) {
      auto key = std::make_pair(e.comm, e.stream);
      auto& batch = batches[key];
      if (batch.empty()) order.push_back(key);
      batch.push_back(e.op);
    }
    flagosStatus_t first = FLAGOS_SUCCESS;
    for (const auto& key : order) {
      flagosStatus_t s = FLAGOS_SUCCESS;
      if (!validComm("groupEnd", key.first) || !validStream("groupEnd", key.second)) {
        s = FLAGOS_ERROR_INVALID_ARGUMENT;  // destroyed inside the group
      } else {
        s = submitSendRecv(key.first, key.second, std::move(batches[key]));
      }
      if (first == FLAGOS_SUCCESS) first = s;
    }
    return first;
  });
}

}  // namespace

void fillCalls(flagosCollectiveTable* t) {
  t->allReduce = allReduce;
  t->broadcast = broadcast;
  t->reduce = reduce;
  t->allGather = allGather;
  t->reduceScatter = reduceScatter;
  t->send = send;
  t->recv = recv;
  t->groupStart = groupStart;
  t->groupEnd = groupEnd;
  t->allToAll = allToAll;
}

}  // namespace flagos_host::coll
