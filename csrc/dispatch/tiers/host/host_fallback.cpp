// The boxed host fallback for PrivateUse1 (its RNG handling, undeclared
// mutations) and the explicit errors for sparse layouts.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include "dispatch/tiers/host/host_fallback.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dispatch/core/device_check.h"
#include "dispatch/core/op_stats.h"
#include "runtime/backend.h"
#include "runtime/env.h"
#include "runtime/generator.h"

namespace flagos {
namespace {

// Read at load; garbage is off here (a throw during static initialization
// would abort the import), config.py reports it.
std::atomic<bool> g_log{[] { return flagos_kit::envFlag("FLAGOS_LOG_FALLBACK", false); }()};

void logOnce(const std::string& op) {
  static std::mutex mutex;
  static auto* logged = new std::set<std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  if (!logged->insert(op).second) return;
  fprintf(stderr,
          "[flagos] %s has no kernel on backend '%s': running it on the host (CPU fallback); "
          "later calls are only counted (flagos_torchfl.op_stats())\n",
          op.c_str(), isInitialized() ? backend().name.c_str() : "?");
}

std::string fullName(const c10::OperatorHandle& op) {
  const auto& name = op.schema().operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

bool isGeneratorType(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  auto opt = type->cast<c10::OptionalType>();
  return opt && opt->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

// The flagos device an operator call is about: its first flagos tensor (or
// tensor list element), else its Device argument.
std::optional<c10::Device> callDevice(c10::ArrayRef<c10::IValue> args) {
  for (const auto& v : args) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_privateuseone())
      return v.toTensor().device();
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec())
        if (t.defined() && t.is_privateuseone()) return t.device();
    }
  }
  for (const auto& v : args)
    if (v.isDevice() && v.toDevice().is_privateuseone()) return v.toDevice();
  return std::nullopt;
}

// Note [Random operators in the host fallback]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The CPU kernel of a random operator wants a CPU generator: given None it
// would use the CPU default generator, given a flagos one it would raise.
// So each Generator? argument is replaced by a CPU twin of the flagos
// generator the call should use (the one passed, or the device's default),
// keyed by its (seed, offset), and the offset advances by the numbers the
// call returned, all under the flagos generator's lock. See Note
// [Generators of the flagos device].
class GeneratorSwap {
 public:
  GeneratorSwap(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
    const auto& schema_args = op.schema().arguments();
    const size_t n = schema_args.size();
    const size_t begin = stack->size() - n;
    for (size_t i = 0; i < n; ++i) {
      if (!isGeneratorType(schema_args[i].type())) continue;
      c10::IValue& value = (*stack)[begin + i];
      at::Generator gen;
      if (value.isNone()) {
        auto device = callDevice(c10::ArrayRef<c10::IValue>(stack->data() + begin, n));
        if (!device) continue;
        gen = defaultGenerator(device->index());
      } else {
        gen = value.toGenerator();
        TORCH_CHECK(isFlagosGenerator(gen), "flagos: ", fullName(op),
                    ": expected a generator of the flagos device, got one on ", gen.device());
      }
      bool locked = false;
      for (const auto& g : gens_) locked |= g == gen;
      if (!locked) locks_.emplace_back(gen.mutex());
      value = c10::IValue(cpuTwin(gen));
      gens_.push_back(gen);
    }
  }
  // After the call: @p returns are its results; each generator's offset
  // advances by the numbers they hold (Note [Generators of the flagos device]).
  void commit(c10::ArrayRef<c10::IValue> returns) {
    if (gens_.empty()) return;
    uint64_t numbers = 0;
    for (const c10::IValue& v : returns) {
      if (v.isTensor() && v.toTensor().defined()) numbers += v.toTensor().numel();
      if (v.isTensorList())
        for (const at::Tensor& t : v.toTensorList().vec()) numbers += t.defined() ? t.numel() : 0;
    }
    for (const at::Generator& gen : gens_) advanceOffset(gen, numbers);
  }

 private:
  std::vector<at::Generator> gens_;  // the flagos generators the call draws from
  std::vector<std::unique_lock<std::mutex>> locks_;
};

// Note [Mutations the schema does not declare]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// cpu_fallback writes back only arguments annotated (a!). native_batch_norm
// updates running_mean/running_var in training mode although its schema
// does not say so; those arguments are staged here and copied back.
const std::vector<size_t>* undeclaredMutations(const std::string& op) {
  static const std::vector<size_t> batch_norm_stats{3, 4};
  if (op == "aten::native_batch_norm" || op == "aten::native_batch_norm.out")
    return &batch_norm_stats;
  return nullptr;
}

void hostFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = fullName(op);
  recordOpCall(name, Tier::Fallback);
  if (g_log.load(std::memory_order_relaxed)) logOnce(name);
  if (!mixesDevicesByDesign(op)) {  // Note [Tensors on one device]
    const size_t n = op.schema().arguments().size();
    checkSameDevice(op, c10::ArrayRef<c10::IValue>(stack->data() + stack->size() - n, n));
  }
  std::vector<int> mutated;
  if (const auto* indices = undeclaredMutations(name))
    mutated.assign(indices->begin(), indices->end());
  runOnHost(op, stack, mutated);
}

}  // namespace

void runOnHost(const c10::OperatorHandle& op, torch::jit::Stack* stack,
               c10::ArrayRef<int> mutated) {
  GeneratorSwap generators(op, stack);
  std::vector<std::pair<at::Tensor, at::Tensor>> written_back;  // (device, host)
  const size_t begin = stack->size() - op.schema().arguments().size();
  for (int i : mutated) {
    c10::IValue& v = (*stack)[begin + i];
    if (!v.isTensor() || !v.toTensor().defined() || !v.toTensor().is_privateuseone()) continue;
    at::Tensor device_tensor = v.toTensor();
    at::Tensor host = device_tensor.cpu();
    v = c10::IValue(host);
    written_back.emplace_back(std::move(device_tensor), std::move(host));
  }
  // Note [Results of a CPU scalar first]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // cpu_fallback puts the results on its first tensor argument's device. A
  // CPU 0-dim tensor first (a complex Python scalar times a flagos tensor:
  // mul(scalar, x)) took them to the CPU, where CPU's rule, and CUDA's, is
  // the device of the other operands. So the call's flagos device is
  // noted, and results that came back on the CPU go there.
  std::optional<c10::Device> device;
  const c10::IValue& first = (*stack)[begin];
  if (first.isTensor() && first.toTensor().defined() && !first.toTensor().is_privateuseone())
    device = callDevice(c10::ArrayRef<c10::IValue>(stack->data() + begin, stack->size() - begin));
  // error_on_views: a view computed on a host copy would not alias the
  // device tensor; every view operator has a core kernel (core_ops.cpp).
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
  const size_t returns = op.schema().returns().size();
  if (device) {
    for (size_t i = stack->size() - returns; i < stack->size(); ++i) {
      c10::IValue& r = (*stack)[i];
      if (r.isTensor() && r.toTensor().defined() && r.toTensor().is_cpu())
        r = c10::IValue(r.toTensor().to(*device));
    }
  }
  generators.commit(c10::ArrayRef<c10::IValue>(stack->data() + stack->size() - returns, returns));
  for (auto& [device_tensor, host] : written_back) device_tensor.copy_(host);
}

namespace {

void sparseUnsupported(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(false,
                              "flagos: sparse tensors are not supported on the flagos "
                              "device (operator ",
                              fullName(op), "); use a strided tensor");
}

// Quantized tensors (torch.quantize_per_tensor & co., deprecated by PyTorch)
// have no flagos kernels: a clear error instead of "Could not run
// 'aten::empty_quantized' with arguments from the 'Quantizedflagos' backend".
void quantizedUnsupported(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(false,
                              "flagos: quantized tensors are not supported on the flagos "
                              "device (operator ",
                              fullName(op),
                              "); keep quantized tensors on the CPU, or dequantize() them "
                              "before moving them to the device");
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&hostFallback>());
}

// Note [Composite kernels that refuse the device]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A few CompositeExplicitAutograd kernels refuse a device they do not know,
// so the dispatcher never reaches the fallback and "never not implemented"
// broke:
//   - mode.values (torch.mode(..., out=)) checks the device type: "mode
//     only supports CPU, CUDA and XPU device type, got: flagos";
//   - kaiser_window.beta (every torch.kaiser_window) calls a DispatchStub
//     that has kernels for CPU and CUDA only: "DispatchStub: missing kernel
//     for flagos" (an internal assert).
// They are registered for PrivateUse1 to the host fallback directly, which
// runs them on CPU (a factory's device argument included) and moves the
// results (tests/python/test_cpu_corner_semantics.py::
// test_composites_that_refuse_the_device_run).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mode.values", torch::CppFunction::makeFromBoxedFunction<&hostFallback>());
  m.impl("kaiser_window", torch::CppFunction::makeFromBoxedFunction<&hostFallback>());
  m.impl("kaiser_window.periodic", torch::CppFunction::makeFromBoxedFunction<&hostFallback>());
  m.impl("kaiser_window.beta", torch::CppFunction::makeFromBoxedFunction<&hostFallback>());
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparseUnsupported>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparseUnsupported>());
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&quantizedUnsupported>());
}

}  // namespace

void setLogFallback(bool enabled) {
  g_log.store(enabled);
}
bool logFallback() {
  return g_log.load();
}

}  // namespace flagos
