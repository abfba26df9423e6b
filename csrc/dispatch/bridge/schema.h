// Schema analysis: what the bridge needs to know about one overload,
// resolved once from the live schema (the generator checked the same facts
// against the same torch at build time).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dispatch/bridge/catalog.h"
#include "dispatch/tiers/decomposition/composite.h"

namespace flagos::semantic {

// How an overload returns its results (Note [Finding the outputs]).
enum class OutKind : uint8_t { Functional, InPlace, Out, Void };

struct ScalarArg {
  int arg;              // schema index, -1: absent in this overload
  bool is_scalar_type;  // ScalarType argument: passed as a flagos dtype code
};

struct OverloadSchema {
  int num_args = 0;
  bool check_devices = true;  // false for the copy and indexing operators
  int num_returns = 0;
  OutKind kind = OutKind::Functional;
  bool decomposable = false;                   // Note [Reaching the composite kernel]
  composite::CompositeFn composite = nullptr;  // Note [Composite kernels]
  bool composite_sees_out = false;             // an out= call passes its outs too
  std::vector<int> inputs;                     // schema indices of the catalog's inputs
  std::vector<ScalarArg> scalars;              // per catalog scalar
  std::vector<int> outputs;                    // Note [Finding the outputs]
  std::vector<int> mutated;                    // schema indices of `mutates` inputs
};

// @p name ("aten::add.Tensor") only names the overload in assertions.
OverloadSchema analyzeSchema(const c10::OperatorHandle& op, const OpSpec& spec,
                             const OverloadSpec& overload, const std::string& name);

}  // namespace flagos::semantic
