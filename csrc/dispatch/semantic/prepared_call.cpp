// The prepared call of tiers 1 and 2: a call's tensors gathered from the
// stack, its outputs shaped by the meta-shape cache and allocated, pointwise
// inputs promoted and broadcast, descriptors and scalars built, then the
// native kernel or a generated one launched and the returns pushed.
#include <ATen/ATen.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <optional>
#include <string>

#include "dispatch/semantic/descriptors.h"
#include "dispatch/semantic/generated_tier.h"
#include "dispatch/semantic/index_bounds.h"
#include "dispatch/semantic/scalar_encoding.h"
#include "dispatch/semantic/semantic_kernel.h"
#include "runtime/allocator.h"
#include "runtime/backend.h"
#include "runtime/stream.h"

namespace flagos::semantic {
namespace {

void appendTensors(const c10::IValue& v, c10::SmallVectorImpl<at::Tensor>& out, bool& ok) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isNone()) {
    out.emplace_back();
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) out.push_back(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      out.push_back(e.isNone() ? at::Tensor() : e.toTensor());
  } else {
    ok = false;
  }
}

}  // namespace

// Tier 1 (fn: the native kernel) or tier 2 (fn == nullptr: generated).
Native SemanticKernel::tryKernel(const c10::OperatorHandle& op, flagosKernelFn fn,
                                 torch::jit::Stack* stack) {
  const c10::IValue* args = stack->data() + (stack->size() - schema_.num_args);

  // Inputs, and the device they live on.
  c10::SmallVector<at::Tensor, 8> inputs;
  bool ok = true;
  for (int a : schema_.inputs) appendTensors(args[a], inputs, ok);
  if (!ok) return Native::Skip;
  std::optional<c10::Device> device;
  for (const at::Tensor& t : inputs) {
    if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) {
      device = t.device();
      break;
    }
  }
  c10::SmallVector<at::Tensor, 4> outputs;
  if (schema_.kind != OutKind::Functional) {
    for (int a : schema_.outputs) appendTensors(args[a], outputs, ok);
    if (!ok) return Native::Skip;
    for (const at::Tensor& t : outputs) {
      if (t.defined() && !device && t.device().type() == c10::DeviceType::PrivateUse1)
        device = t.device();
    }
  }
  if (!device) return Native::Skip;
  for (const at::Tensor& t : inputs) {
    // CPU 0-dim tensors are scalars to ATen's pointwise ops; anything else
    // on another device is the host tier's business (it raises or copies).
    if (t.defined() && t.device() != *device &&
        !(spec_.family == Family::Pointwise && t.device().is_cpu() && t.dim() == 0)) {
      return Native::Skip;
    }
  }
  for (const at::Tensor& t : outputs)
    if (t.defined() && t.device() != *device) return Native::Skip;

  // Shapes and dtypes (Note [Shape inference cache]).
  // Note [Argument errors come from the CPU]
  // The meta kernel also checks the arguments, but PyTorch's Python meta
  // registrations word some errors differently from the CPU kernels (mv:
  // "got input (3x4), vec (5)" where CPU says "got input (3), mat (3x4),
  // vec (5)"), and a few overloads have no meta kernel at all. So a
  // failing meta call only means "not on this tier": the call goes on,
  // composites decline bad arguments, and the host tier raises CPU's own
  // error (or, where only the meta kernel was missing, computes it). The
  // fallback is counted like any other.
  std::shared_ptr<const MetaResult> shapes;
  try {
    shapes = shapes_.inferShapes(op, args, schema_, spec_.family);
  } catch (const std::exception&) {
    return Native::Skip;
  }
  if (schema_.kind == OutKind::Functional) {
    for (const OutShape& m : shapes->outs) {
      if (m.dtype == at::ScalarType::Undefined) {
        outputs.emplace_back();
        continue;
      }
      // Straight to the device allocator (what the core's empty_strided
      // kernel does) under a guard: a trip through the dispatcher per
      // output was ~0.1 us of a tiny op's cost.
      const c10::DeviceGuard guard(*device);
      outputs.push_back(at::detail::empty_strided_generic(
          m.sizes, m.strides, flagos::deviceAllocator(),
          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), m.dtype));
    }
  } else if (schema_.kind == OutKind::Out) {
    // The meta kernel resized its copies of the outputs: mirror that.
    if (shapes->outs.size() != outputs.size()) return Native::Skip;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].defined() && outputs[i].sizes() != c10::IntArrayRef(shapes->outs[i].sizes)) {
        outputs[i].resize_(shapes->outs[i].sizes);
      }
    }
  }
  if (static_cast<int>(outputs.size()) < 1) return Native::Skip;

  // Pointwise: promote and broadcast the inputs.
  // Note [CPU scalars are filled, not copied]
  // A CPU 0-dim input (ATen's wrapped scalar: add_(1), mul(x, 0.5) on a
  // tensor) becomes a device tensor by fill_, enqueued on the stream like
  // any kernel (memFill reads the pattern before it returns). A .to() is a
  // host-to-device copy from pageable memory, which synchronizes the stream
  // (Note [Copies are ordered on the current stream]): BatchNorm's
  // num_batches_tracked.add_(1) stalled every training step until all the
  // work queued before it had finished (host CNN step: 1.3 ms of waiting).
  const at::Tensor& out0 = outputs[0];
  const bool pointwise = spec_.family == Family::Pointwise;
  if (pointwise && spec_.promote_mask) {
    at::native::ResultTypeState state;
    for (int i = 0; i < static_cast<int>(inputs.size()) && i < 32; ++i)
      if ((spec_.promote_mask >> i & 1u) && inputs[i].defined())
        state = at::native::update_result_type_state(inputs[i], state);
    const at::ScalarType common = at::native::result_type(state);
    for (int i = 0; i < static_cast<int>(inputs.size()) && i < 32; ++i) {
      at::Tensor& t = inputs[i];
      if (!t.defined()) continue;
      const bool promoted = spec_.promote_mask >> i & 1u;
      const at::ScalarType dtype = promoted ? common : t.scalar_type();
      if (t.device() != *device) {
        // Note [CPU scalars are filled, not copied]
        t = at::empty({}, t.options().device(*device).dtype(dtype)).fill_(t.item());
      } else if (dtype != t.scalar_type()) {
        t = t.to(dtype);
      }
    }
  }

  // Descriptors.
  const size_t n_in = inputs.size(), n_out = outputs.size();
  c10::SmallVector<DescStore, 8> store;
  store.resize_for_overwrite(n_in + n_out);  // describe() writes what it uses
  c10::SmallVector<flagosTensor, 8> in_desc(n_in), out_desc(n_out);
  for (size_t i = 0; i < n_out; ++i)
    if (!describe(outputs[i], out_desc[i], store[i])) return Native::Skip;
  for (size_t i = 0; i < n_in; ++i) {
    const bool good = pointwise ? describeBroadcast(inputs[i], out0, in_desc[i], store[n_out + i])
                                : describe(inputs[i], in_desc[i], store[n_out + i]);
    if (!good) return Native::Skip;
  }
  c10::SmallVector<flagosScalar, 16> scalars;
  // Dims are normalized against the highest-rank input (cat may list 1-D
  // empty tensors first; a reduction has one input).
  int64_t ndim0 = inputs.empty() ? out0.dim() : 0;
  for (const at::Tensor& t : inputs)
    if (t.defined()) ndim0 = std::max<int64_t>(ndim0, t.dim());
  try {
    for (int k = 0; k < spec_.num_scalars; ++k)
      if (!encodeScalar(spec_.scalars[k], schema_.scalars[k], args, ndim0, scalars))
        return Native::Skip;
  } catch (const c10::Error&) {
    return Native::Skip;  // e.g. a dim out of range: the host tier raises it properly
  }

  // Empty outputs: the meta kernel checked the arguments and there is
  // nothing to write (kernels and the generator need not handle numel 0).
  if (std::all_of(outputs.begin(), outputs.end(),
                  [](const at::Tensor& t) { return !t.defined() || t.numel() == 0; }))
    return finish(outputs, shapes, args, stack);

  // Call.
  c10::DeviceGuard guard(*device);
  flagosStream_t stream = flagos::currentVendorStream(device->index());
  if (checksIndexRange(spec_)) checkIndexRange(spec_, inputs, scalars);  // Note [Index bounds]
  if (!fn) {
    const kernels::Call call{out_desc.data(), static_cast<int32_t>(n_out),
                             in_desc.data(),  static_cast<int32_t>(n_in),
                             scalars.data(),  static_cast<int32_t>(scalars.size())};
    if (!runGeneratedKernel(op_index_, device->index(), stream, call)) return Native::Skip;
    return finish(outputs, shapes, args, stack);
  }
  const flagosStatus_t status =
      fn(stream, out_desc.data(), static_cast<int32_t>(n_out), in_desc.data(),
         static_cast<int32_t>(n_in), scalars.data(), static_cast<int32_t>(scalars.size()));
  if (status == FLAGOS_ERROR_NOT_SUPPORTED || status == FLAGOS_ERROR_FALLBACK) return Native::Skip;
  if (status != FLAGOS_SUCCESS) {
    const std::string what = std::string("native kernel '") + spec_.id + "' for " + name_;
    flagos::check(status, what.c_str());
  }
  return finish(outputs, shapes, args, stack);
}

