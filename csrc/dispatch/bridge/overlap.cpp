// Note [Overlapping writes] in overlap.h.
#include "dispatch/bridge/overlap.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>

#include <cstring>

namespace flagos::semantic {

namespace {

// cat.out (CPU's cat_out checks).
void checkCatOverlap(c10::ArrayRef<c10::IValue> args, c10::ArrayRef<int> outputs,
                     c10::ArrayRef<int> inputs) {
  if (outputs.empty() || inputs.empty() || !args[outputs[0]].isTensor() ||
      !args[inputs[0]].isTensorList())
    return;
  const at::Tensor& out = args[outputs[0]].toTensor();
  if (!out.defined()) return;
  at::assert_no_internal_overlap(out);
  for (const at::Tensor& t : args[inputs[0]].toTensorList().vec())
    if (t.defined()) at::assert_no_overlap(out, t);
}

}  // namespace

void checkWrittenOverlap(const OpSpec& spec, c10::ArrayRef<c10::IValue> args,
                         c10::ArrayRef<int> outputs, c10::ArrayRef<int> inputs) {
  if (std::strcmp(spec.id, "cat") == 0) return checkCatOverlap(args, outputs, inputs);
  if (spec.family != Family::Pointwise) return;
  for (int o : outputs) {
    if (!args[o].isTensor()) continue;
    const at::Tensor& out = args[o].toTensor();
    if (!out.defined()) continue;
    at::assert_no_internal_overlap(out);
    for (int i : inputs) {
      if (i == o || !args[i].isTensor()) continue;
      const at::Tensor& in = args[i].toTensor();
      if (in.defined()) at::assert_no_partial_overlap(out, in);
    }
  }
}

}  // namespace flagos::semantic
