// The opencl plugin's kernel table (backends/opencl/kernels/), called
// through the plugin's tables on device buffers and checked against a naive
// double-precision reference: contiguous, transposed and sliced operands
// (offsets, leading dimension > columns, untouched elements around a sliced
// output), broadcast bias, beta == 0 over NaN, and the layouts and dtypes
// the kernels must hand back with FLAGOS_ERROR_NOT_SUPPORTED.
// ctest runs it twice: as configured by default (GEMMs up to 2^18
// multiply-adds on the plugin's own kernel, Note [Small GEMMs]) and with
// FLAGOS_OPENCL_SMALL_GEMM=0 (CLBlast for every GEMM).
// Runs on the conformance harness (conformance_main.cpp); exit code 77 when
// there is no OpenCL device.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "conformance.h"
#include "flagos/kernel.h"

namespace conformance {
namespace {

flagosKernelFn kernel(const char* id) {
  const flagosKernelTable* t = tables().kernels;
  for (int32_t i = 0; t != nullptr && i < t->num_entries; ++i)
    if (std::strcmp(t->entries[i].op_id, id) == 0) return t->entries[i].fn;
  return nullptr;
}

template <typename T>
constexpr flagosDtype_t dtypeOf() {
  return sizeof(T) == 4 ? FLAGOS_DTYPE_FLOAT32 : FLAGOS_DTYPE_FLOAT64;
}

// A strided view into a device buffer, with the host copy of the whole
// buffer (the storage) it was uploaded from.
template <typename T>
struct Operand {
  std::vector<T> host;
  std::shared_ptr<DeviceBuffer> dev;  // copies share it (views of one buffer)
  std::vector<int64_t> shape, strides;
  int64_t offset = 0;
  flagosDtype_t dtype = dtypeOf<T>();

  Operand(int64_t storage, std::vector<int64_t> shape_, std::vector<int64_t> strides_,
          int64_t offset_, uint32_t seed, T fill_value = T(0), bool fill = false)
      : host(storage), shape(std::move(shape_)), strides(std::move(strides_)), offset(offset_) {
    uint32_t s = seed * 2654435761u + 12345u;
    for (T& v : host) {
      s = s * 1664525u + 1013904223u;
      v = fill ? fill_value : static_cast<T>(static_cast<double>(s >> 8) / (1 << 23) - 1.0);
    }
    dev = std::make_shared<DeviceBuffer>(0, std::max<int64_t>(1, storage) * sizeof(T));
    std::vector<uint8_t> bytes(host.size() * sizeof(T));
    std::memcpy(bytes.data(), host.data(), bytes.size());
    upload(dev->get(), bytes);
  }
  flagosTensor tensor() const {
    return {dev->get() + offset * sizeof(T), dtype, static_cast<int32_t>(shape.size()),
            shape.data(), strides.data()};
  }
  // Element (b, i, j), the view's dims right-aligned into 3; size-1 dims
  // broadcast.
  double at(int64_t b, int64_t i, int64_t j) const {
    const int64_t idx[3] = {b, i, j};
    int64_t e = offset;
    const int n = static_cast<int>(shape.size());
    for (int d = 0; d < n; ++d)
      if (shape[d] != 1) e += idx[3 - n + d] * strides[d];
    return host[e];
  }
  std::vector<T> fetch() const {
    const std::vector<uint8_t> bytes = download(dev->get(), host.size() * sizeof(T));
    std::vector<T> out(host.size());
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
};

// Contiguous row-major view of a fresh buffer.
template <typename T>
Operand<T> dense(std::vector<int64_t> shape, uint32_t seed) {
  std::vector<int64_t> strides(shape.size());
  int64_t n = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = n;
    n *= shape[d];
  }
  return Operand<T>(n, shape, strides, 0, seed);
}

flagosScalar scalar(double v) {
  return {FLAGOS_DTYPE_FLOAT64, 0, 0, v};
}

// Whether small GEMMs run on the plugin's own kernel (any strides) rather
// than CLBlast (row- or column-major operands only).
bool smallKernel() {
  const char* limit = std::getenv("FLAGOS_OPENCL_SMALL_GEMM");
  return limit == nullptr || std::strcmp(limit, "0") != 0;
}

class OpenclKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::strcmp(tables().name, "opencl") != 0) GTEST_SKIP() << "opencl plugin only";
    if (tables().kernels == nullptr) GTEST_SKIP() << "plugin built without CLBlast";
    stream_ = std::make_unique<Stream>(0);
  }

  // Runs kernel @p id; SUCCESS is synchronized before returning.
  template <typename T>
  flagosStatus_t call(const char* id, Operand<T>& out, std::vector<const Operand<T>*> ins,
                      std::vector<flagosScalar> scalars = {}) {
    flagosKernelFn fn = kernel(id);
    EXPECT_NE(nullptr, fn) << id;
    if (fn == nullptr) return FLAGOS_ERROR_NOT_SUPPORTED;
    const flagosTensor o = out.tensor();
    std::vector<flagosTensor> in;
    for (const auto* op : ins) in.push_back(op->tensor());
    const flagosStatus_t s = fn(stream_->get(), &o, 1, in.data(), static_cast<int32_t>(in.size()),
                                scalars.data(), static_cast<int32_t>(scalars.size()));
    if (s == FLAGOS_SUCCESS) {
      FLAGOS_EXPECT_OK(str().streamSynchronize(stream_->get()));
    }
    return s;
  }

  std::unique_ptr<Stream> stream_;
};

