// What the torch.linalg composites share: the plugin's linear-algebra table
// (include/flagos/linalg.h), operands in its layout, and its statuses.
//
// Note [Linear algebra through the library slot]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every vendor ships dense linear algebra as a LAPACK-like library, so the
// ABI hands the core its batched primitives (getrf, getrs, potrf, trsm,
// geqrf, orgqr, ormqr, gesvd, syevd) and the core builds ATen's linalg
// operators from them, as ATen builds its CPU and CUDA kernels from LAPACK
// and cuSOLVER. Each composite (linalg_lu.cpp, linalg_triangular.cpp,
// linalg_orthogonal.cpp) copies its operands into fresh column-major
// batches on the device (what every such library takes, and the layout
// ATen's own linalg outputs have), calls the primitives on the current
// stream, and finishes with at:: operators on the device (triangles,
// diagonals, products), which take their own best tiers. The outputs are
// CPU's: the same values (up to the signs of singular vectors and
// eigenvectors, which LAPACK leaves to the implementation, as torch.linalg's
// documentation says), the same strides, and the same auxiliary outputs the
// autograd formulas read (the LU of A^T where CPU factors A^T).
//
// A composite takes a call only when the slot has every member it needs
// and the operands are float32/float64 on the device with the shapes CPU
// accepts; anything else (complex, half, a CPU error to raise, a member the
// plugin leaves NULL or declines with NOT_SUPPORTED) leaves the call to the
// host tier, counted. Empty batches are computed without the library.
// Numerical failures (a singular matrix, a matrix not positive definite)
// come back in info and raise through ATen's own _linalg_check_errors with
// CPU's message, exactly where CPU raises. Reading info is a device sync,
// as on CPU and CUDA; lu_unpack also reads the pivots on the host to build
// the permutation (k integers per matrix).
#pragma once

#include <ATen/ATen.h>

#include <initializer_list>
#include <vector>

#include "flagos/linalg.h"

namespace flagos::composite::linalg {

// The active plugin's linear-algebra table, or nullptr.
const flagosLinalgTable* table();

// Whether @p t is a tensor the slot takes: on the flagos device, float32 or
// float64, at least 2-D. Square when @p square.
bool takes(const at::Tensor& t, bool square = false);

// The slot's dtype for float32/float64 tensors.
flagosDtype_t dtypeOf(const at::Tensor& t);

// An uninitialized batch of column-major matrices: @p sizes (..., rows,
// cols) with ATen's batched Fortran strides.
at::Tensor emptyColumnMajor(at::IntArrayRef sizes, const at::TensorOptions& options);
// A column-major copy of @p t (which the library may then overwrite).
at::Tensor columnMajorCopy(const at::Tensor& t);
// @p t itself when it already has that layout, else such a copy: for
// operands the library only reads.
at::Tensor columnMajor(const at::Tensor& t);

// @p t's batch dims (all but the last two), and @p batch followed by @p tail.
at::IntArrayRef batchOf(const at::Tensor& t);
std::vector<int64_t> withTail(at::IntArrayRef batch, std::initializer_list<int64_t> tail);

// The number of matrices in @p t (the product of its batch dims).
int64_t batchCount(const at::Tensor& t);

// @p t as the slot's array: a column-major batch (emptyColumnMajor's
// layout), or, for a vector argument (pivots, tau, S, W), a contiguous one.
flagosLinalgArray matrixArg(const at::Tensor& t);
flagosLinalgArray vectorArg(const at::Tensor& t);

// The calling thread's current vendor stream on @p t's device.
flagosStream_t streamOf(const at::Tensor& t);

// A member's status: true on success; false for FLAGOS_ERROR_NOT_SUPPORTED
// (the composite declines, and nothing the caller sees has been written);
// any other status raises with the plugin's message.
bool ok(flagosStatus_t status, const char* member);

// The identity batch: @p batch_sizes + (n, n), column-major.
at::Tensor identity(at::IntArrayRef batch_sizes, int64_t n, const at::TensorOptions& options);

}  // namespace flagos::composite::linalg