// Replaces the arguments on @p stack by the returns.
Native SemanticKernel::finish(c10::SmallVectorImpl<at::Tensor>& outputs,
                              const std::shared_ptr<const MetaResult>& shapes,
                              const c10::IValue* args, torch::jit::Stack* stack) {
  switch (schema_.kind) {
    case OutKind::Functional: {
      torch::jit::drop(*stack, schema_.num_args);
      size_t next = 0;
      for (int32_t n : shapes->layout) {
        if (n < 0) {
          stack->emplace_back(outputs[next++]);
        } else {
          c10::List<at::Tensor> list;
          for (int32_t j = 0; j < n; ++j) list.push_back(outputs[next++]);
          stack->emplace_back(std::move(list));
        }
      }
      break;
    }
    case OutKind::InPlace:
    case OutKind::Out: {
      c10::SmallVector<c10::IValue, 4> rets;
      for (int a : schema_.outputs) rets.push_back(args[a]);
      torch::jit::drop(*stack, schema_.num_args);
      for (int i = 0; i < schema_.num_returns && i < static_cast<int>(rets.size()); ++i)
        stack->push_back(std::move(rets[i]));
      break;
    }
    case OutKind::Void:
      torch::jit::drop(*stack, schema_.num_args);
      break;
  }
  return Native::Done;
}

}  // namespace flagos::semantic
