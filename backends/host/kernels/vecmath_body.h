// The vector-math bodies of vecmath.h, written once over an instruction-set
// description `I` (vecmath_avx2.cpp, vecmath_avx512.cpp each define one and
// instantiate these in a translation unit built for that ISA). `I` has:
//   F, kWidth          the float vector type and its lane count
//   load/store/set1, add/sub/mul/div/fmadd/fnmadd, max, bit and/xor
//   exp/log/tanh/sin/cos    SLEEF's 1-ULP functions for that ISA
//   nanMask(v)         a bitmask of the NaN lanes
//   D, dzero, addWidened(v, acc), dsum(acc)  double accumulation of lanes
// Tails go through a zero-padded buffer so every element takes the vector
// path (Note [Vector math]).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "vecmath.h"

namespace flagos_host::kernels::vec {

template <class I>
struct Body {
  using F = typename I::F;
  static constexpr int W = I::kWidth;

  static F one() { return I::set1(1.0f); }
  static F half() { return I::set1(0.5f); }
  static F negZero() { return I::set1(-0.0f); }

  // erf by Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7), the
  // formula PyTorch's own Vectorized<float>::erf uses: SLEEF 3.5's erff
  // measured 4 ns an element here, slower than scalar libm.
  __attribute__((always_inline)) static F erf(F x) {
    const F sign = I::bitAnd(negZero(), x);
    const F ax = I::bitXor(sign, x);
    const F t = I::div(one(), I::fmadd(I::set1(0.3275911f), ax, one()));
    F r = I::set1(1.061405429f);
    r = I::fmadd(r, t, I::set1(-1.453152027f));
    r = I::fmadd(r, t, I::set1(1.421413741f));
    r = I::fmadd(r, t, I::set1(-0.284496736f));
    r = I::fmadd(r, t, I::set1(0.254829592f));
    const F e = I::exp(I::bitXor(negZero(), I::mul(x, x)));
    // sign(x) * (1 - r t exp(-x^2))
    return I::bitXor(sign, I::fmadd(I::bitXor(negZero(), I::mul(e, t)), r, one()));
  }

  static F expNeg(F x) { return I::exp(I::bitXor(negZero(), x)); }

  // sqrt(2/pi) (x + 0.044715 x^3)
  static F geluTanhInner(F x) {
    const F x3 = I::mul(I::mul(x, x), x);
    return I::mul(I::set1(0.7978845608028654f), I::fmadd(I::set1(0.044715f), x3, x));
  }

  __attribute__((always_inline)) static F unary(Fn f, F x) {
    switch (f) {
      case Fn::Exp:
        return I::exp(x);
      case Fn::Log:
        return I::log(x);
      case Fn::Tanh:
        return I::tanh(x);
      case Fn::Erf:
        return erf(x);
      case Fn::Sin:
        return I::sin(x);
      case Fn::Cos:
        return I::cos(x);
      case Fn::Sigmoid:
        return I::div(one(), I::add(one(), expNeg(x)));
      case Fn::Silu:  // x / (1 + exp(-x)), as the scalar kernel and CPU
        return I::div(x, I::add(one(), expNeg(x)));
      case Fn::Gelu:
        return I::mul(I::mul(half(), x),
                      I::add(one(), erf(I::mul(x, I::set1(0.7071067811865476f)))));
      case Fn::GeluTanh:
        return I::mul(I::mul(half(), x), I::add(one(), I::tanh(geluTanhInner(x))));
      case Fn::None:
        break;
    }
    return x;
  }

  __attribute__((always_inline)) static F grad(Grad f, F g, F x) {
    switch (f) {
      case Grad::GeluTanhBackward: {
        const F t = I::tanh(geluTanhInner(x));
        const F left = I::mul(half(), x), right = I::add(one(), t);
        const F dinner = I::mul(I::set1(0.7978845608028654f),
                                I::fmadd(I::set1(3 * 0.044715f), I::mul(x, x), one()));
        const F dt = I::mul(I::fnmadd(t, t, one()), dinner);
        return I::mul(g, I::fmadd(left, dt, I::mul(half(), right)));
      }
      case Grad::GeluBackward: {
        const F cdf = I::mul(half(), I::add(one(), erf(I::mul(x, I::set1(0.7071067811865476f)))));
        const F pdf =
            I::mul(I::exp(I::mul(I::set1(-0.5f), I::mul(x, x))), I::set1(0.3989422804014327f));
        return I::mul(g, I::fmadd(x, pdf, cdf));
      }
      case Grad::SiluBackward: {  // g s (1 + x (1 - s)), s = sigmoid(x)
        const F sg = I::div(one(), I::add(one(), expNeg(x)));
        return I::mul(I::mul(g, sg), I::fmadd(x, I::sub(one(), sg), one()));
      }
    }
    return g;
  }

