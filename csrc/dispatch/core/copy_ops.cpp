// Copies between the host and the flagos device, fills, and item():
// _copy_from, _copy_from_and_resize, fill_, zero_, _local_scalar_dense.
//
// Every byte moves through the vendor's memory calls; device memory is never
// dereferenced here (Note [Core operators never read device memory]).
//
// Note [Copies are ordered on the current stream]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// All copies are enqueued with memcpyAsync on the current stream of the
// device involved, so they follow the work already queued there. A copy
// that must be finished when it returns (every H2D/D2H copy except a
// non_blocking one with pinned host memory) then synchronizes that stream:
// .cpu() sees finished work, and a pageable host buffer may die on return.
// Device-to-device copies never block, as in CUDA.
//
// Note [Staging through the host]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Layout or dtype changes (non-dense views, different strides, dtype
// conversion, conj/neg bits, broadcasting) are done by ATen on the CPU: the
// device tensor's storage span is copied to a host buffer, viewed with the
// tensor's sizes/strides, converted by CPU copy_, and (for a device
// destination) the whole span is written back. Slow but always correct.
// Device-to-device copies first try the generated copy kernel
// (dispatch/device_copy.h, Note [Generated copies]).
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <atomic>

#include "dispatch/core/device_copy.h"
#include "dispatch/core/op_stats.h"
#include "runtime/backend.h"
#include "runtime/host_allocator.h"
#include "runtime/stream.h"

namespace flagos {
namespace {

void copyAsync(void* dst, const void* src, size_t bytes, flagosMemcpyKind_t kind,
               const c10::Stream& stream) {
  check(backend().tables.memory->memcpyAsync(dst, src, bytes, kind, vendorStream(stream)),
        "memcpyAsync");
}

void syncStream(const c10::Stream& stream) {
  check(backend().tables.stream->streamSynchronize(vendorStream(stream)), "streamSynchronize");
}

bool isPlainDense(const at::Tensor& t) {
  return t.is_non_overlapping_and_dense() && !t.is_conj() && !t.is_neg();
}

// A device tensor's storage span [lo, hi) in elements (ATen strides are
// never negative).
std::pair<int64_t, int64_t> elementSpan(const at::Tensor& t) {
  const int64_t lo = t.storage_offset();
  int64_t hi = lo + 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 0) return {lo, lo};
    hi += (t.size(d) - 1) * t.stride(d);
  }
  return {lo, hi};
}

// A host copy of a device tensor's span (Note [Staging through the host]).
struct Staged {
  at::Tensor buffer;  // contiguous, the span's elements
  at::Tensor view;    // buffer viewed as the device tensor
  int64_t lo = 0;
};

Staged stageToHost(const at::Tensor& t) {
  const auto [lo, hi] = elementSpan(t);
  Staged s;
  s.lo = lo;
  s.buffer = at::empty({hi - lo}, t.options().device(c10::kCPU));
  if (hi > lo) {
    const c10::Stream stream = currentStream(t.device().index());
    const char* base = static_cast<const char*>(t.storage().data()) + lo * t.itemsize();
    copyAsync(s.buffer.mutable_data_ptr(), base, (hi - lo) * t.itemsize(),
              FLAGOS_MEMCPY_DEVICE_TO_HOST, stream);
    syncStream(stream);
  }
  s.view = s.buffer.as_strided(t.sizes(), t.strides(), t.storage_offset() - lo);
  s.view._set_conj(t.is_conj());
  s.view._set_neg(t.is_neg());
  return s;
}

// Write a staged (and modified) span back to the device tensor's storage.
void writeBack(const at::Tensor& t, const Staged& s) {
  const size_t bytes = s.buffer.numel() * t.itemsize();
  if (bytes == 0) return;
  const c10::Stream stream = currentStream(t.device().index());
  char* base = static_cast<char*>(t.storage().mutable_data()) + s.lo * t.itemsize();
  copyAsync(base, s.buffer.const_data_ptr(), bytes, FLAGOS_MEMCPY_HOST_TO_DEVICE, stream);
  syncStream(stream);
}

// dst (device) = src (host, any layout/dtype, broadcastable to dst).
void writeFromHost(const at::Tensor& dst, const at::Tensor& src) {
  if (isPlainDense(dst)) {
    at::Tensor tmp = at::empty_strided(dst.sizes(), dst.strides(), dst.options().device(c10::kCPU));
    tmp.copy_(src);
    const c10::Stream stream = currentStream(dst.device().index());
    copyAsync(dst.mutable_data_ptr(), tmp.const_data_ptr(), dst.numel() * dst.itemsize(),
              FLAGOS_MEMCPY_HOST_TO_DEVICE, stream);
    syncStream(stream);
    return;
  }
  Staged s = stageToHost(dst);  // keep the elements dst does not cover
  s.view.copy_(src);
  writeBack(dst, s);
}

// Do a and b share bytes? (x[1:].copy_(x[:-1]) must not be one memcpy.)
bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  if (!a.storage().is_alias_of(b.storage())) return false;
  const auto [alo, ahi] = elementSpan(a);
  const auto [blo, bhi] = elementSpan(b);
  const int64_t as = a.itemsize(), bs = b.itemsize();
  return alo * as < bhi * bs && blo * bs < ahi * as;
}

std::atomic<DeviceCopyKernel> g_device_copy{nullptr};

bool sameLayout(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes().equals(b.sizes()) && a.strides().equals(b.strides()) &&
         isPlainDense(a) && isPlainDense(b);
}

