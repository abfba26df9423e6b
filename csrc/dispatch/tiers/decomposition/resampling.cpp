// Padding by reflection and replication, 1-D upsampling and max unpooling
// from other device operators (Note [Composite kernels]):
//  - reflection_pad{1,2,3}d and replication_pad{1,2,3}d and their
//    backwards: an index_select per padded dim with the source index of
//    every output position (computed on the host: a few hundred integers),
//    and the backward as index_add of the gradient over the same indices;
//  - upsample_nearest1d and upsample_linear1d (and backwards): the 2-D
//    kernels over a height of 1, which reproduces the 1-D index and weight
//    formulas (a height of 1 maps to itself with weight 1);
//  - max_unpool2d and max_unpool3d: a scatter of the values to their saved
//    indices in a zeroed output; indices outside it are CPU's error;
//  - _upsample_nearest_exact{1,2,3}d and backwards: an index_select per
//    spatial dim (index_add backwards), as padding is, with CPU's source
//    index min(floorf((i + 0.5f) * scale), n - 1) in float, scale being
//    1 / scales when given and positive, else in / out (UpSample.h).
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

bool onDevice(const at::Tensor& t) {
  return t.defined() && t.device().is_privateuseone() && !t.is_complex();
}

// The source index, in [0, n), of each of the n + lo + hi output positions
// of one padded dim; empty when CPU refuses the padding (a reflection of
// lo or hi >= n, an output of no positions).
std::vector<int64_t> paddedSources(int64_t n, int64_t lo, int64_t hi, bool reflect) {
  std::vector<int64_t> from;
  const int64_t size = n + lo + hi;
  if (n <= 0 || size <= 0 || (reflect && (lo >= n || hi >= n))) return from;
  for (int64_t i = 0; i < size; ++i) {
    int64_t j = i - lo;
    if (reflect) {
      if (j < 0) j = -j;
      if (j >= n) j = 2 * (n - 1) - j;
    } else {
      j = std::clamp<int64_t>(j, 0, n - 1);
    }
    from.push_back(j);
  }
  return from;
}

// The padded dims of @p self for a padding list (last dim first, lo/hi
// pairs) and each one's source indices on the device; nullopt if CPU refuses.
struct SourceDim {
  int64_t dim;
  at::Tensor from;
};

// @p self with each of @p dims replaced by its sources (an index_select a dim).
at::Tensor selectSources(at::Tensor self, const std::vector<SourceDim>& dims) {
  for (const SourceDim& d : dims) self = self.index_select(d.dim, d.from);
  return self;
}

// The backward of selectSources: each position's gradient added to its
// source, dim by dim in the reverse order; @p sizes: the sizes of the input.
at::Tensor addToSources(at::Tensor grad, const std::vector<SourceDim>& dims,
                        c10::IntArrayRef sizes) {
  for (auto d = dims.rbegin(); d != dims.rend(); ++d) {
    std::vector<int64_t> shape = grad.sizes().vec();
    shape[d->dim] = sizes[d->dim];
    grad = at::zeros(shape, grad.options()).index_add_(d->dim, d->from, grad);
  }
  return grad;
}
std::optional<std::vector<SourceDim>> paddedDims(const at::Tensor& self,
                                                 const std::vector<int64_t>& pad, int spatial,
                                                 bool reflect) {
  // CPU takes a batched (spatial + 2 dims) or unbatched (spatial + 1) input.
  if (static_cast<int>(pad.size()) != 2 * spatial ||
      (self.dim() != spatial + 1 && self.dim() != spatial + 2))
    return std::nullopt;
  std::vector<SourceDim> dims;
  for (int k = 0; k < spatial; ++k) {
    const int64_t dim = self.dim() - 1 - k;
    const std::vector<int64_t> from =
        paddedSources(self.size(dim), pad[2 * k], pad[2 * k + 1], reflect);
    if (from.empty()) return std::nullopt;
    dims.push_back({dim, at::tensor(from, at::TensorOptions().dtype(at::kLong)).to(self.device())});
  }
  return dims;
}

