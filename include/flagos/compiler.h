/*
 * flagos vendor ABI — the optional runtime compiler.
 *
 * A plugin whose SDK can compile at run time (OpenCL C, CUDA C through NVRTC,
 * C through the system compiler) fills this table; the core's kernel
 * generator then emits source in `language`, builds it, caches the binary
 * on disk and launches it. Without it (vendor tables point to NULL) the
 * generated tier is skipped.
 */
#ifndef FLAGOS_COMPILER_H_
#define FLAGOS_COMPILER_H_

#include "flagos/status.h"
#include "flagos/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque handle to a built or loaded program (one or more kernels). */
typedef struct flagosProgram_st* flagosProgram_t;

/** Kinds of kernel arguments. */
typedef int32_t flagosArgKind_t;
/** value points to a void* holding a device address. How it reaches the
 * kernel depends on `language` (the generator emits matching signatures):
 *  - "opencl-c": TWO kernel parameters, `__global T* base, ulong offset`
 *    (OpenCL 1.2 cannot pass a pointer into the middle of a cl_mem; the
 *    plugin translates the address to buffer + byte offset);
 *  - "c": args[k] points to a void* holding the address as is (see
 *    Note [Language "c"] below); NULL stays NULL;
 *  - "cuda-c": one pointer parameter holding the address as is. */
#define FLAGOS_ARG_DEVICE_PTR ((flagosArgKind_t)1)
/** value points to `size` bytes passed by value (ints, floats, structs). */
#define FLAGOS_ARG_BYTES ((flagosArgKind_t)2)

/* Note [Language "c"]
 * ~~~~~~~~~~~~~~~~~~~
 * The source is one C99 translation unit that includes what it uses
 * (<stdint.h>, <math.h>; libm is linked). A kernel is a function with
 * external linkage:
 *
 *     void NAME(void* const* args, uint64_t begin, uint64_t end);
 *
 * computing work items [begin, end) of global[0]; the plugin splits the
 * launch across its threads, calling NAME concurrently on disjoint ranges
 * (local[0], when given, is the smallest range, not a work-group: there
 * are no barriers). args[k] points to a copy of the k-th flagosKernelArg's
 * value, owned by the plugin, valid while the kernel runs and aligned for
 * any type: for FLAGOS_ARG_DEVICE_PTR a void*
 * holding the device address (`*(float* const*)args[k]`), for
 * FLAGOS_ARG_BYTES the `size` bytes (`*(const int64_t*)args[k]`). When the
 * source also defines `const int NAME_num_args = N;`, kernelLaunch returns
 * FLAGOS_ERROR_INVALID_ARGUMENT unless num_args == N. work_dim must be 1
 * (else FLAGOS_ERROR_NOT_SUPPORTED). */

/* Note [Launch geometry]
 * ~~~~~~~~~~~~~~~~~~~~~~
 * The core launches every generated kernel with an explicit local size:
 * the device's preferred_work_group_size, else min(256,
 * max_work_group_size) (device.h), or FLAGOS_WORK_GROUP_SIZE. Generated
 * kernels compare their global id with the work count and return past it,
 * so any global size works with one local size. Why: with a NULL local size
 * the OpenCL runtime picks a work-group size per global size, and PoCL
 * builds a new work-group function for each one, so every new tensor size
 * waited for a compiler (and a size with a large prime factor ran in
 * work-groups of 1, which also defeats PoCL's vectorizer). One local size
 * means one work-group build per kernel. Reductions and row operators over
 * contiguous rows (csrc/jit/gen/reduce_layout.cpp, Note [Reduction strategies])
 * give each row a segment of a work-group, synchronized with barriers:
 * their global size is a whole number of groups and their kernels require
 * that local size (reqd_work_group_size). */

/** One kernel argument. */
typedef struct flagosKernelArg {
  flagosArgKind_t kind;
  uint32_t size;     /**< Bytes behind value (sizeof(void*) for DEVICE_PTR). */
  const void* value; /**< Read during kernelLaunch only. */
} flagosKernelArg;

