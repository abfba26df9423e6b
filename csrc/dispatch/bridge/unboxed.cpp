// Unboxed entries: the hottest catalog overloads registered with a typed
// kernel in front of the bridge.
//
// Note [Unboxed entries]
// ~~~~~~~~~~~~~~~~~~~~~~
// The bridge is one boxed kernel (Note [The semantic bridge]), so an
// unboxed call (every Python operator call is one) first goes through
// c10's BoxedKernelWrapper: a heap-allocated IValue stack with a copy of
// each argument. A copy of a tensor that only Python holds takes a reference
// on its PyObject (c10::TensorImpl::incref_pyobject), and that needs the GIL,
// which torch's binding released for the call: `a + b` on (4, 4) paid two
// GIL round trips and two heap allocations before any tier ran, a third of
// the core's cost next to native CPU (docs/benchmarks.md, "tiny ops").
//
// For the overloads in kEntries below, the registered kernel is typed: it
// wraps its arguments in IValues that *borrow* the tensors (no reference
// counts, c10::MaybeOwnedTraits), in an array on the C stack, and hands them
// to SemanticKernel::callUnboxed, which runs the same checks and kernel
// tiers as the boxed path over the same `const IValue*` arguments (the
// prepared call borrows too: Operands in prepared_call.cpp). Only when the
// call leaves tiers 1-2 (decomposition, host, a plugin's FALLBACK) or is
// replayed by autocompare does it build the boxed stack, with owned copies,
// and take the boxed path from there. Boxed callers (torch.ops.aten.*,
// Python dispatch modes) reach the entry through c10's unboxing wrapper.
//
// An entry's C++ signature must be the one ATen's codegen gives the schema;
// the dispatcher checks it when the entry is registered, and an overload
// whose signature does not match this torch keeps the boxed kernel.
#include "dispatch/bridge/unboxed.h"

#include <ATen/ATen.h>
#include <c10/util/MaybeOwned.h>

#include <array>
#include <cstring>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace flagos::semantic {
namespace {

template <class T>
constexpr bool kIsTensor = std::is_same_v<std::decay_t<T>, at::Tensor>;

// An argument as an IValue: tensors borrowed, everything else by value.
c10::IValue box(const at::Tensor& t) {
  return c10::IValue(c10::MaybeOwnedTraits<at::Tensor>::createBorrow(t));
}
template <class T>
c10::IValue box(const T& v) {
  return c10::IValue(v);
}

// Forgets the borrowed tensors (without a decref) when the call ends,
// however it ends.
template <class... Args>
struct Borrowed {
  std::array<c10::IValue, sizeof...(Args)> args;
  ~Borrowed() {
    constexpr bool tensor[] = {kIsTensor<Args>...};
    for (size_t i = 0; i < sizeof...(Args); ++i)
      if (tensor[i]) c10::MaybeOwnedTraits<c10::IValue>::destroyBorrow(args[i]);
  }
};

template <class Sig>
struct Entry;

template <class Ret, class... Args>
struct Entry<Ret(Args...)> {
  static_assert(std::is_same_v<Ret, at::Tensor> || std::is_same_v<Ret, at::Tensor&>,
                "entries return one tensor (functional) or self (in-place)");
  SemanticKernel* kernel;

  Ret operator()(Args... args) const {
    Borrowed<Args...> borrowed{{box(args)...}};
    at::Tensor out;
    torch::jit::Stack stack;
    const Unboxed how = kernel->callUnboxed(kernel->handle(), borrowed.args.data(), &out, &stack);
    if constexpr (std::is_same_v<Ret, at::Tensor&>) {
      // In-place: the boxed path returns self too.
      return std::get<0>(std::forward_as_tuple(args...));
    } else {
      if (how == Unboxed::Done) return out;
      return std::move(stack.back()).toTensor();
    }
  }
};

template <class Sig>
torch::CppFunction makeEntry(SemanticKernel* kernel) {
  return torch::CppFunction(Entry<Sig>{kernel});
}

using T = const at::Tensor&;
using S = const c10::Scalar&;
using Dtype = std::optional<at::ScalarType>;
using Binary = at::Tensor(T, T);
using BinaryAlpha = at::Tensor(T, T, S);
using Unary = at::Tensor(T);

// The overloads of a training step's small operators, and the tiny-op
// benchmark's (benchmarks/bench_training.py).
constexpr std::pair<const char*, torch::CppFunction (*)(SemanticKernel*)> kEntries[] = {
    {"add.Tensor", makeEntry<BinaryAlpha>},
    {"add_.Tensor", makeEntry<at::Tensor&(at::Tensor&, T, S)>},
    {"sub.Tensor", makeEntry<BinaryAlpha>},
    {"sub_.Tensor", makeEntry<at::Tensor&(at::Tensor&, T, S)>},
    {"mul.Tensor", makeEntry<Binary>},
    {"mul_.Tensor", makeEntry<at::Tensor&(at::Tensor&, T)>},
    {"div.Tensor", makeEntry<Binary>},
    {"div_.Tensor", makeEntry<at::Tensor&(at::Tensor&, T)>},
    {"relu", makeEntry<Unary>},
    {"relu_", makeEntry<at::Tensor&(at::Tensor&)>},
    {"neg", makeEntry<Unary>},
    {"exp", makeEntry<Unary>},
    {"sigmoid", makeEntry<Unary>},
    {"tanh", makeEntry<Unary>},
    {"silu", makeEntry<Unary>},
    {"sqrt", makeEntry<Unary>},
    {"rsqrt", makeEntry<Unary>},
    {"threshold_backward", makeEntry<at::Tensor(T, T, S)>},
    {"mm", makeEntry<Binary>},
    {"bmm", makeEntry<Binary>},
    {"addmm", makeEntry<at::Tensor(T, T, T, S, S)>},
    {"sum", makeEntry<at::Tensor(T, Dtype)>},
    {"sum.dim_IntList", makeEntry<at::Tensor(T, at::OptionalIntArrayRef, bool, Dtype)>},
    {"mean.dim", makeEntry<at::Tensor(T, at::OptionalIntArrayRef, bool, Dtype)>},
};

}  // namespace

bool registerUnboxed(torch::Library& m, std::unique_ptr<SemanticKernel>& kernel) {
  const char* name = kernel->overloadName();
  for (const auto& [entry_name, make] : kEntries) {
    if (std::strcmp(entry_name, name) != 0) continue;
    SemanticKernel* k = kernel.release();  // lives until exit, as the dispatcher's would
    try {
      m.impl(name, make(k));
      return true;
    } catch (const c10::Error&) {  // another signature in this torch: the boxed kernel
      kernel.reset(k);
      return false;
    }
  }
  return false;
}

}  // namespace flagos::semantic
