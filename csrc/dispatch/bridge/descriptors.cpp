// Tensor descriptors for the vendor ABI (descriptors.h). The shape and
// stride arrays live in a caller-owned DescStore, so describing a call's
// tensors allocates nothing.
#include "dispatch/bridge/descriptors.h"

#include <cstring>

#include "runtime/dtype.h"

namespace flagos::semantic {

bool describe(const at::Tensor& t, flagosTensor& d, DescStore& s) {
  if (!t.defined()) {
    d = flagosTensor{nullptr, 0, 0, nullptr, nullptr};
    return true;
  }
  // The sizes and strides as arrays, read once: size(i)/stride(i) wrap and
  // check the dim on every call (a third of a tiny op's descriptor cost).
  const c10::IntArrayRef sizes = t.sizes(), strides = t.strides();
  const size_t nd = sizes.size();
  if (nd > FLAGOS_MAX_DIMS) return false;
  const auto dtype = toVendorDtype(t.scalar_type());
  if (!dtype) return false;
  d.dtype = *dtype;
  for (size_t i = 0; i < nd; ++i) {  // a loop: an inlined memcpy of unknown size was a `rep movs`
    s.shape[i] = sizes[i];
    s.strides[i] = strides[i];
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
  const c10::IntArrayRef out_sizes = out.sizes(), sizes = t.sizes(), strides = t.strides();
  const int64_t nd = static_cast<int64_t>(out_sizes.size());
  const int64_t off = nd - static_cast<int64_t>(sizes.size());
  if (off < 0 || nd > FLAGOS_MAX_DIMS) return false;
  if (off == 0 && sizes == out_sizes) return true;  // the common case: nothing broadcast
  int64_t shape[FLAGOS_MAX_DIMS], bstrides[FLAGOS_MAX_DIMS];
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t os = out_sizes[i];
    if (i < off) {
      shape[i] = os;
      bstrides[i] = 0;
      continue;
    }
    const int64_t ts = sizes[i - off];
    if (ts == os) {
      shape[i] = os;
      bstrides[i] = strides[i - off];
    } else if (ts == 1) {
      shape[i] = os;
      bstrides[i] = 0;
    } else {
      return false;
    }
  }
  for (int64_t i = 0; i < nd; ++i) {
    s.shape[i] = shape[i];
    s.strides[i] = bstrides[i];
  }
  d.ndim = static_cast<int32_t>(nd);
  d.shape = nd ? s.shape : nullptr;
  d.strides = nd ? s.strides : nullptr;
  return true;
}

}  // namespace flagos::semantic
