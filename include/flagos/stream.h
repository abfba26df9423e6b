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
 * members are thread-safe; handles may be used from any thread. */
typedef struct flagosStreamTable {
  uint32_t struct_size; /**< sizeof(flagosStreamTable) as the plugin was built. */

  /** Create a stream on physical @p device.
   * @param priority 0 = normal; negative = higher priority (a hint).
   * @param stream out: the new handle.
   * @returns FLAGOS_ERROR_INVALID_ARGUMENT, FLAGOS_ERROR_DEVICE. */
  flagosStatus_t (*streamCreate)(int32_t device, int32_t priority, flagosStream_t* stream);

  /** Destroy @p stream: blocks until its queued work completes. */
  flagosStatus_t (*streamDestroy)(flagosStream_t stream);

  /** Block the caller until all work queued on @p stream is done.
   * @returns FLAGOS_SUCCESS, or the first asynchronous error on the stream. */
  flagosStatus_t (*streamSynchronize)(flagosStream_t stream);

  /** Non-blocking: FLAGOS_SUCCESS if all queued work is done,
   * FLAGOS_ERROR_NOT_READY if not (never an error for pending work). */
  flagosStatus_t (*streamQuery)(flagosStream_t stream);

  /** Make future work on @p stream wait until @p event has completed.
   * Returns at once. An event never recorded counts as completed. */
  flagosStatus_t (*streamWaitEvent)(flagosStream_t stream, flagosEvent_t event);

  /** Create an event on physical @p device.
   * @param flags FLAGOS_EVENT_DEFAULT or FLAGOS_EVENT_TIMING. */
  flagosStatus_t (*eventCreate)(int32_t device, uint32_t flags, flagosEvent_t* event);

  /** Destroy @p event; pending waits on it still complete. */
  flagosStatus_t (*eventDestroy)(flagosEvent_t event);

  /** Capture the current tail of @p stream into @p event (re-recording
   * replaces the previous capture). Returns at once.
   * @returns FLAGOS_ERROR_INVALID_ARGUMENT if the event and the stream
   *          belong to different devices. */
  flagosStatus_t (*eventRecord)(flagosEvent_t event, flagosStream_t stream);

  /** Non-blocking: FLAGOS_SUCCESS when the captured work is done (or the
   * event was never recorded), FLAGOS_ERROR_NOT_READY otherwise. */
  flagosStatus_t (*eventQuery)(flagosEvent_t event);

  /** Block the caller until the captured work is done. */
  flagosStatus_t (*eventSynchronize)(flagosEvent_t event);

  /** Milliseconds between two completed events created with
   * FLAGOS_EVENT_TIMING.
   * @returns FLAGOS_ERROR_NOT_READY if either is pending,
   *          FLAGOS_ERROR_INVALID_ARGUMENT if either lacks timing or was
   *          never recorded. */
  flagosStatus_t (*eventElapsedTime)(float* ms, flagosEvent_t start, flagosEvent_t end);
} flagosStreamTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLAGOS_STREAM_H_ */