// out = beta * self + alpha * a @ b, batched when the views are 3-D; checks
// every element of out's storage: the view against the reference, the rest
// unchanged.
template <typename T>
struct Same {
  using type = T;  // a non-deduced context: `nullptr` binds to any T
};

template <typename T>
void checkGemm(const Operand<T>& out, const Operand<T>& a, const Operand<T>& b,
               const typename Same<Operand<T>>::type* self, double beta, double alpha) {
  const int r = static_cast<int>(out.shape.size());
  const int64_t B = r == 3 ? out.shape[0] : 1, M = out.shape[r - 2], N = out.shape[r - 1];
  const int64_t K = a.shape[a.shape.size() - 1];
  const std::vector<T> got = out.fetch();
  std::vector<bool> inside(got.size(), false);
  const double tol = sizeof(T) == 4 ? 1e-4 * (K + 1) : 1e-12 * (K + 1);
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double want = 0;
        for (int64_t k = 0; k < K; ++k) want += a.at(bb, i, k) * b.at(bb, k, j);
        want *= alpha;
        if (self != nullptr && beta != 0) want += beta * self->at(bb, i, j);
        const int64_t e = out.offset + (r == 3 ? bb * out.strides[0] : 0) + i * out.strides[r - 2] +
                          j * out.strides[r - 1];
        inside[e] = true;
        ASSERT_NEAR(want, got[e], tol) << "at " << bb << "," << i << "," << j;
      }
  for (size_t e = 0; e < got.size(); ++e)
    if (!inside[e]) {
      ASSERT_EQ(out.host[e], got[e]) << "element " << e << " outside out changed";
    }
}

TEST_F(OpenclKernels, TableHasGemmIds) {
  for (const char* id : {"mm", "addmm", "bmm", "baddbmm", "mv", "addmv", "dot"})
    EXPECT_NE(nullptr, kernel(id)) << id;
}

TEST_F(OpenclKernels, MmContiguous) {
  for (auto [m, n, k] : {std::tuple{5, 3, 7}, {64, 48, 33}, {1, 9, 4}, {130, 70, 129}}) {
    auto a = dense<float>({m, k}, 1), b = dense<float>({k, n}, 2), out = dense<float>({m, n}, 3);
    FLAGOS_ASSERT_OK(call<float>("mm", out, {&a, &b}));
    checkGemm(out, a, b, nullptr, 0, 1);
  }
}

