// The host fallback (execution tier 4): any operator without a kernel on the
// flagos device runs on the CPU, with its tensors copied over and back.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace flagos {

// Run `op` on the host without counting it (callers count the tier they
// took): tensors copied to CPU and back, random operators drawing from the
// flagos generator (Note [Random operators in the host fallback]), and the
// arguments at `mutated` (which the schema does not mark as written) copied
// back too (Note [Mutations the schema does not declare]).
void runOnHost(const c10::OperatorHandle& op, torch::jit::Stack* stack,
               c10::ArrayRef<int> mutated = {});

// One stderr line per operator on its first fallback while enabled.
// Initially FLAGOS_LOG_FALLBACK=1 in the environment.
void setLogFallback(bool enabled);
bool logFallback();

}  // namespace flagos
