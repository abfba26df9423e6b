// Note [Overlapping writes] in overlap.h.
#include "dispatch/semantic/overlap.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>

namespace flagos::semantic {

void checkWrittenOverlap(Family family, c10::ArrayRef<c10::IValue> args, c10::ArrayRef<int> outputs,
                         c10::ArrayRef<int> inputs) {
  if (family != Family::Pointwise) return;
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
