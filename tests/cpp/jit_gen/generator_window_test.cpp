// Window recipes (csrc/jit/gen/window.cpp): im2col/col2im, pooling and
// their backwards, nearest upsampling; generated "c" kernels against
// straightforward references written here (torch CPU's loops), and what
// keyFor declines.
#include <functional>

#include "generator_harness.h"

namespace flagos::kernels::testing {
namespace {

constexpr flagosDtype_t F32 = FLAGOS_DTYPE_FLOAT32, F64 = FLAGOS_DTYPE_FLOAT64,
                        I32 = FLAGOS_DTYPE_INT32, I64 = FLAGOS_DTYPE_INT64,
                        BF16 = FLAGOS_DTYPE_BFLOAT16;

std::shared_ptr<const Recipe> windowRecipe(const std::string& id) {
  return catalogRecipe(id, {"pooling", "convolution"});
}

HostTensor filled(HostTensor t, int seed) {
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, testValue(i + seed, -4, 4));
  return t;
}
// (N, C, H, W) with channels last in memory (NHWC strides).
HostTensor channelsLast(flagosDtype_t dt, std::vector<int64_t> s) {
  HostTensor t = HostTensor::contiguous(dt, s);
  t.strides = {s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
  return t;
}
std::vector<flagosScalar> ints(std::vector<int64_t> v) {
  std::vector<flagosScalar> s;
  for (int64_t x : v) s.push_back(intScalar(x));
  return s;
}

// An image-like view: element (n, c, h, w) of a 3-D or 4-D tensor.
struct Img {
  HostTensor* t;
  int64_t C, H, W;
  explicit Img(HostTensor* x)
      : t(x),
        C(x->shape[x->shape.size() - 3]),
        H(x->shape[x->shape.size() - 2]),
        W(x->shape.back()) {}
  int64_t lin(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return ((n * C + c) * H + h) * W + w;
  }
  double get(int64_t n, int64_t c, int64_t h, int64_t w) const { return t->get(lin(n, c, h, w)); }
  int64_t N() const { return t->numel() / (C * H * W); }
};

// torch's pooling_output_shape.
int64_t poolOut(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil) {
  int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil && (out - 1) * stride >= in + pad) --out;
  return out;
}

void expectClose(const HostTensor& got, const std::vector<double>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.numel(), (int64_t)want.size()) << what;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.get(i), w = want[i];
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << what << " [" << i << "]";
    } else {
      EXPECT_NEAR(g, w, tol * (1 + std::fabs(w))) << what << " [" << i << "]";
    }
  }
}

TEST(WindowRecipes, CatalogRows) {
  for (const char* id :
       {"im2col", "col2im", "max_pool2d", "max_pool2d_backward", "avg_pool2d",
        "avg_pool2d_backward", "adaptive_avg_pool2d", "adaptive_avg_pool2d_backward",
        "adaptive_max_pool2d", "adaptive_max_pool2d_backward", "upsample_nearest2d",
        "upsample_nearest2d_backward"}) {
    EXPECT_TRUE(windowRecipe(id)) << id;
  }
  std::string why;
  OpInfo conv{"convolution", "convolution", "", {"input", "weight", "bias"}, {"stride"}, 1};
  EXPECT_EQ(makeRecipe(conv, &why), nullptr);
  EXPECT_NE(why.find("no generator recipe"), std::string::npos) << why;
}

