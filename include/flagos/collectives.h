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

/** The collectives table. All operations are enqueued on a stream and
 * return at once; completion is observed through events or stream
 * synchronization. In-place operation (send == recv) is allowed where NCCL
 * allows it. Every member is required when the table is present, except
 * allToAll. */
typedef struct flagosCollectiveTable {
  uint32_t struct_size; /**< sizeof(flagosCollectiveTable) as built. */

  /** Library name reported to users ("nccl", "shm-ring", ...). */
  const char* library_name;

  /** Create a new unique id (called on rank 0 only). */
  flagosStatus_t (*getUniqueId)(flagosUniqueId* id);

  /** Join communicator @p id as @p rank of @p nranks, on physical @p device.
   * Blocks until all ranks joined or @p timeout_ms passed
   * (FLAGOS_ERROR_TIMEOUT). */
  flagosStatus_t (*commInitRank)(flagosComm_t* comm, int32_t nranks, const flagosUniqueId* id,
                                 int32_t rank, int32_t device, int64_t timeout_ms);

  /** Destroy @p comm after its pending operations complete. */
  flagosStatus_t (*commDestroy)(flagosComm_t comm);

  /** Abort @p comm: pending and future operations fail at once. Used on
   * timeouts so that no rank hangs. */
  flagosStatus_t (*commAbort)(flagosComm_t comm);

  /** Element-wise reduction of @p count elements across ranks, result on all. */
  flagosStatus_t (*allReduce)(const void* sendbuf, void* recvbuf, uint64_t count,
                              flagosDtype_t dtype, flagosRedOp_t op, flagosComm_t comm,
                              flagosStream_t stream);

  /** Copy @p count elements from @p root's sendbuf to every rank's recvbuf. */
  flagosStatus_t (*broadcast)(const void* sendbuf, void* recvbuf, uint64_t count,
                              flagosDtype_t dtype, int32_t root, flagosComm_t comm,
                              flagosStream_t stream);

  /** Reduction whose result lands on @p root only. */
  flagosStatus_t (*reduce)(const void* sendbuf, void* recvbuf, uint64_t count, flagosDtype_t dtype,
                           flagosRedOp_t op, int32_t root, flagosComm_t comm,
                           flagosStream_t stream);

  /** Gather @p sendcount elements from each rank into recvbuf, rank-major. */
  flagosStatus_t (*allGather)(const void* sendbuf, void* recvbuf, uint64_t sendcount,
                              flagosDtype_t dtype, flagosComm_t comm, flagosStream_t stream);

  /** Reduce nranks * @p recvcount elements; rank r keeps block r. */
  flagosStatus_t (*reduceScatter)(const void* sendbuf, void* recvbuf, uint64_t recvcount,
                                  flagosDtype_t dtype, flagosRedOp_t op, flagosComm_t comm,
                                  flagosStream_t stream);

  /** Point-to-point send of @p count elements to @p peer. */
  flagosStatus_t (*send)(const void* sendbuf, uint64_t count, flagosDtype_t dtype, int32_t peer,
                         flagosComm_t comm, flagosStream_t stream);

  /** Point-to-point receive of @p count elements from @p peer. */
  flagosStatus_t (*recv)(void* recvbuf, uint64_t count, flagosDtype_t dtype, int32_t peer,
                         flagosComm_t comm, flagosStream_t stream);

  /** Start a group: the following send/recv calls are fused until groupEnd
   * (needed for all-to-all built from send/recv without deadlock). */
  flagosStatus_t (*groupStart)(void);
  /** End a group started by groupStart. */
  flagosStatus_t (*groupEnd)(void);

  /** Optional (may be NULL): each rank sends @p count elements to every
   * rank. NULL: the core composes it from send/recv inside a group. */
  flagosStatus_t (*allToAll)(const void* sendbuf, void* recvbuf, uint64_t count,
                             flagosDtype_t dtype, flagosComm_t comm, flagosStream_t stream);
} flagosCollectiveTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLAGOS_COLLECTIVES_H_ */
