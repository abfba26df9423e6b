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
#include <utility>

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
  // was slower here than scalar libm.
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
      case Fn::Count:
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
      case Grad::Count:
        break;
    }
    return g;
  }

  // y[0..n) = op(the vectors of src...) a vector at a time, two an
  // iteration; the tail through zero-padded buffers.
  template <class Op, class... Src>
  __attribute__((always_inline)) static void mapVectors(int64_t n, float* y, Op op,
                                                        const Src*... src) {
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      const F a = op(I::load(src + i)...), b = op(I::load(src + i + W)...);
      I::store(y + i, a);
      I::store(y + i + W, b);
    }
    for (; i + W <= n; i += W) I::store(y + i, op(I::load(src + i)...));
    if (i < n) {
      const auto padded = [&](const float* p) {
        float buf[W] = {};
        std::memcpy(buf, p + i, (n - i) * sizeof(float));
        return I::load(buf);
      };
      float out[W];
      I::store(out, op(padded(src)...));
      std::memcpy(y + i, out, (n - i) * sizeof(float));
    }
  }

  // Note [One switch a call]
  // ~~~~~~~~~~~~~~~~~~~~~~~~
  // The function is a template argument, chosen once a call through a
  // table: a switch per vector (a jump table the compiler kept in the
  // loop) and one dependency chain an iteration ran GELU at half of
  // native CPU's speed. Two vectors an iteration overlap the division's
  // and exp's latencies, as ATen's vectorized loops do.
  template <Fn f>
  static void applyFn(const float* x, float* y, int64_t n) {
    mapVectors(
        n, y, [](F v) { return unary(f, v); }, x);
  }
  template <Grad f>
  static void applyGradFn(const float* g, const float* x, float* y, int64_t n) {
    mapVectors(
        n, y, [](F gv, F xv) { return grad(f, gv, xv); }, g, x);
  }
  template <size_t... K>
  static void apply(Fn f, const float* x, float* y, int64_t n, std::index_sequence<K...>) {
    static constexpr void (*kByFn[])(const float*, float*,
                                     int64_t) = {applyFn<static_cast<Fn>(K)>...};
    kByFn[static_cast<int>(f)](x, y, n);
  }
  template <size_t... K>
  static void applyGrad(Grad f, const float* g, const float* x, float* y, int64_t n,
                        std::index_sequence<K...>) {
    static constexpr void (*kByGrad[])(const float*, const float*, float*,
                                       int64_t) = {applyGradFn<static_cast<Grad>(K)>...};
    kByGrad[static_cast<int>(f)](g, x, y, n);
  }
  static void apply(Fn f, const float* x, float* y, int64_t n) {
    apply(f, x, y, n, std::make_index_sequence<static_cast<size_t>(Fn::Count)>());
  }
  static void applyGrad(Grad f, const float* g, const float* x, float* y, int64_t n) {
    applyGrad(f, g, x, y, n, std::make_index_sequence<static_cast<size_t>(Grad::Count)>());
  }

  // The sum of term(x[i]) as PyTorch's cascade sum: float partials of at
  // most 16 terms a lane (four accumulators, blocks of 16 steps), totalled
  // in double; @p add folds a vector of x into a partial, @p tail one
  // element of the remainder.
  template <class Add, class Tail>
  __attribute__((always_inline)) static double cascadeSum(const float* x, int64_t n, Add add,
                                                          Tail tail) {
    constexpr int64_t kStep = 4 * W, kBlock = 16 * kStep;
    typename I::D acc = I::dzero();
    int64_t i = 0;
    while (n - i >= kStep) {
      const int64_t end = i + std::min<int64_t>(kBlock, (n - i) / kStep * kStep);
      F s0 = I::set1(0.0f), s1 = s0, s2 = s0, s3 = s0;
      for (; i < end; i += kStep) {
        s0 = add(s0, I::load(x + i));
        s1 = add(s1, I::load(x + i + W));
        s2 = add(s2, I::load(x + i + 2 * W));
        s3 = add(s3, I::load(x + i + 3 * W));
      }
      I::addWidened(I::add(I::add(s0, s1), I::add(s2, s3)), acc);
    }
    double sum = I::dsum(acc);
    for (; i < n; ++i) sum += tail(x[i]);
    return sum;
  }

  static double rowSum(const float* x, int64_t n) {
    return cascadeSum(
        x, n, [](F s, F v) { return I::add(s, v); }, [](float v) { return double{v}; });
  }

  // sum((x[i] - mu)^2) (layer norm's variance).
  static double rowSquaredDeviation(const float* x, int64_t n, float mu) {
    const F m = I::set1(mu);
    return cascadeSum(
        x, n,
        [m](F s, F v) {
          const F d = I::sub(v, m);
          return I::fmadd(d, d, s);
        },
        [mu](float v) {
          const double d = static_cast<double>(v) - mu;
          return d * d;
        });
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