TEST(WindowKernels, Im2colAndCol2im) {
  const int64_t N = 2, C = 3, H = 5, W = 6, kh = 2, kw = 3, dh = 1, dw = 2, ph = 1, pw = 2, sh = 2,
                sw = 1;
  const int64_t bh = (H + 2 * ph - (dh * (kh - 1) + 1)) / sh + 1;
  const int64_t bw = (W + 2 * pw - (dw * (kw - 1) + 1)) / sw + 1;
  for (bool batched : {true, false}) {
    const int64_t n_count = batched ? N : 1;
    std::vector<int64_t> ishape = {C, H, W}, cshape = {C * kh * kw, bh * bw};
    if (batched) ishape.insert(ishape.begin(), N), cshape.insert(cshape.begin(), N);
    HostTensor img =
        filled(batched ? channelsLast(F32, ishape) : HostTensor::reversedLayout(F32, ishape), 1);
    HostTensor cols = HostTensor::contiguous(F32, cshape);
    ASSERT_TRUE(runC(*windowRecipe("im2col"), {&cols}, {&img},
                     ints({kh, kw, dh, dw, ph, pw, sh, sw}), Variant::Generic));
    Img in(&img);
    std::vector<double> want(cols.numel());
    for (int64_t n = 0; n < n_count; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j)
            for (int64_t y = 0; y < bh; ++y)
              for (int64_t x = 0; x < bw; ++x) {
                const int64_t h = y * sh - ph + i * dh, w = x * sw - pw + j * dw;
                const int64_t row = (c * kh + i) * kw + j;
                want[(n * C * kh * kw + row) * bh * bw + y * bw + x] =
                    h >= 0 && h < H && w >= 0 && w < W ? in.get(n, c, h, w) : 0;
              }
    expectClose(cols, want, 0, "im2col");

    // col2im of strided columns, torch's scatter order as the reference.
    HostTensor src = filled(HostTensor::reversedLayout(F64, cshape), 2);
    HostTensor back = HostTensor::contiguous(F64, ishape);
    ASSERT_TRUE(runC(*windowRecipe("col2im"), {&back}, {&src},
                     ints({H, W, kh, kw, dh, dw, ph, pw, sh, sw}), Variant::Generic));
    std::vector<double> sum(back.numel(), 0.0);
    for (int64_t n = 0; n < n_count; ++n)
      for (int64_t row = 0; row < C * kh * kw; ++row)
        for (int64_t y = 0; y < bh; ++y)
          for (int64_t x = 0; x < bw; ++x) {
            const int64_t j = row % kw, i = row / kw % kh, c = row / kw / kh;
            const int64_t h = y * sh - ph + i * dh, w = x * sw - pw + j * dw;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            sum[((n * C + c) * H + h) * W + w] +=
                src.get((n * C * kh * kw + row) * bh * bw + y * bw + x);
          }
    expectClose(back, sum, 1e-12, "col2im");
  }
}

struct Pool2d {
  int64_t kh, kw, sh, sw, ph, pw, dh = 1, dw = 1;
  bool ceil = false;
};

// max_pool2d's reference: torch's loop (a NaN is the max; the last NaN wins).
void maxPoolRef(Img in, int64_t OH, int64_t OW, const Pool2d& p, std::vector<double>* out,
                std::vector<double>* idx) {
  for (int64_t n = 0; n < in.N(); ++n)
    for (int64_t c = 0; c < in.C; ++c)
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t x = 0; x < OW; ++x) {
          int64_t h0 = y * p.sh - p.ph, w0 = x * p.sw - p.pw;
          const int64_t h1 = std::min(h0 + (p.kh - 1) * p.dh + 1, in.H);
          const int64_t w1 = std::min(w0 + (p.kw - 1) * p.dw + 1, in.W);
          while (h0 < 0) h0 += p.dh;
          while (w0 < 0) w0 += p.dw;
          double best = -INFINITY;
          int64_t arg = h0 * in.W + w0;
          for (int64_t h = h0; h < h1; h += p.dh)
            for (int64_t w = w0; w < w1; w += p.dw) {
              const double v = in.get(n, c, h, w);
              if (v > best || std::isnan(v)) best = v, arg = h * in.W + w;
            }
          const int64_t o = ((n * in.C + c) * OH + y) * OW + x;
          (*out)[o] = best;
          (*idx)[o] = (double)arg;
        }
}

