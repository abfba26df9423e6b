/*
 * flagos vendor ABI — native kernels, looked up by operator semantic ID.
 *
 * A semantic ID names what an operator means ("add", "relu", "mm",
 * "convolution"), never how a chip computes it; the catalog in ops/ is the
 * list of IDs and, for each, the order of its outputs, inputs and scalars.
 * The core has already resolved shapes, dtypes and broadcasting and has
 * allocated the outputs: a kernel only computes.
 */
#ifndef FLAGOS_KERNEL_H_
#define FLAGOS_KERNEL_H_

#include "flagos/status.h"
#include "flagos/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Maximum rank of a tensor crossing the ABI. */
#define FLAGOS_MAX_DIMS 16

/** A strided view of device memory (like DLPack's DLTensor). */
typedef struct flagosTensor {
  void* data;             /**< Device address of element (0, ..., 0), offset applied. */
  flagosDtype_t dtype;    /**< Element type. */
  int32_t ndim;           /**< 0 .. FLAGOS_MAX_DIMS; 0 is a scalar tensor. */
  const int64_t* shape;   /**< ndim sizes (NULL when ndim == 0). */
  const int64_t* strides; /**< ndim strides in elements, may be 0 (broadcast) or negative. */
} flagosTensor;

/** A scalar argument (alpha, negative_slope, dim, ...). Exactly one of the
 * two value fields is meaningful, as dtype says (integral and bool types use
 * i, floating types use f). */
typedef struct flagosScalar {
  flagosDtype_t dtype;
  int32_t reserved; /**< Zero. Keeps the 8-byte fields aligned. */
  int64_t i;
  double f;
} flagosScalar;

/** A native kernel. Enqueues the computation on @p stream and returns at
 * once (or computes synchronously, which is also correct). Must not throw
 * and must not keep pointers to the descriptor arrays after returning.
 * Thread-safe: the core calls kernels from any thread, on each thread's current stream.
 * @param stream   the current stream of the outputs' device; work enqueued
 *                 on it is ordered after everything the core enqueued before.
 * @param outputs  @p num_outputs descriptors, allocated by the core with the
 *                 final shape and dtype (in-place ops: the destination). The core calls
 *                 no kernel when every output is empty.
 * @param inputs   @p num_inputs descriptors in the catalog's order
 *                 (flagos/ops.h documents each ID's order); an absent optional input has
 *                 data == NULL.
 * @param scalars  @p num_scalars values in the catalog's order.
 * Descriptor arrays are valid only during the call; the memory they point to
 * stays alive until the stream passes the work (the core records it).
 * In place: an output may be the very same tensor as an input (x.add_(x)); for the
 * pointwise family the core rejects partial overlaps and self-overlapping outputs before any
 * tier runs. Unspecified: overlaps in the other families (the core does not check them).
 * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_NOT_SUPPORTED for a dtype/layout it
 *          does not handle (the core tries the generated, decomposition and
 *          host tiers in turn; for non-pointwise operators it first retries once with
 *          contiguous copies of strided inputs); FLAGOS_ERROR_FALLBACK to go to the host tier
 *          at once. Return those two before queuing anything. FLAGOS_ERROR_DEVICE on failure
 *          (the core raises, with getLastError's message, as for any other status, e.g.
 *          FLAGOS_ERROR_INVALID_ARGUMENT for a NULL or destroyed @p stream). An error found
 *          while the work runs (an index out of range) is the stream's asynchronous error. */
typedef flagosStatus_t (*flagosKernelFn)(flagosStream_t stream, const flagosTensor* outputs,
                                         int32_t num_outputs, const flagosTensor* inputs,
                                         int32_t num_inputs, const flagosScalar* scalars,
                                         int32_t num_scalars);

/** One row of the kernel table. */
typedef struct flagosKernelEntry {
  const char* op_id; /**< Semantic ID from the catalog, e.g. "relu". */
  flagosKernelFn fn; /**< Non-NULL. */
} flagosKernelEntry;

/** The kernel table: plain data, walkable by tools (`flagos-torchfl ops`).
 * Optional as a whole (vendor tables may point to NULL): then every operator
 * goes to the generated, decomposition or host tiers.
 *
 * Checked at load (ABI 1.1): an op_id the core's catalog does not know (a
 * typo) or one listed twice makes the plugin fail to load, with a reason
 * naming the plugin, the entry's index and the id (`flagos-torchfl doctor`
 * shows it). A plugin built against a newer minor than the core may list
 * ids the core does not know yet; those are ignored. */
typedef struct flagosKernelTable {
  uint32_t struct_size;             /**< sizeof(flagosKernelTable) as built. */
  int32_t num_entries;              /**< Rows in entries. */
  const flagosKernelEntry* entries; /**< Unsorted; IDs unique; static lifetime. */
} flagosKernelTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLAGOS_KERNEL_H_ */
