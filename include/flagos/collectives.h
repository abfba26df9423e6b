/*
 * flagos vendor ABI — the optional collective-communication table.
 *
 * Modelled on the NCCL API so that NCCL, RCCL, HCCL and similar libraries map
 * onto it one call to one call. Without it (vendor tables point to NULL) the
 * core's communication plane stages tensors through the host and uses gloo.
 */
#ifndef FLAGOS_COLLECTIVES_H_
#define FLAGOS_COLLECTIVES_H_

#include "flagos/status.h"
#include "flagos/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Bytes of a communicator's unique id (NCCL uses 128). */
#define FLAGOS_UNIQUE_ID_BYTES 128

/** Created by rank 0, broadcast by the core through the c10d store, then
 * passed to commInitRank on every rank. */
typedef struct flagosUniqueId {
  char internal[FLAGOS_UNIQUE_ID_BYTES];
} flagosUniqueId;

/** Opaque communicator handle. */
typedef struct flagosComm_st* flagosComm_t;

/** Reduction operators. */
typedef int32_t flagosRedOp_t;
#define FLAGOS_RED_SUM ((flagosRedOp_t)0)
#define FLAGOS_RED_PROD ((flagosRedOp_t)1)
#define FLAGOS_RED_MAX ((flagosRedOp_t)2)
#define FLAGOS_RED_MIN ((flagosRedOp_t)3)
#define FLAGOS_RED_AVG ((flagosRedOp_t)4)

/** The collectives table. Every member is required when the table is present, except
 * allToAll.
 *
 * Rules of the operations (allReduce ... allToAll, send, recv), as host-shm (the host
 * plugin's library) implements them and the core's vendor route (csrc/comm) relies on:
 *  - Asynchronous: the call checks its arguments, enqueues the operation on @p stream after
 *    the work already there and returns at once; the stream (not the caller) then waits for
 *    the peers. Completion is observed through events or stream synchronization.
 *  - Order: all ranks call the operations of a communicator in the same order, as in NCCL.
 *    Calls from several threads are ordered as they were made. host-shm fails ranks that
 *    disagree on kind, count, dtype, operator or root with FLAGOS_ERROR_INVALID_ARGUMENT at
 *    the next synchronize and the communicator stays usable; unspecified for other libraries.
 *  - Buffers: device memory of the communicator's device, counted in elements of @p dtype.
 *    They are accessed when the stream reaches the operation, so they must stay allocated
 *    (the send side unchanged) until the stream has passed it; the core keeps a task's
 *    tensors alive until it completed. With a count of 0 nothing is accessed (NULL is fine).
 *  - @p comm is a live communicator, @p stream a live stream of its device.
 *  - At the call: FLAGOS_SUCCESS (queued); FLAGOS_ERROR_INVALID_ARGUMENT (nothing queued) for
 *    a NULL or destroyed comm or stream, a stream of another device, an unknown dtype or
 *    operator, a root or peer outside 0..nranks-1, a buffer that is not device memory, or a
 *    byte size that overflows; FLAGOS_ERROR_NOT_SUPPORTED for a reduction of a dtype the
 *    library cannot reduce (host-shm reduces float16/32/64, bfloat16, int8/32/64 and uint8;
 *    the core maps bool and complex onto those); FLAGOS_ERROR_DEVICE after commAbort and
 *    FLAGOS_ERROR_TIMEOUT after a timeout aborted the communicator.
 *  - Reported by the next streamSynchronize/streamQuery of @p stream (vendor.h):
 *    FLAGOS_ERROR_TIMEOUT when a peer did not arrive within the communicator's timeout
 *    (host-shm names the ranks and aborts the communicator, so the others fail at once),
 *    FLAGOS_ERROR_DEVICE when it was aborted, FLAGOS_ERROR_INVALID_ARGUMENT when the ranks
 *    disagreed.
 *  - In place: as in NCCL, per member below. Other overlaps of sendbuf and recvbuf are
 *    unspecified (host-shm moves data in chunks and would read what it already wrote). */