TEST(WindowKernels, MaxPoolAndBackward) {
  const Pool2d cases[] = {{3, 2, 2, 1, 1, 1, 1, 2, true}, {2, 2, 0, 0, 0, 0, 1, 1, false}};
  for (const Pool2d& p : cases) {
    const int64_t N = 2, C = 3, H = 7, W = 6;
    const int64_t sh = p.sh ? p.sh : p.kh, sw = p.sw ? p.sw : p.kw;
    const int64_t OH = poolOut(H, p.kh, p.ph, sh, p.dh, p.ceil);
    const int64_t OW = poolOut(W, p.kw, p.pw, sw, p.dw, p.ceil);
    HostTensor x = filled(channelsLast(F32, {N, C, H, W}), 3);
    x.set(5, NAN);
    x.set(6, NAN);
    x.set(40, NAN);
    HostTensor out = HostTensor::contiguous(F32, {N, C, OH, OW});
    HostTensor idx = HostTensor::contiguous(I64, {N, C, OH, OW});
    auto sc = ints({p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, p.ceil});
    ASSERT_TRUE(runC(*windowRecipe("max_pool2d"), {&out, &idx}, {&x}, sc, Variant::Generic));
    std::vector<double> want(out.numel()), want_idx(out.numel());
    Pool2d q = p;
    q.sh = sh, q.sw = sw;
    maxPoolRef(Img(&x), OH, OW, q, &want, &want_idx);
    expectClose(out, want, 0, "max_pool2d");
    expectClose(idx, want_idx, 0, "max_pool2d indices");

    // Backward: grad_output scattered to the saved indices, in output order.
    HostTensor g = filled(HostTensor::reversedLayout(F32, {N, C, OH, OW}), 4);
    HostTensor gi = HostTensor::contiguous(F32, {N, C, H, W});
    ASSERT_TRUE(
        runC(*windowRecipe("max_pool2d_backward"), {&gi}, {&g, &x, &idx}, sc, Variant::Generic));
    std::vector<double> sum(gi.numel(), 0.0);
    for (int64_t o = 0; o < g.numel(); ++o)
      sum[o / (OH * OW) * H * W + (int64_t)idx.get(o)] += g.get(o);
    expectClose(gi, sum, 1e-6, "max_pool2d_backward");
  }
}

TEST(WindowKernels, AvgPoolVariantsAndBackward) {
  struct Case {
    Pool2d p;
    bool cip;
    int64_t div;  // 0: none
  };
  const Case cases[] = {{{3, 3, 2, 2, 1, 1, 1, 1, true}, true, 0},
                        {{3, 3, 2, 2, 1, 1, 1, 1, true}, false, 0},
                        {{2, 3, 0, 0, 1, 0, 1, 1, false}, true, 5},
                        {{3, 2, 2, 3, 0, 1, 1, 1, true}, false, 0}};
  for (const Case& k : cases) {
    const Pool2d& p = k.p;
    const int64_t N = 2, C = 2, H = 6, W = 7;
    const int64_t sh = p.sh ? p.sh : p.kh, sw = p.sw ? p.sw : p.kw;
    const int64_t OH = poolOut(H, p.kh, p.ph, sh, 1, p.ceil);
    const int64_t OW = poolOut(W, p.kw, p.pw, sw, 1, p.ceil);
    HostTensor x = filled(HostTensor::reversedLayout(F64, {N, C, H, W}), 5);
    HostTensor out = HostTensor::contiguous(F64, {N, C, OH, OW});
    auto sc = ints({p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.ceil, k.cip});
    sc.push_back(k.div ? intScalar(k.div) : noneScalar());
    ASSERT_TRUE(runC(*windowRecipe("avg_pool2d"), {&out}, {&x}, sc, Variant::Generic));
    HostTensor g = filled(channelsLast(F64, {N, C, OH, OW}), 6);
    HostTensor gi = HostTensor::contiguous(F64, {N, C, H, W});
    ASSERT_TRUE(runC(*windowRecipe("avg_pool2d_backward"), {&gi}, {&g, &x}, sc, Variant::Generic));
    Img in(&x);
    std::vector<double> want(out.numel()), sum(gi.numel(), 0.0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = 0; y < OH; ++y)
          for (int64_t xx = 0; xx < OW; ++xx) {
            int64_t h0 = y * sh - p.ph, w0 = xx * sw - p.pw;
            int64_t h1 = std::min(h0 + p.kh, H + p.ph), w1 = std::min(w0 + p.kw, W + p.pw);
            const int64_t pool = (h1 - h0) * (w1 - w0);
            h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
            h1 = std::min(h1, H), w1 = std::min(w1, W);
            const int64_t o = ((n * C + c) * OH + y) * OW + xx;
            const int64_t d = k.div ? k.div : k.cip ? pool : (h1 - h0) * (w1 - w0);
            double s = 0;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) {
                s += in.get(n, c, h, w);
                sum[in.lin(n, c, h, w)] += g.get(o) / d;
              }
            want[o] = h0 >= h1 || w0 >= w1 ? 0 : s / d;
          }
    expectClose(out, want, 1e-12, "avg_pool2d");
    expectClose(gi, sum, 1e-12, "avg_pool2d_backward");
  }
}

