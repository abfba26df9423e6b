// Convolution as im2col + GEMM (Note [Composite kernels]): aten::convolution
// and aten::convolution_backward for 1-D and 2-D, grouped, strided, padded,
// dilated and transposed convolutions on backends without a convolution
// kernel of their own (3-D: convolution_3d.cpp). Half types go to the host
// tier.
//
// Note [Convolution from three GEMM shapes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With cols = im2col(x) (N, C*kh*kw, L) and W viewed per group as
// (O/g, C/g*kh*kw), every direction is one of three products, per group:
//   lower(x, W)     = W @ im2col(x)                   forward; transposed grad_input
//   raise(y, W, hw) = col2im(W^T @ y, hw)             grad_input; transposed forward
//   weightGrad(y, x) = sum_n y[n] @ im2col(x)[n]^T     grad_weight (transposed: swap)
// The batch and the groups are the GEMM's batch dims: one bmm per product
// (Note [Grouped convolution in one GEMM], conv_gemm.h).
#include <ATen/ATen.h>

#include <array>
#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/conv_gemm.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

// 2-D geometry (a 1-D convolution is a 2-D one of height 1).
struct Geometry {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t groups = 1;
  int64_t op_h = 0, op_w = 0;  // output_padding
  bool transposed = false;
  bool one_d = false;
};

std::array<int64_t, 2> k(const Geometry& g) {
  return {g.kh, g.kw};
}

// `spatial` values, or one for all dims (ATen expands it: padding="valid"
// arrives as [0]).
bool readPair(const c10::IValue& v, int spatial, int64_t* h, int64_t* w) {
  if (!v.isIntList()) return false;
  const std::vector<int64_t> l = v.toIntVector();
  if (l.size() != 1 && static_cast<int>(l.size()) != spatial) return false;
  *w = l.back();
  if (spatial == 2) *h = l.front();
  return true;
}

bool readGeometry(const c10::IValue* a, int spatial, int64_t kh, int64_t kw, Geometry* g) {
  // a: stride, padding, dilation, transposed, output_padding, groups
  g->kh = kh;
  g->kw = kw;
  g->one_d = spatial == 1;
  if (!readPair(a[0], spatial, &g->sh, &g->sw) || !readPair(a[1], spatial, &g->ph, &g->pw) ||
      !readPair(a[2], spatial, &g->dh, &g->dw) || !a[3].isBool() ||
      !readPair(a[4], spatial, &g->op_h, &g->op_w) || !a[5].isInt())
    return false;
  g->transposed = a[3].toBool();
  g->groups = a[5].toInt();
  const bool positive = g->sh >= 1 && g->sw >= 1 && g->dh >= 1 && g->dw >= 1 && g->groups >= 1;
  const bool padding_ok = g->ph >= 0 && g->pw >= 0 && g->op_h >= 0 && g->op_w >= 0;
  // ATen: output_padding below the stride or the dilation (transposed only).
  const bool op_ok =
      g->transposed ? (g->op_h < g->sh || g->op_h < g->dh) && (g->op_w < g->sw || g->op_w < g->dw)
                    : g->op_h == 0 && g->op_w == 0;
  return positive && padding_ok && op_ok;
}

// Note [Transposed convolution on the full grid]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// col2im/im2col of a transposed convolution see H x W blocks only while
// output_padding < stride. Otherwise the call is computed on the full
// grid, (H-1)*s + d*(k-1) + 1 rows, without padding, and cropped (padding)
// or zero-extended (output_padding) to the output with constant_pad_nd;
// grad_output takes the inverse pad on the way back.
bool needsFullGrid(const Geometry& g) {
  return g.transposed && (g.op_h >= g.sh || g.op_w >= g.sw);
}

int64_t fullSize(int64_t in, int64_t k, int64_t s, int64_t d) {
  return (in - 1) * s + d * (k - 1) + 1;
}

int64_t blocks(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (size + 2 * p - d * (k - 1) - 1) / s + 1;
}

// Weight, bias and grad_output: like the input, and not empty.
bool usable(const at::Tensor& t, const at::Tensor& like) {
  return usableLike(t, like) && t.numel() > 0;
}

// 1-D operands as 2-D ones of height 1.
at::Tensor as2d(const at::Tensor& t, const Geometry& g) {
  return g.one_d ? t.unsqueeze(2) : t;
}
at::Tensor from2d(const at::Tensor& t, const Geometry& g) {
  return g.one_d ? t.squeeze(2) : t;
}

