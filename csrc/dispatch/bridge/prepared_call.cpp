// The prepared call of tiers 1 and 2: a call's tensors gathered from the
// stack, its outputs shaped by the meta-shape cache and allocated, pointwise
// inputs promoted and broadcast, descriptors and scalars built, then the
// native kernel or a generated one launched and the returns pushed.
#include <ATen/ATen.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/MaybeOwned.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "dispatch/bridge/descriptors.h"
#include "dispatch/bridge/index_bounds.h"
#include "dispatch/bridge/scalar_encoding.h"
#include "dispatch/bridge/semantic_kernel.h"
#include "dispatch/tiers/generated/tier.h"
#include "runtime/allocator.h"
#include "runtime/backend.h"
#include "runtime/plugin_loader.h"
#include "runtime/stream.h"

namespace flagos::semantic {
namespace {

using TensorRef = c10::MaybeOwned<at::Tensor>;

// The tensors of one call and the device it runs on. Arguments are
// borrowed, never copied: a copy of a tensor Python holds alone takes a
// reference on its PyObject, which needs the GIL that the binding released
// (two GIL round trips a call; Note [Unboxed entries]). Promoted and
// contiguous stand-ins are owned.
struct Operands {
  c10::SmallVector<TensorRef, 8> inputs;
  c10::SmallVector<TensorRef, 4> outputs;  // the written arguments, or the allocated returns
  c10::Device device{c10::DeviceType::PrivateUse1};
};

// The call as the vendor ABI takes it.
struct AbiArgs {
  c10::SmallVector<DescStore, 8> store;
  c10::SmallVector<flagosTensor, 8> in, out;
  c10::SmallVector<flagosScalar, 16> scalars;
};

const at::Tensor& undefinedTensor() {
  static const at::Tensor none;
  return none;
}

void appendTensors(const c10::IValue& v, c10::SmallVectorImpl<TensorRef>& out, bool& ok) {
  if (v.isTensor()) {
    out.push_back(TensorRef::borrowed(v.toTensor()));
  } else if (v.isNone()) {
    out.push_back(TensorRef::borrowed(undefinedTensor()));
  } else if (v.isList()) {  // Tensor[] and Tensor?[]: the elements live in the argument
    for (const c10::IValue& e : v.toListRef())
      out.push_back(TensorRef::borrowed(e.isNone() ? undefinedTensor() : e.toTensor()));
  } else {
    ok = false;
  }
}

// Inputs (and the written arguments), and the device they live on. False:
// not a call for a kernel tier.
bool gatherOperands(const OpSpec& spec, const OverloadSchema& schema, const c10::IValue* args,
                    Operands& o) {
  bool ok = true;
  for (int a : schema.inputs) appendTensors(args[a], o.inputs, ok);
  if (!ok) return false;
  std::optional<c10::Device> device;
  for (const TensorRef& t : o.inputs) {
    if (t->defined() && t->device().type() == c10::DeviceType::PrivateUse1) {
      device = t->device();
      break;
    }
  }
  if (schema.kind != OutKind::Functional) {
    for (int a : schema.outputs) appendTensors(args[a], o.outputs, ok);
    if (!ok) return false;
    for (const TensorRef& t : o.outputs) {
      if (t->defined() && !device && t->device().type() == c10::DeviceType::PrivateUse1)
        device = t->device();
    }
  }
  if (!device) return false;
  for (const TensorRef& t : o.inputs) {
    // CPU 0-dim tensors are scalars to ATen's pointwise ops; anything else
    // on another device is the host tier's business (it raises or copies).
    if (t->defined() && t->device() != *device &&
        !(spec.family == Family::Pointwise && t->device().is_cpu() && t->dim() == 0)) {
      return false;
    }
  }
  for (const TensorRef& t : o.outputs)
    if (t->defined() && t->device() != *device) return false;
  o.device = *device;
  return true;
}

// Functional outputs allocated as the meta kernel shaped them; out=
// outputs resized as it resized its copies. False: nothing to write to.
bool shapeOutputs(const OverloadSchema& schema, const MetaResult& shapes, Operands& o) {
  if (schema.kind == OutKind::Functional) {
    for (const OutShape& m : shapes.outs) {
      if (m.dtype == at::ScalarType::Undefined) {
        o.outputs.push_back(TensorRef::borrowed(undefinedTensor()));
        continue;
      }
      // Straight to the device allocator (what the core's empty_strided
      // kernel does; the caller holds a guard on the device): a trip
      // through the dispatcher per output was a visible part of a tiny op's cost.
      o.outputs.push_back(TensorRef::owned(at::detail::empty_strided_generic(
          m.sizes, m.strides, flagos::deviceAllocator(),
          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), m.dtype)));
    }
  } else if (schema.kind == OutKind::Out) {
    // The meta kernel resized its copies of the outputs: mirror that.
    if (shapes.outs.size() != o.outputs.size()) return false;
    for (size_t i = 0; i < o.outputs.size(); ++i) {
      if (o.outputs[i]->defined() &&
          o.outputs[i]->sizes() != c10::IntArrayRef(shapes.outs[i].sizes)) {
        o.outputs[i]->resize_(shapes.outs[i].sizes);
      }
    }
  }
  return !o.outputs.empty();
}

// Note [Scalars of half arithmetic stay in float]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// CPU's add, sub, mul and div (any rounding mode) on float16/bfloat16 read
// a CPU scalar second operand (a Python number: x * 0.001) at its original
// value in float, the type they compute in (original_scalar_value<opmath_t>
// of operand 2), and round once; 0.001 rounded to half first gave other
// results (PyTorch's test_binary_ufuncs). A scalar first operand (1.7 - x
// is sub(1.7, x)) is cast to the common type, as TensorIterator casts it.
// So for these operators a second-operand scalar goes to the device as
// float32, and the kernel, reading each operand at its own type, computes
// in float.
bool keepsScalarInFloat(const OpSpec& spec) {
  for (const char* id : {"add", "sub", "mul", "div", "div_mode"})
    if (std::strcmp(spec.id, id) == 0) return true;
  return false;
}

// Pointwise: the promoted inputs cast to the common dtype.
// Note [CPU scalars are filled, not copied]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A CPU 0-dim input (ATen's wrapped scalar: add_(1), mul(x, 0.5) on a
// tensor) becomes a device tensor by fill_, enqueued on the stream like
// any kernel (memFill reads the pattern before it returns). A .to() is a
// host-to-device copy from pageable memory, which synchronizes the stream
// (Note [Copies are ordered on the current stream]): BatchNorm's
// num_batches_tracked.add_(1) stalled every training step until all the
// work queued before it had finished, a stall in every host CNN step.
// Returns the common dtype (Undefined when no input takes part).
at::ScalarType promoteInputs(const OpSpec& spec, Operands& o) {
  // The common case first: every input on the device, the promoted ones of
  // one dtype (their result type), so nothing changes.
  at::ScalarType first = at::ScalarType::Undefined;
  bool plain = true;
  for (int i = 0; i < static_cast<int>(o.inputs.size()) && plain; ++i) {
    const at::Tensor& t = *o.inputs[i];
    if (!t.defined()) continue;
    if (t.device() != o.device) plain = false;
    if (i < 32 && (spec.promote_mask >> i & 1u)) {
      if (first == at::ScalarType::Undefined) first = t.scalar_type();
      plain = plain && t.scalar_type() == first;
    }
  }
  if (plain) return first;
  at::native::ResultTypeState state;
  for (int i = 0; i < static_cast<int>(o.inputs.size()) && i < 32; ++i)
    if ((spec.promote_mask >> i & 1u) && o.inputs[i]->defined())
      state = at::native::update_result_type_state(*o.inputs[i], state);
  const at::ScalarType common = at::native::result_type(state);
  for (int i = 0; i < static_cast<int>(o.inputs.size()) && i < 32; ++i) {
    const at::Tensor& t = *o.inputs[i];
    if (!t.defined()) continue;
    const bool promoted = spec.promote_mask >> i & 1u;
    at::ScalarType dtype = promoted ? common : t.scalar_type();
    // See Note [Scalars of half arithmetic stay in float]
    if (i == 1 && promoted && t.device() != o.device && t.dim() == 0 &&
        (common == at::kHalf || common == at::kBFloat16) && keepsScalarInFloat(spec))
      dtype = at::kFloat;
    if (t.device() != o.device) {
      // See Note [CPU scalars are filled, not copied]
      // Converted on the CPU first, as TensorIterator converts a wrapped
      // number (uint8 + 1000 wraps to 233 there; fill_ would raise overflow).
      at::Tensor filled = at::empty({}, t.options().device(o.device).dtype(dtype));
      filled.fill_((t.scalar_type() == dtype ? t : t.to(dtype)).item());
      o.inputs[i] = TensorRef::owned(std::move(filled));
    } else if (dtype != t.scalar_type()) {
      o.inputs[i] = TensorRef::owned(t.to(dtype));
    }
  }
  return common;
}

// Note [Comparisons with a wider scalar]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A comparison against a Python scalar (lt.Scalar, eq.Scalar, ...) writes
// bool, so its kernel's compute type comes from the tensor alone: int8 <
// 0.5 compared 0 < 0 (the scalar truncated to the integer type) and gave
// False where CPU gives True (test_type_promotion's
// test_lt_with_type_promotion). TensorIterator computes in the result
// type of the tensor and the wrapped scalar: an integral or bool tensor
// against a floating (complex) scalar compares in the default floating
// (complex) dtype. So in that case the tensor is cast first; every other
// case is unchanged (the scalar's category is not higher).
void promoteAgainstScalar(const OpSpec& spec, const OverloadSchema& schema, const c10::IValue* args,
                          Operands& o) {
  if (o.inputs.size() != 1 || o.outputs.size() != 1 || spec.num_scalars != 1 ||
      !o.outputs[0]->defined() || o.outputs[0]->scalar_type() != at::kBool)
    return;
  const at::Tensor& self = *o.inputs[0];
  const int arg = schema.scalars[0].arg;
  if (!self.defined() || arg < 0 || !args[arg].isScalar() || self.is_complex()) return;
  const at::Scalar other = args[arg].toScalar();
  const bool wider = (other.isFloatingPoint() || other.isComplex()) &&
                     at::isIntegralType(self.scalar_type(), /*includeBool=*/true);
  if (!wider && !(other.isComplex() && at::isFloatingType(self.scalar_type()))) return;
  o.inputs[0] = TensorRef::owned(self.to(at::result_type(self, other)));
}

// Note [Pointwise out= in the common dtype]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// TensorIterator computes in one dtype and casts the result to an out= (or
// in-place) tensor of another type; kernels compute in their output's
// type. So half + half into a float32 out gave 120000 where CPU overflows
// to inf, and pow(2, uint8, out=int64) 131072 where CPU wraps to 0
// (test_type_promotion, test_binary_ufuncs). The computation dtype is
// TensorIterator's:
// * the result type of the promoted tensors and of the scalar arguments
//   that stand for an operand (wrapped numbers to TensorIterator:
//   pow.Tensor_Scalar's exponent, pow.Scalar's base, the .Scalar
//   overloads' other, clamp's bounds): int64 ** 1.5 computes in float32,
//   not in int64 with the exponent truncated;
// * an operator defined for floating types only computes integer inputs in
//   the default floating dtype (sin or true division of int64 into a
//   float64 out rounds as float32 does, as on CPU).
// A written tensor that cannot hold the first (the result type) raises
// CPU's error (int32 *= float32: "result type Float can't be cast to the
// desired output type Int"); an integer tensor written by a float-only
// operator is left to the kernel and CPU (nan_to_num of integers is a
// copy; sin raises from its meta kernel). Otherwise, when the written
// tensor's dtype differs from the computation's, the kernel
// writes a temporary of the computation dtype, then copied (cast) into it
// on the device. Predicates (comparisons, logical_*, isnan: TensorIterator's
// comparison ops) may write any type: no cast check for them (int64 <
// float64 into an int64 out is 0 or 1). Bool outputs compute in the right
// dtype already (Note [Comparisons with a wider scalar]), and complex
// computations into a real output are left to the kernel (abs of a
// complex tensor writes its real magnitude).
// Returns the temporary's destination (undefined: none).
namespace {

// A catalog scalar that stands for an operand (see the Note above).
bool operandScalar(const char* name) {
  for (const char* n : {"other", "exponent", "self", "min", "max"})
    if (std::strcmp(name, n) == 0) return true;
  return false;
}

// An operator whose result is a truth value (see the Note above).
bool predicate(const OpSpec& spec) {
  static const char* const kIds[] = {"eq",          "ne",         "lt",          "le",
                                     "gt",          "ge",         "eq_scalar",   "ne_scalar",
                                     "lt_scalar",   "le_scalar",  "gt_scalar",   "ge_scalar",
                                     "logical_and", "logical_or", "logical_xor", "logical_not",
                                     "isnan",       "isposinf",   "isneginf",    "signbit"};
  for (const char* id : kIds)
    if (std::strcmp(spec.id, id) == 0) return true;
  return false;
}

// TensorIterator's common dtype: the promoted tensors' @p common and the
// scalars that stand for an operand.
at::ScalarType resultDtype(const OpSpec& spec, const OverloadSchema& schema,
                           const c10::IValue* args, at::ScalarType common) {
  at::native::ResultTypeState state;
  state.dimResult = common;
  for (int k = 0; k < spec.num_scalars && k < static_cast<int>(schema.scalars.size()); ++k) {
    const int arg = schema.scalars[k].arg;
    if (arg >= 0 && operandScalar(spec.scalars[k].name) && args[arg].isScalar())
      state = at::native::update_result_type_state(args[arg].toScalar(), state);
  }
  return at::native::result_type(state);
}

}  // namespace

at::Tensor computeInCommonDtype(const OpSpec& spec, const OverloadSchema& schema,
                                const c10::IValue* args, at::ScalarType common, Operands& o) {
  if (schema.kind == OutKind::Functional || o.outputs.size() != 1 ||
      common == at::ScalarType::Undefined)
    return at::Tensor();
  const at::Tensor& out = *o.outputs[0];
  if (!out.defined()) return at::Tensor();
  const at::ScalarType type = out.scalar_type();
  const at::ScalarType result = resultDtype(spec, schema, args, common);
  if (type == at::kBool || (at::isComplexType(result) && !at::isComplexType(type)))
    return at::Tensor();
  TORCH_CHECK(predicate(spec) || c10::canCast(result, type), "result type ", result,
              " can't be cast to the desired output type ", type);
  // Integers into a float-only operator compute in the default float; into
  // an integer out that is for the kernel and CPU to settle (nan_to_num of
  // integers is a copy, sin raises from its meta kernel).
  at::ScalarType dtype = result;
  if (!spec.integral && at::isIntegralType(result, /*includeBool=*/true)) {
    dtype = c10::typeMetaToScalarType(c10::get_default_dtype());
    if (!c10::canCast(dtype, type)) return at::Tensor();
  }
  if (type == dtype) return at::Tensor();
  at::Tensor destination = out;
  o.outputs[0] = TensorRef::owned(at::empty_like(out, out.options().dtype(dtype)));
  return destination;
}

// Note [Contiguous retry]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Many native kernels take contiguous inputs only, and backward passes hand
// them strided ones: the gradient of a sum or a mean is a stride-0 expand, a
// transposed view reaches a GEMM backward. A kernel that declines such a
// call (NOT_SUPPORTED) is offered it once more with contiguous copies of
// its inputs (device copies on the same stream), before the call goes to a
// slower tier. Outputs are never copied: a written argument must stay the
// caller's tensor. Pointwise inputs are not retried: their descriptors are
// broadcasts of the output shape, which every pointwise kernel must read.
// Returns whether any input changed (else the retry would be the same call).
bool contiguousInputs(Operands& o) {
  bool changed = false;
  for (TensorRef& t : o.inputs) {
    if (t->defined() && !t->is_contiguous()) {
      t = TensorRef::owned(t->contiguous());
      changed = true;
    }
  }
  return changed;
}

// Descriptors of the outputs and inputs (pointwise inputs broadcast to the
// first output's shape).
bool describeOperands(bool pointwise, const Operands& o, AbiArgs& abi) {
  const size_t n_in = o.inputs.size(), n_out = o.outputs.size();
  abi.store.resize_for_overwrite(n_in + n_out);  // describe() writes what it uses
  abi.in.resize(n_in);
  abi.out.resize(n_out);
  for (size_t i = 0; i < n_out; ++i)
    if (!describe(*o.outputs[i], abi.out[i], abi.store[i])) return false;
  for (size_t i = 0; i < n_in; ++i) {
    const bool good =
        pointwise ? describeBroadcast(*o.inputs[i], *o.outputs[0], abi.in[i], abi.store[n_out + i])
                  : describe(*o.inputs[i], abi.in[i], abi.store[n_out + i]);
    if (!good) return false;
  }
  return true;
}

bool encodeScalars(const OpSpec& spec, const OverloadSchema& schema, const c10::IValue* args,
                   const Operands& o, AbiArgs& abi) {
  // Dims are normalized against the highest-rank input (cat may list 1-D
  // empty tensors first; a reduction has one input).
  int64_t ndim0 = o.inputs.empty() ? o.outputs[0]->dim() : 0;
  // Random operators draw one Philox block per element of their first output.
  const int64_t draws = o.outputs.empty() || !o.outputs[0]->defined() ? 0 : o.outputs[0]->numel();
  for (const TensorRef& t : o.inputs)
    if (t->defined()) ndim0 = std::max<int64_t>(ndim0, t->dim());
  try {
    for (int k = 0; k < spec.num_scalars; ++k)
      if (!encodeScalar(spec.scalars[k], schema.scalars[k], args, ndim0, o.device, draws,
                        abi.scalars))
        return false;
  } catch (const c10::Error&) {
    return false;  // e.g. a dim out of range: the host tier raises it properly
  }
  return true;
}

}  // namespace

