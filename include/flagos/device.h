/*
 * flagos vendor ABI — the device table: probe, enumerate, select, synchronize.
 *
 * Device indices in this table are the plugin's *physical* indices, 0 ..
 * count-1. The core maps PyTorch's logical indices onto them
 * (FLAGOS_VISIBLE_DEVICES), so a plugin never sees logical indices.
 */
#ifndef FLAGOS_DEVICE_H_
#define FLAGOS_DEVICE_H_

#include "flagos/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What probe() learned about the SDK and driver. Written by the plugin;
 * the core zero-fills it and sets struct_size before the call. */
typedef struct flagosProbeInfo {
  uint32_t struct_size;    /**< sizeof(flagosProbeInfo) as the core knows it. */
  int32_t device_count;    /**< Usable devices found (0 when unavailable). */
  char sdk_name[64];       /**< e.g. "OpenCL", "CUDA", "host". NUL-terminated. */
  char sdk_version[64];    /**< SDK/runtime version string. */
  char driver_version[64]; /**< Driver version string ("" if none). */
  char reason[256];        /**< Why the plugin is unusable; "" when usable. */
  /** Rank under backend "auto" now that the devices are known, overriding
   * flagosVendorTables.priority; 0 keeps the tables' value. Lets one
   * plugin rank as an accelerator on a GPU and below the host plugin when
   * it found only CPU devices (OpenCL on PoCL). */
  int32_t priority;
} flagosProbeInfo;

/** Static properties of one physical device. The core zero-fills it and
 * sets struct_size before the call. */
typedef struct flagosDeviceProperties {
  uint32_t struct_size;     /**< sizeof(flagosDeviceProperties) as the core knows it. */
  int32_t compute_units;    /**< Multiprocessors / compute units / cores. */
  uint64_t total_memory;    /**< Bytes of device memory the plugin will hand out. */
  int32_t capability_major; /**< Vendor architecture version, 0 if meaningless. */
  int32_t capability_minor;
  char name[256]; /**< Marketing name, NUL-terminated. */
  char arch[64];  /**< Architecture string; part of kernel-cache keys. */
  /* Appended members: a plugin built before them leaves them 0 (struct_size). */
  /** Largest local size (work-group size, dimension 0) kernelLaunch accepts
   * for a kernel without barriers; 0 when there is no limit. */
  uint32_t max_work_group_size;
  /** The local size the core gives every generated-kernel launch
   * (Note [Launch geometry], compiler.h); 0 lets the core choose
   * min(256, max_work_group_size). For language "c" it is the smallest range
   * one thread runs. */
  uint32_t preferred_work_group_size;
  /* Appended in ABI 1.1: a 1.0 plugin leaves them 0 (the core's struct_size
   * is larger than the plugin's, and writeSized-style copies stop short). */
  /** Whether the device computes float64 (FLAGOS_FP64_*). 0 (unknown, a 1.0
   * plugin): the core asks the runtime compiler, when there is one. The
   * answer decides whether float64 kernels are generated and reach native
   * kernels; without fp64 float64 operators take the host tier. */
  int32_t fp64;
  /** The dtype torch.autocast("flagos") picks when no dtype is given:
   * FLAGOS_DTYPE_FLOAT16 or FLAGOS_DTYPE_BFLOAT16, whichever the device runs
   * fastest; 0: the core's default (float16, as CUDA). Users override it
   * with FLAGOS_AMP_DTYPE or flagos_torchfl.amp.set_policy. */
  flagosDtype_t autocast_dtype;
} flagosDeviceProperties;

/** flagosDeviceProperties.fp64 values. */
#define FLAGOS_FP64_UNKNOWN 0
#define FLAGOS_FP64_NATIVE 1
#define FLAGOS_FP64_NONE 2

/** The device table. Every member is required (non-NULL). */
typedef struct flagosDeviceTable {
  uint32_t struct_size; /**< sizeof(flagosDeviceTable) as the plugin was built. */

  /** Is the SDK/driver present and is there at least one device?
   * Called before init() (the core probes every candidate plugin, also ones it does not
   * pick); must be cheap, must not allocate device memory, and must be repeatable (the
   * conformance suite calls it again after init() and expects the same answer).
   * @param info  out (struct_size preset by the caller; at most struct_size bytes written):
   *        SDK versions, device count, reason when unusable.
   * @returns FLAGOS_SUCCESS when usable; FLAGOS_ERROR_NO_DEVICE with info->reason set when
   *          not; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL @p info or a struct_size < 4.
   *          Blocking only for as long as the SDK's discovery takes. Thread-safe. */
  flagosStatus_t (*probe)(flagosProbeInfo* info);

  /** Bring the plugin up (contexts, queues, memory arenas). Called once, after a successful
   * probe(), before any other member below; blocks until done. The core never retries a
   * failed init (the in-tree plugins answer a repeated call with FLAGOS_SUCCESS).
   * @returns FLAGOS_SUCCESS, FLAGOS_ERROR_DEVICE (the in-tree plugins' answer for every
   *          failure, e.g. bad configuration), FLAGOS_ERROR_INTERNAL. */
  flagosStatus_t (*init)(void);

  /** Release everything init() created, including streams left over (drained first, so no
   * plugin thread outlives the call: dlclose may follow). Blocks until done. May be a no-op
   * (the skeleton's); after it, host and opencl answer every call as before init().
   * Called at most once: the conformance suite calls it before dlclose, after freeing its
   * memory and destroying its streams and events. Unspecified: the core in this tree never
   * calls it (the plugin stays loaded until process exit).
   * @returns FLAGOS_SUCCESS (the in-tree plugins never fail it). */
  flagosStatus_t (*shutdown)(void);

  /** @param count out: number of physical devices (same as probe's).
   * Must not fail after a successful init(); returns at once.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL @p count or before
   *          init(). */
  flagosStatus_t (*getCount)(int32_t* count);

  /** @param device physical index; @param props out (struct_size preset by the caller and
   * kept; at most struct_size bytes written). Returns at once.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a bad index or a NULL
   *          @p props. */
  flagosStatus_t (*getProperties)(int32_t device, flagosDeviceProperties* props);

  /** Make @p device current for the calling thread (like cudaSetDevice); other threads keep
   * their own. Calls that take no explicit device act on the current one. Returns at once.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a bad index (the current
   *          device is then unchanged). */
  flagosStatus_t (*setCurrent)(int32_t device);

  /** @param device out: the calling thread's current device (0 initially, per thread).
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL @p device. */
  flagosStatus_t (*getCurrent)(int32_t* device);

  /** Block until all work queued on every stream of @p device before the call is done
   * (work other threads queue meanwhile may not be waited for).
   * @returns FLAGOS_SUCCESS or the first asynchronous error seen (each stream's error is
   *          reported once, then cleared); FLAGOS_ERROR_INVALID_ARGUMENT for a bad index. */
  flagosStatus_t (*synchronize)(int32_t device);
} flagosDeviceTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLAGOS_DEVICE_H_ */
