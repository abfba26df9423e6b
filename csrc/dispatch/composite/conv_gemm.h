// The GEMM halves of convolution as im2col + GEMM (Note [Convolution from
// three GEMM shapes]), shared by the 1-D/2-D path (convolution.cpp, columns
// from the generated im2col) and the 3-D path (convolution_3d.cpp, columns
// from unfold views). Columns are (N, C*K, L): C input channels, K taps.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/stack.h>

#include <vector>

namespace flagos::composite {

// Group gi's rows of a (rows, ...) weight as a (rows/g, rest) matrix.
inline at::Tensor groupMatrix(const at::Tensor& w, int64_t gi, int64_t groups) {
  const int64_t rows = w.size(0) / groups;
  return w.narrow(0, gi * rows, rows).reshape({rows, -1});
}

inline at::Tensor joined(std::vector<at::Tensor>& parts, int64_t dim) {
  return parts.size() == 1 ? parts[0] : at::cat(parts, dim);
}

// W @ cols per group: (N, W.rows, L). W is expanded over the batch (bmm with
// batch stride 0, no copy).
inline at::Tensor weightTimesColumns(const at::Tensor& cols, const at::Tensor& w, int64_t groups) {
  const int64_t n = cols.size(0), kk = cols.size(1) / groups;
  std::vector<at::Tensor> parts;
  for (int64_t gi = 0; gi < groups; ++gi) {
    const at::Tensor wg = groupMatrix(w, gi, groups);
    parts.push_back(
        at::bmm(wg.unsqueeze(0).expand({n, wg.size(0), kk}), cols.narrow(1, gi * kk, kk)));
  }
  return joined(parts, 1);
}

// sum_n y[n] @ cols[n]^T per group: (y.size(1), C/groups * K), the weight
// gradient as a matrix. y: (N, rows, L), contiguous.
inline at::Tensor outputTimesColumns(const at::Tensor& y, const at::Tensor& cols, int64_t groups) {
  const int64_t kk = cols.size(1) / groups, rows = y.size(1) / groups;
  std::vector<at::Tensor> parts;
  for (int64_t gi = 0; gi < groups; ++gi) {
    const at::Tensor yg = y.narrow(1, gi * rows, rows);
    const at::Tensor cg = cols.narrow(1, gi * kk, kk).transpose(1, 2);
    parts.push_back(at::bmm(yg, cg).sum(0));
  }
  return joined(parts, 0);
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
