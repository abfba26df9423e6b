// Note [Tensors on one device]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch's generated CUDA wrappers check that every tensor argument is on
// one device (c10::impl::check_and_update_common_device) and TensorIterator
// does the same, letting only 0-dim CPU tensors through as scalars. Kernels
// registered out of tree get no such wrapper, so without this check
// `flagos_t + cpu_t` silently ran on the host tier and returned a flagos
// tensor (`cpu_t + flagos_t` even a CPU one), and `cpu_t.add_(flagos_t)`
// died in _copy_from_and_resize with a NotImplementedError. Silent mixing
// hides placement bugs and hidden copies, so every boxed entry of the
// PrivateUse1 key (the catalog bridge, the host fallback) and the typed
// accelerator kernels raise CUDA's error instead:
//   "Expected all tensors to be on the same device, but ..."
// Allowed, as on CUDA: 0-dim CPU tensors anywhere; the operators that move
// data between devices (copy_, _to_copy, _copy_from, pin_memory); CPU
// indices for advanced indexing (index.Tensor, index_put_); the 1-D CPU
// `scalars` tensor of _foreach_addcdiv/_foreach_addcmul.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <initializer_list>

namespace flagos {

// True for the operators above that move data between devices by design.
bool mixesDevicesByDesign(const c10::OperatorHandle& op);

// @p args: the call's arguments, in schema order. Throws CUDA's error for
// the first tensor on another device than the ones before it.
void checkSameDevice(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args);

// The typed kernels' form: @p tensors with their argument names.
void checkSameDevice(const char* op,
                     std::initializer_list<std::pair<const char*, const at::Tensor*>> tensors);

}  // namespace flagos
