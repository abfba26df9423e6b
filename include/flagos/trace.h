/*
 * flagos vendor ABI — the optional tracing table (ABI 1.2).
 *
 * Device activity for torch.profiler: while tracing is enabled the plugin
 * keeps one record per piece of device work (a kernel, an async copy, a
 * fill) with its start and end time on the host clock; the core drains the
 * records when the profiler stops and hands them to Kineto, linked to the
 * ATen operator that launched them through the correlation id the core set
 * on the launching thread. Without the table (vendor tables point to NULL,
 * or a plugin built before ABI 1.2) torch.profiler shows CPU rows only.
 */
#ifndef FLAGOS_TRACE_H_
#define FLAGOS_TRACE_H_

#include "flagos/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** flagosTraceRecord.kind: what the device did. */
typedef uint32_t flagosTraceKind_t;
/** A kernel: native (kernel.h) or generated (compiler.h). */
#define FLAGOS_TRACE_KERNEL ((flagosTraceKind_t)1)
/** An asynchronous copy (memory.h memcpyAsync, or one the plugin made itself). */
#define FLAGOS_TRACE_MEMCPY ((flagosTraceKind_t)2)
/** A fill (memory.h memFill). */
#define FLAGOS_TRACE_MEMSET ((flagosTraceKind_t)3)

/** Bytes of flagosTraceRecord.name, its terminating NUL included. */
#define FLAGOS_TRACE_NAME_BYTES 64

/** One finished piece of device work. Plain data, copied out by drain: the
 * layout is fixed within ABI major 1 (a later minor may only give meaning to
 * `reserved`). */
typedef struct flagosTraceRecord {
  flagosTraceKind_t kind; /**< FLAGOS_TRACE_KERNEL, _MEMCPY or _MEMSET. */
  int32_t device;         /**< Physical device index the work ran on. */
  /** The stream's identity for the trace viewer: any value that is the same for all work of
   * one stream and differs between live streams of a device (the in-tree plugins use a
   * per-stream counter). */
  uint64_t stream_id;
  /** The correlation id set (setCorrelationId) on the thread that queued the work, at the
   * time it queued it; 0 when none was set. */
  uint64_t correlation_id;
  /** When the work started and ended on the device, in nanoseconds of the host's
   * CLOCK_MONOTONIC (std::chrono::steady_clock on Linux, the clock of c10::getTime): a
   * device with its own timer maps its times onto this clock (the opencl plugin samples
   * both clocks at enable). start_ns <= end_ns. */
  int64_t start_ns;
  int64_t end_ns;
  /** NUL-terminated display name ("aten.mm", "Memcpy DtoD", a generated kernel's name),
   * truncated to fit. */
  char name[FLAGOS_TRACE_NAME_BYTES];
  uint64_t reserved; /**< 0. */
} flagosTraceRecord;

/** The tracing table. Optional as a whole (vendor tables may point to NULL); when present
 * every member is required. All members are thread-safe, return at once (drain does not
 * wait for work in flight), and may be called only after device.init() succeeded (before:
 * FLAGOS_ERROR_INVALID_ARGUMENT, vendor.h). */
typedef struct flagosTraceTable {
  uint32_t struct_size; /**< sizeof(flagosTraceTable) as the plugin was built. */

  /** Start recording: work queued after the call (on any thread, any device) produces
   * records; records left from an earlier enable are discarded. Enabling twice is
   * allowed (the second call only discards). Tracing may cost the plugin a little per
   * launch (the in-tree plugins: a clock read and a lock); when disabled the cost must be
   * a load of a flag.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_DEVICE when the device timer cannot be read. */
  flagosStatus_t (*enable)(void);

  /** Stop recording: work queued after the call produces no records. Records of work
   * queued before stay drainable (work still in flight finishes its record when it
   * completes). Disabling while disabled is a no-op.
   * @returns FLAGOS_SUCCESS. */
  flagosStatus_t (*disable)(void);

  /** Set the calling thread's current correlation id (thread-local in the plugin): work this
   * thread queues from now on carries @p correlation_id in its record. 0 clears it. The
   * core calls it around every ATen operator while torch.profiler records, from the
   * thread that runs the operator.
   * @returns FLAGOS_SUCCESS. */
  flagosStatus_t (*setCorrelationId)(uint64_t correlation_id);

  /** Move up to @p capacity finished records into @p records (the caller's array; oldest
   * first) and write how many to @p count. Work still running is left for a later drain;
   * a record drained once is gone. The plugin keeps a bounded number of undrained records
   * (the in-tree plugins: 65536) and drops new ones beyond that, counting them in
   * @p dropped.
   * @param dropped out (may be NULL): records dropped since the last drain for lack of room.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL @p records with
   *          @p capacity > 0, a negative @p capacity or a NULL @p count. */
  flagosStatus_t (*drain)(flagosTraceRecord* records, int32_t capacity, int32_t* count,
                          uint64_t* dropped);
} flagosTraceTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLAGOS_TRACE_H_ */
