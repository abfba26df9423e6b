// Core operators that only touch metadata or allocate: factories, views,
// resize_ and set_. Copies and fills are in copy_ops.cpp; everything else
// reaches the device through the tiers (host fallback for now).
//
// Note [Core operators never read device memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Device addresses are opaque (include/flagos/memory.h), so none of these
// kernels may use the CPU implementations that memcpy/realloc storage on
// the host (resize_bytes_cpu, set_storage_cpu_, set_cpu_). Storage growth
// goes through resizeStorageBytes (vendor device-to-device copy).
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/is_set_to_native.h>
#include <ATen/ops/randperm.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "dispatch/core/op_stats.h"
#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/host/host_fallback.h"
#include "runtime/allocator.h"
#include "runtime/stream.h"

namespace flagos {
namespace {

constexpr c10::DispatchKeySet kFlagosKeys(c10::DispatchKey::PrivateUse1);

void checkFactoryArgs(const c10::Device& device, std::optional<c10::Layout> layout,
                      std::optional<bool> pin_memory) {
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1, "flagos: factory called for device ",
              device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "flagos: only strided tensors are supported, got layout ", *layout);
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "Only CPU tensors can be pinned");
}

at::Tensor empty(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                 std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                 std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  FLAGOS_RECORD_OP("aten::empty.memory_format", Tier::Core);
  const c10::Device dev = c10::device_or_default(device);
  checkFactoryArgs(dev, layout, pin_memory);
  const c10::DeviceGuard guard(dev);
  return at::detail::empty_generic(size, deviceAllocator(), kFlagosKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor emptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride,
                        std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                        std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  FLAGOS_RECORD_OP("aten::empty_strided", Tier::Core);
  const c10::Device dev = c10::device_or_default(device);
  checkFactoryArgs(dev, layout, pin_memory);
  const c10::DeviceGuard guard(dev);
  return at::detail::empty_strided_generic(size, stride, deviceAllocator(), kFlagosKeys,
                                           c10::dtype_or_default(dtype));
}

// --- views: metadata only -------------------------------------------------

at::Tensor asStrided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                     std::optional<int64_t> storage_offset) {
  FLAGOS_RECORD_OP("aten::as_strided", Tier::Core);
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}
at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  FLAGOS_RECORD_OP("aten::view", Tier::Core);
  return at::native::view(self, size);
}
at::Tensor reshapeAlias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  FLAGOS_RECORD_OP("aten::_reshape_alias", Tier::Core);
  return at::native::_reshape_alias(self, size, stride);
}
at::Tensor unfold(const at::Tensor& self, int64_t dim, int64_t size, int64_t step) {
  FLAGOS_RECORD_OP("aten::unfold", Tier::Core);
  return at::native::unfold(self, dim, size, step);
}
at::Tensor viewAsReal(const at::Tensor& self) {
  FLAGOS_RECORD_OP("aten::view_as_real", Tier::Core);
  return at::native::view_as_real(self);
}
at::Tensor viewAsComplex(const at::Tensor& self) {
  FLAGOS_RECORD_OP("aten::view_as_complex", Tier::Core);
  return at::native::view_as_complex(self);
}

// --- resize_ and set_ -------------------------------------------------------

void maybeResizeStorage(c10::TensorImpl* self, size_t new_bytes) {
  // As on CPU: an empty tensor needs no storage (and a positive offset
  // with zero elements must not grow it).
  if (self->numel() == 0) return;
  const c10::Storage& storage = self->unsafe_storage();
  if (!storage) {
    self->set_storage_keep_dtype(c10::Storage(c10::Storage::use_byte_size_t(), new_bytes,
                                              deviceAllocator(), /*resizable=*/true));
  } else if (new_bytes > storage.nbytes()) {
    resizeStorageBytes(storage, new_bytes);
  }
}

void resizeImpl(c10::TensorImpl* self, c10::IntArrayRef size, at::OptionalIntArrayRef stride) {
  if (self->sizes() == size && (!stride || self->strides() == stride.value())) return;
  const size_t itemsize = self->dtype().itemsize();
  const size_t offset = self->storage_offset();
  size_t bytes = 0;
  if (stride) {
    self->set_sizes_and_strides(size, *stride);
    bytes = at::detail::computeStorageNbytes(size, *stride, itemsize, offset);
  } else {
    self->set_sizes_contiguous(size);
    bytes = at::detail::computeStorageNbytesContiguous(size, itemsize, offset);
  }
  maybeResizeStorage(self, bytes);
}

const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef size,
                         std::optional<c10::MemoryFormat> memory_format) {
  FLAGOS_RECORD_OP("aten::resize_", Tier::Core);
  const c10::DeviceGuard guard(self.device());
  auto* impl = self.unsafeGetTensorImpl();
  const int64_t old_nbytes = impl->unsafe_storage() ? impl->unsafe_storage().nbytes() : 0;
  resizeImpl(impl, C10_AS_INTARRAYREF_SLOW(size), std::nullopt);
  if (memory_format) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve, "Unsupported memory format ",
                *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  if (at::globalContext().deterministicAlgorithms() &&
      at::globalContext().deterministicFillUninitializedMemory()) {
    at::native::fill_resize_deterministic_(self, old_nbytes);
  }
  return self;
}

