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
   * The core's caching allocator calls this rarely (it reuses blocks). Blocks until the
   * memory is usable (opencl touches it, so that a shortage shows here).
   * @param device in: physical index. @param bytes in: size, any value > 0.
   * @param ptr out: the device address (NULL on failure), owned by the caller until free;
   *        never overlaps another live allocation.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_OUT_OF_MEMORY when the device is full, also for
   *          absurd sizes such as UINT64_MAX (the core then empties its cache and retries
   *          once); FLAGOS_ERROR_INVALID_ARGUMENT for 0 bytes, a NULL @p ptr or a bad
   *          device; FLAGOS_ERROR_DEVICE for other SDK failures. */
  flagosStatus_t (*malloc)(int32_t device, uint64_t bytes, void** ptr);

  /** Free an address returned by malloc on @p device. Returns at once; the address (and
   * every address inside the block) is invalid afterwards. The core only frees after all
   * streams that used the block have passed it (it synchronizes the device first).
   * Unspecified: work still queued on the block (opencl keeps the buffer alive for it;
   * host and skeleton release the memory at once).
   * @param device in: the device malloc was called with. @param ptr in: malloc's address.
   * @returns FLAGOS_ERROR_INVALID_ARGUMENT for NULL, a bad device index, another device's
   *          address, an interior address, a double free or an address malloc did not
   *          return (the core never frees NULL). */
  flagosStatus_t (*free)(int32_t device, void* ptr);

  /** Synchronous copy of @p bytes. Blocks until the data has arrived.
   * It is NOT ordered after queued stream work: the core synchronizes the producing stream
   * first. Host pointers are ordinary (pageable) memory; device ranges lie inside one live
   * allocation (of any device: copies between devices work, staged by opencl).
   * @param dst out, @param src in: NULL only when @p bytes is 0. @param kind FLAGOS_MEMCPY_*.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL pointer, an unknown
   *          kind or a device range outside a live allocation; FLAGOS_ERROR_OUT_OF_MEMORY or
   *          FLAGOS_ERROR_DEVICE when the SDK fails.
   * Unspecified: overlapping device ranges (all in-tree plugins copy them as memmove does,
   * but the core never passes them). The core in this tree copies with memcpyAsync (and
   * streamSynchronize) only; memcpy is used by the C++ tests. */
  flagosStatus_t (*memcpy)(void* dst, const void* src, uint64_t bytes, flagosMemcpyKind_t kind);

  /** Copy enqueued on @p stream; returns at once. The host buffer must stay valid (for
   * host-to-device also unchanged) until the stream passes the copy (the core keeps it
   * alive or synchronizes). Device ranges as for memcpy, overlap unspecified likewise.
   * @param dst, @p src, @p bytes, @p kind as for memcpy. @param stream in: a live stream.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL or destroyed
   *          @p stream (checked even for 0 bytes), then as memcpy; a failure of the copy
   *          itself is the stream's asynchronous error.
   * Unspecified: device memory of another device than the stream's (opencl drains the
   * stream and copies synchronously, host enqueues as usual). */
  flagosStatus_t (*memcpyAsync)(void* dst, const void* src, uint64_t bytes, flagosMemcpyKind_t kind,
                                flagosStream_t stream);

  /** Fill @p count elements of @p pattern_size bytes (1, 2, 4 or 8) at
   * device address @p dst with the pattern, enqueued on @p stream; returns at once.
   * Used for fill_/zero_ of contiguous tensors. @p pattern is read before
   * the call returns (the core passes a temporary); @p dst needs no alignment.
   * @param dst out: device address. @param pattern in: @p pattern_size bytes.
   * @param count in: elements (0: nothing). @param stream in: a live stream.
   * @returns FLAGOS_ERROR_INVALID_ARGUMENT for other pattern sizes, a NULL @p pattern or
   *          @p stream, or a range outside a live allocation (count 0: success after the
   *          stream and pattern checks). Unspecified: @p dst on another device than the
   *          stream's (opencl rejects it as INVALID_ARGUMENT; host and skeleton fill). */
  flagosStatus_t (*memFill)(void* dst, const void* pattern, uint32_t pattern_size, uint64_t count,
                            flagosStream_t stream);

  /** Free and total bytes of physical @p device, as the plugin sees them (its own
   * accounting: free <= total, total > 0). Returns at once.
   * @param free_bytes out. @param total_bytes out.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL out-parameter or a bad
   *          device. */
  flagosStatus_t (*memGetInfo)(int32_t device, uint64_t* free_bytes, uint64_t* total_bytes);

  /** Optional: page-locked host memory for fast async copies. NULL: the core
   * uses ordinary host memory and pin_memory() only marks it.
   * @param bytes > 0. @param ptr out: host memory the CPU may use directly, owned by the
   *        caller until hostFree.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for 0 bytes or a NULL @p ptr;
   *          FLAGOS_ERROR_OUT_OF_MEMORY. Returns once the memory is allocated. */
  flagosStatus_t (*hostAlloc)(uint64_t bytes, void** ptr);
  /** Optional (NULL exactly when hostAlloc is NULL): frees hostAlloc memory. Returns at
   * once; the core frees a block only after every stream that used it has passed it.
   * @returns FLAGOS_ERROR_INVALID_ARGUMENT for a pointer hostAlloc did not return (or
   *          returned and was freed). */
  flagosStatus_t (*hostFree)(void* ptr);
} flagosMemoryTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLAGOS_MEMORY_H_ */
