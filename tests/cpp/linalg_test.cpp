// The optional linear-algebra library slot (linalg.h, ABI 1.4): the name,
// argument checks, and each member the plugin fills on a batch of two
// float64 matrices with padded leading dimensions and batch strides,
// checked by the identity it must satisfy (A X = B, L L^T = A, Q R = A with
// Q orthonormal, U S V^T = A, A V = V W), computed here in double.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "conformance.h"

namespace conformance {
namespace {

const flagosLinalgTable* linalgTable() {
  const flagosVendorTables& t = tables();
  // A plugin of ABI < 1.4 ends before the member (the suite zero-fills it).
  if (t.struct_size < offsetof(flagosVendorTables, linalg) + sizeof(t.linalg)) return nullptr;
  return t.linalg;
}

constexpr int64_t kBatch = 2;

// A batch of column-major rows x cols matrices with ld = rows + 1
// and a batch stride one column longer than needed, on the host and the
// device.
class Batch {
 public:
  Batch(int64_t rows, int64_t cols)
      : ld_(rows + 1),
        stride_(ld_ * (cols + 1)),
        host_(static_cast<size_t>(stride_ * kBatch), 0.0),
        device_(0, host_.size() * sizeof(double)) {}

  double& at(int64_t b, int64_t i, int64_t j) { return host_[b * stride_ + j * ld_ + i]; }
  void upload() {
    std::vector<uint8_t> bytes(host_.size() * sizeof(double));
    std::memcpy(bytes.data(), host_.data(), bytes.size());
    conformance::upload(device_.get(), bytes);
  }
  void download() {
    std::vector<uint8_t> bytes = conformance::download(device_.get(), device_.size());
    std::memcpy(host_.data(), bytes.data(), bytes.size());
  }
  flagosLinalgArray arg() { return {device_.get(), ld_, stride_}; }

