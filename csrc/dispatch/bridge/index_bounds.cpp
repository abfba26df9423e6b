// Note [Index bounds]
// ~~~~~~~~~~~~~~~~~~~
// Generated index kernels cannot raise, so an out-of-range index would
// read 0 silently; a native kernel's own check surfaces only at the next
// synchronization, as a stream error (CUDA's device-side assert). Before
// launching either, the index tensor's range is checked on the host (a
// copy of the index, usually small, and a sync), raising the errors CPU
// raises, with the offending index named: wrong input is an error at the
// call, never a silent wrong result. Negative indices are out of range
// here as on CPU (index_select does not wrap). nll_loss's targets get the
// same check (ignore_index excepted).
#include "dispatch/bridge/index_bounds.h"

#include <ATen/ATen.h>

#include <cstring>
#include <string>

namespace flagos::semantic {
namespace {

// nll_loss(self, target, weight; reduction, ignore_index): CPU's IndexError.
void checkTargetRange(c10::ArrayRef<c10::MaybeOwned<at::Tensor>> inputs,
                      const c10::SmallVectorImpl<flagosScalar>& scalars) {
  if (inputs.size() < 2 || scalars.size() < 2 || !inputs[1]->defined() || inputs[1]->numel() == 0)
    return;
  const at::Tensor& self = *inputs[0];
  const int64_t classes = self.dim() >= 2 ? self.size(1) : self.size(0);
  at::Tensor target = inputs[1]->to(at::kCPU, at::kLong).flatten();
  target = target.masked_select(target != scalars[1].i);  // ignore_index
  if (target.numel() == 0) return;
  const int64_t lo = target.min().item<int64_t>(), hi = target.max().item<int64_t>();
  TORCH_CHECK_INDEX(lo >= 0 && hi < classes, "Target ", lo < 0 ? lo : hi, " is out of bounds.");
}

}  // namespace

bool checksIndexRange(const OpSpec& spec) {
  return spec.family == Family::Index || std::strcmp(spec.id, "nll_loss") == 0 ||
         std::strcmp(spec.id, "nll_loss2d") == 0;
}

void checkIndexRange(const OpSpec& spec, c10::ArrayRef<c10::MaybeOwned<at::Tensor>> inputs,
                     const c10::SmallVectorImpl<flagosScalar>& scalars) {
  if (spec.family != Family::Index) return checkTargetRange(inputs, scalars);
  int index = -1, self = -1;
  for (int i = 0; i < spec.num_inputs && i < static_cast<int>(inputs.size()); ++i) {
    const std::string name = spec.inputs[i];
    if (name == "index" || name == "indices") index = i;
    if (name == "self" || name == "weight") self = i;
  }
  if (index < 0 || self < 0 || !inputs[index]->defined() || inputs[index]->numel() == 0) return;
  const at::Tensor& source = *inputs[self];
  const bool embedding = std::string(spec.inputs[self]) == "weight";
  const int64_t dim = embedding || scalars.empty() ? 0 : scalars[0].i;
  const int64_t size = source.dim() == 0 ? 1 : source.size(dim);
  const at::Tensor host = inputs[index]->to(at::kCPU, at::kLong);
  const int64_t lo = host.min().item<int64_t>(), hi = host.max().item<int64_t>();
  const int64_t bad = lo < 0 ? lo : hi;
  const std::string id = spec.id;
  if (id == "index_select" || id == "embedding") {
    TORCH_CHECK_INDEX(lo >= 0 && hi < size, "index out of range in self: index ", bad,
                      " for dimension ", dim, " with size ", size);
  } else {  // gather, scatter*, index_add
    TORCH_CHECK(lo >= 0 && hi < size, "index ", bad, " is out of bounds for dimension ", dim,
                " with size ", size);
  }
}

}  // namespace flagos::semantic
