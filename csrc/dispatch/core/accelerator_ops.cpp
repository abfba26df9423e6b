// Operators that ATen sends an accelerator to (because the tensor is not on
// the CPU) but implements for CUDA only, or with CPU-only state. The
// generic paths never reach them, so each gets a kernel here:
//  - the fused LSTM/GRU cells and their backwards: decomposed, likewise;
//  - convolution(_backward)_overrideable: the CPU convolution on host copies,
//    tier "fallback".
// Every operator used inside runs on whatever tier it has itself.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <tuple>

#include "dispatch/core/device_check.h"
#include "dispatch/core/op_stats.h"

namespace flagos {
namespace {

void count(const char* op) {
  recordOpCall(op, Tier::Decomposition);
}

// Note [Fused RNN cells]
// ~~~~~~~~~~~~~~~~~~~~~~
// nn.LSTM/GRU/LSTMCell/GRUCell on an accelerator call _thnn_fused_*_cell
// (ATen's RNN.cpp), which only CUDA implements. These follow the CUDA
// kernels (aten/src/ATen/native/cuda/RNN.cu) exactly, including the layout
// of the workspace that the backward reads: LSTM [i, f, g, o] activated
// gates; GRU [r, i, n, hx, hn].
at::Tensor gatesSum(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                    const std::optional<at::Tensor>& input_bias,
                    const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = input_gates + hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) gates = gates + *input_bias;
  if (hidden_bias.has_value() && hidden_bias->defined()) gates = gates + *hidden_bias;
  return gates;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmCell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  count("aten::_thnn_fused_lstm_cell");
  auto chunks = gatesSum(input_gates, hidden_gates, input_bias, hidden_bias).chunk(4, 1);
  at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid();
  at::Tensor g = chunks[2].tanh(), o = chunks[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmCellBackward(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy,
    const at::Tensor& cx, const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  count("aten::_thnn_fused_lstm_cell_backward_impl");
  const bool have_hy = grad_hy.has_value() && grad_hy->defined();
  const bool have_cy = grad_cy.has_value() && grad_cy->defined();
  if (!have_hy && !have_cy) return {at::Tensor(), at::Tensor(), at::Tensor()};
  auto ws = workspace.chunk(4, 1);
  const at::Tensor &i = ws[0], &f = ws[1], &g = ws[2], &o = ws[3];
  at::Tensor go = have_hy ? *grad_hy : at::zeros_like(cx);
  at::Tensor tanh_cy = cy.tanh();
  at::Tensor gcx = go * o * (1 - tanh_cy * tanh_cy);
  if (have_cy) gcx = gcx + *grad_cy;
  at::Tensor gi = gcx * g * i * (1 - i);
  at::Tensor gf = gcx * cx * f * (1 - f);
  at::Tensor gg = gcx * i * (1 - g * g);
  at::Tensor gog = go * tanh_cy * o * (1 - o);
  at::Tensor grad_gates = at::cat({gi, gf, gg, gog}, 1);
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0, /*keepdim=*/false) : at::Tensor();
  return {grad_gates, gcx * f, grad_bias};
}

std::tuple<at::Tensor, at::Tensor> gruCell(const at::Tensor& input_gates,
                                           const at::Tensor& hidden_gates, const at::Tensor& hx,
                                           const std::optional<at::Tensor>& input_bias,
                                           const std::optional<at::Tensor>& hidden_bias) {
  count("aten::_thnn_fused_gru_cell");
  at::Tensor in_gates = input_gates, hid_gates = hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) in_gates = in_gates + *input_bias;
  if (hidden_bias.has_value() && hidden_bias->defined()) hid_gates = hid_gates + *hidden_bias;
  auto ic = in_gates.chunk(3, 1);
  auto hc = hid_gates.chunk(3, 1);
  at::Tensor r = (ic[0] + hc[0]).sigmoid();
  at::Tensor i = (ic[1] + hc[1]).sigmoid();
  at::Tensor n = (ic[2] + r * hc[2]).tanh();
  at::Tensor hy = n + i * (hx - n);
  return {hy, at::cat({r, i, n, hx, hc[2]}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gruCellBackward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  count("aten::_thnn_fused_gru_cell_backward");
  auto ws = workspace.chunk(5, 1);
  const at::Tensor &r = ws[0], &i = ws[1], &n = ws[2], &hx = ws[3], &hn = ws[4];
  at::Tensor gi = grad_hy * (hx - n) * (1 - i) * i;
  at::Tensor ghx = grad_hy * i;
  at::Tensor gin = grad_hy * (1 - i) * (1 - n * n);
  at::Tensor ghn = gin * r;
  at::Tensor gr = gin * hn * (1 - r) * r;
  at::Tensor grad_input = at::cat({gr, gi, gin}, 1);
  at::Tensor grad_hidden = at::cat({gr, gi, ghn}, 1);
  at::Tensor grad_input_bias = has_bias ? grad_input.sum(0, false) : at::Tensor();
  at::Tensor grad_hidden_bias = has_bias ? grad_hidden.sum(0, false) : at::Tensor();
  return {grad_input, grad_hidden, ghx, grad_input_bias, grad_hidden_bias};
}

// Note [Overrideable operators]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// For a device it does not know, ATen routes convolution to
// convolution_overrideable / convolution_backward_overrideable, whose only
// kernel raises "not implemented". The boxed host fallback cannot help
// (their CPU kernel is that same stub), so these run the CPU counterparts
// (at::convolution, at::convolution_backward) on host copies, counted as
// fallback calls. Only without the catalog: with it, the catalog routes them.
#ifndef FLAGOS_ENABLE_CATALOG
at::Tensor toHost(const at::Tensor& t) {
  return t.defined() ? t.cpu() : t;
}

at::Tensor toDevice(const at::Tensor& t, const c10::Device& device) {
  return t.defined() ? t.to(device) : t;
}

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                       c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                       c10::IntArrayRef output_padding, int64_t groups) {
  checkSameDevice("convolution_overrideable",  // Note [Tensors on one device]
                  {{"input", &input}, {"weight", &weight}, {"bias", bias ? &*bias : nullptr}});
  recordOpCall("aten::convolution_overrideable", Tier::Fallback);
  const c10::DeviceGuard guard(input.device());
  std::optional<at::Tensor> host_bias;
  if (bias.has_value() && bias->defined()) host_bias = bias->cpu();
  at::Tensor out = at::convolution(input.cpu(), weight.cpu(), host_bias, stride, padding, dilation,
                                   transposed, output_padding, groups);
  return out.to(input.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolutionBackward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  checkSameDevice("convolution_backward_overrideable",
                  {{"grad_output", &grad_output}, {"input", &input}, {"weight", &weight}});
  recordOpCall("aten::convolution_backward_overrideable", Tier::Fallback);
  const c10::DeviceGuard guard(input.device());
  // Output channels: weight is (out, in/groups, ...) or, transposed,
  // (in, out/groups, ...).
  const int64_t out_channels = transposed ? weight.size(1) * groups : weight.size(0);
  const std::array<int64_t, 1> bias_sizes{out_channels};
  auto [gi, gw, gb] = at::convolution_backward(
      toHost(grad_output), toHost(input), toHost(weight),
      output_mask[2] ? at::OptionalIntArrayRef(bias_sizes) : std::nullopt, stride, padding,
      dilation, transposed, output_padding, groups, output_mask);
  const c10::Device device = input.device();
  return {toDevice(gi, device), toDevice(gw, device), toDevice(gb, device)};
}

#endif  // FLAGOS_ENABLE_CATALOG

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(lstmCell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(lstmCellBackward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(gruCell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(gruCellBackward));
#ifndef FLAGOS_ENABLE_CATALOG  // the catalog routes these (ops/catalog.yaml)
  m.impl("convolution_overrideable", TORCH_FN(convolution));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolutionBackward));
#endif
}

}  // namespace
}  // namespace flagos
