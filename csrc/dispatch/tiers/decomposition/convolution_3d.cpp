// 3-D convolution as columns + GEMM (Note [Composite kernels]). There is no
// vol2col operator to generate, so the columns come from views:
// constant_pad_nd, then unfold per spatial dim (a view), every d-th tap for
// the dilation (a strided view), and one layout-changing copy into
// (N, C*kd*kh*kw, L). GEMMs as in 2-D (conv_gemm.h).
//
// Note [The adjoint as a forward convolution]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With no col2vol either, grad_input (and the transposed forward) is
// computed as a forward convolution: the gradient spread by the stride
// (zeros between its elements), padded by d*(k-1) - p (plus the remainder
// rows the forward never read, or output_padding), convolved with stride 1
// and dilation d by the weight flipped in space with in/out channels swapped
// per group.
#include <ATen/ATen.h>

#include <array>
#include <vector>

#include "dispatch/tiers/decomposition/conv_gemm.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

using Int3 = std::array<int64_t, 3>;

struct Geometry3 {
  Int3 k{}, s{}, p{}, d{}, op{};
  int64_t groups = 1;
  bool transposed = false;
};

// Three values, or one for all dims (ATen expands it).
bool read3(const c10::IValue& v, Int3* out) {
  if (!v.isIntList()) return false;
  const std::vector<int64_t> l = v.toIntVector();
  if (l.size() != 1 && l.size() != 3) return false;
  for (int i = 0; i < 3; ++i) (*out)[i] = l[l.size() == 1 ? 0 : i];
  return true;
}

// a: stride, padding, dilation, transposed, output_padding, groups.
bool readGeometry(const c10::IValue* a, const at::Tensor& weight, Geometry3* g) {
  if (!read3(a[0], &g->s) || !read3(a[1], &g->p) || !read3(a[2], &g->d) || !a[3].isBool() ||
      !read3(a[4], &g->op) || !a[5].isInt())
    return false;
  g->transposed = a[3].toBool();
  g->groups = a[5].toInt();
  if (g->groups < 1) return false;
  for (int i = 0; i < 3; ++i) {
    g->k[i] = weight.size(2 + i);
    if (g->s[i] < 1 || g->d[i] < 1 || g->p[i] < 0 || g->op[i] < 0) return false;
    if (g->transposed ? g->op[i] >= std::max(g->s[i], g->d[i]) : g->op[i] != 0) return false;
  }
  return true;
}

int64_t span(const Geometry3& g, int i) {  // the dilated kernel's extent
  return g.d[i] * (g.k[i] - 1) + 1;
}

// (N, C, D, H, W) -> (N, C*kd*kh*kw, L) for geometry g; `blocks` limits the
// windows per dim (a transposed backward reads only the first D x H x W).
at::Tensor columns(const at::Tensor& x, const Geometry3& g, const Int3& blocks) {
  at::Tensor v = x;
  if (g.p[0] || g.p[1] || g.p[2])
    v = at::constant_pad_nd(x, {g.p[2], g.p[2], g.p[1], g.p[1], g.p[0], g.p[0]});
  for (int i = 0; i < 3; ++i) v = v.unfold(2 + i, span(g, i), g.s[i]).narrow(2 + i, 0, blocks[i]);
  for (int i = 0; i < 3; ++i)
    if (g.d[i] > 1) v = v.slice(5 + i, 0, std::nullopt, g.d[i]);
  return v.permute({0, 1, 5, 6, 7, 2, 3, 4})
      .reshape({x.size(0), -1, blocks[0] * blocks[1] * blocks[2]});
}

Int3 windows(const at::Tensor& x, const Geometry3& g) {
  Int3 n;
  for (int i = 0; i < 3; ++i) n[i] = (x.size(2 + i) + 2 * g.p[i] - span(g, i)) / g.s[i] + 1;
  return n;
}

// W @ columns(x): (N, W.size(0), blocks...).
at::Tensor forward(const at::Tensor& x, const at::Tensor& w, const Geometry3& g,
                   const Int3& blocks) {
  return weightTimesColumns(columns(x, g, blocks), w, g.groups)
      .view({x.size(0), w.size(0), blocks[0], blocks[1], blocks[2]});
}