/** The compiler table. Every member is required when the table is present. */
typedef struct flagosCompilerTable {
  uint32_t struct_size; /**< sizeof(flagosCompilerTable) as built. */

  /** Source language the generator must emit: "opencl-c", "c", "cuda-c". */
  const char* language;

  /** Compile @p source for physical @p device with @p options (may be "").
   * Blocking; thread-safe (the core compiles from a background pool; opencl serializes
   * builds on PoCL).
   * @param device in: physical index. @param source in: NUL-terminated, in `language`.
   * @param options in: compiler flags; NULL is unspecified (the in-tree plugins read "").
   *        Both strings are read during the call only.
   * @param program out: the new program (NULL on failure), owned by the caller until
   *        programDestroy.
   * @returns FLAGOS_ERROR_COMPILE with the build log in the last-error
   *          string when the source is rejected (the core remembers it for that kernel and
   *          takes the next tier); FLAGOS_ERROR_INVALID_ARGUMENT for a NULL @p source or
   *          @p program or a bad device; FLAGOS_ERROR_DEVICE or FLAGOS_ERROR_OUT_OF_MEMORY
   *          (opencl) when the SDK fails otherwise (the core retries those later). */
  flagosStatus_t (*programBuild)(int32_t device, const char* source, const char* options,
                                 flagosProgram_t* program);

  /** Serialize @p program for the on-disk cache. Call with buffer NULL to
   * learn the size, then with a buffer of *size bytes. Blocking, thread-safe.
   * @param program in: a live program. @param buffer out: owned by the caller; NULL asks for the
   * size.
   * @param size in: the buffer's capacity (when @p buffer is given); out: the binary's size
   *        (bytes written). Must not be NULL.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL @p size, a buffer
   *          smaller than the binary, or a NULL or destroyed @p program;
   *          FLAGOS_ERROR_NOT_SUPPORTED (opencl) when the driver offers no binary. On any
   *          failure the core just does not cache the program. */
  flagosStatus_t (*programGetBinary)(flagosProgram_t program, void* buffer, uint64_t* size);

  /** Recreate a program from programGetBinary's bytes. Blocking, thread-safe.
   * @param binary in: @p size bytes, read during the call only (may be truncated, corrupted
   *        or from another machine: the in-tree plugins check the kit's envelope first).
   * @param program out: as for programBuild.
   * @returns FLAGOS_ERROR_COMPILE for a binary this device/driver cannot
   *          load (the core then rebuilds from source, as it does after any failure);
   *          FLAGOS_ERROR_INVALID_ARGUMENT for a NULL @p binary or @p program or a bad
   *          device. */
  flagosStatus_t (*programLoadBinary)(int32_t device, const void* binary, uint64_t size,
                                      flagosProgram_t* program);

  /** Free @p program; returns at once, and launches already enqueued still complete (their
   * code stays loaded until they ran). The handle is invalid afterwards.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL or destroyed
   *          @p program. */
  flagosStatus_t (*programDestroy)(flagosProgram_t program);

  /** Enqueue kernel @p name of @p program on @p stream and return at once.
   * @param program, @p stream in: live handles of one device; @param name in: NUL-terminated.
   * @p name, @p args (and the values they point to), @p global and @p local are read during
   * the call only; device memory the arguments address must stay allocated until the stream
   * passes the launch. Thread-safe, also for launches of one program from several threads.
   * Unspecified: opencl on PoCL waits for the first launch of a new work size to finish.
   * @param args @p num_args arguments (may be NULL when num_args is 0).
   * @param work_dim 1 .. 3 (language "c": 1; the core always launches 1-D).
   * @param global work items per dimension (work_dim values); need not be a
   *        multiple of local: the plugin rounds it up and the kernel skips
   *        the items past the end (Note [Launch geometry]). A 0 launches nothing.
   * @param local  work-group size per dimension (no 0), or NULL to let the plugin
   *        choose. The core always gives one for generated kernels.
   * @returns FLAGOS_ERROR_INVALID_ARGUMENT for an unknown kernel name or a
   *          wrong argument count, a malformed argument, a NULL @p name or @p global, a
   *          work_dim outside 1..3, a local size of 0, a program and stream of different
   *          devices, or a device address of another device; FLAGOS_ERROR_NOT_SUPPORTED
   *          for work_dim != 1 in language "c"; FLAGOS_ERROR_OUT_OF_MEMORY or
   *          FLAGOS_ERROR_DEVICE (opencl) when the enqueue fails. The core raises on any
   *          failure. A failure of the kernel itself is the stream's asynchronous error. */
  flagosStatus_t (*kernelLaunch)(flagosProgram_t program, const char* name,
                                 const flagosKernelArg* args, int32_t num_args, int32_t work_dim,
                                 const uint64_t* global, const uint64_t* local,
                                 flagosStream_t stream);
} flagosCompilerTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLAGOS_COMPILER_H_ */
