// The one boxed kernel every catalog overload is registered with (Note [The
// semantic bridge] in bridge.cpp). Internal to csrc/dispatch/semantic: the
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
#include <string>
#include <vector>

#include "dispatch/op_stats.h"
#include "dispatch/semantic/catalog.h"
#include "dispatch/semantic/schema.h"
#include "dispatch/semantic/shape_cache.h"
#include "flagos/kernel.h"

namespace flagos::semantic {

// Outcome of a kernel tier.
enum class Native : uint8_t {
  Done,  // the kernel ran; the stack holds the returns
  Skip,  // not on this tier: the next one
  Host,  // the plugin asked for the host tier (FLAGOS_ERROR_FALLBACK)
};

class SemanticKernel final : public c10::OperatorKernel {
 public:
  explicit SemanticKernel(int overload);

  // Every overload's kernel, by index into kOverloads (owned by the
  // dispatcher, alive until exit).
  static std::vector<SemanticKernel*>& registry();

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);

  // Resolves the schema facts and the generator's recipe now instead of on
  // the first call (done at initialize for the overloads an earlier process
  // used). A recipe is ~20-90 us: parsing a gelu-like expression and one
  // lowering (Note [Support checks on first use]).
  void prepare(const c10::OperatorHandle& op);

  const char* overloadName() const { return kOverloads[ov_].name; }  // "add.Tensor"
  ShapeCache& shapes() { return shapes_; }
  const ShapeCache& shapes() const { return shapes_; }

 private:
  // The tiers; returns the one that ran.
  Tier run(const c10::OperatorHandle& op, Route route, torch::jit::Stack* stack);
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
  Native tryKernel(const c10::OperatorHandle& op, flagosKernelFn fn, torch::jit::Stack* stack,
                   std::string* why_host = nullptr);
  Native finish(c10::SmallVectorImpl<at::Tensor>& outputs,
                const std::shared_ptr<const MetaResult>& shapes, const c10::IValue* args,
                torch::jit::Stack* stack);

  const int ov_;
  const int op_index_;
  const OpSpec& spec_;
  const std::string name_;  // "aten::add.Tensor", the op_stats key

  std::once_flag analyzed_;
  OverloadSchema schema_;

  std::atomic<OpCounters*> counters_{nullptr};
  std::atomic<int> kernel_state_{0};
  flagosKernelFn fn_ = nullptr;

  ShapeCache shapes_;
};

}  // namespace flagos::semantic
