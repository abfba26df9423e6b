/*
 * flagos vendor ABI — the optional FFT library slot (ABI 1.3).
 *
 * Every vendor ships its FFT as a library with plans (cuFFT, rocFFT, clFFT),
 * not as kernels: a plan is made once for a transform's sizes, layout and
 * precision, then run many times. This table hands such a library to the
 * core. The core serves torch.fft (aten::_fft_c2c, _fft_r2c, _fft_c2r:
 * fft, ifft, rfft, irfft, hfft, fftn, stft, ...) through it on the native
 * tier, keeps the plans it made in a cache keyed by the whole descriptor,
 * and never asks for a transform in place. Without the table (vendor tables
 * point to NULL, or a plugin built before ABI 1.3) those operators take the
 * host tier, counted like every fallback (flagos_torchfl.op_stats()).
 */
#ifndef FLAGOS_FFT_H_
#define FLAGOS_FFT_H_

#include "flagos/kernel.h"
#include "flagos/status.h"
#include "flagos/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** flagosFftDesc.kind: the domains of input and output. */
typedef int32_t flagosFftKind_t;
/** Complex to complex, forward or inverse. */
#define FLAGOS_FFT_C2C ((flagosFftKind_t)1)
/** Real to complex, forward: the input is real, the output complex. */
#define FLAGOS_FFT_R2C ((flagosFftKind_t)2)
/** Complex to real, inverse: the input holds the first n/2 + 1 bins along the
 * last transformed dim (a Hermitian half spectrum), the output n reals. */
#define FLAGOS_FFT_C2R ((flagosFftKind_t)3)

/** One transform: plain data, zero-filled past the used entries, so that the
 * core keys its plan cache on the bytes. Sizes and strides count elements of
 * each side's own type (a complex element is one pair of reals). */
typedef struct flagosFftDesc {
  uint32_t struct_size; /**< sizeof(flagosFftDesc) as the core was built. */
  flagosFftKind_t kind; /**< FLAGOS_FFT_C2C, _R2C or _C2R. */
  /** The exponent's sign: 0 forward (e^{-2 pi i jk/n}), 1 inverse (e^{+2 pi i jk/n}). R2C is
   * always 0, C2R always 1. No scaling is implied: see scale. */
  int32_t inverse;
  /** R2C only: 1 when the output holds n/2 + 1 bins along the last transformed dim, 0 when
   * it holds all n (bin n - k the conjugate of bin k, as a C2C of the real input would
   * give). C2C: 0; C2R: 1. */
  int32_t onesided;
  /** The real precision: FLAGOS_DTYPE_FLOAT32 (complex sides COMPLEX64) or
   * FLAGOS_DTYPE_FLOAT64 (COMPLEX128). The core asks for nothing else. */
  flagosDtype_t dtype;
  int32_t ndim;     /**< Rank of input and output, 1 .. FLAGOS_MAX_DIMS. */
  int32_t num_dims; /**< How many dims are transformed, 1 .. ndim. */
  /** The transformed dims, distinct, each in [0, ndim); dims[num_dims - 1] is the one R2C
   * and C2R halve. The others are batch dims: every index along them is one transform. */
  int32_t dims[FLAGOS_MAX_DIMS];
  /** Input and output sizes per dim; equal on batch dims and on transformed dims except
   * the halved one. The signal length n of a transformed dim is the real side's size
   * (C2C: either side's). Every size is >= 1: the core calls no transform on an empty
   * tensor. */
  int64_t in_sizes[FLAGOS_MAX_DIMS];
  int64_t out_sizes[FLAGOS_MAX_DIMS];
  /** Strides per dim, in elements; never negative. Input strides may be 0 (a broadcast
   * input); the output never overlaps itself nor the input. */
  int64_t in_strides[FLAGOS_MAX_DIMS];
  int64_t out_strides[FLAGOS_MAX_DIMS];
  /** Every output element is multiplied by it (1.0, 1/n or 1/sqrt(n): torch's norm=). */
  double scale;
} flagosFftDesc;

/** A plan, made by planCreate for one descriptor on one device (opaque). */
typedef struct flagosFftPlan_st* flagosFftPlan_t;

/** The FFT table. Optional as a whole; when present every member is required. Every member
 * may be called only after device.init() succeeded (vendor.h) and is thread-safe. */
typedef struct flagosFftTable {
  uint32_t struct_size; /**< sizeof(flagosFftTable) as the plugin was built. */

  /** The library's name and version for reports ("kissfft 131", "cuFFT 12.0"); static
   * lifetime. */
  const char* library;

  /** Make a plan for @p desc on physical device @p device. May be slow (the core caches
   * plans and makes each once per process). The plan does not keep @p desc.
   * @returns FLAGOS_SUCCESS with @p plan set; FLAGOS_ERROR_NOT_SUPPORTED (before
   *          allocating anything) for a transform the library does not do (a rank, a size
   *          or a layout): the core then runs the call on the host tier and caches that
   *          answer as well; FLAGOS_ERROR_OUT_OF_MEMORY; FLAGOS_ERROR_INVALID_ARGUMENT for a
   *          NULL argument, a bad device or a descriptor that breaks the rules above. */
  flagosStatus_t (*planCreate)(int32_t device, const flagosFftDesc* desc, flagosFftPlan_t* plan);

  /** Enqueue the transform of @p plan on @p stream (a stream of the plan's device):
   * @p output (device memory laid out as the descriptor's output) receives the transform of
   * @p input, times scale. Returns at once, or computes synchronously (also correct).
   * @p input is never written (a library that overwrites its input, as cuFFT's C2R does,
   * works on a copy) and both stay alive until the stream passes the work, as for kernels
   * (kernel.h). The core may run one plan on several streams at once: any scratch memory
   * the library needs belongs to the execution, not to the plan.
   * @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a NULL or destroyed plan
   *          or stream; FLAGOS_ERROR_DEVICE (asynchronous failures: the stream's error). */
  flagosStatus_t (*execute)(flagosFftPlan_t plan, flagosStream_t stream, const void* input,
                            void* output);

  /** Release @p plan once no work that uses it is pending (the plugin waits or defers).
   * NULL is a no-op. @returns FLAGOS_SUCCESS; FLAGOS_ERROR_INVALID_ARGUMENT for a plan
   * already destroyed. */
  flagosStatus_t (*planDestroy)(flagosFftPlan_t plan);
} flagosFftTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLAGOS_FFT_H_ */