// Tier 1 (fn: the native kernel) or tier 2 (fn == nullptr: generated).
Native SemanticKernel::tryKernel(const c10::OperatorHandle& op, flagosKernelFn fn,
                                 const c10::IValue* args, KernelReturns& ret,
                                 std::string* why_host) {
  Operands o;
  if (!gatherOperands(spec_, schema_, args, o)) return Native::Skip;
  // The device's allocator and stream, for everything below (a guard only
  // when it changes the device: two virtual calls otherwise).
  c10::OptionalDeviceGuard guard;
  if (currentDevice() != o.device.index()) guard.reset_device(o.device);

  // Shapes and dtypes (Note [Shape inference cache], shape_cache.cpp).
  // Note [Argument errors come from the CPU]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // The meta kernel also checks the arguments, but PyTorch's Python meta
  // registrations word some errors differently from the CPU kernels (mv:
  // "got input (3x4), vec (5)" where CPU says "got input (3), mat (3x4),
  // vec (5)"), and a few overloads have no meta kernel at all. So a
  // failing meta call only means "not on this tier": the call goes on,
  // composites decline bad arguments, and the host tier raises CPU's own
  // error (or, where only the meta kernel was missing, computes it). The
  // fallback is counted like any other.
  const MetaResult* shapes = nullptr;
  std::shared_ptr<const MetaResult> keep;  // unset when the per-thread memo answered
  try {
    shapes = shapes_.inferShapes(op, args, schema_, shape_rule_, &keep);
  } catch (const std::exception&) {
    return Native::Skip;
  }
  // Read now, before anything below may run another operator on this
  // thread (and so reuse the memo slot behind @p shapes).
  if (!shapeOutputs(schema_, *shapes, o)) return Native::Skip;
  ret.layout.assign(shapes->layout.begin(), shapes->layout.end());
  shapes = nullptr;
  // The returns: the functional outputs (owned), in the layout read above.
  at::Tensor cast_into;  // Note [Pointwise out= in the common dtype]
  const auto finish = [&] {
    if (cast_into.defined()) cast_into.copy_(*o.outputs[0]);
    if (schema_.kind == OutKind::Functional) {
      for (TensorRef& t : o.outputs) ret.outs.push_back(*std::move(t));
    }
    return Native::Done;
  };

  const bool pointwise = spec_.family == Family::Pointwise;
  if (pointwise && spec_.promote_mask)
    cast_into = computeInCommonDtype(spec_, schema_, args, promoteInputs(spec_, o), o);
  if (pointwise) promoteAgainstScalar(spec_, schema_, args, o);
  AbiArgs abi;
  // Random operators' inputs (bernoulli's p) broadcast to the output, too.
  const bool elementwise = pointwise || spec_.family == Family::Random;
  if (!describeOperands(elementwise, o, abi) || !encodeScalars(spec_, schema_, args, o, abi))
    return Native::Skip;

  // Empty outputs: the meta kernel checked the arguments and there is
  // nothing to write (kernels and the generator need not handle numel 0).
  if (std::all_of(o.outputs.begin(), o.outputs.end(),
                  [](const TensorRef& t) { return !t->defined() || t->numel() == 0; }))
    return finish();

  // Call.
  flagosStream_t stream = flagos::currentVendorStream(o.device.index());
  // Note [Index bounds] (index_bounds.cpp)
  if (checks_index_range_) checkIndexRange(spec_, o.inputs, abi.scalars);
  const auto n_in = static_cast<int32_t>(abi.in.size());
  const auto n_out = static_cast<int32_t>(abi.out.size());
  const auto n_scalars = static_cast<int32_t>(abi.scalars.size());
  if (!fn) {
    const kernels::Call call{abi.out.data(),     n_out,    abi.in.data(), n_in,
                             abi.scalars.data(), n_scalars};
    if (!runGeneratedKernel(op_index_, o.device.index(), stream, call)) return Native::Skip;
    return finish();
  }
  flagosStatus_t status =
      fn(stream, abi.out.data(), n_out, abi.in.data(), n_in, abi.scalars.data(), n_scalars);
  if (status == FLAGOS_ERROR_NOT_SUPPORTED && !pointwise && contiguousInputs(o) &&
      describeOperands(false, o, abi)) {
    status = fn(stream, abi.out.data(), n_out, abi.in.data(), n_in, abi.scalars.data(), n_scalars);
  }
  if (status == FLAGOS_ERROR_NOT_SUPPORTED) return Native::Skip;
  if (status == FLAGOS_ERROR_FALLBACK) {  // status.h: run this request on the host
    // Read now: the host tier's copies call into the plugin again.
    if (why_host) *why_host = detail::lastError(backend().tables);
    return Native::Host;
  }
  if (status != FLAGOS_SUCCESS) {
    const std::string what = std::string("native kernel '") + spec_.id + "' for " + name_;
    flagos::check(status, what.c_str());
  }
  return finish();
}

}  // namespace flagos::semantic