  // Note [One switch a call]: the function is a template argument, chosen
  // once a call: a switch per vector (a jump table the compiler kept in the
  // loop) and one dependency chain an iteration ran GELU at half of native
  // CPU's speed. Two vectors an iteration overlap the division's and exp's
  // latencies, as ATen's vectorized loops do.
  template <Fn f>
  static void applyFn(const float* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      const F a = unary(f, I::load(x + i)), b = unary(f, I::load(x + i + W));
      I::store(y + i, a);
      I::store(y + i + W, b);
    }
    for (; i + W <= n; i += W) I::store(y + i, unary(f, I::load(x + i)));
    if (i < n) {
      float buf[W] = {};
      std::memcpy(buf, x + i, (n - i) * sizeof(float));
      I::store(buf, unary(f, I::load(buf)));
      std::memcpy(y + i, buf, (n - i) * sizeof(float));
    }
  }

  static void apply(Fn f, const float* x, float* y, int64_t n) {
    switch (f) {
      case Fn::Exp:
        return applyFn<Fn::Exp>(x, y, n);
      case Fn::Log:
        return applyFn<Fn::Log>(x, y, n);
      case Fn::Tanh:
        return applyFn<Fn::Tanh>(x, y, n);
      case Fn::Erf:
        return applyFn<Fn::Erf>(x, y, n);
      case Fn::Sin:
        return applyFn<Fn::Sin>(x, y, n);
      case Fn::Cos:
        return applyFn<Fn::Cos>(x, y, n);
      case Fn::Sigmoid:
        return applyFn<Fn::Sigmoid>(x, y, n);
      case Fn::Silu:
        return applyFn<Fn::Silu>(x, y, n);
      case Fn::Gelu:
        return applyFn<Fn::Gelu>(x, y, n);
      case Fn::GeluTanh:
        return applyFn<Fn::GeluTanh>(x, y, n);
      case Fn::None:
        return applyFn<Fn::None>(x, y, n);
    }
  }

