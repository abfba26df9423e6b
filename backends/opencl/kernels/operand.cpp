// Resolving kernel arguments: tensors to (cl_mem, element offset) and
// strides to the row-major/transpose/leading-dimension triple CLBlast takes.
#include <algorithm>

#include "blas.h"

namespace flagos_opencl::kernels {

Resolved resolveBytes(const char* op, flagosStream_t stream, const flagosTensor& t, cl_mem* buffer,
                      uint64_t* offset) {
  if (t.data == nullptr || t.ndim < 0) return {FLAGOS_ERROR_NOT_SUPPORTED};
  const uint64_t esize = FLAGOS_DTYPE_SIZE(t.dtype);
  uint64_t extent = 1;  // elements from the first to one past the last
  for (int d = 0; d < t.ndim; ++d) {
    // A size-1 dim is never stepped: its stride means nothing.
    const int64_t stride = t.shape[d] == 1 ? 0 : t.strides[d];
    if (t.shape[d] <= 0 || stride < 0) return {FLAGOS_ERROR_NOT_SUPPORTED};
    extent += static_cast<uint64_t>(t.shape[d] - 1) * static_cast<uint64_t>(stride);
  }
  DevicePtr p;
  if (!resolve(op, t.data, extent * esize, &p)) return {FLAGOS_ERROR_INVALID_ARGUMENT};
  if (p.device != stream->device) {
    return {fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                 "opencl %s: a tensor is on device %d, the stream on %d", op, p.device->index,
                 stream->device->index)};
  }
  // Kernels and CLBlast index whole elements; torch never misaligns, but check.
  if (p.offset % esize != 0) return {FLAGOS_ERROR_NOT_SUPPORTED};
  *buffer = p.buffer;
  *offset = p.offset;
  return {};
}

Resolved resolveOperand(const char* op, flagosStream_t stream, const flagosTensor& t,
                        Operand* out) {
  if (t.ndim > 3) return {FLAGOS_ERROR_NOT_SUPPORTED};
  uint64_t bytes = 0;
  const Resolved r = resolveBytes(op, stream, t, &out->buffer, &bytes);
  if (!r.ok()) return r;
  out->ndim = t.ndim;
  for (int d = 0; d < t.ndim; ++d) {
    out->shape[d] = t.shape[d];
    out->strides[d] = t.shape[d] == 1 ? 0 : t.strides[d];
  }
  out->offset = bytes / FLAGOS_DTYPE_SIZE(t.dtype);  // CLBlast offsets count elements
  return {};
}

MatView matrixOf(const Operand& op) {
  const int r = op.ndim - 2;
  MatView m;
  m.rows = op.shape[r];
  m.cols = op.shape[r + 1];
  m.rs = op.strides[r];
  m.cs = op.strides[r + 1];
  return m;
}

// Like the host plugin's: row-major (unit column stride) reads as is,
// column-major as the transpose of a row-major matrix; the leading dimension
// must cover a stored row (no overlap, no broadcast).
bool blasView(MatView* m) {
  if ((m->cs == 1 || m->cols <= 1) && (m->rows <= 1 || m->rs >= std::max<int64_t>(1, m->cols))) {
    m->trans = false;
    m->ld = static_cast<size_t>(m->rows <= 1 ? std::max<int64_t>(1, m->cols) : m->rs);
    return true;
  }
  if ((m->rs == 1 || m->rows <= 1) && (m->cols <= 1 || m->cs >= std::max<int64_t>(1, m->rows))) {
    m->trans = true;
    m->ld = static_cast<size_t>(m->cols <= 1 ? std::max<int64_t>(1, m->rows) : m->cs);
    return true;
  }
  return false;
}

MatView transposed(const MatView& m) {
  MatView t = m;
  std::swap(t.rows, t.cols);
  std::swap(t.rs, t.cs);
  return t;
}

double scalarValue(const flagosScalar& s, double fallback) {
  if (s.dtype == 0) return fallback;
  const bool floating = (s.dtype >> 8) == 2 || (s.dtype >> 8) == 4;  // float*, bfloat16
  return floating ? s.f : static_cast<double>(s.i);
}

bool supportedDtype(flagosStream_t stream, flagosDtype_t dt, const flagosTensor* tensors,
                    int32_t count) {
  if (dt != FLAGOS_DTYPE_FLOAT32 && dt != FLAGOS_DTYPE_FLOAT64) return false;
  for (int32_t i = 0; i < count; ++i)
    if (tensors[i].dtype != dt) return false;
  return dt == FLAGOS_DTYPE_FLOAT32 || hasFp64(stream->device);
}

flagosStatus_t blasFailure(const char* op, int code) {
  // CLBlast's own argument checks and missing features (-1024..-1007,
  // -2050..-2039) happen before it enqueues: another tier can take over.
  const bool rejected =
      code <= -1000 && code != CLBlastUnknownError && code != CLBlastUnexpectedError;
  if (rejected) {
    return fail(FLAGOS_ERROR_NOT_SUPPORTED, "opencl %s: CLBlast rejected the call (status %d)", op,
                code);
  }
  return fail(isOutOfMemory(code) ? FLAGOS_ERROR_OUT_OF_MEMORY : FLAGOS_ERROR_DEVICE,
              "opencl %s: CLBlast failed: %s", op, clErrorName(code).c_str());
}

}  // namespace flagos_opencl::kernels