// Note [The adjoint as a forward convolution]: y (N, W.size(0), O...) ->
// (N, W.size(1) * groups, out...).
at::Tensor adjoint(const at::Tensor& y, const at::Tensor& w, const Geometry3& g, const Int3& out) {
  at::Tensor spread = y;
  if (g.s[0] > 1 || g.s[1] > 1 || g.s[2] > 1) {
    std::vector<int64_t> shape{y.size(0), y.size(1)};
    for (int i = 0; i < 3; ++i) shape.push_back((y.size(2 + i) - 1) * g.s[i] + 1);
    spread = at::zeros(shape, y.options());
    at::Tensor every = spread;
    for (int i = 0; i < 3; ++i) every = every.slice(2 + i, 0, std::nullopt, g.s[i]);
    every.copy_(y);
  }
  std::vector<int64_t> pads(6);
  for (int i = 0; i < 3; ++i) {
    const int64_t q = g.d[i] * (g.k[i] - 1) - g.p[i];
    const int64_t rest = out[i] - (spread.size(2 + i) + 2 * q - g.d[i] * (g.k[i] - 1));
    pads[2 * (2 - i)] = q;
    pads[2 * (2 - i) + 1] = q + rest;
  }
  const at::Tensor padded = at::constant_pad_nd(spread, pads);
  const int64_t rows = w.size(0) / g.groups, cols = w.size(1);
  const at::Tensor swapped = w.flip({2, 3, 4})
                                 .view({g.groups, rows, cols, g.k[0], g.k[1], g.k[2]})
                                 .transpose(1, 2)
                                 .reshape({g.groups * cols, rows, g.k[0], g.k[1], g.k[2]});
  Geometry3 unit = g;
  unit.s = {1, 1, 1};
  unit.p = {0, 0, 0};
  return forward(padded, swapped, unit, out);
}

// sum_n y[n] @ columns(x)[n]^T: the weight gradient (y.size(1), C/groups, k...).
at::Tensor weightGrad(const at::Tensor& y, const at::Tensor& x, const Geometry3& g,
                      const Int3& blocks) {
  return outputTimesColumns(flat(y), columns(x, g, blocks), g.groups)
      .view({y.size(1), x.size(1) / g.groups, g.k[0], g.k[1], g.k[2]});
}

struct Shapes3 {
  Int3 in{}, out{};
  int64_t o = 0;  // output channels
};

bool shapesOf(const at::Tensor& x, const at::Tensor& w, const Geometry3& g, Shapes3* s) {
  if (x.dim() != 5 || w.dim() != 5) return false;
  const int64_t c = x.size(1);
  if (g.transposed ? (c != w.size(0) || c % g.groups != 0)
                   : (c != w.size(1) * g.groups || w.size(0) % g.groups != 0))
    return false;
  s->o = g.transposed ? w.size(1) * g.groups : w.size(0);
  for (int i = 0; i < 3; ++i) {
    s->in[i] = x.size(2 + i);
    if (!g.transposed && s->in[i] + 2 * g.p[i] < span(g, i)) return false;  // CPU raises
    s->out[i] = g.transposed ? (s->in[i] - 1) * g.s[i] - 2 * g.p[i] + span(g, i) + g.op[i]
                             : (s->in[i] + 2 * g.p[i] - span(g, i)) / g.s[i] + 1;
    if (s->out[i] < 1) return false;
  }
  return true;
}

}  // namespace

bool convolution3d(torch::jit::Stack* stack) {
  constexpr int kArgs = 9;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor()) return false;
  const at::Tensor x = a[0].toTensor(), w = a[1].toTensor(), bias = optTensor(a[2]);
  Geometry3 g;
  Shapes3 s;
  if (!usableFirst(x) || !usableLike(w, x) || w.numel() == 0 || !readGeometry(a + 3, w, &g) ||
      !shapesOf(x, w, g, &s))
    return false;
  if (bias.defined() && (!usableLike(bias, x) || bias.dim() != 1 || bias.size(0) != s.o))
    return false;
  at::Tensor out = g.transposed ? adjoint(x, w, g, s.out) : forward(x, w, g, s.out);
  out = out.contiguous();
  if (bias.defined()) out.add_(bias.view({1, s.o, 1, 1, 1}));
  replaceArgs(stack, kArgs, {out});
  return true;
}

bool convolutionBackward3d(torch::jit::Stack* stack) {
  constexpr int kArgs = 11;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isTensor() || !a[10].isBoolList())
    return false;
  const at::Tensor go = a[0].toTensor(), x = a[1].toTensor(), w = a[2].toTensor();
  const std::vector<bool> mask = a[10].toBoolList().vec();
  Geometry3 g;
  Shapes3 s;
  if (mask.size() != 3 || !usableFirst(x) || !usableLike(w, x) || w.numel() == 0 ||
      !usableLike(go, x) || !readGeometry(a + 4, w, &g) || !shapesOf(x, w, g, &s) ||
      go.dim() != 5 || go.size(0) != x.size(0) || go.size(1) != s.o)
    return false;
  for (int i = 0; i < 3; ++i)
    if (go.size(2 + i) != s.out[i]) return false;
  at::Tensor grad_input, grad_weight, grad_bias;
  if (!g.transposed) {
    if (mask[0]) grad_input = adjoint(go, w, g, s.in);
    if (mask[1]) grad_weight = weightGrad(go, x, g, s.out);
  } else {
    if (mask[0]) grad_input = forward(go, w, g, s.in);
    if (mask[1]) grad_weight = weightGrad(x, go, g, s.in);
  }
  if (mask[2]) grad_bias = go.sum({0, 2, 3, 4});
  replaceArgs(stack, kArgs,
              {grad_input.defined() ? grad_input.contiguous() : grad_input,
               grad_weight.defined() ? grad_weight.contiguous() : grad_weight, grad_bias});
  return true;
}

}  // namespace flagos::composite
