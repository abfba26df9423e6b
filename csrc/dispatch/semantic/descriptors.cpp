// Tensor descriptors for the vendor ABI (descriptors.h). The shape and
// stride arrays live in a caller-owned DescStore, so describing a call's
// tensors allocates nothing.
#include "dispatch/semantic/descriptors.h"

#include <cstring>

#include "runtime/dtype.h"

namespace flagos::semantic {

bool describe(const at::Tensor& t, flagosTensor& d, DescStore& s) {
  if (!t.defined()) {
    d = flagosTensor{nullptr, 0, 0, nullptr, nullptr};
    return true;
  }
  const int64_t nd = t.dim();
  if (nd > FLAGOS_MAX_DIMS) return false;
  const auto dtype = toVendorDtype(t.scalar_type());
  if (!dtype) return false;
  d.dtype = *dtype;
  for (int64_t i = 0; i < nd; ++i) {
    s.shape[i] = t.size(i);
    s.strides[i] = t.stride(i);
  }
  d.data = t.numel() == 0 ? nullptr : const_cast<void*>(t.const_data_ptr());
  d.ndim = static_cast<int32_t>(nd);
  d.shape = nd ? s.shape : nullptr;
  d.strides = nd ? s.strides : nullptr;
  return true;
}

bool describeBroadcast(const at::Tensor& t, const at::Tensor& out, flagosTensor& d, DescStore& s) {
  if (!t.defined()) return describe(t, d, s);  // absent optional: data == NULL
  if (!describe(t, d, s)) return false;
  const int64_t nd = out.dim(), off = nd - t.dim();
  if (off < 0 || nd > FLAGOS_MAX_DIMS) return false;
  int64_t shape[FLAGOS_MAX_DIMS], strides[FLAGOS_MAX_DIMS];
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t os = out.size(i);
    if (i < off) {
      shape[i] = os;
      strides[i] = 0;
      continue;
    }
    const int64_t ts = t.size(i - off);
    if (ts == os) {
      shape[i] = os;
      strides[i] = t.stride(i - off);
    } else if (ts == 1) {
      shape[i] = os;
      strides[i] = 0;
    } else {
      return false;
    }
  }
  std::memcpy(s.shape, shape, sizeof(int64_t) * nd);
  std::memcpy(s.strides, strides, sizeof(int64_t) * nd);
  d.ndim = static_cast<int32_t>(nd);
  d.shape = nd ? s.shape : nullptr;
  d.strides = nd ? s.strides : nullptr;
  return true;
}

}  // namespace flagos::semantic
