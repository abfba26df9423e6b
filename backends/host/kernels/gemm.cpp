// mm / addmm / bmm / baddbmm on OpenBLAS (float32: sgemm, float64: dgemm;
// float16 and bfloat16: sgemm on float copies, Note [Half GEMMs on the
// host]), and addmv / mv / dot as those on one-column views.
//
// BLAS reads a matrix in place when one of its strides is 1 (row-major:
// NoTrans, column-major: Trans); anything else (a sliced, expanded or
// permuted operand) is packed into a contiguous copy first. The output is
// written in place when it is row-major with unit column stride, otherwise
// through a contiguous temporary. addmm-style `self` is broadcast into the
// output first and BLAS's beta does the scaling.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../half.h"
#include "kernels.h"

namespace flagos_host::kernels {
namespace {

struct Mat {
  char* data;
  int64_t rows, cols, rs, cs;  // element strides
};

inline void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k,
                 float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                 float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k,
                 double alpha, const double* a, int64_t lda, const double* b, int64_t ldb,
                 double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// How BLAS can read `m` in place; false when it must be packed.
bool blasView(const Mat& m, CBLAS_TRANSPOSE& t, int64_t& ld) {
  if ((m.cs == 1 || m.cols <= 1) && (m.rows <= 1 || m.rs >= std::max<int64_t>(1, m.cols))) {
    t = CblasNoTrans;
    ld = m.rows <= 1 ? std::max<int64_t>(1, m.cols) : m.rs;
    return true;
  }
  if ((m.rs == 1 || m.rows <= 1) && (m.cols <= 1 || m.cs >= std::max<int64_t>(1, m.rows))) {
    t = CblasTrans;
    ld = m.cols <= 1 ? std::max<int64_t>(1, m.rows) : m.cs;
    return true;
  }
  return false;
}

// C (M x N, any strides) = alpha * A @ B + beta * C.
template <typename T>
void matmul(const Mat& A, const Mat& B, const Mat& C, T alpha, T beta) {
  const int64_t M = C.rows, N = C.cols, K = A.cols;
  if (M == 0 || N == 0) return;
  std::vector<T> pa, pb, pc;
  auto pack = [](const Mat& m, std::vector<T>& buf) {
    buf.resize(std::max<int64_t>(1, m.rows * m.cols));
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j)
        buf[i * m.cols + j] = reinterpret_cast<const T*>(m.data)[i * m.rs + j * m.cs];
    return Mat{reinterpret_cast<char*>(buf.data()), m.rows, m.cols, std::max<int64_t>(1, m.cols),
               1};
  };
  CBLAS_TRANSPOSE ta, tb;
  int64_t lda, ldb;
  Mat a = A, b = B;
  if (!blasView(a, ta, lda)) {
    a = pack(A, pa);
    blasView(a, ta, lda);
  }
  if (!blasView(b, tb, ldb)) {
    b = pack(B, pb);
    blasView(b, tb, ldb);
  }
  const bool direct = (C.cs == 1 || N == 1) && (M == 1 || C.rs >= N);
  if (direct) {
    const int64_t ldc = M == 1 ? std::max<int64_t>(1, N) : std::max<int64_t>(1, C.rs);
    gemm(ta, tb, M, N, K, alpha, reinterpret_cast<const T*>(a.data), lda,
         reinterpret_cast<const T*>(b.data), ldb, beta, reinterpret_cast<T*>(C.data), ldc);
    return;
  }
  Mat c = pack(C, pc);
  gemm(ta, tb, M, N, K, alpha, reinterpret_cast<const T*>(a.data), lda,
       reinterpret_cast<const T*>(b.data), ldb, beta, reinterpret_cast<T*>(c.data), N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      reinterpret_cast<T*>(C.data)[i * C.rs + j * C.cs] = pc[i * N + j];
}

Mat matOf(const Tensor& t, int64_t batch_offset = 0) {
  const int r = t.ndim - 2;
  return Mat{t.data + batch_offset, t.shape[r], t.shape[r + 1], t.strides[r], t.strides[r + 1]};
}

// Note [Half GEMMs on the host]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// OpenBLAS has no float16 GEMM, and its bfloat16 one (sbgemm) exists only in
// some builds. CPU's ATen computes a half GEMM as float multiply-adds with
// one rounding of the result, so we do the same: each operand is converted
// into a contiguous float copy (exact), sgemm runs on the copies (beta
// reads C converted), and C is rounded to nearest even once. The copies cost
// O(MK + KN + MN) conversions against O(MNK) multiply-adds.
template <uint16_t (*kStore)(float), float (*kLoad)(uint16_t)>
void halfMatmul(const Mat& A, const Mat& B, const Mat& C, float alpha, float beta) {
  const int64_t M = C.rows, N = C.cols;
  if (M == 0 || N == 0) return;
  auto widen = [](const Mat& m, std::vector<float>& buf) {
    buf.resize(std::max<int64_t>(1, m.rows * m.cols));
    const uint16_t* src = reinterpret_cast<const uint16_t*>(m.data);
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j) buf[i * m.cols + j] = kLoad(src[i * m.rs + j * m.cs]);
    return Mat{reinterpret_cast<char*>(buf.data()), m.rows, m.cols, std::max<int64_t>(1, m.cols),
               1};
  };
  std::vector<float> fa, fb, fc;
  const Mat a = widen(A, fa), b = widen(B, fb);
  if (beta != 0.0f)
    widen(C, fc);
  else
    fc.assign(static_cast<size_t>(M * N), 0.0f);  // beta 0: C is not read (NaN included)
  matmul<float>(a, b, Mat{reinterpret_cast<char*>(fc.data()), M, N, N, 1}, alpha, beta);
  uint16_t* dst = reinterpret_cast<uint16_t*>(C.data);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) dst[i * C.rs + j * C.cs] = kStore(fc[i * N + j]);
}