typedef struct flagosCollectiveTable {
  uint32_t struct_size; /**< sizeof(flagosCollectiveTable) as built. */

  /** Library name reported to users ("nccl", "shm-ring", ...); static lifetime. */
  const char* library_name;

  /** Create a new unique id. The core calls it on rank 0 only, once per communicator, and
   * sends the bytes to the other ranks through the c10d store.
   * @param id out: the id (opaque bytes, owned by the caller; one id per communicator).
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL @p id;
   *          FLAGOS_ERROR_DEVICE when the library cannot make one. Returns at once.
   * Unspecified: host-shm also answers before device.init() and starts no thread (the
   * collectives suite calls it in a parent that forks the ranks), unlike vendor.h's rule. */
  flagosStatus_t (*getUniqueId)(flagosUniqueId* id);

  /** Join communicator @p id as @p rank of @p nranks, on physical @p device. Blocks the
   * caller until all ranks joined or @p timeout_ms passed.
   * @param comm out: the new communicator, owned by the caller until commDestroy; NULL on
   *        failure.
   * @param nranks in: ranks of the communicator (>= 1; host-shm: at most 64).
   * @param id in: from getUniqueId (any rank's copy); read during the call only.
   * @param rank in: 0 .. nranks-1 (the core: one rank per process).
   * @param timeout_ms in: bounds this join and every later wait on a peer of the
   *        communicator (the core passes the process group's timeout). <= 0: the library's
   *        default (host-shm: FLAGOS_HOST_COMM_TIMEOUT_MS, else 300000); unspecified
   *        elsewhere.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_TIMEOUT when a rank did not join in time (the
   *          message names it); FLAGOS_ERROR_INVALID_ARGUMENT for a NULL @p comm, a bad
   *          nranks, rank, device or id, and (host-shm) for ranks that disagree on nranks or
   *          claim the same rank (those may also time out). */
  flagosStatus_t (*commInitRank)(flagosComm_t* comm, int32_t nranks, const flagosUniqueId* id,
                                 int32_t rank, int32_t device, int64_t timeout_ms);

  /** Destroy @p comm. Blocks the caller until its queued operations have ended (each wait on
   * a peer is bounded by the timeout, and ends at once after commAbort), then frees it; the
   * handle is invalid afterwards. Also required after commAbort (the core destroys aborted
   * communicators at shutdown). Must not race with other calls on @p comm.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL or destroyed @p comm. */
  flagosStatus_t (*commDestroy)(flagosComm_t comm);

  /** Abort @p comm: pending and future operations fail at once. Used on timeouts so that no
   * rank hangs; the core may call it from another thread while operations are pending.
   * Returns at once and does not free @p comm (commDestroy still must be called).
   * Unspecified: in host-shm the abort also fails the peers' operations (shared memory);
   * with NCCL-like libraries it is local and peers rely on their own timeouts.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL or destroyed @p comm. */
  flagosStatus_t (*commAbort)(flagosComm_t comm);

  /** Element-wise reduction of @p count elements across ranks, result on all.
   * @param sendbuf in: @p count elements. @param recvbuf out: @p count elements.
   * @param op FLAGOS_RED_* (AVG: the sum divided by nranks; host-shm truncates integers).
   * In place: sendbuf == recvbuf is allowed; the core always passes it so.
   * @returns as the table comment: SUCCESS (queued), INVALID_ARGUMENT, NOT_SUPPORTED, DEVICE
   *          or TIMEOUT at the call; TIMEOUT, DEVICE or INVALID_ARGUMENT at the next sync. */
  flagosStatus_t (*allReduce)(const void* sendbuf, void* recvbuf, uint64_t count,
                              flagosDtype_t dtype, flagosRedOp_t op, flagosComm_t comm,
                              flagosStream_t stream);

  /** Copy @p count elements from @p root's sendbuf to every rank's recvbuf.
   * @param sendbuf in: read on @p root only; may be NULL on the other ranks (the core passes
   *        NULL there). @param recvbuf out, on every rank (root included).
   * In place: sendbuf == recvbuf is allowed on root; the core's broadcast passes it so
   * (its uneven all_gather passes distinct buffers).
   * @returns as the table comment (no NOT_SUPPORTED: any dtype moves). */
  flagosStatus_t (*broadcast)(const void* sendbuf, void* recvbuf, uint64_t count,
                              flagosDtype_t dtype, int32_t root, flagosComm_t comm,
                              flagosStream_t stream);

  /** Reduction whose result lands on @p root only.
   * @param sendbuf in: @p count elements, every rank.
   * @param recvbuf out: @p count elements, written on @p root only; may be NULL elsewhere
   *        (the core passes NULL there).
   * In place: sendbuf == recvbuf is allowed on root; the core passes it so for contiguous
   * tensors (host-shm supports it; the conformance tests do not check it).
   * @returns as the table comment. */
  flagosStatus_t (*reduce)(const void* sendbuf, void* recvbuf, uint64_t count, flagosDtype_t dtype,
                           flagosRedOp_t op, int32_t root, flagosComm_t comm,
                           flagosStream_t stream);

  /** Gather @p sendcount elements from each rank into recvbuf, rank-major.
   * @param sendbuf in: @p sendcount elements. @param recvbuf out: nranks * @p sendcount
   * elements; block r comes from rank r.
   * In place: sendbuf == recvbuf + rank * sendcount elements is allowed (NCCL's rule).
   * @returns as the table comment (no NOT_SUPPORTED: any dtype moves). */
  flagosStatus_t (*allGather)(const void* sendbuf, void* recvbuf, uint64_t sendcount,
                              flagosDtype_t dtype, flagosComm_t comm, flagosStream_t stream);

  /** Reduce nranks * @p recvcount elements; rank r keeps block r.
   * @param sendbuf in: nranks * @p recvcount elements. @param recvbuf out: @p recvcount.
   * In place: recvbuf == sendbuf + rank * recvcount elements is allowed (NCCL's rule).
   * @returns as the table comment. */
  flagosStatus_t (*reduceScatter)(const void* sendbuf, void* recvbuf, uint64_t recvcount,
                                  flagosDtype_t dtype, flagosRedOp_t op, flagosComm_t comm,
                                  flagosStream_t stream);

  /** Point-to-point send of @p count elements to @p peer (0 .. nranks-1, itself included).
   * @param sendbuf in: read when the stream reaches the send.
   * Inside a group (groupStart) the send is held back until groupEnd. Messages between two
   * ranks arrive in call order. The stream may wait for @p peer's matching recv (host-shm:
   * once the message does not fit the peer's mailbox), so sends and recvs that cross belong
   * in one group. Unspecified: host-shm reports a recv whose count or dtype differs from the
   * send as INVALID_ARGUMENT on the receiver only.
   * @returns as the table comment (no NOT_SUPPORTED). */
  flagosStatus_t (*send)(const void* sendbuf, uint64_t count, flagosDtype_t dtype, int32_t peer,
                         flagosComm_t comm, flagosStream_t stream);

  /** Point-to-point receive of @p count elements from @p peer; the counterpart of send (same
   * grouping, ordering and waiting rules).
   * @param recvbuf out: written when the stream reaches the receive.
   * @returns as the table comment (no NOT_SUPPORTED). */
  flagosStatus_t (*recv)(void* recvbuf, uint64_t count, flagosDtype_t dtype, int32_t peer,
                         flagosComm_t comm, flagosStream_t stream);

  /** Start a group: the following send/recv calls of this thread are fused until groupEnd
   * (needed for all-to-all built from send/recv without deadlock). Groups nest per calling
   * thread; returns at once. Unspecified: collectives called inside a group are not held
   * back by host-shm (NCCL fuses them too); the core puts only send/recv in groups.
   * @returns FLAGOS_SUCCESS. */
  flagosStatus_t (*groupStart)(void);
  /** End a group started by groupStart on this thread. The outermost groupEnd enqueues the
   * held sends and receives (host-shm: one batch per communicator and stream, progressing
   * together) and returns at once. The core also calls it after a failed send/recv of the
   * group, to close it.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT without a matching groupStart,
   *          or when a communicator or stream of the group was destroyed meanwhile. */
  flagosStatus_t (*groupEnd)(void);

  /** Optional (may be NULL): each rank sends @p count elements to every rank. NULL: the core
   * composes it from send/recv inside a group. The core calls it only for even splits.
   * @param sendbuf in: nranks * @p count elements; block j goes to rank j.
   * @param recvbuf out: nranks * @p count elements; block q comes from rank q.
   * In place: unspecified (the core's send/recv composition would not support it); pass
   * disjoint buffers.
   * @returns as the table comment (no NOT_SUPPORTED). */
  flagosStatus_t (*allToAll)(const void* sendbuf, void* recvbuf, uint64_t count,
                             flagosDtype_t dtype, flagosComm_t comm, flagosStream_t stream);
} flagosCollectiveTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLAGOS_COLLECTIVES_H_ */
