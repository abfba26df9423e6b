/*
 * flagos vendor ABI — status codes and the shared scalar types.
 *
 * Part of the vendor C ABI (see vendor.h for the versioning rules). Valid C99,
 * no PyTorch, no C++ types. Every ABI call returns a flagosStatus_t and writes
 * its results through out-parameters.
 */
#ifndef FLAGOS_STATUS_H_
#define FLAGOS_STATUS_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Symbols a plugin exports must be visible even when it builds with
 * -fvisibility=hidden (which it should: see Note [Plugin symbol isolation]
 * in docs/architecture.md). */
#if defined(_WIN32)
#define FLAGOS_EXPORT __declspec(dllexport)
#else
#define FLAGOS_EXPORT __attribute__((visibility("default")))
#endif

/* Status codes: one meaning each, explicitly numbered, never renumbered.
 * Stored in a fixed 32-bit integer so the ABI does not depend on how a
 * compiler sizes enums. Plugins map their SDK's errors onto these codes
 * rather than collapsing them all into FLAGOS_ERROR_DEVICE, and leave the
 * SDK's own message in the per-thread last-error string (getLastError). */
typedef int32_t flagosStatus_t;

/** The call succeeded; out-parameters are written. */
#define FLAGOS_SUCCESS ((flagosStatus_t)0)
/** An argument was NULL, out of range or inconsistent; nothing was done. */
#define FLAGOS_ERROR_INVALID_ARGUMENT ((flagosStatus_t)1)
/** This plugin does not implement this request (operator, dtype, layout,
 * feature). The core tries the next execution tier (generated, then
 * decomposition, then host); not an error. */
#define FLAGOS_ERROR_NOT_SUPPORTED ((flagosStatus_t)2)
/** The plugin asks the core to run this request on the host (tier 4) at
 * once, skipping the generated and decomposition tiers: e.g. a kernel that
 * knows its result would be inexact for these inputs, or inputs whose
 * errors only the host kernel reports as PyTorch does. Counted as a host
 * fallback, with the last-error message as its reason. */
#define FLAGOS_ERROR_FALLBACK ((flagosStatus_t)3)
/** Asynchronous work is still pending (stream/event query). Not an error. */
#define FLAGOS_ERROR_NOT_READY ((flagosStatus_t)4)
/** Device memory is exhausted. The core frees its cache and retries once,
 * then raises torch.OutOfMemoryError. Must be distinguishable from other
 * device errors for that retry to happen. */
#define FLAGOS_ERROR_OUT_OF_MEMORY ((flagosStatus_t)5)
/** The device or its driver reported a failure (launch failed, lost
 * device, ...). The last-error string carries the SDK's message. */
#define FLAGOS_ERROR_DEVICE ((flagosStatus_t)6)
/** probe: the SDK or driver is installed but no usable device exists, or
 * the SDK is missing. The core skips this plugin under backend "auto". */
#define FLAGOS_ERROR_NO_DEVICE ((flagosStatus_t)7)
/** A runtime compiler rejected a source; the build log is in the
 * last-error string. The core falls to the next tier and reports it. */
#define FLAGOS_ERROR_COMPILE ((flagosStatus_t)8)
/** A blocking call gave up after its timeout (collectives, sync). */
#define FLAGOS_ERROR_TIMEOUT ((flagosStatus_t)9)
/** The core and the plugin disagree on the ABI version. */
#define FLAGOS_ERROR_ABI_MISMATCH ((flagosStatus_t)10)
/** A bug inside the plugin (broken invariant). */
#define FLAGOS_ERROR_INTERNAL ((flagosStatus_t)11)

/* Element types of tensors crossing the ABI. Values follow DLPack's
 * (code, bits) pairs packed as code << 8 | bits, so they are stable and
 * self-describing. */
typedef int32_t flagosDtype_t;
#define FLAGOS_DTYPE_BOOL ((flagosDtype_t)((6 << 8) | 8))
#define FLAGOS_DTYPE_UINT8 ((flagosDtype_t)((1 << 8) | 8))
#define FLAGOS_DTYPE_INT8 ((flagosDtype_t)((0 << 8) | 8))
#define FLAGOS_DTYPE_INT16 ((flagosDtype_t)((0 << 8) | 16))
#define FLAGOS_DTYPE_INT32 ((flagosDtype_t)((0 << 8) | 32))
#define FLAGOS_DTYPE_INT64 ((flagosDtype_t)((0 << 8) | 64))
#define FLAGOS_DTYPE_FLOAT16 ((flagosDtype_t)((2 << 8) | 16))
#define FLAGOS_DTYPE_BFLOAT16 ((flagosDtype_t)((4 << 8) | 16))
#define FLAGOS_DTYPE_FLOAT32 ((flagosDtype_t)((2 << 8) | 32))
#define FLAGOS_DTYPE_FLOAT64 ((flagosDtype_t)((2 << 8) | 64))
#define FLAGOS_DTYPE_COMPLEX64 ((flagosDtype_t)((5 << 8) | 64))
#define FLAGOS_DTYPE_COMPLEX128 ((flagosDtype_t)((5 << 8) | 128))

/** Size in bytes of one element of @p dtype (bits / 8). */
#define FLAGOS_DTYPE_SIZE(dtype) ((size_t)(((dtype)&0xff) / 8))

/** The name of @p status ("FLAGOS_ERROR_NOT_READY"), for messages and logs;
 * "unknown flagos status" for codes this header does not define (a newer
 * minor's). Static storage; never NULL. Added in ABI 1.1 (header-only: it
 * works with plugins and cores of any minor). */
static inline const char* flagosStatusString(flagosStatus_t status) {
  switch (status) {
    case FLAGOS_SUCCESS:
      return "FLAGOS_SUCCESS";
    case FLAGOS_ERROR_INVALID_ARGUMENT:
      return "FLAGOS_ERROR_INVALID_ARGUMENT";
    case FLAGOS_ERROR_NOT_SUPPORTED:
      return "FLAGOS_ERROR_NOT_SUPPORTED";
    case FLAGOS_ERROR_FALLBACK:
      return "FLAGOS_ERROR_FALLBACK";
    case FLAGOS_ERROR_NOT_READY:
      return "FLAGOS_ERROR_NOT_READY";
    case FLAGOS_ERROR_OUT_OF_MEMORY:
      return "FLAGOS_ERROR_OUT_OF_MEMORY";
    case FLAGOS_ERROR_DEVICE:
      return "FLAGOS_ERROR_DEVICE";
    case FLAGOS_ERROR_NO_DEVICE:
      return "FLAGOS_ERROR_NO_DEVICE";
    case FLAGOS_ERROR_COMPILE:
      return "FLAGOS_ERROR_COMPILE";
    case FLAGOS_ERROR_TIMEOUT:
      return "FLAGOS_ERROR_TIMEOUT";
    case FLAGOS_ERROR_ABI_MISMATCH:
      return "FLAGOS_ERROR_ABI_MISMATCH";
    case FLAGOS_ERROR_INTERNAL:
      return "FLAGOS_ERROR_INTERNAL";
    default:
      return "unknown flagos status";
  }
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLAGOS_STATUS_H_ */