// out[b] = broadcast(self) for an addmm/baddbmm `self` of rank <= out's.
template <typename T>
void broadcastInto(const Tensor& self, const Tensor& out) {
  int64_t st[3] = {0, 0, 0}, sh[3] = {1, 1, 1};
  const int off = out.ndim - self.ndim;
  for (int d = 0; d < out.ndim; ++d) {
    sh[3 - out.ndim + d] = out.shape[d];
    if (d >= off && self.shape[d - off] != 1) st[3 - out.ndim + d] = self.strides[d - off];
  }
  int64_t os[3] = {0, 0, 0};
  for (int d = 0; d < out.ndim; ++d) os[3 - out.ndim + d] = out.strides[d];
  const T* s = self.ptr<T>();
  T* o = out.ptr<T>();
  for (int64_t b = 0; b < sh[0]; ++b)
    for (int64_t i = 0; i < sh[1]; ++i)
      for (int64_t j = 0; j < sh[2]; ++j)
        o[b * os[0] + i * os[1] + j * os[2]] = s[b * st[0] + i * st[1] + j * st[2]];
}

bool sameLayout(const Tensor& a, const Tensor& b) {
  if (a.data != b.data || a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim; ++d)
    if (a.shape[d] != b.shape[d] || (a.shape[d] != 1 && a.strides[d] != b.strides[d])) return false;
  return true;
}

bool selfBroadcasts(const Tensor& self, const Tensor& out) {
  if (self.ndim > out.ndim) return false;
  const int off = out.ndim - self.ndim;
  for (int d = 0; d < self.ndim; ++d)
    if (self.shape[d] != 1 && self.shape[d] != out.shape[d + off]) return false;
  return true;
}

// rank: 2 (mm family) or 3 (bmm family); with_self: addmm/baddbmm.
template <int kRank, bool kWithSelf>
flagosStatus_t gemmKernel(flagosStream_t stream, const flagosTensor* o, int32_t no,
                          const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  const int first = kWithSelf ? 1 : 0;
  if (no != 1 || ni != first + 2 || (kWithSelf && ns < 2)) return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = o[0].dtype;
  if (dt != FLAGOS_DTYPE_FLOAT32 && dt != FLAGOS_DTYPE_FLOAT64 && dt != FLAGOS_DTYPE_FLOAT16 &&
      dt != FLAGOS_DTYPE_BFLOAT16)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  for (int i = 0; i < ni; ++i)
    if (in[i].dtype != dt) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (o[0].ndim != kRank || in[first].ndim != kRank || in[first + 1].ndim != kRank)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor out = copyTensor(o[0]), a = copyTensor(in[first]), b = copyTensor(in[first + 1]);
  Tensor self = kWithSelf ? copyTensor(in[0]) : Tensor{};
  if (kWithSelf && !selfBroadcasts(self, out)) return FLAGOS_ERROR_NOT_SUPPORTED;
  const double beta = kWithSelf ? scalarAs<double>(sc[0], 1.0) : 0.0;
  const double alpha = kWithSelf ? scalarAs<double>(sc[1], 1.0) : 1.0;
  // Cost (Note [Inline execution]): multiply-adds, not bytes; saturated.
  const double fma = static_cast<double>(out.numel()) * static_cast<double>(a.shape[kRank - 1]);
  const int64_t cost = fma < 1e15 ? static_cast<int64_t>(fma) : INT64_MAX;
  return submit(
      stream,
      [out, a, b, self, beta, alpha, dt] {
        // T: the element type; the scalars and the GEMM in float for the half types.
        auto run = [&](auto tag, auto gemm_of) {
          using T = decltype(tag);
          using A = std::conditional_t<sizeof(T) == 2, float, T>;
          A eff_beta = static_cast<A>(beta);
          if (kWithSelf && beta != 0.0 && !sameLayout(self, out)) broadcastInto<T>(self, out);
          if (!kWithSelf) eff_beta = 0;
          const int64_t batches = kRank == 3 ? out.shape[0] : 1;
          for (int64_t i = 0; i < batches; ++i) {
            const int64_t esz = sizeof(T);
            const int64_t oa = kRank == 3 ? i * a.strides[0] * esz : 0;
            const int64_t ob = kRank == 3 ? i * b.strides[0] * esz : 0;
            const int64_t oc = kRank == 3 ? i * out.strides[0] * esz : 0;
            gemm_of(matOf(a, oa), matOf(b, ob), matOf(out, oc), static_cast<A>(alpha), eff_beta);
          }
        };
        switch (dt) {
          case FLAGOS_DTYPE_FLOAT32:
            run(float{}, matmul<float>);
            break;
          case FLAGOS_DTYPE_FLOAT64:
            run(double{}, matmul<double>);
            break;
          case FLAGOS_DTYPE_FLOAT16:
            run(uint16_t{}, halfMatmul<floatToHalf, halfToFloat>);
            break;
          default:
            run(uint16_t{}, halfMatmul<floatToBf16, bf16ToFloat>);
            break;
        }
      },
      cost);
}