TEST_F(OpenclKernels, MmTransposedOperands) {
  const int64_t M = 17, N = 11, K = 13;
  // A and B stored transposed (column-major views): strides (1, ld).
  Operand<float> a(K * M, {M, K}, {1, M}, 0, 4), b(N * K, {K, N}, {1, K}, 0, 5);
  auto out = dense<float>({M, N}, 6);
  FLAGOS_ASSERT_OK(call<float>("mm", out, {&a, &b}));
  checkGemm(out, a, b, nullptr, 0, 1);
  // A column-major output: computed as C^T = B^T A^T.
  Operand<float> outt(N * M, {M, N}, {1, M}, 0, 7);
  FLAGOS_ASSERT_OK(call<float>("mm", outt, {&a, &b}));
  checkGemm(outt, a, b, nullptr, 0, 1);
}

TEST_F(OpenclKernels, MmSlicedOperands) {
  const int64_t M = 9, N = 6, K = 10;
  // Slices of larger matrices: an offset and a leading dimension > columns;
  // the output's neighbours must stay untouched.
  Operand<float> a(20 * 16, {M, K}, {16, 1}, 2 * 16 + 3, 8);
  Operand<float> b(3 + 12 * 20, {K, N}, {1, 20}, 3, 9);  // transposed and offset
  Operand<float> out(15 * 9, {M, N}, {9, 1}, 9 + 2, 10);
  FLAGOS_ASSERT_OK(call<float>("mm", out, {&a, &b}));
  checkGemm(out, a, b, nullptr, 0, 1);
}

TEST_F(OpenclKernels, AddmmBroadcastBias) {
  const int64_t M = 12, N = 7, K = 5;
  auto a = dense<float>({M, K}, 11), b = dense<float>({K, N}, 12);
  auto bias = dense<float>({N}, 13);  // broadcast over rows (linear's bias)
  auto out = dense<float>({M, N}, 14);
  FLAGOS_ASSERT_OK(call<float>("addmm", out, {&bias, &a, &b}, {scalar(0.5), scalar(2.0)}));
  checkGemm(out, a, b, &bias, 0.5, 2.0);
  Operand<float> col(M, {M, 1}, {1, 1}, 0, 15);  // broadcast over columns
  FLAGOS_ASSERT_OK(call<float>("addmm", out, {&col, &a, &b}, {scalar(1.0), scalar(1.0)}));
  checkGemm(out, a, b, &col, 1.0, 1.0);
  auto full = dense<float>({M, N}, 16);
  FLAGOS_ASSERT_OK(call<float>("addmm", out, {&full, &a, &b}, {scalar(-1.5), scalar(0.25)}));
  checkGemm(out, a, b, &full, -1.5, 0.25);
}

TEST_F(OpenclKernels, AddmmInPlace) {
  // addmm_: self is the output.
  const int64_t M = 8, N = 9, K = 4;
  auto a = dense<float>({M, K}, 17), b = dense<float>({K, N}, 18), out = dense<float>({M, N}, 19);
  const Operand<float> before = out;  // same buffer; its host copy keeps the old values
  FLAGOS_ASSERT_OK(call<float>("addmm", out, {&out, &a, &b}, {scalar(2.0), scalar(1.0)}));
  checkGemm(out, a, b, &before, 2.0, 1.0);
}

TEST_F(OpenclKernels, BetaZeroIgnoresNan) {
  const int64_t M = 6, N = 5, K = 3;
  const float nan = std::nanf("");
  auto a = dense<float>({M, K}, 20), b = dense<float>({K, N}, 21);
  Operand<float> self(M * N, {M, N}, {N, 1}, 0, 0, nan, true);
  Operand<float> out(M * N, {M, N}, {N, 1}, 0, 0, nan, true);
  FLAGOS_ASSERT_OK(call<float>("addmm", out, {&self, &a, &b}, {scalar(0.0), scalar(1.0)}));
  checkGemm(out, a, b, &self, 0.0, 1.0);
  Operand<float> out2(M * N, {M, N}, {N, 1}, 0, 0, nan, true);
  FLAGOS_ASSERT_OK(call<float>("mm", out2, {&a, &b}));
  checkGemm(out2, a, b, nullptr, 0, 1);
  auto x = dense<float>({K}, 22);
  Operand<float> y(M, {M}, {1}, 0, 0, nan, true), yself(M, {M}, {1}, 0, 0, nan, true);
  FLAGOS_ASSERT_OK(call<float>("addmv", y, {&yself, &a, &x}, {scalar(0.0), scalar(1.0)}));
  for (float v : y.fetch()) EXPECT_FALSE(std::isnan(v));
}

