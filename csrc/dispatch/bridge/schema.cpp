// Schema analysis (schema.h): argument positions of the catalog's inputs
// and scalars, the outputs, and which decomposition tiers the overload can
// take.
//
// Note [Finding the outputs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// (mirrored by codegen/gen_catalog.py, which checks the counts at build time)
//  - out=:       the kwarg-only mutable arguments, in order;
//  - in-place:   the arguments the returns alias, in order;
//  - void (`-> ()`, the _foreach_*_ family): every mutable argument;
//  - functional: the returns, allocated by the bridge.
#include "dispatch/bridge/schema.h"

#include "dispatch/core/device_check.h"

namespace flagos::semantic {
namespace {

bool isScalarTypeArg(const c10::Argument& a) {
  c10::TypePtr t = a.real_type();
  if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
  return t->kind() == c10::TypeKind::ScalarTypeType;
}

// See Note [Finding the outputs]
void findOutputs(const c10::FunctionSchema& schema, OverloadSchema& s) {
  const auto& args = schema.arguments();
  for (int i = 0; i < s.num_args; ++i)
    if (args[i].is_out()) s.outputs.push_back(i);
  if (!s.outputs.empty()) {
    s.kind = OutKind::Out;
    return;
  }
  for (const auto& r : schema.returns()) {
    if (!r.alias_info()) continue;
    for (int i = 0; i < s.num_args; ++i) {
      if (args[i].alias_info() && args[i].alias_info()->isWrite() &&
          args[i].alias_info()->beforeSets() == r.alias_info()->beforeSets()) {
        s.outputs.push_back(i);
        break;
      }
    }
  }
  if (!s.outputs.empty()) {
    s.kind = OutKind::InPlace;
  } else if (schema.returns().empty()) {
    s.kind = OutKind::Void;
    for (int i = 0; i < s.num_args; ++i)
      if (args[i].alias_info() && args[i].alias_info()->isWrite()) s.outputs.push_back(i);
  } else {
    s.kind = OutKind::Functional;
  }
}

// Composites compute functional calls; out= overloads whose out arguments
// are the trailing ones (all of ATen's) reuse them, and in-place ones (self
// first) when the composite allows it.
composite::CompositeFn compositeFor(const OpSpec& spec, const OverloadSchema& s) {
  const bool trailing_outs = s.kind == OutKind::Out &&
                             static_cast<int>(s.outputs.size()) == s.num_returns &&
                             s.outputs.front() == s.num_args - static_cast<int>(s.outputs.size());
  const bool self_in_place = s.kind == OutKind::InPlace && s.outputs.size() == 1 &&
                             s.outputs.front() == 0 && s.num_returns == 1;
  if (const composite::Composite* c = composite::findComposite(spec.id)) {
    if (s.kind == OutKind::Functional || s.kind == OutKind::Void || trailing_outs ||
        (self_in_place && c->in_place))
      return c->fn;
  }
  return nullptr;
}

}  // namespace

OverloadSchema analyzeSchema(const c10::OperatorHandle& op, const OpSpec& spec,
                             const OverloadSpec& overload, const std::string& name) {
  const c10::FunctionSchema& schema = op.schema();
  const auto& args = schema.arguments();
  OverloadSchema s;
  s.num_args = static_cast<int>(args.size());
  s.check_devices = !mixesDevicesByDesign(op);
  auto indexOf = [&](const char* arg) -> int {
    for (int i = 0; i < s.num_args; ++i)
      if (args[i].name() == arg) return i;
    return -1;
  };
  for (int i = 0; i < spec.num_inputs; ++i) {
    int a = indexOf(spec.inputs[i]);
    TORCH_INTERNAL_ASSERT(a >= 0, name, ": no input ", spec.inputs[i]);
    s.inputs.push_back(a);
    if (spec.mutates_mask >> i & 1u) s.mutated.push_back(a);
  }
  for (int i = 0; i < spec.num_scalars; ++i) {
    int a = indexOf(spec.scalars[i].name);
    s.scalars.push_back({a, a >= 0 && isScalarTypeArg(args[a])});
  }
  findOutputs(schema, s);
  s.num_returns = static_cast<int>(schema.returns().size());
  s.composite = compositeFor(spec, s);
  if (s.composite) s.composite_sees_out = composite::findComposite(spec.id)->sees_out;
  // Checked once per overload (Note [Reaching the composite kernel]).
  s.decomposable = overload.decomposable &&
                   !op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse3) &&
                   op.hasComputedKernelForDispatchKey(c10::DispatchKey::PrivateUse3);
  return s;
}

}  // namespace flagos::semantic
