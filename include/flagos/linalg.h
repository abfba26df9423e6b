/*
 * flagos vendor ABI — the optional dense linear-algebra library slot (ABI 1.4).
 *
 * Every vendor ships its dense linear algebra as a library (cuSOLVER,
 * rocSOLVER, a LAPACK), not as kernels. This table hands the library's
 * batched LAPACK primitives to the core, which builds torch.linalg on them
 * (LU, solve, inv, det, Cholesky, QR, SVD, eigh, eig, LDL, triangular solves, ...: see
 * Note [Linear algebra through the library slot] in the core). The core
 * brings every operand into the layout below first, so a member only ever
 * sees what LAPACK itself takes.
 *
 * Layout. Every matrix argument is a batch of `batch` matrices in device
 * memory, each column-major (LAPACK's order) with leading dimension ld >=
 * max(1, rows), the matrices `stride` elements apart (stride >= ld * cols;
 * batches never overlap). Vectors (pivots, tau, singular values,
 * eigenvalues) are contiguous, `stride` elements apart per matrix; info is
 * one int32 per matrix, contiguous. Pivots are int32 and 1-based, as LAPACK
 * (and torch.linalg.lu_factor) gives them. Every size is >= 1 and batch >=
 * 1: the core calls nothing on empty tensors.
 *
 * Precision. dtype is the matrices' element type: FLAGOS_DTYPE_FLOAT32,
 * _FLOAT64, _COMPLEX64 or _COMPLEX128; singular values and eigenvalues use
 * its real type. A member returns FLAGOS_ERROR_NOT_SUPPORTED (before touching
 * memory) for a dtype it does not do; the core then runs the operator on the
 * host tier, counted like every fallback (flagos_torchfl.op_stats()). The
 * core asks for float32 and float64 today.
 *
 * Execution. Every member enqueues its work on `stream` (a stream of the
 * current device) and returns at once, or computes synchronously (also
 * correct); the operands stay alive until the stream passes the work, as for
 * kernels (kernel.h). Numerical failures are not errors: they go to info
 * (LAPACK's meaning: > 0 names the failing pivot or minor), which the core
 * reads only when PyTorch would (check_errors, the non-_ex operators). A
 * member returns FLAGOS_ERROR_INVALID_ARGUMENT for a NULL pointer or a
 * layout that breaks the rules above, FLAGOS_ERROR_OUT_OF_MEMORY when it
 * cannot get its workspace, FLAGOS_ERROR_DEVICE for asynchronous failures
 * (the stream's error).
 *
 * The table is optional, and so is each member: a NULL member sends the
 * operators that need it to the host tier (`flagos_torchfl ops` lists which
 * members a plugin fills). Every member may be called only after
 * device.init() succeeded (vendor.h) and is thread-safe.
 */
#ifndef FLAGOS_LINALG_H_
#define FLAGOS_LINALG_H_

#include "flagos/status.h"
#include "flagos/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How a member uses a matrix argument: as stored, transposed, or
 * conjugate-transposed (the same as transposed for real dtypes). */
typedef int32_t flagosLinalgOp_t;
#define FLAGOS_LINALG_OP_N ((flagosLinalgOp_t)0)
#define FLAGOS_LINALG_OP_T ((flagosLinalgOp_t)1)
#define FLAGOS_LINALG_OP_C ((flagosLinalgOp_t)2)

/** flagosLinalgTable.gesvd's job: what is computed besides the singular values. */
typedef int32_t flagosLinalgSvdJob_t;
/** The singular values only; u and vh are not touched (may be NULL). */
#define FLAGOS_LINALG_SVD_VALUES ((flagosLinalgSvdJob_t)0)
/** The thin factors: u is m x k, vh k x n, k = min(m, n). */
#define FLAGOS_LINALG_SVD_REDUCED ((flagosLinalgSvdJob_t)1)
/** The full factors: u is m x m, vh n x n. */
#define FLAGOS_LINALG_SVD_FULL ((flagosLinalgSvdJob_t)2)