TEST_F(OpenclKernels, BmmAndBaddbmm) {
  const int64_t B = 3, M = 10, N = 7, K = 9;
  auto a = dense<float>({B, M, K}, 23), b = dense<float>({B, K, N}, 24);
  auto out = dense<float>({B, M, N}, 25);
  FLAGOS_ASSERT_OK(call<float>("bmm", out, {&a, &b}));
  checkGemm(out, a, b, nullptr, 0, 1);
  // Transposed matrices inside each batch, and a batch-broadcast B (stride 0).
  Operand<float> at(B * K * M, {B, M, K}, {K * M, 1, M}, 0, 26);
  Operand<float> bb(K * N, {B, K, N}, {0, N, 1}, 0, 27);
  FLAGOS_ASSERT_OK(call<float>("bmm", out, {&at, &bb}));
  checkGemm(out, at, bb, nullptr, 0, 1);
  auto bias = dense<float>({N}, 28);
  FLAGOS_ASSERT_OK(call<float>("baddbmm", out, {&bias, &a, &b}, {scalar(0.75), scalar(-1.0)}));
  checkGemm(out, a, b, &bias, 0.75, -1.0);
  // A sliced batch: every other batch of a larger tensor, offset.
  Operand<float> outs(5 * M * N + 4, {B, M, N}, {2 * M * N, N, 1}, 4, 29);
  FLAGOS_ASSERT_OK(call<float>("bmm", outs, {&a, &b}));
  checkGemm(outs, a, b, nullptr, 0, 1);
}

TEST_F(OpenclKernels, MvAndAddmv) {
  const int64_t M = 13, N = 8;
  auto a = dense<float>({M, N}, 30);
  Operand<float> at(N * M, {M, N}, {1, M}, 0, 31);  // transposed
  Operand<float> x(2 * N, {N}, {2}, 1, 32);         // strided, offset
  for (const Operand<float>* mat : {&a, &at}) {
    auto y = dense<float>({M}, 33);
    FLAGOS_ASSERT_OK(call<float>("mv", y, {mat, &x}));
    // As a gemm: y (M x 1) = mat (M x N) @ x (N x 1).
    Operand<float> xc = x;
    xc.shape = {N, 1};
    xc.strides = {2, 1};
    Operand<float> yc = y;
    yc.shape = {M, 1};
    yc.strides = {1, 1};
    checkGemm(yc, *mat, xc, nullptr, 0, 1);
    Operand<float> bias(1, {}, {}, 0, 34);  // 0-d: broadcast everywhere
    FLAGOS_ASSERT_OK(call<float>("addmv", y, {&bias, mat, &x}, {scalar(3.0), scalar(0.5)}));
    Operand<float> bc = bias;
    bc.shape = {1, 1};
    bc.strides = {0, 0};
    checkGemm(yc, *mat, xc, &bc, 3.0, 0.5);
  }
}

TEST_F(OpenclKernels, Dot) {
  const int64_t n = 37;
  auto x = dense<float>({n}, 35);
  Operand<float> y(3 * n, {n}, {3}, 2, 36);
  Operand<float> out(1, {}, {}, 0, 37);
  FLAGOS_ASSERT_OK(call<float>("dot", out, {&x, &y}));
  double want = 0;
  for (int64_t i = 0; i < n; ++i) want += x.host[i] * y.host[2 + 3 * i];
  EXPECT_NEAR(want, out.fetch()[0], 1e-4);
}