 private:
  int64_t ld_, stride_;
  std::vector<double> host_;
  DeviceBuffer device_;
};

// A contiguous device vector of @p n T per matrix.
template <typename T>
class Vec {
 public:
  explicit Vec(int64_t n) : n_(n), device_(0, static_cast<uint64_t>(n * kBatch) * sizeof(T)) {}
  std::vector<T> values() {
    std::vector<uint8_t> bytes = conformance::download(device_.get(), device_.size());
    std::vector<T> v(bytes.size() / sizeof(T));
    std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
  flagosLinalgArray arg() { return {device_.get(), 1, n_}; }
  T* ptr() { return reinterpret_cast<T*>(device_.get()); }

 private:
  int64_t n_;
  DeviceBuffer device_;
};

// Random entries; @p shift added to the diagonal (well conditioned).
void fill(Batch& a, int64_t rows, int64_t cols, double shift, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t i = 0; i < rows; ++i) a.at(b, i, j) = u(gen) + (i == j ? shift : 0.0);
}

void sync(Stream& s) {
  FLAGOS_EXPECT_OK(str().streamSynchronize(s.get()));
}

TEST(Linalg, TableNamesItsLibrary) {
  const flagosLinalgTable* t = linalgTable();
  if (t == nullptr) GTEST_SKIP() << "no linear-algebra table (optional)";
  EXPECT_GE(t->struct_size, offsetof(flagosLinalgTable, library) + sizeof(t->library));
  ASSERT_NE(nullptr, t->library);
  EXPECT_STRNE("", t->library);
}

TEST(Linalg, MembersCheckTheirArguments) {
  const flagosLinalgTable* t = linalgTable();
  if (t == nullptr || t->getrf == nullptr) GTEST_SKIP() << "no getrf (optional)";
  Stream s(0);
  Batch a(3, 3);
  Vec<int32_t> piv(3), info(1);
  flagosLinalgArray bad = a.arg();
  bad.data = nullptr;
  FLAGOS_EXPECT_INVALID(
      t->getrf(s.get(), FLAGOS_DTYPE_FLOAT64, kBatch, 3, 3, bad, piv.arg(), info.ptr()));
  bad = a.arg();
  bad.ld = 2;  // below the rows
  FLAGOS_EXPECT_INVALID(
      t->getrf(s.get(), FLAGOS_DTYPE_FLOAT64, kBatch, 3, 3, bad, piv.arg(), info.ptr()));
  FLAGOS_EXPECT_INVALID(
      t->getrf(s.get(), FLAGOS_DTYPE_FLOAT64, kBatch, 3, 3, a.arg(), piv.arg(), nullptr));
  EXPECT_STREQ(statusName(FLAGOS_ERROR_NOT_SUPPORTED),
               statusName(t->getrf(s.get(), FLAGOS_DTYPE_INT32, kBatch, 3, 3, a.arg(), piv.arg(),
                                   info.ptr())));
}

TEST(Linalg, LuSolvesItsSystem) {
  const flagosLinalgTable* t = linalgTable();
  if (t == nullptr || !t->getrf || !t->getrs) GTEST_SKIP() << "no getrf/getrs (optional)";
  const int64_t n = 5, nrhs = 2;
  Batch a(n, n), lu(n, n), b(n, nrhs), x(n, nrhs);
  fill(a, n, n, 0.0, 1);  // no shift: pivoting is exercised
  fill(b, n, nrhs, 0.0, 2);
  for (int64_t k = 0; k < kBatch; ++k)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < n; ++i) lu.at(k, i, j) = a.at(k, i, j);
  for (int64_t k = 0; k < kBatch; ++k)
    for (int64_t j = 0; j < nrhs; ++j)
      for (int64_t i = 0; i < n; ++i) x.at(k, i, j) = b.at(k, i, j);
  lu.upload();
  x.upload();
  Vec<int32_t> piv(n), info(1);
  Stream s(0);
  FLAGOS_EXPECT_OK(
      t->getrf(s.get(), FLAGOS_DTYPE_FLOAT64, kBatch, n, n, lu.arg(), piv.arg(), info.ptr()));
  FLAGOS_EXPECT_OK(t->getrs(s.get(), FLAGOS_DTYPE_FLOAT64, FLAGOS_LINALG_OP_N, kBatch, n, nrhs,
                            lu.arg(), piv.arg(), x.arg()));
  sync(s);
  x.download();
  for (int32_t v : info.values()) EXPECT_EQ(0, v);
  for (int32_t p : piv.values()) EXPECT_TRUE(p >= 1 && p <= n) << p;
  for (int64_t k = 0; k < kBatch; ++k)
    for (int64_t j = 0; j < nrhs; ++j)
      for (int64_t i = 0; i < n; ++i) {
        double ax = 0;
        for (int64_t c = 0; c < n; ++c) ax += a.at(k, i, c) * x.at(k, c, j);
        EXPECT_NEAR(b.at(k, i, j), ax, 1e-9);
      }
}

TEST(Linalg, CholeskyAndTriangularSolve) {
  const flagosLinalgTable* t = linalgTable();
  if (t == nullptr || !t->potrf || !t->trsm) GTEST_SKIP() << "no potrf/trsm (optional)";
  const int64_t n = 4;
  Batch g(n, n), a(n, n), b(n, 1);
  fill(g, n, n, 0.0, 3);
  fill(b, n, 1, 0.0, 4);
  for (int64_t k = 0; k < kBatch; ++k)  // A = G G^T + n I
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double v = i == j ? n : 0.0;
        for (int64_t c = 0; c < n; ++c) v += g.at(k, i, c) * g.at(k, j, c);
        a.at(k, i, j) = v;
      }
  Batch l(n, n), y(n, 1);
  for (int64_t k = 0; k < kBatch; ++k) {
    for (int64_t i = 0; i < n; ++i) {
      y.at(k, i, 0) = b.at(k, i, 0);
      for (int64_t j = 0; j < n; ++j) l.at(k, i, j) = a.at(k, i, j);
    }
  }
  l.upload();
  y.upload();
  Vec<int32_t> info(1);
  Stream s(0);
  FLAGOS_EXPECT_OK(t->potrf(s.get(), FLAGOS_DTYPE_FLOAT64, 0, kBatch, n, l.arg(), info.ptr()));
  // L^T y = (L^-1 b) solved twice: y = A^-1 b
  FLAGOS_EXPECT_OK(t->trsm(s.get(), FLAGOS_DTYPE_FLOAT64, 0, 0, FLAGOS_LINALG_OP_N, 0, kBatch, n, 1,
                           l.arg(), y.arg()));
  FLAGOS_EXPECT_OK(t->trsm(s.get(), FLAGOS_DTYPE_FLOAT64, 0, 0, FLAGOS_LINALG_OP_T, 0, kBatch, n, 1,
                           l.arg(), y.arg()));
  sync(s);
  l.download();
  y.download();
  for (int32_t v : info.values()) EXPECT_EQ(0, v);
  for (int64_t k = 0; k < kBatch; ++k)
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j <= i; ++j) {  // L L^T = A on the lower triangle
        double v = 0;
        for (int64_t c = 0; c <= j; ++c) v += l.at(k, i, c) * l.at(k, j, c);
        EXPECT_NEAR(a.at(k, i, j), v, 1e-9);
      }
      double ay = 0;
      for (int64_t c = 0; c < n; ++c) ay += a.at(k, i, c) * y.at(k, c, 0);
      EXPECT_NEAR(b.at(k, i, 0), ay, 1e-9);
    }
}

