// FLAGOS_AUTOCOMPARE: check every catalog call that ran on the device (native
// or decomposition tier) against ATen's CPU kernel. See Note [Autocompare]
// in autocompare.cpp.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/macros/Macros.h>
#include <c10/util/ArrayRef.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "dispatch/core/op_stats.h"

namespace flagos::semantic {

// 0 off, 1 report, 2 raise; -1: the environment is not read yet.
extern std::atomic<int> g_autocompare_mode;
int initAutocompare();  // reads FLAGOS_AUTOCOMPARE(_INJECT) once; the mode
bool inAutocompare();   // this thread is inside the checker (nested calls skip)

// The whole cost when off: one relaxed load.
inline bool autocompareActive() {
  int mode = g_autocompare_mode.load(std::memory_order_relaxed);
  if (C10_LIKELY(mode == 0)) return false;
  if (mode < 0 && initAutocompare() == 0) return false;
  return !inAutocompare();
}

// One checked call: the constructor copies the arguments to the CPU (before
// the call: in-place and out= variants overwrite them); check() runs the CPU
// reference and compares after the device call left its returns on `stack`.
class AutocompareCall {
 public:
  // @p accumulates: the operator sums many terms per output (GEMM,
  // convolution, reductions, norms, losses): Note [Autocompare tolerances].
  AutocompareCall(const c10::OperatorHandle& op, const std::string& name, const char* op_id,
                  const char* host_op, c10::ArrayRef<int> mutated, const torch::jit::Stack& stack,
                  int num_args, bool accumulates);
  ~AutocompareCall();
  void check(Tier tier, const torch::jit::Stack& stack);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace flagos::semantic
