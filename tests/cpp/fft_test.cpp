// The optional FFT library slot (fft.h, ABI 1.3): members complete, argument
// checks, and transforms of each kind (batched, strided, scaled, a length
// with an odd factor) compared with a direct DFT computed here in double.
#include <cmath>
#include <complex>
#include <cstring>
#include <vector>

#include "conformance.h"

namespace conformance {
namespace {

using Complex = std::complex<double>;

const flagosFftTable* fftTable() {
  const flagosVendorTables& t = tables();
  // A plugin of ABI < 1.3 ends before the member (the suite zero-fills it).
  if (t.struct_size < offsetof(flagosVendorTables, fft) + sizeof(t.fft)) return nullptr;
  return t.fft;
}

// A 1-D descriptor: @p batch rows of @p n points, rows contiguous.
flagosFftDesc rows(flagosFftKind_t kind, int64_t batch, int64_t n, int32_t inverse) {
  flagosFftDesc d;
  std::memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  d.kind = kind;
  d.inverse = inverse;
  d.onesided = kind == FLAGOS_FFT_C2C ? 0 : 1;
  d.dtype = FLAGOS_DTYPE_FLOAT64;
  d.ndim = 2;
  d.num_dims = 1;
  d.dims[0] = 1;
  const int64_t half = n / 2 + 1;
  const int64_t in_n = kind == FLAGOS_FFT_C2R ? half : n;
  const int64_t out_n = kind == FLAGOS_FFT_R2C ? half : n;
  d.in_sizes[0] = d.out_sizes[0] = batch;
  d.in_sizes[1] = in_n;
  d.out_sizes[1] = out_n;
  d.in_strides[0] = in_n;
  d.in_strides[1] = 1;
  d.out_strides[0] = out_n;
  d.out_strides[1] = 1;
  d.scale = 1.0;
  return d;
}

// sum_j x[j] e^{sign 2 pi i jk/n}.
std::vector<Complex> dft(const std::vector<Complex>& x, int sign) {
  const size_t n = x.size();
  const double pi = std::acos(-1.0);
  std::vector<Complex> y(n);
  for (size_t k = 0; k < n; ++k)
    for (size_t j = 0; j < n; ++j)
      y[k] += x[j] * std::polar(1.0, sign * 2 * pi * static_cast<double>(j * k % n) / n);
  return y;
}

// Runs @p desc over @p in (host bytes) and returns the output's bytes.
std::vector<uint8_t> run(const flagosFftTable& t, const flagosFftDesc& desc,
                         const std::vector<uint8_t>& in, uint64_t out_bytes) {
  flagosFftPlan_t plan = nullptr;
  EXPECT_STREQ(statusName(FLAGOS_SUCCESS), statusName(t.planCreate(0, &desc, &plan)))
      << lastError();
  if (!plan) return {};
  DeviceBuffer din(0, in.size()), dout(0, out_bytes);
  upload(din.get(), in);
  Stream s(0);
  FLAGOS_EXPECT_OK(t.execute(plan, s.get(), din.get(), dout.get()));
  FLAGOS_EXPECT_OK(str().streamSynchronize(s.get()));
  FLAGOS_EXPECT_OK(t.planDestroy(plan));
  return download(dout.get(), out_bytes);
}

template <typename T>
std::vector<uint8_t> bytesOf(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <typename T>
std::vector<T> valuesOf(const std::vector<uint8_t>& b) {
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

TEST(Fft, TableCompleteWhenPresent) {
  const flagosFftTable* t = fftTable();
  if (t == nullptr) GTEST_SKIP() << "no FFT table (optional)";
  EXPECT_GE(t->struct_size, offsetof(flagosFftTable, planDestroy) + sizeof(t->planDestroy));
  ASSERT_NE(nullptr, t->library);
  EXPECT_STRNE("", t->library);
  EXPECT_NE(nullptr, t->planCreate);
  EXPECT_NE(nullptr, t->execute);
  EXPECT_NE(nullptr, t->planDestroy);
}

TEST(Fft, PlansCheckTheirArguments) {
  const flagosFftTable* t = fftTable();
  if (t == nullptr) GTEST_SKIP() << "no FFT table (optional)";
  flagosFftPlan_t plan = nullptr;
  flagosFftDesc d = rows(FLAGOS_FFT_C2C, 2, 8, 0);
  FLAGOS_EXPECT_INVALID(t->planCreate(0, nullptr, &plan));
  FLAGOS_EXPECT_INVALID(t->planCreate(0, &d, nullptr));
  FLAGOS_EXPECT_INVALID(t->planCreate(deviceCount(), &d, &plan));
  flagosFftDesc bad = d;
  bad.dims[0] = 2;  // out of range
  FLAGOS_EXPECT_INVALID(t->planCreate(0, &bad, &plan));
  bad = d;
  bad.dtype = FLAGOS_DTYPE_INT32;
  FLAGOS_EXPECT_INVALID(t->planCreate(0, &bad, &plan));
  bad = rows(FLAGOS_FFT_R2C, 2, 8, 0);
  bad.out_sizes[1] = 4;  // one-sided is n/2 + 1 = 5
  FLAGOS_EXPECT_INVALID(t->planCreate(0, &bad, &plan));
  bad = d;
  bad.in_sizes[0] = 3;  // a batch dim that changes size
  FLAGOS_EXPECT_INVALID(t->planCreate(0, &bad, &plan));
  EXPECT_EQ(nullptr, plan);
  FLAGOS_EXPECT_OK(t->planDestroy(nullptr));
  FLAGOS_ASSERT_OK(t->planCreate(0, &d, &plan));
  Stream s(0);
  FLAGOS_EXPECT_INVALID(t->execute(plan, s.get(), nullptr, nullptr));
  FLAGOS_EXPECT_INVALID(t->execute(plan, nullptr, &d, &d));
  FLAGOS_EXPECT_OK(t->planDestroy(plan));
}

TEST(Fft, ComplexRowsMatchADirectTransform) {
  const flagosFftTable* t = fftTable();
  if (t == nullptr) GTEST_SKIP() << "no FFT table (optional)";
  for (int64_t n : {1, 2, 8, 12, 15, 97}) {
    for (int32_t inverse : {0, 1}) {
      const int64_t batch = 3;
      std::vector<Complex> x(batch * n);
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = Complex(std::sin(0.7 * i + n), std::cos(1.3 * i) - 0.25);
      flagosFftDesc d = rows(FLAGOS_FFT_C2C, batch, n, inverse);
      d.scale = 0.5;
      const auto y = valuesOf<Complex>(run(*t, d, bytesOf(x), x.size() * sizeof(Complex)));
      ASSERT_EQ(x.size(), y.size());
      for (int64_t b = 0; b < batch; ++b) {
        const std::vector<Complex> row(x.begin() + b * n, x.begin() + (b + 1) * n);
        const auto want = dft(row, inverse ? 1 : -1);
        for (int64_t k = 0; k < n; ++k)
          EXPECT_NEAR(0, std::abs(y[b * n + k] - 0.5 * want[k]), 1e-9 * n)
              << "n " << n << " inverse " << inverse << " row " << b << " bin " << k;
      }
    }
  }
}

TEST(Fft, RealTransformsKeepHalfTheSpectrum) {
  const flagosFftTable* t = fftTable();
  if (t == nullptr) GTEST_SKIP() << "no FFT table (optional)";
  const int64_t n = 10, half = n / 2 + 1, batch = 2;
  std::vector<double> x(batch * n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * i * i) + 0.1 * i;
  // R2C, one-sided.
  const auto spec = valuesOf<Complex>(
      run(*t, rows(FLAGOS_FFT_R2C, batch, n, 0), bytesOf(x), batch * half * sizeof(Complex)));
  ASSERT_EQ(static_cast<size_t>(batch * half), spec.size());
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Complex> row(x.begin() + b * n, x.begin() + (b + 1) * n);
    const auto want = dft(row, -1);
    for (int64_t k = 0; k < half; ++k)
      EXPECT_NEAR(0, std::abs(spec[b * half + k] - want[k]), 1e-9) << "row " << b << " bin " << k;
  }
  // C2R back, scaled by 1/n: the input again.
  flagosFftDesc back = rows(FLAGOS_FFT_C2R, batch, n, 1);
  back.scale = 1.0 / n;
  const auto again = valuesOf<double>(run(*t, back, bytesOf(spec), x.size() * sizeof(double)));
  ASSERT_EQ(x.size(), again.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], again[i], 1e-9) << i;
}

TEST(Fft, StridedBatchesAlongTheFirstDim) {
  const flagosFftTable* t = fftTable();
  if (t == nullptr) GTEST_SKIP() << "no FFT table (optional)";
  // A [n, batch] input transformed along dim 0 (stride batch), written to a
  // [n, batch] output with its dims swapped in memory (stride 1 along dim 0).
  const int64_t n = 6, batch = 4;
  std::vector<Complex> x(n * batch);
  for (size_t i = 0; i < x.size(); ++i) x[i] = Complex(0.5 * i, -1.0 / (1 + i));
  flagosFftDesc d;
  std::memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  d.kind = FLAGOS_FFT_C2C;
  d.dtype = FLAGOS_DTYPE_FLOAT64;
  d.ndim = 2;
  d.num_dims = 1;
  d.dims[0] = 0;
  d.in_sizes[0] = d.out_sizes[0] = n;
  d.in_sizes[1] = d.out_sizes[1] = batch;
  d.in_strides[0] = batch;
  d.in_strides[1] = 1;
  d.out_strides[0] = 1;
  d.out_strides[1] = n;
  d.scale = 1.0;
  const auto y = valuesOf<Complex>(run(*t, d, bytesOf(x), x.size() * sizeof(Complex)));
  ASSERT_EQ(x.size(), y.size());
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Complex> column(n);
    for (int64_t j = 0; j < n; ++j) column[j] = x[j * batch + b];
    const auto want = dft(column, -1);
    for (int64_t k = 0; k < n; ++k)
      EXPECT_NEAR(0, std::abs(y[b * n + k] - want[k]), 1e-9) << "column " << b << " bin " << k;
  }
}

}  // namespace
}  // namespace conformance