at::Tensor& setStorageOffset(at::Tensor& self, c10::Storage source, c10::SymInt storage_offset,
                             c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  FLAGOS_RECORD_OP("aten::set_.source_Storage_storage_offset", Tier::Core);
  const c10::DeviceGuard guard(self.device());
  const int64_t offset = storage_offset.expect_int();
  const c10::IntArrayRef sizes = C10_AS_INTARRAYREF_SLOW(size);
  // stride=[] means contiguous (ATen passes a null ArrayRef for that).
  const bool has_stride = !stride.empty() || sizes.empty();
  const c10::IntArrayRef strides =
      has_stride ? C10_AS_INTARRAYREF_SLOW(stride) : c10::IntArrayRef();
  at::native::checkSetStorage(self, std::move(source), offset, sizes, strides);
  self.unsafeGetTensorImpl()->set_storage_offset(offset);
  resizeImpl(self.unsafeGetTensorImpl(), sizes,
             has_stride ? at::OptionalIntArrayRef(strides) : std::nullopt);
  return self;
}

at::Tensor& setStorage(at::Tensor& self, c10::Storage source) {
  FLAGOS_RECORD_OP("aten::set_.source_Storage", Tier::Core);
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return self.set_(std::move(source), 0, {numel}, {});
}

at::Tensor& setTensor(at::Tensor& self, const at::Tensor& source) {
  FLAGOS_RECORD_OP("aten::set_.source_Tensor", Tier::Core);
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) return self;
  return self.set_(source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& setEmpty(at::Tensor& self) {
  FLAGOS_RECORD_OP("aten::set_", Tier::Core);
  const c10::DeviceGuard guard(self.device());
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, deviceAllocator(), /*resizable=*/true);
  return self.set_(std::move(storage), 0, {0}, {});
}

bool isSetTo(const at::Tensor& self, const at::Tensor& other) {
  FLAGOS_RECORD_OP("aten::is_set_to", Tier::Core);
  return at::native::is_set_to(self, other);
}

void recordStream(at::Tensor& self, c10::Stream stream) {
  FLAGOS_RECORD_OP("aten::record_stream", Tier::Core);
  deviceAllocator()->recordStream(self.storage().data_ptr(), stream);
}

// arange(start, end, step, out=): a factory from three scalars (RoPE and
// GPT-2 positions, T5's relative buckets). The values are CPU's own
// (start + i * step in the accumulate type), made on the host and written
// with one host-to-device copy on the current stream, as torch.tensor(list,
// device=...) is; no device data is read.
at::Tensor& arangeOut(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                      at::Tensor& out) {
  FLAGOS_RECORD_OP("aten::arange.start_out", Tier::Core);
  at::Tensor host = at::empty({0}, out.options().device(c10::kCPU));
  at::arange_out(host, start, end, step);
  // As CPU's arange_out: an out= of the right element count keeps its shape
  // and strides (a narrowed 2-D view is filled in row-major order); only a
  // wrong count resizes it to 1-D.
  if (out.numel() != host.numel()) {
    if (out.numel() > 0) {  // CPU's words (RangeFactories.cpp)
      TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ",
                 out.numel(), " which does not match the computed number of elements ",
                 host.numel(), ". Note that this may occur as a result of rounding error. ",
                 "The out tensor will be resized to a tensor of shape (", host.numel(), ",).");
    }
    out.resize_(host.sizes());
  }
  out.copy_(host.view(out.sizes()));
  return out;
}

// randperm(n, generator, out=) (and randperm.out, ATen's composite over
// it): where the randperm composite takes the call (its dtypes and sizes),
// the factory randperm(n, generator, dtype=out's, device=out's) and one
// device copy into out, so the out= form draws the numbers the factory
// draws from the same generator state, as on CPU and CUDA; the host
// fallback's CPU algorithm gave other numbers. The rest run on the host as
// the factory's do (through the factory they would come back here: CPU's
// randperm calls randperm_out on a tensor of the factory's device).
at::Tensor& randpermOut(int64_t n, std::optional<at::Generator> generator, at::Tensor& out) {
  if (!composite::randpermComposes(out.scalar_type(), n)) {
    static const c10::OperatorHandle op =
        c10::Dispatcher::singleton().findSchemaOrThrow("aten::randperm", "generator_out");
    FLAGOS_RECORD_OP("aten::randperm.generator_out", Tier::Fallback);
    torch::jit::Stack stack{c10::IValue(n), c10::IValue(generator), c10::IValue(out)};
    runOnHost(op, &stack);
    return out;
  }
  FLAGOS_RECORD_OP("aten::randperm.generator_out", Tier::Core);
  at::Tensor drawn = at::randperm(n, generator, out.options());
  out.resize_({n});  // as CPU's randperm_out
  out.copy_(drawn);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("arange.start_out", TORCH_FN(arangeOut));
  m.impl("randperm.generator_out", TORCH_FN(randpermOut));
  m.impl("empty.memory_format", TORCH_FN(empty));
  m.impl("empty_strided", TORCH_FN(emptyStrided));
  m.impl("as_strided", TORCH_FN(asStrided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshapeAlias));
  m.impl("unfold", TORCH_FN(unfold));
  m.impl("view_as_real", TORCH_FN(viewAsReal));
  m.impl("view_as_complex", TORCH_FN(viewAsComplex));
  m.impl("resize_", TORCH_FN(resize));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(setStorageOffset));
  m.impl("set_.source_Storage", TORCH_FN(setStorage));
  m.impl("set_.source_Tensor", TORCH_FN(setTensor));
  m.impl("set_", TORCH_FN(setEmpty));
  m.impl("is_set_to", TORCH_FN(isSetTo));
  m.impl("record_stream", TORCH_FN(recordStream));
}

}  // namespace
}  // namespace flagos