// reflection_pad / replication_pad (self, padding) of @p kSpatial dims.
template <int kSpatial, bool kReflect>
bool pad(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isIntList()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!onDevice(self)) return false;  // an empty batch pads, as on CPU
  const auto dims = paddedDims(self, a[1].toIntVector(), kSpatial, kReflect);
  if (!dims) return false;
  replaceArgs(stack, kArgs, {selectSources(self, *dims).contiguous()});
  return true;
}

// reflection_pad / replication_pad backward (grad_output, self, padding):
// each output position's gradient added to its source, dim by dim in the
// reverse order of the forward.
template <int kSpatial, bool kReflect>
bool padBackward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isIntList()) return false;
  const at::Tensor grad = a[0].toTensor(), self = a[1].toTensor();
  if (!onDevice(grad) || !onDevice(self) || !at::isFloatingType(grad.scalar_type())) return false;
  const auto dims = paddedDims(self, a[2].toIntVector(), kSpatial, kReflect);
  if (!dims) return false;
  replaceArgs(stack, kArgs, {addToSources(grad, *dims, self.sizes())});
  return true;
}

// The source of each of @p out positions of one nearest-exact dim of @p in
// (CPU's float formula, above); empty when CPU refuses the sizes.
std::vector<int64_t> nearestExactSources(int64_t in, int64_t out, const c10::IValue& scales) {
  std::vector<int64_t> from;
  if (in <= 0 || out <= 0 || !(scales.isNone() || scales.isDouble())) return from;
  const float scale = scales.isDouble() && scales.toDouble() > 0.
                          ? static_cast<float>(1.0 / scales.toDouble())
                          : static_cast<float>(in) / static_cast<float>(out);
  for (int64_t i = 0; i < out; ++i) {
    const float src = std::floor((static_cast<float>(i) + 0.5f) * scale);
    from.push_back(std::min(static_cast<int64_t>(src), in - 1));
  }
  return from;
}

// Each spatial dim of a (batch, channel, spatial...) tensor of @p in_size
// resized to @p out_size, with its sources on @p device; nullopt when CPU
// refuses. @p scales: the kSpatial scale arguments.
std::optional<std::vector<SourceDim>> nearestExactDims(const std::vector<int64_t>& in_size,
                                                       const std::vector<int64_t>& out_size,
                                                       const c10::IValue* scales,
                                                       c10::Device device) {
  const size_t spatial = out_size.size();
  if (in_size.size() != spatial + 2) return std::nullopt;
  std::vector<SourceDim> dims;
  for (size_t k = 0; k < spatial; ++k) {
    const std::vector<int64_t> from = nearestExactSources(in_size[k + 2], out_size[k], scales[k]);
    if (from.empty()) return std::nullopt;
    dims.push_back({static_cast<int64_t>(k + 2),
                    at::tensor(from, at::TensorOptions().dtype(at::kLong)).to(device)});
  }
  return dims;
}

// _upsample_nearest_exact{N}d(self, output_size, scales...).
template <int kSpatial>
bool upsampleNearestExact(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2 + kSpatial;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isIntList()) return false;
  const at::Tensor self = a[0].toTensor();
  const std::vector<int64_t> size = a[1].toIntVector();
  if (!onDevice(self) || !at::isFloatingType(self.scalar_type()) || self.dim() != kSpatial + 2 ||
      size.size() != kSpatial || self.numel() == 0)
    return false;
  const auto dims = nearestExactDims(self.sizes().vec(), size, a + 2, self.device());
  if (!dims) return false;
  replaceArgs(stack, kArgs, {selectSources(self, *dims).contiguous(self.suggest_memory_format())});
  return true;
}

