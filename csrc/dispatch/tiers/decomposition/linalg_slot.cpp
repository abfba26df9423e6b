// The torch.linalg composites' shared helpers (linalg_slot.h; Note [Linear
// algebra through the library slot]).
#include "dispatch/tiers/decomposition/linalg_slot.h"

#include <algorithm>
#include <vector>

#include "runtime/backend.h"
#include "runtime/stream.h"

namespace flagos::composite::linalg {

const flagosLinalgTable* table() {
  return flagos::isInitialized() ? flagos::backend().tables.linalg : nullptr;
}

bool takes(const at::Tensor& t, bool square) {
  return t.defined() && t.device().is_privateuseone() && t.dim() >= 2 &&
         (t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble) &&
         (!square || t.size(-1) == t.size(-2));
}

flagosDtype_t dtypeOf(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat ? FLAGOS_DTYPE_FLOAT32 : FLAGOS_DTYPE_FLOAT64;
}

namespace {

// ATen's batched_matrix_contiguous_strides(sizes, /*f_contig=*/true).
std::vector<int64_t> columnMajorStrides(at::IntArrayRef sizes) {
  const int64_t n = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  strides[n - 2] = stride;
  stride *= std::max<int64_t>(sizes[n - 2], 1);
  strides[n - 1] = stride;
  stride *= std::max<int64_t>(sizes[n - 1], 1);
  for (int64_t d = n - 3; d >= 0; --d) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

}  // namespace

at::Tensor emptyColumnMajor(at::IntArrayRef sizes, const at::TensorOptions& options) {
  return at::empty_strided(sizes, columnMajorStrides(sizes), options);
}

at::Tensor columnMajorCopy(const at::Tensor& t) {
  at::Tensor out = emptyColumnMajor(t.sizes(), t.options());
  out.copy_(t);
  return out;
}

at::Tensor columnMajor(const at::Tensor& t) {
  if (t.numel() > 0 && t.strides() == at::IntArrayRef(columnMajorStrides(t.sizes()))) return t;
  return columnMajorCopy(t);
}

at::IntArrayRef batchOf(const at::Tensor& t) {
  return t.sizes().slice(0, t.dim() - 2);
}

std::vector<int64_t> withTail(at::IntArrayRef batch, std::initializer_list<int64_t> tail) {
  std::vector<int64_t> sizes(batch.begin(), batch.end());
  sizes.insert(sizes.end(), tail);
  return sizes;
}

int64_t batchCount(const at::Tensor& t) {
  int64_t batch = 1;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) batch *= t.size(d);
  return batch;
}

flagosLinalgArray matrixArg(const at::Tensor& t) {
  flagosLinalgArray a{};
  a.data = t.data_ptr();
  a.ld = std::max<int64_t>(t.stride(-1), 1);
  a.stride = t.dim() > 2 ? t.stride(-3) : t.size(-2) * t.size(-1);
  return a;
}

flagosLinalgArray vectorArg(const at::Tensor& t) {
  flagosLinalgArray v{};
  v.data = t.data_ptr();
  v.ld = 1;
  v.stride = t.size(-1);
  return v;
}

flagosStream_t streamOf(const at::Tensor& t) {
  return flagos::currentVendorStream(t.device().index());
}

bool ok(flagosStatus_t status, const char* member) {
  if (status == FLAGOS_ERROR_NOT_SUPPORTED) return false;
  flagos::check(status, member);
  return true;
}

at::Tensor identity(at::IntArrayRef batch_sizes, int64_t n, const at::TensorOptions& options) {
  std::vector<int64_t> sizes(batch_sizes.begin(), batch_sizes.end());
  sizes.push_back(n);
  sizes.push_back(n);
  at::Tensor eye = emptyColumnMajor(sizes, options);
  eye.copy_(at::eye(n, options));
  return eye;
}

}  // namespace flagos::composite::linalg
