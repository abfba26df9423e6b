// Note [Overlapping writes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// An in-place or out= call whose output overlaps itself (a write into an
// expanded tensor: y.expand(4, 3).mul_(2) multiplied each element by 16) or
// partly overlaps an input (x[1:].add_(x[:-1]) gave a running sum) computes
// garbage on any tier: kernels run in parallel and the host tier copies the
// operands apart. CPU's TensorIterator refuses both with its "unsupported
// operation: ... refer to a single memory location" RuntimeError; the
// bridge asks the same questions (at::assert_no_internal_overlap,
// at::assert_no_partial_overlap: an input that is exactly the output, as in
// x.add_(x), stays allowed) before any tier runs, for the pointwise family,
// whose CPU kernels are TensorIterator loops. cat.out makes CPU's own
// checks: the output may not overlap itself nor share any element with an
// input (at::assert_no_overlap; torch.cat([x[:3], x[3:]], out=x) copied
// over its own inputs). (Reductions are not checked: CPU's sum(out=an
// expanded tensor) does not raise either.)
#pragma once

#include <ATen/core/stack.h>
#include <c10/util/ArrayRef.h>

#include "dispatch/bridge/catalog.h"

namespace flagos::semantic {

// @p args: the call's arguments; @p outputs and @p inputs: indices into
// them of the written tensors and of the tensor inputs. Throws CPU's error.
void checkWrittenOverlap(const OpSpec& spec, c10::ArrayRef<c10::IValue> args,
                         c10::ArrayRef<int> outputs, c10::ArrayRef<int> inputs);

}  // namespace flagos::semantic
