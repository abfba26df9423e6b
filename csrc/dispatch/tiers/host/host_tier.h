// Tier 4 for catalog overloads: the host fallback.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/ArrayRef.h>

namespace flagos::semantic {

// Runs `op` on the host: its arguments are copied to the CPU, ATen's CPU
// kernel runs, results (and mutated arguments) are copied back. With
// `host_op` set, runs aten::<host_op> instead (ops that only exist for
// out-of-tree devices, e.g. convolution_overrideable -> convolution).
// `mutated` lists the (schema) argument indices the op writes although its
// schema does not mark them (a!): staged on the host and copied back.
void runOnHost(const c10::OperatorHandle& op, const char* host_op, c10::ArrayRef<int> mutated,
               torch::jit::Stack* stack);

}  // namespace flagos::semantic