TEST(WindowKernels, AdaptivePoolsAndBackwards) {
  auto start = [](int64_t a, int64_t out, int64_t in) { return a * in / out; };
  auto end = [](int64_t a, int64_t out, int64_t in) { return ((a + 1) * in + out - 1) / out; };
  const int64_t C = 3, H = 7, W = 5;
  for (auto [OH, OW] : {std::pair<int64_t, int64_t>{3, 4}, {7, 2}, {1, 1}, {9, 8}}) {
    HostTensor x = filled(HostTensor::reversedLayout(F32, {C, H, W}), 7);  // unbatched
    x.set(11, NAN);
    Img in(&x);
    HostTensor avg = HostTensor::contiguous(F32, {C, OH, OW});
    HostTensor mx = HostTensor::contiguous(F32, {C, OH, OW});
    HostTensor idx = HostTensor::contiguous(I64, {C, OH, OW});
    ASSERT_TRUE(
        runC(*windowRecipe("adaptive_avg_pool2d"), {&avg}, {&x}, ints({OH, OW}), Variant::Generic));
    ASSERT_TRUE(runC(*windowRecipe("adaptive_max_pool2d"), {&mx, &idx}, {&x}, ints({OH, OW}),
                     Variant::Generic));
    HostTensor g = filled(HostTensor::reversedLayout(F32, {C, OH, OW}), 8);
    HostTensor ga = HostTensor::contiguous(F32, {C, H, W});
    HostTensor gm = HostTensor::contiguous(F32, {C, H, W});
    ASSERT_TRUE(
        runC(*windowRecipe("adaptive_avg_pool2d_backward"), {&ga}, {&g, &x}, {}, Variant::Generic));
    ASSERT_TRUE(runC(*windowRecipe("adaptive_max_pool2d_backward"), {&gm}, {&g, &x, &idx}, {},
                     Variant::Generic));
    std::vector<double> want_avg(avg.numel()), want_max(avg.numel()), want_idx(avg.numel());
    std::vector<double> sum_avg(ga.numel(), 0.0), sum_max(ga.numel(), 0.0);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t xx = 0; xx < OW; ++xx) {
          const int64_t h0 = start(y, OH, H), h1 = end(y, OH, H);
          const int64_t w0 = start(xx, OW, W), w1 = end(xx, OW, W);
          const int64_t o = (c * OH + y) * OW + xx;
          double s = 0, best = -INFINITY;
          int64_t arg = h0 * W + w0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) {
              const double v = in.get(0, c, h, w);
              s += v;
              if (v > best || std::isnan(v)) best = v, arg = h * W + w;
              sum_avg[in.lin(0, c, h, w)] += g.get(o) / (h1 - h0) / (w1 - w0);
            }
          want_avg[o] = s / (h1 - h0) / (w1 - w0);
          want_max[o] = best;
          want_idx[o] = (double)arg;
          sum_max[c * H * W + arg] += g.get(o);
        }
    const std::string at = " " + std::to_string(OH) + "x" + std::to_string(OW);
    expectClose(avg, want_avg, 1e-6, "adaptive_avg_pool2d" + at);
    expectClose(mx, want_max, 0, "adaptive_max_pool2d" + at);
    expectClose(idx, want_idx, 0, "adaptive_max_pool2d indices" + at);
    expectClose(ga, sum_avg, 1e-6, "adaptive_avg_pool2d_backward" + at);
    expectClose(gm, sum_max, 1e-6, "adaptive_max_pool2d_backward" + at);
  }
}