TEST(Linalg, QrGivesAnOrthonormalQ) {
  const flagosLinalgTable* t = linalgTable();
  if (t == nullptr || !t->geqrf || !t->orgqr) GTEST_SKIP() << "no geqrf/orgqr (optional)";
  const int64_t m = 5, n = 3;
  Batch a(m, n), qr(m, n);
  fill(a, m, n, 0.0, 5);
  for (int64_t k = 0; k < kBatch; ++k)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) qr.at(k, i, j) = a.at(k, i, j);
  qr.upload();
  Vec<double> tau(n);
  Stream s(0);
  FLAGOS_EXPECT_OK(t->geqrf(s.get(), FLAGOS_DTYPE_FLOAT64, kBatch, m, n, qr.arg(), tau.arg()));
  sync(s);
  qr.download();
  std::vector<double> r(kBatch * n * n);  // R from the upper triangle
  for (int64_t k = 0; k < kBatch; ++k)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) r[(k * n + i) * n + j] = j >= i ? qr.at(k, i, j) : 0.0;
  FLAGOS_EXPECT_OK(t->orgqr(s.get(), FLAGOS_DTYPE_FLOAT64, kBatch, m, n, n, qr.arg(), tau.arg()));
  sync(s);
  qr.download();
  for (int64_t k = 0; k < kBatch; ++k) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {  // Q^T Q = I
        double v = 0;
        for (int64_t c = 0; c < m; ++c) v += qr.at(k, c, i) * qr.at(k, c, j);
        EXPECT_NEAR(i == j ? 1.0 : 0.0, v, 1e-12);
      }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {  // Q R = A
        double v = 0;
        for (int64_t c = 0; c < n; ++c) v += qr.at(k, i, c) * r[(k * n + c) * n + j];
        EXPECT_NEAR(a.at(k, i, j), v, 1e-12);
      }
  }
}

TEST(Linalg, SvdRebuildsItsMatrix) {
  const flagosLinalgTable* t = linalgTable();
  if (t == nullptr || !t->gesvd) GTEST_SKIP() << "no gesvd (optional)";
  const int64_t m = 4, n = 3, k = 3;
  Batch a(m, n), work(m, n), u(m, k), vh(k, n);
  fill(a, m, n, 0.0, 6);
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) work.at(b, i, j) = a.at(b, i, j);
  work.upload();
  Vec<double> sv(k);
  Vec<int32_t> info(1);
  Stream s(0);
  FLAGOS_EXPECT_OK(t->gesvd(s.get(), FLAGOS_DTYPE_FLOAT64, FLAGOS_LINALG_SVD_REDUCED, kBatch, m, n,
                            work.arg(), sv.arg(), u.arg(), vh.arg(), info.ptr()));
  sync(s);
  u.download();
  vh.download();
  const std::vector<double> sigma = sv.values();
  for (int32_t v : info.values()) EXPECT_EQ(0, v);
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t c = 1; c < k; ++c) EXPECT_GE(sigma[b * k + c - 1], sigma[b * k + c]);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double v = 0;
        for (int64_t c = 0; c < k; ++c) v += u.at(b, i, c) * sigma[b * k + c] * vh.at(b, c, j);
        EXPECT_NEAR(a.at(b, i, j), v, 1e-12);
      }
  }
}

TEST(Linalg, SymmetricEigenvectors) {
  const flagosLinalgTable* t = linalgTable();
  if (t == nullptr || !t->syevd) GTEST_SKIP() << "no syevd (optional)";
  const int64_t n = 4;
  Batch a(n, n), v(n, n);
  fill(a, n, n, 0.0, 7);
  for (int64_t b = 0; b < kBatch; ++b)  // symmetric: mirror the lower triangle
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < i; ++j) a.at(b, j, i) = a.at(b, i, j);
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < n; ++i) v.at(b, i, j) = a.at(b, i, j);
  v.upload();
  Vec<double> w(n);
  Vec<int32_t> info(1);
  Stream s(0);
  FLAGOS_EXPECT_OK(
      t->syevd(s.get(), FLAGOS_DTYPE_FLOAT64, 1, 0, kBatch, n, v.arg(), w.arg(), info.ptr()));
  sync(s);
  v.download();
  const std::vector<double> lambda = w.values();
  for (int32_t x : info.values()) EXPECT_EQ(0, x);
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t j = 0; j < n; ++j) {
      if (j > 0) {
        EXPECT_LE(lambda[b * n + j - 1], lambda[b * n + j]);
      }
      for (int64_t i = 0; i < n; ++i) {  // A v_j = lambda_j v_j
        double av = 0;
        for (int64_t c = 0; c < n; ++c) av += a.at(b, i, c) * v.at(b, c, j);
        EXPECT_NEAR(lambda[b * n + j] * v.at(b, i, j), av, 1e-12);
      }
    }
}

