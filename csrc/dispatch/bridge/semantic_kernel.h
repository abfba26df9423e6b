// The one boxed kernel every catalog overload is registered with (Note [The
// semantic bridge] in bridge.cpp). Internal to csrc/dispatch/bridge: the
// tier walk (bridge.cpp), the kernel tiers' prepared call
// (prepared_call.cpp) and the shape preload (shape_preload.cpp) share it.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/bridge/argument_checks.h"
#include "dispatch/bridge/catalog.h"
#include "dispatch/bridge/schema.h"
#include "dispatch/core/op_stats.h"
#include "dispatch/shapes/shape_cache.h"
#include "flagos/kernel.h"

namespace flagos::semantic {

// Outcome of a kernel tier.
enum class Native : uint8_t {
  Done,  // the kernel ran; KernelReturns holds the returns
  Skip,  // not on this tier: the next one
  Host,  // the plugin asked for the host tier (FLAGOS_ERROR_FALLBACK)
};

// What a kernel tier's call returns: the functional outputs it allocated
// (in-place and out= calls return their written arguments instead).
struct KernelReturns {
  c10::SmallVector<at::Tensor, 4> outs;
  c10::SmallVector<int32_t, 2> layout;  // per return: -1 one tensor, n: a list of n
};

// How tiers 1 and 2 ended a call: Done (@c ran is the tier, @c ret its
// returns), Host (the plugin asked for the host tier; @c why_host is its
// reason) or Skip (on to tier 3).
struct KernelTiers {
  Native got = Native::Skip;
  Tier ran = Tier::Native;
  KernelReturns ret;
  std::string why_host;
};

// How an unboxed entry's call ended (Note [Unboxed entries], unboxed.cpp).
enum class Unboxed : uint8_t {
  Done,   // a kernel tier ran: the result is the functional output
  Boxed,  // the call took the boxed path: the stack holds the returns
};

class SemanticKernel final : public c10::OperatorKernel {
 public:
  explicit SemanticKernel(int overload);

  // Every overload's kernel, by index into kOverloads (owned by the
  // dispatcher, alive until exit).
  static std::vector<SemanticKernel*>& registry();

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);

  // Note [Unboxed entries]: the call with @p args borrowed (no reference
  // counts taken), as an unboxed entry makes it. Done: a kernel tier ran
  // and @p out holds the functional result (unset for in-place calls).
  // Boxed: @p stack was filled with owned copies of the arguments and the
  // boxed path ran on it (autocompare, tiers 3 and 4): it holds the returns.
  Unboxed callUnboxed(const c10::OperatorHandle& op, const c10::IValue* args, at::Tensor* out,
                      torch::jit::Stack* stack);
  // The operator this kernel is registered for (an unboxed entry is not
  // handed it); found on first use.
  const c10::OperatorHandle& handle();

  // Resolves the schema facts and the generator's recipe now instead of on
  // the first call (done at initialize for the overloads an earlier process
  // used). A recipe costs far more than a call: parsing a gelu-like
  // expression and one lowering (Note [Support checks on first use]).
  void prepare(const c10::OperatorHandle& op);

  const char* overloadName() const { return kOverloads[ov_].name; }  // "add.Tensor"
  ShapeCache& shapes() { return shapes_; }
  const ShapeCache& shapes() const { return shapes_; }

 private:
  // The tiers; returns the one that ran.
  Tier run(const c10::OperatorHandle& op, Route route, torch::jit::Stack* stack);
  // What every tier checks first (Note [Tensors on one device], Note
  // [Overlapping writes]); raises CPU's errors.
  void checkCall(const c10::OperatorHandle& op, const c10::IValue* args);
  // The checks, then tiers 1 and 2, for the boxed and the unboxed path.
  KernelTiers kernelTiers(const c10::OperatorHandle& op, Route route, const c10::IValue* args);
  // Tiers 3 and 4.
  Tier laterTiers(const c10::OperatorHandle& op, Route route, torch::jit::Stack* stack);
  // Replaces the arguments on @p stack by the returns of a kernel tier.
  void pushReturns(KernelReturns& ret, torch::jit::Stack* stack);
  void ensureAnalyzed(const c10::OperatorHandle& op);
  void analyze(const c10::OperatorHandle& op);
  bool runComposite(const c10::OperatorHandle& op, torch::jit::Stack* stack);
  // Tier 4; @p asked: the plugin's reason when its kernel asked for it.
  Tier runHostTier(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                   const std::string* asked);
  OpCounters* counters();
  flagosKernelFn kernel();

  // Tier 1 (fn: the native kernel) or tier 2 (fn == nullptr: generated);
  // prepared_call.cpp. On Native::Host, @p why_host holds the plugin's
  // last error.
  Native tryKernel(const c10::OperatorHandle& op, flagosKernelFn fn, const c10::IValue* args,
                   KernelReturns& ret, std::string* why_host = nullptr);

  const int ov_;
  const int op_index_;
  const OpSpec& spec_;
  const std::string name_;               // "aten::add.Tensor", the op_stats key
  const bool checks_index_range_;        // Note [Index bounds]
  const ArgumentCheck check_arguments_;  // Note [Argument checks the meta kernels skip]

  std::once_flag analyzed_;
  std::atomic<bool> analyzed_done_{false};  // call_once's fast path, without its TLS
  OverloadSchema schema_;
  ShapeRuleSpec shape_rule_;
  std::once_flag handle_once_;
  std::atomic<bool> handle_done_{false};
  std::optional<c10::OperatorHandle> handle_;

  std::atomic<OpCounters*> counters_{nullptr};
  std::atomic<int> kernel_state_{0};
  flagosKernelFn fn_ = nullptr;

  ShapeCache shapes_;
};

}  // namespace flagos::semantic