TEST(WindowKernels, UpsampleNearest) {
  const int64_t N = 1, C = 2, H = 3, W = 5;
  struct Case {
    int64_t OH, OW;
    double scale_h, scale_w;  // 0: None
  };
  for (const Case& k : {Case{3, 10, 0, 0}, Case{7, 4, 0, 0}, Case{6, 8, 2.5, 1.7},
                        Case{2, 13, 0.7, 2.6}, Case{1, 2, 0, 0}}) {
    HostTensor x = filled(channelsLast(BF16, {N, C, H, W}), 9);
    HostTensor out = HostTensor::contiguous(BF16, {N, C, k.OH, k.OW});
    std::vector<flagosScalar> sc = ints({k.OH, k.OW});
    sc.push_back(k.scale_h ? floatScalar(k.scale_h) : noneScalar());
    sc.push_back(k.scale_w ? floatScalar(k.scale_w) : noneScalar());
    ASSERT_TRUE(runC(*windowRecipe("upsample_nearest2d"), {&out}, {&x}, sc, Variant::Generic));
    auto src = [](int64_t o, int64_t in, int64_t out, double scale) -> int64_t {
      if (out == in) return o;
      if (out == 2 * in) return o >> 1;
      const float f = scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
      return std::min((int64_t)std::floor((float)o * f), in - 1);
    };
    Img in(&x);
    std::vector<double> want(out.numel());
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < k.OH; ++y)
        for (int64_t xx = 0; xx < k.OW; ++xx)
          want[(c * k.OH + y) * k.OW + xx] =
              in.get(0, c, src(y, H, k.OH, k.scale_h), src(xx, W, k.OW, k.scale_w));
    expectClose(out, want, 0, "upsample_nearest2d");

    // Backward: grad_output added to each output's source, in output order.
    HostTensor g = filled(HostTensor::reversedLayout(F32, {N, C, k.OH, k.OW}), 10);
    HostTensor gi = HostTensor::contiguous(F32, {N, C, H, W});
    std::vector<flagosScalar> bs = ints({k.OH, k.OW, N, C, H, W});
    bs.push_back(sc[2]);
    bs.push_back(sc[3]);
    ASSERT_TRUE(
        runC(*windowRecipe("upsample_nearest2d_backward"), {&gi}, {&g}, bs, Variant::Generic));
    std::vector<double> sum(gi.numel(), 0.0);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < k.OH; ++y)
        for (int64_t xx = 0; xx < k.OW; ++xx)
          sum[in.lin(0, c, src(y, H, k.OH, k.scale_h), src(xx, W, k.OW, k.scale_w))] +=
              g.get((c * k.OH + y) * k.OW + xx);
    expectClose(gi, sum, 1e-6, "upsample_nearest2d_backward");
  }
}

TEST(WindowKernels, Declines) {
  auto r = windowRecipe("max_pool2d");
  auto sc = ints({2, 2, 0, 0, 0, 0, 1, 1, 0});
  HostTensor x = HostTensor::contiguous(F32, {1, 2, 4, 4});
  HostTensor out = HostTensor::contiguous(F32, {1, 2, 2, 2});
  HostTensor idx = HostTensor::contiguous(I64, {1, 2, 2, 2});
  std::string why;
  EXPECT_FALSE(declines(*r, {&out, &idx}, {&x}, sc, Target{"c", true}, &why)) << why;
  HostTensor idx32 = HostTensor::contiguous(I32, {1, 2, 2, 2});
  EXPECT_TRUE(declines(*r, {&out, &idx32}, {&x}, sc, Target{"c", true}, &why));
  EXPECT_NE(why.find("expected int64"), std::string::npos) << why;
  HostTensor xi = HostTensor::contiguous(I32, {1, 2, 4, 4}), oi = xi;
  oi.shape = {1, 2, 2, 2};
  EXPECT_TRUE(declines(*r, {&oi, &idx}, {&xi}, sc, Target{"c", true}, &why));
  HostTensor x64 = HostTensor::contiguous(F64, {1, 2, 4, 4});
  HostTensor o64 = HostTensor::contiguous(F64, {1, 2, 2, 2});
  EXPECT_TRUE(declines(*r, {&o64, &idx}, {&x64}, sc, Target{"opencl-c", false}, &why));
  EXPECT_NE(why.find("fp64"), std::string::npos) << why;
  HostTensor wrong = HostTensor::contiguous(F32, {1, 3, 2, 2});  // channels differ
  EXPECT_TRUE(declines(*r, {&wrong, &idx}, {&x}, sc, Target{"c", true}, &why));
  EXPECT_TRUE(
      declines(*r, {&out, &idx}, {&x}, ints({2, 2, 0, 0, 0, 0, 1}), Target{"c", true}, &why));
  auto im2col = windowRecipe("im2col");
  HostTensor cols = HostTensor::contiguous(F32, {1, 8, 5});  // 9 blocks expected
  EXPECT_TRUE(
      declines(*im2col, {&cols}, {&x}, ints({2, 2, 1, 1, 0, 0, 1, 1}), Target{"c", true}, &why));
  EXPECT_TRUE(
      declines(*im2col, {&cols}, {&x}, ints({2, 2, 1, 1, 0, 0, 0, 1}), Target{"c", true}, &why));
  std::vector<flagosTensor> o{out.view(), idx.view()}, i{x.view()};
  Call call{o.data(), 2, i.data(), 1, sc.data(), (int32_t)sc.size()};
  KernelKey key;
  EXPECT_FALSE(keyFor(*r, call, Variant::Specialized, Target{"c", true}, &key, &why));
}

}  // namespace
}  // namespace flagos::kernels::testing