TEST(Linalg, GeneralEigenpairsAreComplex) {
  const flagosLinalgTable* t = linalgTable();
  if (t == nullptr || !t->geev) GTEST_SKIP() << "no geev (optional)";
  const int64_t n = 4;
  Batch a(n, n), work(n, n);
  fill(a, n, n, 0.0, 8);
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < n; ++i) work.at(b, i, j) = a.at(b, i, j);
  work.upload();
  Vec<double> w(2 * n);  // complex: interleaved
  const int64_t ldv = n + 1, stride = ldv * n;
  DeviceBuffer v(0, static_cast<uint64_t>(2 * stride * kBatch) * sizeof(double));
  Vec<int32_t> info(1);
  Stream s(0);
  FLAGOS_EXPECT_OK(t->geev(s.get(), FLAGOS_DTYPE_FLOAT64, 1, kBatch, n, work.arg(), {w.ptr(), 1, n},
                           {v.get(), ldv, stride}, info.ptr()));
  sync(s);
  const std::vector<double> lambda = w.values();
  std::vector<uint8_t> bytes = download(v.get(), v.size());
  std::vector<double> vc(bytes.size() / sizeof(double));
  std::memcpy(vc.data(), bytes.data(), bytes.size());
  for (int32_t x : info.values()) EXPECT_EQ(0, x);
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t j = 0; j < n; ++j) {  // A v = lambda v, in complex arithmetic
      const double lr = lambda[2 * (b * n + j)], li = lambda[2 * (b * n + j) + 1];
      const double* col = vc.data() + 2 * (b * stride + j * ldv);
      double norm = 0;
      for (int64_t i = 0; i < n; ++i) {
        double ar = 0, ai = 0;
        for (int64_t c = 0; c < n; ++c) {
          ar += a.at(b, i, c) * col[2 * c];
          ai += a.at(b, i, c) * col[2 * c + 1];
        }
        EXPECT_NEAR(lr * col[2 * i] - li * col[2 * i + 1], ar, 1e-12);
        EXPECT_NEAR(lr * col[2 * i + 1] + li * col[2 * i], ai, 1e-12);
        norm += col[2 * i] * col[2 * i] + col[2 * i + 1] * col[2 * i + 1];
      }
      EXPECT_NEAR(1.0, norm, 1e-12);
    }
}

TEST(Linalg, SymmetricIndefiniteSolve) {
  const flagosLinalgTable* t = linalgTable();
  if (t == nullptr || !t->sytrf || !t->sytrs) GTEST_SKIP() << "no sytrf/sytrs (optional)";
  const int64_t n = 5;
  Batch a(n, n), ld(n, n), b(n, 1), x(n, 1);
  fill(a, n, n, 0.0, 9);
  fill(b, n, 1, 0.0, 10);
  for (int64_t k = 0; k < kBatch; ++k)  // symmetric and indefinite
    for (int64_t i = 0; i < n; ++i) {
      x.at(k, i, 0) = b.at(k, i, 0);
      for (int64_t j = 0; j <= i; ++j) {
        const double v = a.at(k, i, j) + a.at(k, j, i) - (i == j ? 1.0 : 0.0);
        a.at(k, i, j) = a.at(k, j, i) = v;
      }
      for (int64_t j = 0; j < n; ++j) ld.at(k, i, j) = a.at(k, i, j);
    }
  ld.upload();
  x.upload();
  Vec<int32_t> piv(n), info(1);
  Stream s(0);
  FLAGOS_EXPECT_OK(
      t->sytrf(s.get(), FLAGOS_DTYPE_FLOAT64, 0, kBatch, n, ld.arg(), piv.arg(), info.ptr()));
  FLAGOS_EXPECT_OK(
      t->sytrs(s.get(), FLAGOS_DTYPE_FLOAT64, 0, kBatch, n, 1, ld.arg(), piv.arg(), x.arg()));
  sync(s);
  x.download();
  for (int32_t v : info.values()) EXPECT_EQ(0, v);
  for (int64_t k = 0; k < kBatch; ++k)
    for (int64_t i = 0; i < n; ++i) {
      double ax = 0;
      for (int64_t c = 0; c < n; ++c) ax += a.at(k, i, c) * x.at(k, c, 0);
      EXPECT_NEAR(b.at(k, i, 0), ax, 1e-9);
    }
}

}  // namespace
}  // namespace conformance
