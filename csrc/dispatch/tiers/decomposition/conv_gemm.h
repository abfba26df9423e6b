// The GEMM halves of convolution as im2col + GEMM (Note [Convolution from
// three GEMM shapes]), shared by the 1-D/2-D path (convolution.cpp, columns
// from the generated im2col) and the 3-D path (convolution_3d.cpp, columns
// from unfold views). Columns are (N, C*K, L): C input channels, K taps.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/stack.h>

#include <vector>

namespace flagos::composite {

// Note [Grouped convolution in one GEMM]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each product below is one bmm whatever the groups: the batch of the GEMM
// is (sample, group), so a depthwise convolution (groups = channels, the
// hot path of ConvNeXt, MobileNet, EfficientNet) is one launch, not one
// GEMM per group joined by a cat of as many parts (which was tens of
// thousands of tiny GEMMs per ConvNeXt step). With groups > 1 the weight is
// expanded over the samples with a copy (N * weight elements, small); with
// one group it is expanded with batch stride 0, no copy.

// W @ cols per group: (N, W.rows, L).
inline at::Tensor weightTimesColumns(const at::Tensor& cols, const at::Tensor& w, int64_t groups) {
  const int64_t n = cols.size(0), kk = cols.size(1) / groups, rows = w.size(0) / groups;
  if (groups == 1) {
    const at::Tensor wm = w.reshape({rows, kk});
    return at::bmm(wm.unsqueeze(0).expand({n, rows, kk}), cols);
  }
  const at::Tensor wg = w.reshape({1, groups, rows, kk})
                            .expand({n, groups, rows, kk})
                            .reshape({n * groups, rows, kk});
  const at::Tensor cg = cols.reshape({n * groups, kk, cols.size(2)});
  return at::bmm(wg, cg).view({n, groups * rows, cols.size(2)});
}

// W^T @ y per group: (N, groups * K, L), K = W.size(1) * taps. y: (N, W.rows, L).
inline at::Tensor weightTransposedTimes(const at::Tensor& y, const at::Tensor& w, int64_t groups) {
  const int64_t n = y.size(0), l = y.size(2), rows = w.size(0) / groups;
  const int64_t kk = w.numel() / w.size(0);
  if (groups == 1) {
    const at::Tensor wt = w.reshape({rows, kk}).t();
    return at::bmm(wt.unsqueeze(0).expand({n, kk, rows}), y);
  }
  const at::Tensor wt = w.reshape({1, groups, rows, kk})
                            .transpose(2, 3)
                            .expand({n, groups, kk, rows})
                            .reshape({n * groups, kk, rows});
  return at::bmm(wt, y.reshape({n * groups, rows, l})).view({n, groups * kk, l});
}

// sum_n y[n] @ cols[n]^T per group: (y.size(1), C/groups * K), the weight
// gradient as a matrix. y: (N, rows, L), contiguous.
inline at::Tensor outputTimesColumns(const at::Tensor& y, const at::Tensor& cols, int64_t groups) {
  const int64_t n = y.size(0), l = y.size(2), kk = cols.size(1) / groups;
  const int64_t rows = y.size(1) / groups;
  const at::Tensor yg = y.reshape({n * groups, rows, l});
  const at::Tensor cg = cols.reshape({n * groups, kk, l}).transpose(1, 2);
  return at::bmm(yg, cg).view({n, groups * rows, kk}).sum(0);
}

// (N, C, spatial...) -> (N, C, L), contiguous: a GEMM operand needs one unit
// stride (grad_output of `.sum().backward()` is all stride 0).
inline at::Tensor flat(const at::Tensor& t) {
  return t.contiguous().view({t.size(0), t.size(1), -1});
}

}  // namespace flagos::composite

namespace flagos::composite {

// The 3-D path (convolution_3d.cpp) of aten::convolution and
// aten::convolution_backward; same contract as a CompositeFn.
bool convolution3d(torch::jit::Stack* stack);
bool convolutionBackward3d(torch::jit::Stack* stack);

}  // namespace flagos::composite