// _upsample_nearest_exact{N}d_backward(grad_output, output_size, input_size,
// scales...): each output's gradient added to its source, dim by dim.
template <int kSpatial>
bool upsampleNearestExactBackward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3 + kSpatial;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isIntList() || !a[2].isIntList()) return false;
  const at::Tensor grad = a[0].toTensor();
  const std::vector<int64_t> out_size = a[1].toIntVector(), in_size = a[2].toIntVector();
  if (!onDevice(grad) || !at::isFloatingType(grad.scalar_type()) || grad.dim() != kSpatial + 2 ||
      out_size.size() != kSpatial)
    return false;
  const auto dims = nearestExactDims(in_size, out_size, a + 3, grad.device());
  if (!dims || grad.size(0) != in_size[0] || grad.size(1) != in_size[1]) return false;
  for (int k = 0; k < kSpatial; ++k)
    if (grad.size(k + 2) != out_size[k]) return false;  // CPU's error
  replaceArgs(stack, kArgs, {addToSources(grad, *dims, in_size)});
  return true;
}

// upsample_nearest1d(self, output_size, scales) through the 2-D kernel.
bool upsampleNearest1d(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isIntList() || !(a[2].isNone() || a[2].isDouble()))
    return false;
  const at::Tensor self = a[0].toTensor();
  const std::vector<int64_t> size = a[1].toIntVector();
  if (!usableFirst(self) || self.dim() != 3 || size.size() != 1) return false;
  const std::optional<double> scale =
      a[2].isNone() ? std::nullopt : std::optional<double>(a[2].toDouble());
  const at::Tensor out =
      at::upsample_nearest2d(self.unsqueeze(2), {1, size[0]}, std::nullopt, scale).squeeze(2);
  replaceArgs(stack, kArgs, {out});
  return true;
}

// upsample_nearest1d_backward(grad_output, output_size, input_size, scales).
bool upsampleNearest1dBackward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isIntList() || !a[2].isIntList() ||
      !(a[3].isNone() || a[3].isDouble()))
    return false;
  const at::Tensor grad = a[0].toTensor();
  const std::vector<int64_t> out_size = a[1].toIntVector(), in_size = a[2].toIntVector();
  if (!usableFirst(grad) || grad.dim() != 3 || out_size.size() != 1 || in_size.size() != 3)
    return false;
  const std::optional<double> scale =
      a[3].isNone() ? std::nullopt : std::optional<double>(a[3].toDouble());
  const at::Tensor g =
      at::upsample_nearest2d_backward(grad.unsqueeze(2), {1, out_size[0]},
                                      {in_size[0], in_size[1], 1, in_size[2]}, std::nullopt, scale)
          .squeeze(2);
  replaceArgs(stack, kArgs, {g});
  return true;
}

// upsample_linear1d(self, output_size, align_corners, scales) through the
// bilinear kernel.
bool upsampleLinear1d(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isIntList() || !a[2].isBool() ||
      !(a[3].isNone() || a[3].isDouble()))
    return false;
  const at::Tensor self = a[0].toTensor();
  const std::vector<int64_t> size = a[1].toIntVector();
  if (!usableFirst(self) || self.dim() != 3 || size.size() != 1) return false;
  const std::optional<double> scale =
      a[3].isNone() ? std::nullopt : std::optional<double>(a[3].toDouble());
  const at::Tensor out =
      at::upsample_bilinear2d(self.unsqueeze(2), {1, size[0]}, a[2].toBool(), std::nullopt, scale)
          .squeeze(2);
  replaceArgs(stack, kArgs, {out});
  return true;
}

// upsample_linear1d_backward(grad_output, output_size, input_size,
// align_corners, scales).
bool upsampleLinear1dBackward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isIntList() || !a[2].isIntList() || !a[3].isBool() ||
      !(a[4].isNone() || a[4].isDouble()))
    return false;
  const at::Tensor grad = a[0].toTensor();
  const std::vector<int64_t> out_size = a[1].toIntVector(), in_size = a[2].toIntVector();
  if (!usableFirst(grad) || grad.dim() != 3 || out_size.size() != 1 || in_size.size() != 3)
    return false;
  const std::optional<double> scale =
      a[4].isNone() ? std::nullopt : std::optional<double>(a[4].toDouble());
  const at::Tensor g = at::upsample_bilinear2d_backward(grad.unsqueeze(2), {1, out_size[0]},
                                                        {in_size[0], in_size[1], 1, in_size[2]},
                                                        a[3].toBool(), std::nullopt, scale)
                           .squeeze(2);
  replaceArgs(stack, kArgs, {g});
  return true;
}