// Matrix-vector products as the GEMMs above on one-column views: a vector
// of n elements with stride s is an (n, 1) matrix with strides (s, 1), or a
// (1, n) row with strides (1, s); a 0-dim tensor is (1, 1). The kernel
// copies the descriptors before returning, so these views may die then.
struct View2d {
  flagosTensor t;
  int64_t shape[2], strides[2];
  View2d(const flagosTensor& v, bool row) : t(v) {
    const int64_t n = v.ndim == 1 ? v.shape[0] : 1, s = v.ndim == 1 ? v.strides[0] : 1;
    shape[0] = row ? 1 : n;
    shape[1] = row ? n : 1;
    strides[0] = row ? 1 : s;
    strides[1] = row ? s : 1;
    t.ndim = 2;
    t.shape = shape;
    t.strides = strides;
  }
};

bool vectorLike(const flagosTensor& t) {
  return t.ndim == 0 || t.ndim == 1;
}

// addmv(self, mat, vec) -> out: addmm(self (m, 1), mat, vec (k, 1)).
flagosStatus_t addmvKernel(flagosStream_t stream, const flagosTensor* o, int32_t no,
                           const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 1 || ni != 3 || !vectorLike(o[0]) || !vectorLike(in[0]) || in[1].ndim != 2 ||
      in[2].ndim != 1)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const View2d out(o[0], false), self(in[0], false), vec(in[2], false);
  const flagosTensor args[3] = {self.t, in[1], vec.t};
  return gemmKernel<2, true>(stream, &out.t, 1, args, 3, sc, ns);
}

// mv(self, vec) -> out: mm(self, vec (k, 1)).
flagosStatus_t mvKernel(flagosStream_t stream, const flagosTensor* o, int32_t no,
                        const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 1 || ni != 2 || o[0].ndim != 1 || in[0].ndim != 2 || in[1].ndim != 1)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const View2d out(o[0], false), vec(in[1], false);
  const flagosTensor args[2] = {in[0], vec.t};
  return gemmKernel<2, false>(stream, &out.t, 1, args, 2, sc, ns);
}

// dot(self, tensor) -> out (0-dim): mm(self (1, n), tensor (n, 1)).
flagosStatus_t dotKernel(flagosStream_t stream, const flagosTensor* o, int32_t no,
                         const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 1 || ni != 2 || o[0].ndim != 0 || in[0].ndim != 1 || in[1].ndim != 1)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const View2d out(o[0], false), a(in[0], true), b(in[1], false);
  const flagosTensor args[2] = {a.t, b.t};
  return gemmKernel<2, false>(stream, &out.t, 1, args, 2, sc, ns);
}

}  // namespace

void addGemmKernels(void (*add)(const char*, flagosKernelFn)) {
  add("mm", gemmKernel<2, false>);
  add("addmm", gemmKernel<2, true>);
  add("bmm", gemmKernel<3, false>);
  add("baddbmm", gemmKernel<3, true>);
  add("addmv", addmvKernel);
  add("mv", mvKernel);
  add("dot", dotKernel);
}

}  // namespace flagos_host::kernels