// CPU's choice (thnn_conv_use_channels_last): channels-last in, channels-last out.
at::MemoryFormat formatOf(const at::Tensor& x, const at::Tensor& w) {
  if (x.dim() == 4 && (x.suggest_memory_format() == at::MemoryFormat::ChannelsLast ||
                       w.suggest_memory_format() == at::MemoryFormat::ChannelsLast))
    return at::MemoryFormat::ChannelsLast;
  return at::MemoryFormat::Contiguous;
}

// W @ im2col(x): (N, W.rows, L).
at::Tensor lower(const at::Tensor& x4, const at::Tensor& w4, const Geometry& g) {
  return weightTimesColumns(at::im2col(x4, k(g), {g.dh, g.dw}, {g.ph, g.pw}, {g.sh, g.sw}), w4,
                            g.groups);
}

// col2im(W^T @ y, hw): y (N, W.rows, L) -> (N, W.size(1) * groups, h, w).
at::Tensor raise(const at::Tensor& y, const at::Tensor& w4, const Geometry& g, int64_t h,
                 int64_t w) {
  return at::col2im(weightTransposedTimes(y, w4, g.groups), {h, w}, k(g), {g.dh, g.dw},
                    {g.ph, g.pw}, {g.sh, g.sw});
}

// sum_n y[n] @ im2col(x)[n]^T, per group: (y.size(1), x.size(1)/groups, kh, kw).
at::Tensor weightGrad(const at::Tensor& y, const at::Tensor& x4, const Geometry& g) {
  const at::Tensor cols = at::im2col(x4, k(g), {g.dh, g.dw}, {g.ph, g.pw}, {g.sh, g.sw});
  return outputTimesColumns(y, cols, g.groups).view({y.size(1), x4.size(1) / g.groups, g.kh, g.kw});
}

// Shapes of one call, checked as far as the composite relies on them; any
// other inconsistency declines (the host tier raises CPU's error).
struct Shapes {
  int64_t n, c, h, w;  // input
  int64_t o, oh, ow;   // output channels and spatial size
};

bool shapesOf(const at::Tensor& x4, const at::Tensor& w4, const Geometry& g, Shapes* s) {
  if (x4.dim() != 4 || w4.dim() != 4) return false;
  s->n = x4.size(0);
  s->c = x4.size(1);
  s->h = x4.size(2);
  s->w = x4.size(3);
  if (w4.size(2) != g.kh || w4.size(3) != g.kw) return false;
  if (!g.transposed) {
    if (s->c != w4.size(1) * g.groups || w4.size(0) % g.groups != 0) return false;
    s->o = w4.size(0);
    s->oh = blocks(s->h, g.kh, g.sh, g.ph, g.dh);
    s->ow = blocks(s->w, g.kw, g.sw, g.pw, g.dw);
    // Kernel larger than the padded input: CPU raises.
    if (s->h + 2 * g.ph < g.dh * (g.kh - 1) + 1 || s->w + 2 * g.pw < g.dw * (g.kw - 1) + 1)
      return false;
  } else {
    if (s->c != w4.size(0) || s->c % g.groups != 0) return false;
    s->o = w4.size(1) * g.groups;
    s->oh = (s->h - 1) * g.sh - 2 * g.ph + g.dh * (g.kh - 1) + g.op_h + 1;
    s->ow = (s->w - 1) * g.sw - 2 * g.pw + g.dw * (g.kw - 1) + g.op_w + 1;
  }
  return s->oh >= 1 && s->ow >= 1;
}

// The geometry without padding and output_padding (the full grid).
Geometry unpadded(const Geometry& g) {
  Geometry u = g;
  u.ph = u.pw = u.op_h = u.op_w = 0;
  return u;
}

// constant_pad_nd's pads from the full grid (fh x fw) to the output: crop
// `padding` in front, then extend (or crop) to the output size.
std::vector<int64_t> toOutput(const Geometry& g, const Shapes& s, int64_t fh, int64_t fw) {
  return {-g.pw, s.ow - (fw - g.pw), -g.ph, s.oh - (fh - g.ph)};
}

