// torch.histogram from device operators (Note [Histogram bins as CPU finds
// them]).
//
// Note [Histogram bins as CPU finds them]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// histogram.bin_ct(self, bins, range, weight, density) makes bins + 1
// edges with linspace between range (or the input's min and max, [0, 1]
// without elements; an empty interval widened by 0.5 on each side): CPU's
// linspace, run on the host and copied (bins + 1 numbers), because CPU's
// vectorized linspace rounds some points past the halfway one differently
// from its both-ends rule (and from our device linspace, which follows the
// rule, as CUDA's does), and an element on an edge must land where CPU's
// edge puts it. Each element then goes in a bin the
// way CPU's kernel does (HistogramKernel.cpp): its linear estimate
// trunc((x - e0) * bins / (eN - e0)), computed in the input's dtype, then
// the upper bound of x among the edges at most one away from it, so that
// an element on an edge lands where the edges say; the last bin keeps its
// right edge; elements outside [e0, eN] and NaN count nowhere. The
// histogram.bins_tensor form takes the given edges and the upper bound
// among all of them (one broadcast comparison). Counts (or weights)
// accumulate with index_put_; density divides by the total, then by each
// bin's width, as CPU does. A range or input that is not finite, an
// interval with min > max, and edges that are not 1-D take the host tier,
// which raises CPU's error.
#include <ATen/ATen.h>

#include <cmath>
#include <optional>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

// Elements of the bins_tensor form's broadcast comparison.
constexpr int64_t kMaxCompared = int64_t{1} << 24;

// The histogram of @p x (1-D) over @p edges (bins + 1 of them, ascending)
// given each element's bin @p pos and whether it counts (@p in).
std::pair<at::Tensor, at::Tensor> accumulate(const at::Tensor& x, const at::Tensor& edges,
                                             at::Tensor pos, const at::Tensor& in,
                                             const at::Tensor& weight, bool density) {
  const int64_t bins = edges.numel() - 1;
  pos = at::where(at::eq(pos, bins), pos - 1, pos);  // the last bin keeps its right edge
  at::Tensor hist = at::zeros({bins}, x.options());
  const at::Tensor values = weight.defined() ? weight.reshape({-1}) : at::ones_like(x);
  hist.index_put_({pos.masked_select(in)}, values.masked_select(in), /*accumulate=*/true);
  if (density) {
    hist.div_(hist.sum());
    hist.div_(edges.narrow(0, 1, bins) - edges.narrow(0, 0, bins));
  }
  return {hist, edges};
}

// histogram.bin_ct(self, bins, *, range, weight, density).
bool histogramBinCount(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt() || !(a[2].isNone() || a[2].isDoubleList()) ||
      !a[4].isBool())
    return false;
  const at::Tensor self = a[0].toTensor(), weight = optTensor(a[3]);
  const int64_t bins = a[1].toInt();
  if (!usableFirst(self, /*allow_empty=*/true) || bins < 1 ||
      (weight.defined() && (!usableLike(weight, self) || weight.sizes() != self.sizes())))
    return false;
  const at::Tensor x = self.reshape({-1});
  double lo = 0, hi = 1;  // an empty input's, as numpy's
  if (a[2].isDoubleList()) {
    const auto range = a[2].toDoubleList();
    if (range.size() != 2) return false;
    lo = range[0];
    hi = range[1];
  } else if (x.numel() > 0) {
    auto [mn, mx] = at::aminmax(x);
    lo = mn.item<double>();
    hi = mx.item<double>();
  }
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) return false;  // CPU's errors
  if (lo == hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  // The edges decide the bins, so they are CPU's own linspace (its result
  // depends on its vector width past the halfway point), copied over.
  const at::Tensor edges =
      at::linspace(lo, hi, bins + 1, x.options().device(at::kCPU)).to(x.device());
  if (x.numel() == 0) {
    auto [hist, e] =
        accumulate(x, edges, at::zeros({0}, x.options().dtype(at::kLong)),
                   at::zeros({0}, x.options().dtype(at::kBool)), weight, a[4].toBool());
    replaceArgs(stack, kArgs, {hist, e});
    return true;
  }
  const at::Tensor e0 = edges.narrow(0, 0, 1), en = edges.narrow(0, bins, 1);
  const at::Tensor in = at::logical_and(at::ge(x, e0), at::le(x, en));
  // CPU's linear estimate, in the input's dtype, then the local upper bound.
  at::Tensor pos = at::trunc((x - e0) * static_cast<double>(bins) / (en - e0)).to(at::kLong);
  pos = at::where(in, pos, at::zeros_like(pos)).clamp(0, bins);
  const at::Tensor lo_k = (pos - 1).clamp_min(0), hi_k = (pos + 2).clamp_max(bins + 1);
  at::Tensor count = at::zeros_like(pos);
  for (int64_t d = -1; d <= 1; ++d) {
    const at::Tensor k = pos + d;
    const at::Tensor inside = at::logical_and(at::ge(k, lo_k), at::lt(k, hi_k));
    const at::Tensor edge = edges.index_select(0, k.clamp(0, bins));
    count = count + at::logical_and(inside, at::le(edge, x)).to(at::kLong);
  }
  pos = lo_k + count - 1;
  auto [hist, e] = accumulate(x, edges, pos, in, weight, a[4].toBool());
  replaceArgs(stack, kArgs, {hist, e});
  return true;
}

// histogram.bins_tensor(self, bins, *, weight, density).
bool histogramBinEdges(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[3].isBool()) return false;
  const at::Tensor self = a[0].toTensor(), edges_in = a[1].toTensor(), weight = optTensor(a[2]);
  if (!usableFirst(self, /*allow_empty=*/true) || !usableLike(edges_in, self) ||
      edges_in.dim() != 1 || edges_in.numel() < 2 ||
      (weight.defined() && (!usableLike(weight, self) || weight.sizes() != self.sizes())))
    return false;
  const at::Tensor x = self.reshape({-1});
  if (x.numel() * edges_in.numel() > kMaxCompared) return false;
  const at::Tensor edges = edges_in.clone();
  const int64_t bins = edges.numel() - 1;
  const at::Tensor in =
      at::logical_and(at::ge(x, edges.narrow(0, 0, 1)), at::le(x, edges.narrow(0, bins, 1)));
  const at::Tensor pos = at::le(edges.unsqueeze(0), x.unsqueeze(1)).sum(1) - 1;
  auto [hist, e] = accumulate(x, edges, pos, in, weight, a[3].toBool());
  replaceArgs(stack, kArgs, {hist, e});
  return true;
}

}  // namespace

void addHistogramComposites(Register add) {
  add("histogram_bin_ct", histogramBinCount, 0);
  add("histogram_bins_tensor", histogramBinEdges, 0);
}

}  // namespace flagos::composite
