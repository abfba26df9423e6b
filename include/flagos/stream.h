/*
 * flagos vendor ABI — streams and events.
 *
 * A stream is an in-order queue of work on one device (kernels, async copies,
 * memsets, event records). Work on different streams may run concurrently;
 * events order them. The core creates one stream per device at start-up and
 * uses it as PyTorch's default stream, so plugins need no special NULL stream.
 */
#ifndef FLAGOS_STREAM_H_
#define FLAGOS_STREAM_H_

#include "flagos/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque stream handle, owned by the plugin. */
typedef struct flagosStream_st* flagosStream_t;
/** Opaque event handle, owned by the plugin. */
typedef struct flagosEvent_st* flagosEvent_t;

/** eventCreate flags. */
#define FLAGOS_EVENT_DEFAULT 0u
/** Record timestamps so eventElapsedTime works (may cost a little). */
#define FLAGOS_EVENT_TIMING 1u

/** The stream and event table. Every member is required (non-NULL). All
 * members are thread-safe; handles may be used from any thread. Handles passed in must be
 * live (created, not yet destroyed): NULL is FLAGOS_ERROR_INVALID_ARGUMENT, and so is a
 * destroyed handle in the common cases the in-tree plugins detect (a magic word). */
typedef struct flagosStreamTable {
  uint32_t struct_size; /**< sizeof(flagosStreamTable) as the plugin was built. */

  /** Create a stream on physical @p device. Returns once the stream is usable.
   * @param priority 0 = normal; negative = higher priority (a hint: the core passes -1 for
   *        its high-priority pool streams; the in-tree plugins ignore it).
   * @param stream out: the new handle, owned by the caller until streamDestroy.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL @p stream or a bad
   *          device; FLAGOS_ERROR_DEVICE or FLAGOS_ERROR_OUT_OF_MEMORY when the SDK (or, on
   *          host, the thread limit) refuses. */
  flagosStatus_t (*streamCreate)(int32_t device, int32_t priority, flagosStream_t* stream);

  /** Destroy @p stream: blocks until its queued work completes, then the handle is invalid
   * (no other thread may use it meanwhile). Unspecified: an asynchronous error still pending
   * on the stream is dropped by all in-tree plugins, not returned.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL or destroyed
   *          @p stream. */
  flagosStatus_t (*streamDestroy)(flagosStream_t stream);

  /** Block the caller until all work queued on @p stream before the call is done (work other
   * threads queue meanwhile need not be waited for).
   * @returns FLAGOS_SUCCESS, or the first asynchronous error on the stream (reported once,
   *          then cleared, with its message); FLAGOS_ERROR_INVALID_ARGUMENT for a NULL or
   *          destroyed @p stream. */
  flagosStatus_t (*streamSynchronize)(flagosStream_t stream);

  /** Non-blocking: FLAGOS_SUCCESS if all queued work is done,
   * FLAGOS_ERROR_NOT_READY if not (never an error for pending work; no message). Once the
   * work is done it reports the stream's asynchronous error like streamSynchronize;
   * FLAGOS_ERROR_INVALID_ARGUMENT for a NULL or destroyed @p stream. */
  flagosStatus_t (*streamQuery)(flagosStream_t stream);

  /** Make future work on @p stream wait until @p event has completed.
   * Returns at once (the wait happens on the device or stream worker). The capture the
   * event holds at the call counts: re-recording it later changes nothing, and it may be
   * destroyed right after. An event never recorded counts as completed.
   * Unspecified: an event of another device (all in-tree plugins accept it; opencl through
   * a user event; the suite does not test it).
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL or destroyed handle;
   *          FLAGOS_ERROR_DEVICE when the SDK cannot enqueue the wait. */
  flagosStatus_t (*streamWaitEvent)(flagosStream_t stream, flagosEvent_t event);

  /** Create an event on physical @p device. Returns at once.
   * @param flags FLAGOS_EVENT_DEFAULT or FLAGOS_EVENT_TIMING.
   * @param event out: the new handle, owned by the caller until eventDestroy.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL @p event, a bad device
   *          or unknown flags. */
  flagosStatus_t (*eventCreate)(int32_t device, uint32_t flags, flagosEvent_t* event);

  /** Destroy @p event; returns at once, and pending records and waits on it still
   * complete. The handle is invalid afterwards.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL or destroyed @p event. */
  flagosStatus_t (*eventDestroy)(flagosEvent_t event);

  /** Capture the current tail of @p stream into @p event (re-recording
   * replaces the previous capture). Returns at once.
   * @returns FLAGOS_ERROR_INVALID_ARGUMENT if the event and the stream
   *          belong to different devices, or for a NULL or destroyed handle;
   *          FLAGOS_ERROR_DEVICE when the SDK cannot enqueue the marker. */
  flagosStatus_t (*eventRecord)(flagosEvent_t event, flagosStream_t stream);

  /** Non-blocking: FLAGOS_SUCCESS when the captured work is done (or the
   * event was never recorded), FLAGOS_ERROR_NOT_READY otherwise;
   * FLAGOS_ERROR_INVALID_ARGUMENT for a NULL or destroyed @p event.
   * Unspecified: captured work that failed (opencl: FLAGOS_ERROR_DEVICE; host and skeleton:
   * FLAGOS_SUCCESS). It does not clear the stream's asynchronous error. */
  flagosStatus_t (*eventQuery)(flagosEvent_t event);

  /** Block the caller until the captured work is done; returns at once for an event never
   * recorded. @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL or destroyed
   * @p event. Unspecified: failed captured work, as for eventQuery. */
  flagosStatus_t (*eventSynchronize)(flagosEvent_t event);

  /** Milliseconds between two completed events created with
   * FLAGOS_EVENT_TIMING (@p ms out: end minus start, 0 for the same event; negative when
   * @p end was captured before @p start). Non-blocking.
   * @returns FLAGOS_ERROR_NOT_READY if either is pending,
   *          FLAGOS_ERROR_INVALID_ARGUMENT if either lacks timing or was
   *          never recorded, or for a NULL @p ms or handle; FLAGOS_ERROR_DEVICE (opencl)
   *          when captured work failed or has no timestamps. */
  flagosStatus_t (*eventElapsedTime)(float* ms, flagosEvent_t start, flagosEvent_t end);
} flagosStreamTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLAGOS_STREAM_H_ */