// aten::convolution(input, weight, bias, stride, padding, dilation,
//                   transposed, output_padding, groups) -> Tensor
bool convolution(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 9;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor()) return false;
  if (a[0].toTensor().dim() == 5) return convolution3d(stack);
  const at::Tensor x = a[0].toTensor(), weight = a[1].toTensor(), bias = optTensor(a[2]);
  if (!usableFirst(x) || !usable(weight, x) || (x.dim() != 3 && x.dim() != 4) ||
      weight.dim() != x.dim())
    return false;
  Geometry g;
  const int spatial = static_cast<int>(x.dim()) - 2;
  if (!readGeometry(a + 3, spatial, spatial == 2 ? weight.size(2) : 1, weight.size(-1), &g))
    return false;
  const at::Tensor x4 = as2d(x, g), w4 = as2d(weight, g);
  Shapes s;
  if (!shapesOf(x4, w4, g, &s)) return false;
  if (bias.defined() && (!usable(bias, x) || bias.dim() != 1 || bias.size(0) != s.o)) return false;

  at::Tensor out;
  if (needsFullGrid(g)) {  // Note [Transposed convolution on the full grid]
    const int64_t fh = fullSize(s.h, g.kh, g.sh, g.dh), fw = fullSize(s.w, g.kw, g.sw, g.dw);
    out = at::constant_pad_nd(raise(flat(x4), w4, unpadded(g), fh, fw), toOutput(g, s, fh, fw));
  } else {
    out = g.transposed ? raise(flat(x4), w4, g, s.oh, s.ow)
                       : lower(x4, w4, g).view({s.n, s.o, s.oh, s.ow});
  }
  out = out.contiguous(formatOf(x4, w4));
  if (bias.defined()) out.add_(bias.view({1, s.o, 1, 1}));
  replaceArgs(stack, kArgs, {from2d(out, g)});
  return true;
}

// aten::convolution_backward(grad_output, input, weight, bias_sizes, stride,
//   padding, dilation, transposed, output_padding, groups, output_mask)
//   -> (grad_input, grad_weight, grad_bias)
bool convolutionBackward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 11;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isTensor() || !a[10].isBoolList())
    return false;
  if (a[1].toTensor().dim() == 5) return convolutionBackward3d(stack);
  const at::Tensor go = a[0].toTensor(), x = a[1].toTensor(), weight = a[2].toTensor();
  const std::vector<bool> mask = a[10].toBoolList().vec();
  if (mask.size() != 3 || !usableFirst(x) || !usable(weight, x) || !usable(go, x) ||
      (x.dim() != 3 && x.dim() != 4) || weight.dim() != x.dim() || go.dim() != x.dim())
    return false;
  Geometry g;
  const int spatial = static_cast<int>(x.dim()) - 2;
  if (!readGeometry(a + 4, spatial, spatial == 2 ? weight.size(2) : 1, weight.size(-1), &g))
    return false;
  const at::Tensor x4 = as2d(x, g), w4 = as2d(weight, g), go4 = as2d(go, g);
  Shapes s;
  if (!shapesOf(x4, w4, g, &s)) return false;
  if (go4.size(0) != s.n || go4.size(1) != s.o || go4.size(2) != s.oh || go4.size(3) != s.ow)
    return false;

  at::Tensor grad_input, grad_weight, grad_bias;
  const at::MemoryFormat format = formatOf(x4, w4);
  if (!g.transposed) {
    if (mask[0]) grad_input = raise(flat(go4), w4, g, s.h, s.w).contiguous(format);
    if (mask[1]) grad_weight = weightGrad(flat(go4), x4, g).contiguous(format);
  } else {
    Geometry gg = g;
    at::Tensor y = go4;
    if (needsFullGrid(g)) {  // Note [Transposed convolution on the full grid]
      gg = unpadded(g);
      const int64_t fh = fullSize(s.h, g.kh, g.sh, g.dh), fw = fullSize(s.w, g.kw, g.sw, g.dw);
      std::vector<int64_t> pads = toOutput(g, s, fh, fw);
      for (int64_t& p : pads) p = -p;
      y = at::constant_pad_nd(go4, pads);
    }
    if (mask[0]) grad_input = lower(y, w4, gg).view({s.n, s.c, s.h, s.w}).contiguous(format);
    if (mask[1]) grad_weight = weightGrad(flat(x4), y, gg).contiguous(format);
  }
  if (mask[2]) grad_bias = go4.sum({0, 2, 3});
  replaceArgs(stack, kArgs,
              {grad_input.defined() ? from2d(grad_input, g) : grad_input,
               grad_weight.defined() ? from2d(grad_weight, g) : grad_weight, grad_bias});
  return true;
}

}  // namespace

void addConvolutionComposites(Register add) {
  add("convolution_direct", convolution, false);
  add("convolution_backward_direct", convolutionBackward, false);
}

}  // namespace flagos::composite