  template <Grad f>
  static void applyGradFn(const float* g, const float* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      const F a = grad(f, I::load(g + i), I::load(x + i));
      const F b = grad(f, I::load(g + i + W), I::load(x + i + W));
      I::store(y + i, a);
      I::store(y + i + W, b);
    }
    for (; i + W <= n; i += W) I::store(y + i, grad(f, I::load(g + i), I::load(x + i)));
    if (i < n) {
      float bg[W] = {}, bx[W] = {};
      std::memcpy(bg, g + i, (n - i) * sizeof(float));
      std::memcpy(bx, x + i, (n - i) * sizeof(float));
      I::store(bg, grad(f, I::load(bg), I::load(bx)));
      std::memcpy(y + i, bg, (n - i) * sizeof(float));
    }
  }

  static void applyGrad(Grad f, const float* g, const float* x, float* y, int64_t n) {
    switch (f) {
      case Grad::GeluBackward:
        return applyGradFn<Grad::GeluBackward>(g, x, y, n);
      case Grad::GeluTanhBackward:
        return applyGradFn<Grad::GeluTanhBackward>(g, x, y, n);
      case Grad::SiluBackward:
        return applyGradFn<Grad::SiluBackward>(g, x, y, n);
    }
  }

  static double rowSum(const float* x, int64_t n) {
    constexpr int64_t kStep = 4 * W, kBlock = 16 * kStep;
    typename I::D acc = I::dzero();
    int64_t i = 0;
    while (n - i >= kStep) {
      const int64_t end = i + std::min<int64_t>(kBlock, (n - i) / kStep * kStep);
      F s0 = I::set1(0.0f), s1 = s0, s2 = s0, s3 = s0;
      for (; i < end; i += kStep) {
        s0 = I::add(s0, I::load(x + i));
        s1 = I::add(s1, I::load(x + i + W));
        s2 = I::add(s2, I::load(x + i + 2 * W));
        s3 = I::add(s3, I::load(x + i + 3 * W));
      }
      I::addWidened(I::add(I::add(s0, s1), I::add(s2, s3)), acc);
    }
    double sum = I::dsum(acc);
    for (; i < n; ++i) sum += x[i];
    return sum;
  }

  // sum((x[i] - mu)^2), accumulated as rowSum: float partials of at most
  // 16 terms a lane, totalled in double (layer norm's variance).
  static double rowSquaredDeviation(const float* x, int64_t n, float mu) {
    constexpr int64_t kStep = 4 * W, kBlock = 16 * kStep;
    const F m = I::set1(mu);
    typename I::D acc = I::dzero();
    int64_t i = 0;
    while (n - i >= kStep) {
      const int64_t end = i + std::min<int64_t>(kBlock, (n - i) / kStep * kStep);
      F s0 = I::set1(0.0f), s1 = s0, s2 = s0, s3 = s0;
      for (; i < end; i += kStep) {
        const F d0 = I::sub(I::load(x + i), m), d1 = I::sub(I::load(x + i + W), m);
        const F d2 = I::sub(I::load(x + i + 2 * W), m), d3 = I::sub(I::load(x + i + 3 * W), m);
        s0 = I::fmadd(d0, d0, s0);
        s1 = I::fmadd(d1, d1, s1);
        s2 = I::fmadd(d2, d2, s2);
        s3 = I::fmadd(d3, d3, s3);
      }
      I::addWidened(I::add(I::add(s0, s1), I::add(s2, s3)), acc);
    }
    double sum = I::dsum(acc);
    for (; i < n; ++i) {
      const double d = static_cast<double>(x[i]) - mu;
      sum += d * d;
    }
    return sum;
  }

  // y = (x - mean) * rstd, times w and plus b where given: the same
  // roundings as the scalar loop of layer norm (no fused multiply-add).
  static void normalizeRow(const float* x, int64_t n, float mean, float rstd, const float* w,
                           const float* b, float* y) {
    const F m = I::set1(mean), r = I::set1(rstd);
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      F v = I::mul(I::sub(I::load(x + i), m), r);
      if (w) v = I::mul(v, I::load(w + i));
      if (b) v = I::add(v, I::load(b + i));
      I::store(y + i, v);
    }
    for (; i < n; ++i) {
      float v = (x[i] - mean) * rstd;
      if (w) v *= w[i];
      if (b) v += b[i];
      y[i] = v;
    }
  }

  static float rowMax(const float* x, int64_t n) {
    F m = I::set1(-std::numeric_limits<float>::infinity());
    bool nan = false;
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      const F v = I::load(x + i);
      m = I::max(m, v);
      nan |= I::nanMask(v) != 0;
    }
    float lanes[W];
    I::store(lanes, m);
    float r = lanes[0];
    for (int k = 1; k < W; ++k) r = std::max(r, lanes[k]);
    for (; i < n; ++i) {
      nan |= std::isnan(x[i]);
      r = std::max(r, x[i]);
    }
    return nan ? std::numeric_limits<float>::quiet_NaN() : r;
  }

  static double expShiftSum(const float* x, float shift, float* y, int64_t n) {
    const F s = I::set1(shift);
    typename I::D acc = I::dzero();
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      const F e = I::exp(I::sub(I::load(x + i), s));
      if (y) I::store(y + i, e);
      I::addWidened(e, acc);
    }
    double sum = I::dsum(acc);
    if (i < n) {
      float buf[W] = {};
      std::memcpy(buf, x + i, (n - i) * sizeof(float));
      I::store(buf, I::exp(I::sub(I::load(buf), s)));
      for (int64_t k = 0; k < n - i; ++k) sum += buf[k];
      if (y) std::memcpy(y + i, buf, (n - i) * sizeof(float));
    }
    return sum;
  }
};

}  // namespace flagos_host::kernels::vec
