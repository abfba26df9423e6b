/*
 * flagos vendor ABI — the memory table.
 *
 * Device addresses are opaque to the core: it never dereferences them, it
 * only adds byte offsets to them (PyTorch does pointer arithmetic on
 * data_ptr). A plugin whose SDK hands out handles rather than pointers
 * (OpenCL cl_mem) reserves a virtual address range and maps each address to
 * (buffer, offset) itself. Every address inside an allocation, and one past
 * its end, must be accepted by the copy calls below. Addresses are unique
 * across all devices of a plugin (the core finds a block's device from its
 * address alone, as from_blob and DLPack need).
 */
#ifndef FLAGOS_MEMORY_H_
#define FLAGOS_MEMORY_H_

#include "flagos/status.h"
#include "flagos/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Direction of a copy. */
typedef int32_t flagosMemcpyKind_t;
#define FLAGOS_MEMCPY_HOST_TO_DEVICE ((flagosMemcpyKind_t)1)
#define FLAGOS_MEMCPY_DEVICE_TO_HOST ((flagosMemcpyKind_t)2)
#define FLAGOS_MEMCPY_DEVICE_TO_DEVICE ((flagosMemcpyKind_t)3)

/** Zero-byte copies and fills succeed without looking at their pointers (an
 * empty tensor may have a NULL address).
 *
 * The memory table. Members marked "optional" may be NULL; the comment says
 * what the core does instead. */
typedef struct flagosMemoryTable {
  uint32_t struct_size; /**< sizeof(flagosMemoryTable) as the plugin was built. */

  /** Allocate @p bytes (> 0) on physical @p device; 256-byte aligned.
   * The core's caching allocator calls this rarely (it reuses blocks).
   * @returns FLAGOS_ERROR_OUT_OF_MEMORY when the device is full (the core
   *          then empties its cache and retries once). */
  flagosStatus_t (*malloc)(int32_t device, uint64_t bytes, void** ptr);

  /** Free an address returned by malloc on @p device. The core only frees
   * after all streams that used the block have passed it.
   * @returns FLAGOS_ERROR_INVALID_ARGUMENT for NULL or an address malloc did
   *          not return (the core never frees NULL). */
  flagosStatus_t (*free)(int32_t device, void* ptr);

  /** Synchronous copy of @p bytes. Blocks until the data has arrived.
   * It is NOT ordered after queued stream work: the core synchronizes the
   * producing stream first. Host pointers are ordinary (pageable) memory. */
  flagosStatus_t (*memcpy)(void* dst, const void* src, uint64_t bytes, flagosMemcpyKind_t kind);

  /** Copy enqueued on @p stream; returns at once. The host buffer must stay
   * valid and unchanged until the stream passes the copy (the core keeps
   * it alive or synchronizes). */
  flagosStatus_t (*memcpyAsync)(void* dst, const void* src, uint64_t bytes, flagosMemcpyKind_t kind,
                                flagosStream_t stream);

  /** Fill @p count elements of @p pattern_size bytes (1, 2, 4 or 8) at
   * device address @p dst with the pattern, enqueued on @p stream.
   * Used for fill_/zero_ of contiguous tensors. @p pattern is read before
   * the call returns (the core passes a temporary).
   * @returns FLAGOS_ERROR_INVALID_ARGUMENT for other pattern sizes. */
  flagosStatus_t (*memFill)(void* dst, const void* pattern, uint32_t pattern_size, uint64_t count,
                            flagosStream_t stream);

  /** Free and total bytes of physical @p device, as the plugin sees them. */
  flagosStatus_t (*memGetInfo)(int32_t device, uint64_t* free_bytes, uint64_t* total_bytes);

  /** Optional: page-locked host memory for fast async copies. NULL: the core
   * uses ordinary host memory and pin_memory() only marks it. */
  flagosStatus_t (*hostAlloc)(uint64_t bytes, void** ptr);
  /** Optional (NULL exactly when hostAlloc is NULL): frees hostAlloc memory. */
  flagosStatus_t (*hostFree)(void* ptr);
} flagosMemoryTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLAGOS_MEMORY_H_ */