/** One array argument of a batch (see the layout rules above). */
typedef struct flagosLinalgArray {
  void* data;     /**< The first element of the first matrix or vector (device memory). */
  int64_t ld;     /**< Matrices: elements between columns, >= max(1, rows). Vectors: 1. */
  int64_t stride; /**< Elements between one matrix's (vector's) start and the next one's. */
} flagosLinalgArray;

/** The linear-algebra table. Optional as a whole and member by member (NULL: the operators
 * built on the member take the host tier). */
typedef struct flagosLinalgTable {
  uint32_t struct_size; /**< sizeof(flagosLinalgTable) as the plugin was built. */

  /** The library's name and version for reports ("OpenBLAS 0.3.21 LAPACK", "cuSOLVER
   * 11.7"); static lifetime. Required. */
  const char* library;

  /** LU with partial pivoting (LAPACK getrf): each m x n @p a becomes L (unit diagonal,
   * below) and U (on and above), P A = L U; @p ipiv receives min(m, n) 1-based row
   * interchanges, @p info 0, or i > 0 when U(i, i) is exactly zero (the factorization is
   * still complete). */
  flagosStatus_t (*getrf)(flagosStream_t stream, flagosDtype_t dtype, int64_t batch, int64_t m,
                          int64_t n, flagosLinalgArray a, flagosLinalgArray ipiv, int32_t* info);

  /** Solve with an LU from getrf (LAPACK getrs): each n x nrhs @p b becomes the solution X
   * of op(A) X = B, A = P L U the n x n factorization in @p a and @p ipiv. */
  flagosStatus_t (*getrs)(flagosStream_t stream, flagosDtype_t dtype, flagosLinalgOp_t op,
                          int64_t batch, int64_t n, int64_t nrhs, flagosLinalgArray a,
                          flagosLinalgArray ipiv, flagosLinalgArray b);

  /** Cholesky (LAPACK potrf): each Hermitian positive-definite n x n @p a, read from its
   * lower (@p upper 0) or upper triangle, becomes L (A = L L^H) or U (A = U^H U) in that
   * triangle; the other triangle is left as it was. @p info: 0, or i > 0 when the leading
   * minor of order i is not positive definite (the factorization stopped there). */
  flagosStatus_t (*potrf)(flagosStream_t stream, flagosDtype_t dtype, int32_t upper, int64_t batch,
                          int64_t n, flagosLinalgArray a, int32_t* info);

  /** Triangular solve (BLAS trsm, alpha 1): @p right 0: each m x n @p b becomes
   * op(A)^-1 B, A m x m; @p right 1: B op(A)^-1, A n x n. A is the lower (@p upper 0) or
   * upper triangle of @p a, with a unit diagonal when @p unit (its stored diagonal unread).
   * A singular A gives infinities or NaNs, as trsm does. */
  flagosStatus_t (*trsm)(flagosStream_t stream, flagosDtype_t dtype, int32_t right, int32_t upper,
                         flagosLinalgOp_t op, int32_t unit, int64_t batch, int64_t m, int64_t n,
                         flagosLinalgArray a, flagosLinalgArray b);

  /** QR (LAPACK geqrf): each m x n @p a becomes R (on and above the diagonal) and the
   * Householder vectors (below), @p tau their min(m, n) scalars. */
  flagosStatus_t (*geqrf)(flagosStream_t stream, flagosDtype_t dtype, int64_t batch, int64_t m,
                          int64_t n, flagosLinalgArray a, flagosLinalgArray tau);

  /** Q from Householder vectors (LAPACK orgqr/ungqr): each m x n @p a (m >= n >= k), its
   * first k columns the vectors with @p tau's k scalars, becomes the first n columns of
   * Q = H(1) ... H(k). */
  flagosStatus_t (*orgqr)(flagosStream_t stream, flagosDtype_t dtype, int64_t batch, int64_t m,
                          int64_t n, int64_t k, flagosLinalgArray a, flagosLinalgArray tau);

  /** Multiply by Q (LAPACK ormqr/unmqr): each m x n @p c becomes op(Q) C (@p right 0) or
   * C op(Q) (@p right 1), Q = H(1) ... H(k) from the first k columns of @p a (rows: m for
   * the left side, n for the right) and @p tau. @p op is N, or T for real / C for complex
   * dtypes. */
  flagosStatus_t (*ormqr)(flagosStream_t stream, flagosDtype_t dtype, int32_t right,
                          flagosLinalgOp_t op, int64_t batch, int64_t m, int64_t n, int64_t k,
                          flagosLinalgArray a, flagosLinalgArray tau, flagosLinalgArray c);

  /** Singular values and vectors (LAPACK gesdd or gesvd): A = U diag(S) V^H for each
   * m x n @p a, which is destroyed. @p s receives min(m, n) values, descending; @p u and
   * @p vh the factors @p job asks for (their signs are the library's). @p info: 0, or > 0
   * when the iteration did not converge. */
  flagosStatus_t (*gesvd)(flagosStream_t stream, flagosDtype_t dtype, flagosLinalgSvdJob_t job,
                          int64_t batch, int64_t m, int64_t n, flagosLinalgArray a,
                          flagosLinalgArray s, flagosLinalgArray u, flagosLinalgArray vh,
                          int32_t* info);

  /** Symmetric / Hermitian eigensolver (LAPACK syevd/heevd): each n x n @p a, read from its
   * lower (@p upper 0) or upper triangle, gives its n eigenvalues in @p w, ascending; with
   * @p vectors, @p a is overwritten by the orthonormal eigenvectors (column j for w[j];
   * signs are the library's), without, its contents are undefined afterwards. @p info: 0,
   * or > 0 when the iteration did not converge. */
  flagosStatus_t (*syevd)(flagosStream_t stream, flagosDtype_t dtype, int32_t vectors,
                          int32_t upper, int64_t batch, int64_t n, flagosLinalgArray a,
                          flagosLinalgArray w, int32_t* info);

  /** Eigenvalues and right eigenvectors of a general matrix (LAPACK geev): each n x n
   * @p a (destroyed) gives its n eigenvalues in @p w and, with @p vectors, its eigenvectors
   * in @p v (column j for w[j], each of unit 2-norm with its largest component real, as
   * LAPACK normalizes them; a real matrix's conjugate pairs come positive imaginary part
   * first). @p w and @p v are complex, of dtype's complex type for a real dtype (complex64
   * for float32): interleaved real and imaginary parts, ld and stride counted in complex
   * elements; @p v is not touched without @p vectors (may be NULL). @p info: 0, or > 0 when
   * the QR algorithm did not converge. */
  flagosStatus_t (*geev)(flagosStream_t stream, flagosDtype_t dtype, int32_t vectors, int64_t batch,
                         int64_t n, flagosLinalgArray a, flagosLinalgArray w, flagosLinalgArray v,
                         int32_t* info);

  /** Symmetric indefinite factorization (LAPACK sytrf, Bunch-Kaufman diagonal pivoting):
   * each symmetric n x n @p a, read from its lower (@p upper 0) or upper triangle, becomes
   * the block-diagonal D and the multipliers of L (A = L D L^T) or U (A = U D U^T) in that
   * triangle; @p ipiv receives the n pivots in LAPACK's encoding (> 0: a 1 x 1 block and the
   * row interchanged with; < 0: a 2 x 2 block). @p info: 0, or i > 0 when D(i, i) is
   * exactly zero (the factorization is complete, D singular). */
  flagosStatus_t (*sytrf)(flagosStream_t stream, flagosDtype_t dtype, int32_t upper, int64_t batch,
                          int64_t n, flagosLinalgArray a, flagosLinalgArray ipiv, int32_t* info);

  /** Solve with a sytrf factorization (LAPACK sytrs): each n x nrhs @p b becomes the
   * solution X of A X = B, A factored in the @p upper or lower triangle of @p a with
   * @p ipiv. */
  flagosStatus_t (*sytrs)(flagosStream_t stream, flagosDtype_t dtype, int32_t upper, int64_t batch,
                          int64_t n, int64_t nrhs, flagosLinalgArray a, flagosLinalgArray ipiv,
                          flagosLinalgArray b);
} flagosLinalgTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLAGOS_LINALG_H_ */