// max_unpool2d(self, indices, output_size) and max_unpool3d(self, indices,
// output_size, stride, padding): values scattered to their indices in each
// (batch, channel) plane of a zeroed output. Two windows that saved the same
// index carry the same value, so the scatter's order does not matter.
template <int kSpatial>
bool maxUnpool(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = kSpatial == 2 ? 3 : 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isIntList()) return false;
  const at::Tensor self = a[0].toTensor(), indices = a[1].toTensor();
  const std::vector<int64_t> size = a[2].toIntVector();
  if (!onDevice(self) || !at::isFloatingType(self.scalar_type()) || !onDevice(indices) ||
      indices.scalar_type() != at::kLong || indices.sizes() != self.sizes() ||
      static_cast<int>(size.size()) != kSpatial ||
      (self.dim() != kSpatial + 1 && self.dim() != kSpatial + 2))
    return false;
  int64_t plane = 1;
  for (int64_t s : size) plane *= s;
  const int64_t lead = self.dim() - kSpatial;  // (N, C) or (C)
  std::vector<int64_t> flat(self.sizes().begin(), self.sizes().begin() + lead);
  std::vector<int64_t> shape = flat;
  flat.push_back(-1);
  shape.insert(shape.end(), size.begin(), size.end());
  const at::Tensor idx = indices.reshape(flat);
  // An index outside the plane is CPU's error (from the host tier).
  if (idx.numel() > 0 && at::logical_or(idx < 0, idx >= plane).any().item<bool>()) return false;
  std::vector<int64_t> out_flat(shape.begin(), shape.begin() + lead);
  out_flat.push_back(plane);
  const at::Tensor out =
      at::zeros(out_flat, self.options()).scatter_(lead, idx, self.reshape(flat)).view(shape);
  replaceArgs(stack, kArgs, {out});
  return true;
}

}  // namespace

void addResamplingComposites(Register add) {
  add("reflection_pad1d", pad<1, true>, false);
  add("reflection_pad2d", pad<2, true>, false);
  add("reflection_pad3d", pad<3, true>, false);
  add("replication_pad1d", pad<1, false>, false);
  add("replication_pad2d", pad<2, false>, false);
  add("replication_pad3d", pad<3, false>, false);
  add("reflection_pad1d_backward", padBackward<1, true>, false);
  add("reflection_pad2d_backward", padBackward<2, true>, false);
  add("reflection_pad3d_backward", padBackward<3, true>, false);
  add("replication_pad1d_backward", padBackward<1, false>, false);
  add("replication_pad2d_backward", padBackward<2, false>, false);
  add("replication_pad3d_backward", padBackward<3, false>, false);
  add("upsample_nearest1d", upsampleNearest1d, false);
  add("upsample_nearest1d_backward", upsampleNearest1dBackward, false);
  add("upsample_linear1d", upsampleLinear1d, false);
  add("upsample_linear1d_backward", upsampleLinear1dBackward, false);
  add("max_unpool2d", maxUnpool<2>, false);
  add("max_unpool3d", maxUnpool<3>, false);
  add("upsample_nearest_exact1d", upsampleNearestExact<1>, false);
  add("upsample_nearest_exact2d", upsampleNearestExact<2>, false);
  add("upsample_nearest_exact3d", upsampleNearestExact<3>, false);
  add("upsample_nearest_exact1d_backward", upsampleNearestExactBackward<1>, false);
  add("upsample_nearest_exact2d_backward", upsampleNearestExactBackward<2>, false);
  add("upsample_nearest_exact3d_backward", upsampleNearestExactBackward<3>, false);
}

}  // namespace flagos::composite