// The tier that did the copy: Core, or Generated (Note [Generated copies]).
Tier copyImpl(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  if (dst.numel() == 0) return Tier::Core;
  const bool src_on_device = src.is_privateuseone();
  const bool dst_on_device = dst.is_privateuseone();
  const size_t bytes = dst.numel() * dst.itemsize();

  if (src_on_device && dst_on_device) {
    if (src.device() == dst.device() && sameLayout(src, dst) && !overlaps(src, dst)) {
      const c10::DeviceGuard guard(dst.device());
      copyAsync(dst.mutable_data_ptr(), src.const_data_ptr(), bytes, FLAGOS_MEMCPY_DEVICE_TO_DEVICE,
                currentStream(dst.device().index()));
      return Tier::Core;
    }
    if (src.device() == dst.device() && !overlaps(src, dst)) {
      if (DeviceCopyKernel kernel = deviceCopyKernel()) {
        const c10::DeviceGuard guard(dst.device());
        if (kernel(dst, src)) return Tier::Generated;
      }
    }
    Staged s;
    {
      const c10::DeviceGuard guard(src.device());
      s = stageToHost(src);
    }
    const c10::DeviceGuard guard(dst.device());
    writeFromHost(dst, s.view);
    return Tier::Core;
  }

  const at::Tensor& device_side = dst_on_device ? dst : src;
  const at::Tensor& host_side = dst_on_device ? src : dst;
  const c10::DeviceGuard guard(device_side.device());
  const c10::Stream stream = currentStream(device_side.device().index());
  if (!sameLayout(src, dst)) {
    if (dst_on_device) {
      writeFromHost(dst, src);
    } else {
      Staged s = stageToHost(src);
      const_cast<at::Tensor&>(dst).copy_(s.view);
    }
    return Tier::Core;
  }
  const flagosMemcpyKind_t kind =
      dst_on_device ? FLAGOS_MEMCPY_HOST_TO_DEVICE : FLAGOS_MEMCPY_DEVICE_TO_HOST;
  copyAsync(dst.mutable_data_ptr(), src.const_data_ptr(), bytes, kind, stream);
  // Pinned + non_blocking: return at once; the pinned block lives until
  // the stream has passed the copy (Note [Pinned blocks outlive their tensors]).
  if (non_blocking && recordPinnedUse(host_side.storage().data_ptr(), stream)) return Tier::Core;
  syncStream(stream);
  return Tier::Core;
}

at::Tensor copyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  recordOpCall("aten::_copy_from", copyImpl(self, dst, non_blocking));
  return dst;
}

at::Tensor copyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  recordOpCall("aten::_copy_from_and_resize", copyImpl(self, dst, /*non_blocking=*/false));
  return dst;
}

at::Tensor& fillScalar(at::Tensor& self, const c10::Scalar& value) {
  FLAGOS_RECORD_OP("aten::fill_.Scalar", Tier::Core);
  if (self.numel() == 0) return self;
  const c10::DeviceGuard guard(self.device());
  const size_t itemsize = self.itemsize();
  if (isPlainDense(self) && (itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8)) {
    // The dtype's bit pattern, converted (and range-checked) by ATen on CPU.
    const at::Tensor pattern = at::scalar_tensor(value, self.options().device(c10::kCPU));
    check(backend().tables.memory->memFill(self.mutable_data_ptr(), pattern.const_data_ptr(),
                                           static_cast<uint32_t>(itemsize), self.numel(),
                                           currentVendorStream(self.device().index())),
          "memFill");
    return self;
  }
  Staged s = stageToHost(self);
  s.view.fill_(value);
  writeBack(self, s);
  return self;
}

at::Tensor& fillTensor(at::Tensor& self, const at::Tensor& value) {
  FLAGOS_RECORD_OP("aten::fill_.Tensor", Tier::Core);
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  return fillScalar(self, value.item());
}

at::Tensor& zero(at::Tensor& self) {
  FLAGOS_RECORD_OP("aten::zero_", Tier::Core);
  return fillScalar(self, 0);
}

c10::Scalar localScalarDense(const at::Tensor& self) {
  FLAGOS_RECORD_OP("aten::_local_scalar_dense", Tier::Core);
  const c10::DeviceGuard guard(self.device());
  at::Tensor host = at::empty({}, self.options().device(c10::kCPU));
  const c10::Stream stream = currentStream(self.device().index());
  copyAsync(host.mutable_data_ptr(), self.const_data_ptr(), self.itemsize(),
            FLAGOS_MEMCPY_DEVICE_TO_HOST, stream);
  syncStream(stream);
  host._set_conj(self.is_conj());
  host._set_neg(self.is_neg());
  return host.item();
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copyFrom));
  m.impl("_copy_from_and_resize", TORCH_FN(copyFromAndResize));
  m.impl("fill_.Scalar", TORCH_FN(fillScalar));
  m.impl("fill_.Tensor", TORCH_FN(fillTensor));
  m.impl("zero_", TORCH_FN(zero));
  m.impl("_local_scalar_dense", TORCH_FN(localScalarDense));
}

// Note [Copies see conj/neg bits]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// ATen's Conjugate/Negative fallbacks resolve a conj view by clone(), which
// copies via _copy_from, which would hit the fallback again (unbounded
// recursion). These kernels carry the bits through the host staging
// instead, so the math-bit keys fall through to them (as copy_ does).
// _copy_from is only reached for devices without an in-tree copy (never
// CPU/CUDA), so this changes nothing for them.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace

void setDeviceCopyKernel(DeviceCopyKernel kernel) {
  g_device_copy.store(kernel);
}
DeviceCopyKernel deviceCopyKernel() {
  return g_device_copy.load(std::memory_order_acquire);
}

}  // namespace flagos