TEST_F(OpenclKernels, Float64) {
  auto a = dense<double>({21, 19}, 38), b = dense<double>({19, 23}, 39);
  auto out = dense<double>({21, 23}, 40), bias = dense<double>({23}, 41);
  const flagosStatus_t s = call<double>("addmm", out, {&bias, &a, &b}, {scalar(0.5), scalar(1.5)});
  if (s == FLAGOS_ERROR_NOT_SUPPORTED) GTEST_SKIP() << "device without fp64";
  FLAGOS_ASSERT_OK(s);
  checkGemm(out, a, b, &bias, 0.5, 1.5);
}

TEST_F(OpenclKernels, UnsupportedLayoutsAndDtypes) {
  const int64_t M = 6, N = 5, K = 4;
  auto a = dense<float>({M, K}, 42), b = dense<float>({K, N}, 43), out = dense<float>({M, N}, 44);
  const std::vector<float> before = out.fetch();
  if (!smallKernel()) {  // CLBlast takes row- or column-major operands only
    // Neither stride is 1 (every other column).
    Operand<float> gappy(M * 2 * K, {M, K}, {2 * K, 2}, 0, 45);
    FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_NOT_SUPPORTED, call<float>("mm", out, {&gappy, &b}));
    // A broadcast operand (row stride 0).
    Operand<float> bcast(K, {M, K}, {0, 1}, 0, 46);
    FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_NOT_SUPPORTED, call<float>("mm", out, {&bcast, &b}));
  }
  // Negative strides.
  Operand<float> flipped(M * K, {M, K}, {-K, 1}, (M - 1) * K, 47);
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_NOT_SUPPORTED, call<float>("mm", out, {&flipped, &b}));
  // An output whose rows overlap.
  Operand<float> overlap(M + N, {M, N}, {1, 1}, 0, 48);
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_NOT_SUPPORTED, call<float>("mm", overlap, {&a, &b}));
  EXPECT_EQ(before, out.fetch()) << "a rejected call must leave the output alone";
  // Integer and half dtypes go to a later tier.
  for (flagosDtype_t dt : {FLAGOS_DTYPE_INT32, FLAGOS_DTYPE_FLOAT16}) {
    auto ai = a, bi = b, oi = out;
    ai.dtype = bi.dtype = oi.dtype = dt;
    FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_NOT_SUPPORTED, call<float>("mm", oi, {&ai, &bi}));
  }
}

// The small-GEMM kernel reads any non-negative strides: operands CLBlast
// cannot take (gaps in both strides, broadcasts) run natively, over row
// counts that are not a multiple of its 8-row blocks and column counts
// past one 32-wide work-group.
TEST_F(OpenclKernels, SmallKernelAnyStrides) {
  if (!smallKernel()) GTEST_SKIP() << "FLAGOS_OPENCL_SMALL_GEMM=0: CLBlast only";
  const int64_t M = 19, N = 45, K = 6;
  Operand<float> gappy(M * 2 * K, {M, K}, {2 * K, 2}, 0, 50);  // every other column
  Operand<float> bcast(K, {M, K}, {0, 1}, 0, 51);              // one row, repeated
  Operand<float> bgappy(3 * K * N, {K, N}, {3 * N, 3}, 1, 52);
  auto b = dense<float>({K, N}, 53);
  for (const Operand<float>* a : {&gappy, &bcast}) {
    auto out = dense<float>({M, N}, 54);
    FLAGOS_ASSERT_OK(call<float>("mm", out, {a, &b}));
    checkGemm(out, *a, b, nullptr, 0, 1);
    FLAGOS_ASSERT_OK(call<float>("mm", out, {a, &bgappy}));
    checkGemm(out, *a, bgappy, nullptr, 0, 1);
  }
  // Batches: a broadcast batch of A, self broadcast over batch and rows.
  const int64_t B = 3;
  Operand<float> ab(M * K, {B, M, K}, {0, K, 1}, 0, 55);
  auto bb = dense<float>({B, K, N}, 56), out = dense<float>({B, M, N}, 57);
  auto self = dense<float>({N}, 58);
  FLAGOS_ASSERT_OK(call<float>("baddbmm", out, {&self, &ab, &bb}, {scalar(0.5), scalar(1.5)}));
  checkGemm(out, ab, bb, &self, 0.5, 1.5);
}

}  // namespace
}  // namespace conformance
