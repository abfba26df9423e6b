// Elementwise kernels: one strided iterator, one loop per arity, and one
// small functor per semantic op.
//
// The core hands pointwise kernels inputs already broadcast to the output's
// shape (stride 0) and cast to one dtype (ops.h), so a kernel only checks
// that dtypes match, then walks the output's index space. Dimensions are
// coalesced first, so contiguous tensors of any rank become one flat loop
// the compiler vectorizes; other layouts run a strided inner loop.
#include <cmath>
#include <cstring>
#include <functional>
#include <type_traits>

#include "iter.h"
#include "kernels.h"
#include "vecmath.h"

namespace flagos_host::kernels {
namespace {

// ------------------------------------------------------------------- loops ---

template <typename To, typename Ti, typename F>
void loop1(char** p, int64_t n, const int64_t* s, const F& f) {
  To* o = reinterpret_cast<To*>(p[0]);
  const Ti* a = reinterpret_cast<const Ti*>(p[1]);
  if (s[0] == sizeof(To) && s[1] == sizeof(Ti)) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<To*>(p[0] + i * s[0]) = f(*reinterpret_cast<const Ti*>(p[1] + i * s[1]));
  }
}

template <typename To, typename Ti, typename F>
void loop2(char** p, int64_t n, const int64_t* s, const F& f) {
  To* o = reinterpret_cast<To*>(p[0]);
  const Ti* a = reinterpret_cast<const Ti*>(p[1]);
  const Ti* b = reinterpret_cast<const Ti*>(p[2]);
  if (s[0] == sizeof(To) && s[1] == sizeof(Ti) && s[2] == sizeof(Ti)) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (s[0] == sizeof(To) && s[1] == sizeof(Ti) && s[2] == 0) {
    const Ti bv = *b;
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
  } else if (s[0] == sizeof(To) && s[1] == 0 && s[2] == sizeof(Ti)) {
    const Ti av = *a;
    for (int64_t i = 0; i < n; ++i) o[i] = f(av, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<To*>(p[0] + i * s[0]) = f(*reinterpret_cast<const Ti*>(p[1] + i * s[1]),
                                                  *reinterpret_cast<const Ti*>(p[2] + i * s[2]));
  }
}

template <typename To, typename T1, typename T2, typename T3, typename F>
void loop3(char** p, int64_t n, const int64_t* s, const F& f) {
  if (s[0] == sizeof(To) && s[1] == sizeof(T1) && s[2] == sizeof(T2) && s[3] == sizeof(T3)) {
    To* o = reinterpret_cast<To*>(p[0]);
    const T1* a = reinterpret_cast<const T1*>(p[1]);
    const T2* b = reinterpret_cast<const T2*>(p[2]);
    const T3* c = reinterpret_cast<const T3*>(p[3]);
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i], c[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<To*>(p[0] + i * s[0]) = f(*reinterpret_cast<const T1*>(p[1] + i * s[1]),
                                                  *reinterpret_cast<const T2*>(p[2] + i * s[2]),
                                                  *reinterpret_cast<const T3*>(p[3] + i * s[3]));
  }
}

// ------------------------------------------------------- kernel templates ---

// Which dtypes an op takes.
enum Types : int { kFloat = 1, kInt = 2, kAll = 3 };

template <typename F>
bool dispatchTypes(int types, flagosDtype_t d, F&& f) {
  if (types & kFloat) {
    if (d == FLAGOS_DTYPE_FLOAT32) {
      f(float{});
      return true;
    }
    if (d == FLAGOS_DTYPE_FLOAT64) {
      f(double{});
      return true;
    }
  }
  if (types & kInt) {
    if (d == FLAGOS_DTYPE_INT32) {
      f(int32_t{});
      return true;
    }
    if (d == FLAGOS_DTYPE_INT64) {
      f(int64_t{});
      return true;
    }
  }
  return false;
}

// The vector-math twin of a unary op (Note [Vector math]): overloads below
// the op structs name one; found by argument-dependent lookup.
template <typename Op>
vec::Fn vecFn(const Op&) {
  return vec::Fn::None;
}

// The same for a binary op over contiguous float32: true when it wrote o.
template <typename Op>
bool vecBinary(const Op&, const float*, const float*, float*, int64_t) {
  return false;
}

// Op: struct with `static constexpr int kTypes`, a constructor from the
// scalars, and `template <class T> T operator()(T...) const`.
template <typename Op>
flagosStatus_t unary(flagosStream_t stream, const flagosTensor* o, int32_t no,
                     const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 1 || ni != 1 || o[0].dtype != in[0].dtype || !sameShape(o[0], in[0]) ||
      o[0].ndim > FLAGOS_MAX_DIMS)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = o[0].dtype;
  if (!dispatchTypes(Op::kTypes, dt, [](auto) {})) return FLAGOS_ERROR_NOT_SUPPORTED;
  Op op(sc, ns);
  Tensor out = copyTensor(o[0]), a = copyTensor(in[0]);
  return submit(stream, [op, out, a, dt] {
    const Tensor* ts[2] = {&out, &a};
    dispatchTypes(Op::kTypes, dt, [&](auto tag) {
      using T = decltype(tag);
      const int es[2] = {sizeof(T), sizeof(T)};
      auto it = makeIter<2>(ts, es);
      const vec::Fn vf = vecFn(op);
      forEach<2>(it, out.numel(), [&](char** p, int64_t n, const int64_t* s) {
        if constexpr (std::is_same_v<T, float>) {
          if (vf != vec::Fn::None && s[0] == 4 && s[1] == 4 &&
              vec::apply(vf, reinterpret_cast<const float*>(p[1]), reinterpret_cast<float*>(p[0]),
                         n))
            return;
        }
        loop1<T, T>(p, n, s, [&](T x) { return op(x); });
      });
    });
  });
}

// Binary ops; Op::kBoolOut: the output is bool (comparisons).
template <typename Op>
flagosStatus_t binary(flagosStream_t stream, const flagosTensor* o, int32_t no,
                      const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 1 || ni != 2 || in[0].dtype != in[1].dtype || !sameShape(o[0], in[0]) ||
      !sameShape(o[0], in[1]))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = in[0].dtype;
  if (Op::kBoolOut ? o[0].dtype != FLAGOS_DTYPE_BOOL : o[0].dtype != dt)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  if (!dispatchTypes(Op::kTypes, dt, [](auto) {})) return FLAGOS_ERROR_NOT_SUPPORTED;
  Op op(sc, ns);
  Tensor out = copyTensor(o[0]), a = copyTensor(in[0]), b = copyTensor(in[1]);
  return submit(stream, [op, out, a, b, dt] {
    const Tensor* ts[3] = {&out, &a, &b};
    dispatchTypes(Op::kTypes, dt, [&](auto tag) {
      using T = decltype(tag);
      using To = std::conditional_t<Op::kBoolOut, bool, T>;
      const int es[3] = {sizeof(To), sizeof(T), sizeof(T)};
      auto it = makeIter<3>(ts, es);
      forEach<3>(it, out.numel(), [&](char** p, int64_t n, const int64_t* s) {
        if constexpr (std::is_same_v<To, float> && std::is_same_v<T, float>) {
          if (s[0] == 4 && s[1] == 4 && s[2] == 4 &&
              vecBinary(op, reinterpret_cast<const float*>(p[1]),
                        reinterpret_cast<const float*>(p[2]), reinterpret_cast<float*>(p[0]), n))
            return;
        }
        loop2<To, T>(p, n, s, [&](T x, T y) { return static_cast<To>(op(x, y)); });
      });
    });
  });
}

// Ternary ops over one dtype, except that Op::kBoolFirst makes input 0 a
// bool mask/condition (where, masked_fill with a tensor value is 2 inputs).
template <typename Op>
flagosStatus_t ternary(flagosStream_t stream, const flagosTensor* o, int32_t no,
                       const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 1 || ni != 3) return FLAGOS_ERROR_NOT_SUPPORTED;
  for (int i = 0; i < 3; ++i)
    if (!sameShape(o[0], in[i])) return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = o[0].dtype;
  for (int i = Op::kBoolFirst ? 1 : 0; i < 3; ++i)
    if (in[i].dtype != dt) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (Op::kBoolFirst && in[0].dtype != FLAGOS_DTYPE_BOOL) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (!dispatchTypes(Op::kTypes, dt, [](auto) {})) return FLAGOS_ERROR_NOT_SUPPORTED;
  Op op(sc, ns);
  Tensor out = copyTensor(o[0]), a = copyTensor(in[0]), b = copyTensor(in[1]),
         c = copyTensor(in[2]);
  return submit(stream, [op, out, a, b, c, dt] {
    const Tensor* ts[4] = {&out, &a, &b, &c};
    dispatchTypes(Op::kTypes, dt, [&](auto tag) {
      using T = decltype(tag);
      using T0 = std::conditional_t<Op::kBoolFirst, bool, T>;
      const int es[4] = {sizeof(T), sizeof(T0), sizeof(T), sizeof(T)};
      auto it = makeIter<4>(ts, es);
      forEach<4>(it, out.numel(), [&](char** p, int64_t n, const int64_t* s) {
        loop3<T, T0, T, T>(p, n, s, [&](T0 x, T y, T z) { return op(x, y, z); });
      });
    });
  });
}

// masked_fill(self, mask, value-scalar): input 1 is a bool mask.
struct MaskedFillTag {};
flagosStatus_t maskedFill(flagosStream_t stream, const flagosTensor* o, int32_t no,
                          const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 1 || ni != 2 || ns != 1 || in[0].dtype != o[0].dtype ||
      in[1].dtype != FLAGOS_DTYPE_BOOL || !sameShape(o[0], in[0]) || !sameShape(o[0], in[1]))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = o[0].dtype;
  if (!dispatchTypes(kAll, dt, [](auto) {}) && dt != FLAGOS_DTYPE_BOOL)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosScalar value = sc[0];
  Tensor out = copyTensor(o[0]), a = copyTensor(in[0]), m = copyTensor(in[1]);
  return submit(stream, [out, a, m, dt, value] {
    const Tensor* ts[3] = {&out, &a, &m};
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const T v = scalarAs<T>(value);
      const int es[3] = {sizeof(T), sizeof(T), 1};
      auto it = makeIter<3>(ts, es);
      forEach<3>(it, out.numel(), [&](char** p, int64_t n, const int64_t* s) {
        for (int64_t i = 0; i < n; ++i) {
          const bool mk = *reinterpret_cast<const bool*>(p[2] + i * s[2]);
          *reinterpret_cast<T*>(p[0] + i * s[0]) =
              mk ? v : *reinterpret_cast<const T*>(p[1] + i * s[1]);
        }
      });
    };
    if (dt == FLAGOS_DTYPE_BOOL)
      run(bool{});
    else
      dispatchTypes(kAll, dt, run);
  });
}

// native_dropout_backward(grad_output, mask(bool), scale).
flagosStatus_t dropoutBackward(flagosStream_t stream, const flagosTensor* o, int32_t no,
                               const flagosTensor* in, int32_t ni, const flagosScalar* sc,
                               int32_t ns) {
  if (no != 1 || ni != 2 || ns != 1 || in[0].dtype != o[0].dtype ||
      in[1].dtype != FLAGOS_DTYPE_BOOL || !sameShape(o[0], in[0]) || !sameShape(o[0], in[1]))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = o[0].dtype;
  if (!dispatchTypes(kFloat, dt, [](auto) {})) return FLAGOS_ERROR_NOT_SUPPORTED;
  const double scale = scalarAs<double>(sc[0], 1.0);
  Tensor out = copyTensor(o[0]), g = copyTensor(in[0]), m = copyTensor(in[1]);
  return submit(stream, [out, g, m, dt, scale] {
    const Tensor* ts[3] = {&out, &g, &m};
    dispatchTypes(kFloat, dt, [&](auto tag) {
      using T = decltype(tag);
      const T sc = static_cast<T>(scale);
      const int es[3] = {sizeof(T), sizeof(T), 1};
      auto it = makeIter<3>(ts, es);
      forEach<3>(it, out.numel(), [&](char** p, int64_t n, const int64_t* s) {
        for (int64_t i = 0; i < n; ++i) {
          const bool mk = *reinterpret_cast<const bool*>(p[2] + i * s[2]);
          *reinterpret_cast<T*>(p[0] + i * s[0]) =
              mk ? *reinterpret_cast<const T*>(p[1] + i * s[1]) * sc : T(0);
        }
      });
    });
  });
}

// ---------------------------------------------------------------- functors ---

template <typename T>
T sigmoidOf(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

#define FLAGOS_UNARY(NAME, TYPES, EXPR)   \
  struct NAME {                           \
    static constexpr int kTypes = TYPES;  \
    NAME(const flagosScalar*, int32_t) {} \
    template <class T>                    \
    T operator()(T x) const {             \
      return EXPR;                        \
    }                                     \
  };

FLAGOS_UNARY(Neg, kAll, -x)
FLAGOS_UNARY(Abs, kAll, x == T(0) ? T(0) : (x < T(0) ? -x : x))  // abs(-0.0) is +0.0
FLAGOS_UNARY(Exp, kFloat, std::exp(x))
FLAGOS_UNARY(Exp2, kFloat, std::exp2(x))
FLAGOS_UNARY(Expm1, kFloat, std::expm1(x))
FLAGOS_UNARY(Log, kFloat, std::log(x))
FLAGOS_UNARY(Log2, kFloat, std::log2(x))
FLAGOS_UNARY(Log10, kFloat, std::log10(x))
FLAGOS_UNARY(Log1p, kFloat, std::log1p(x))
FLAGOS_UNARY(Sqrt, kFloat, std::sqrt(x))
FLAGOS_UNARY(Rsqrt, kFloat, T(1) / std::sqrt(x))
FLAGOS_UNARY(Sin, kFloat, std::sin(x))
FLAGOS_UNARY(Cos, kFloat, std::cos(x))
FLAGOS_UNARY(Tan, kFloat, std::tan(x))
FLAGOS_UNARY(Asin, kFloat, std::asin(x))
FLAGOS_UNARY(Acos, kFloat, std::acos(x))
FLAGOS_UNARY(Atan, kFloat, std::atan(x))
FLAGOS_UNARY(Sinh, kFloat, std::sinh(x))
FLAGOS_UNARY(Cosh, kFloat, std::cosh(x))
FLAGOS_UNARY(Tanh, kFloat, std::tanh(x))
FLAGOS_UNARY(Asinh, kFloat, std::asinh(x))
FLAGOS_UNARY(Acosh, kFloat, std::acosh(x))
FLAGOS_UNARY(Atanh, kFloat, std::atanh(x))
FLAGOS_UNARY(Sigmoid, kFloat, sigmoidOf(x))
FLAGOS_UNARY(Erf, kFloat, std::erf(x))
FLAGOS_UNARY(Erfc, kFloat, std::erfc(x))
FLAGOS_UNARY(Ceil, kFloat, std::ceil(x))
FLAGOS_UNARY(Floor, kFloat, std::floor(x))
FLAGOS_UNARY(Round, kFloat, std::nearbyint(x))
FLAGOS_UNARY(Trunc, kFloat, std::trunc(x))
FLAGOS_UNARY(Frac, kFloat, x - std::trunc(x))
FLAGOS_UNARY(Reciprocal, kFloat, T(1) / x)
FLAGOS_UNARY(Relu, kAll, x > T(0) ? x : (x != x ? x : T(0)))
FLAGOS_UNARY(Silu, kFloat, x / (T(1) + std::exp(-x)))
FLAGOS_UNARY(Mish, kFloat, x* std::tanh(std::log1p(std::exp(x))))
FLAGOS_UNARY(Hardswish, kFloat, x* std::min(std::max(x + T(3), T(0)), T(6)) / T(6))
FLAGOS_UNARY(Hardsigmoid, kFloat, std::min(std::max(x + T(3), T(0)), T(6)) / T(6))
#undef FLAGOS_UNARY

struct Sign {
  static constexpr int kTypes = kAll;
  Sign(const flagosScalar*, int32_t) {}
  template <class T>
  T operator()(T x) const {
    if (x != x) return T(0);
    return static_cast<T>((T(0) < x) - (x < T(0)));
  }
};

struct Gelu {
  static constexpr int kTypes = kFloat;
  bool tanh_approx;
  Gelu(const flagosScalar* s, int32_t n) : tanh_approx(n > 0 && s[0].dtype != 0 && s[0].i == 1) {}
  template <class T>
  T operator()(T x) const {
    if (tanh_approx) {
      const T k = T(0.7978845608028654), c = T(0.044715);
      return T(0.5) * x * (T(1) + std::tanh(k * (x + c * x * x * x)));
    }
    return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
  }
};

vec::Fn vecFn(const Exp&) {
  return vec::Fn::Exp;
}
vec::Fn vecFn(const Log&) {
  return vec::Fn::Log;
}
vec::Fn vecFn(const Tanh&) {
  return vec::Fn::Tanh;
}
vec::Fn vecFn(const Erf&) {
  return vec::Fn::Erf;
}
vec::Fn vecFn(const Sin&) {
  return vec::Fn::Sin;
}
vec::Fn vecFn(const Cos&) {
  return vec::Fn::Cos;
}
vec::Fn vecFn(const Sigmoid&) {
  return vec::Fn::Sigmoid;
}
vec::Fn vecFn(const Silu&) {
  return vec::Fn::Silu;
}
vec::Fn vecFn(const Gelu& g) {
  return g.tanh_approx ? vec::Fn::GeluTanh : vec::Fn::Gelu;
}

struct LeakyRelu {
  static constexpr int kTypes = kFloat;
  double slope;
  LeakyRelu(const flagosScalar* s, int32_t n)
      : slope(n > 0 ? scalarAs<double>(s[0], 0.01) : 0.01) {}
  template <class T>
  T operator()(T x) const {
    return x > T(0) ? x : x * static_cast<T>(slope);
  }
};

struct Elu {
  static constexpr int kTypes = kFloat;
  double alpha, scale, input_scale;
  Elu(const flagosScalar* s, int32_t)
      : alpha(scalarAs<double>(s[0], 1)),
        scale(scalarAs<double>(s[1], 1)),
        input_scale(scalarAs<double>(s[2], 1)) {}
  template <class T>
  T operator()(T x) const {
    return x > T(0) ? x * T(scale) : T(scale * alpha) * (std::exp(x * T(input_scale)) - T(1));
  }
};

struct Softplus {
  static constexpr int kTypes = kFloat;
  double beta, threshold;
  Softplus(const flagosScalar* s, int32_t)
      : beta(scalarAs<double>(s[0], 1)), threshold(scalarAs<double>(s[1], 20)) {}
  template <class T>
  T operator()(T x) const {
    return x * T(beta) > T(threshold) ? x : std::log1p(std::exp(x * T(beta))) / T(beta);
  }
};

// min/max of a value with NaN propagated from x (clamp semantics).
template <class T>
T clampLow(T x, T lo) {  // NaN in x or the bound propagates, as CPU's clamp
  return x != x ? x : (lo != lo || x < lo ? lo : x);
}
template <class T>
T clampHigh(T x, T hi) {
  return x != x ? x : (hi != hi || x > hi ? hi : x);
}

struct Hardtanh {
  static constexpr int kTypes = kAll;
  flagosScalar lo, hi;
  Hardtanh(const flagosScalar* s, int32_t) : lo(s[0]), hi(s[1]) {}
  template <class T>
  T operator()(T x) const {
    return clampHigh(clampLow(x, scalarAs<T>(lo)), scalarAs<T>(hi));
  }
};

struct Clamp {
  static constexpr int kTypes = kAll;
  flagosScalar lo, hi;
  Clamp(const flagosScalar* s, int32_t) : lo(s[0]), hi(s[1]) {}
  template <class T>
  T operator()(T x) const {
    if (lo.dtype != 0) x = clampLow(x, scalarAs<T>(lo));
    if (hi.dtype != 0) x = clampHigh(x, scalarAs<T>(hi));
    return x;
  }
};

struct ClampMin {
  static constexpr int kTypes = kAll;
  flagosScalar lo;
  ClampMin(const flagosScalar* s, int32_t) : lo(s[0]) {}
  template <class T>
  T operator()(T x) const {
    return clampLow(x, scalarAs<T>(lo));
  }
};

struct ClampMax {
  static constexpr int kTypes = kAll;
  flagosScalar hi;
  ClampMax(const flagosScalar* s, int32_t) : hi(s[0]) {}
  template <class T>
  T operator()(T x) const {
    return clampHigh(x, scalarAs<T>(hi));
  }
};

struct Threshold {
  static constexpr int kTypes = kAll;
  flagosScalar th, value;
  Threshold(const flagosScalar* s, int32_t) : th(s[0]), value(s[1]) {}
  template <class T>
  T operator()(T x) const {
    return x <= scalarAs<T>(th) ? scalarAs<T>(value) : x;
  }
};

struct PowScalar {
  static constexpr int kTypes = kFloat;
  double e;
  PowScalar(const flagosScalar* s, int32_t) : e(scalarAs<double>(s[0], 1)) {}
  template <class T>
  T operator()(T x) const {
    if (e == 2.0) return x * x;
    if (e == 0.5) return std::sqrt(x);
    if (e == 1.0) return x;
    if (e == -1.0) return T(1) / x;
    return std::pow(x, static_cast<T>(e));
  }
};

// self (op) alpha * other, with the other operand a scalar.
struct AddScalar {
  static constexpr int kTypes = kAll;
  flagosScalar other, alpha;
  double sign;
  AddScalar(const flagosScalar* s, int32_t n)
      : other(s[0]), alpha(n > 1 ? s[1] : flagosScalar{}), sign(1) {}
  template <class T>
  T operator()(T x) const {
    const T a = alpha.dtype ? scalarAs<T>(alpha) : T(1);
    return static_cast<T>(x + static_cast<T>(sign) * a * scalarAs<T>(other));
  }
};
struct SubScalar : AddScalar {
  SubScalar(const flagosScalar* s, int32_t n) : AddScalar(s, n) { sign = -1; }
};
struct MulScalar {
  static constexpr int kTypes = kAll;
  flagosScalar other;
  MulScalar(const flagosScalar* s, int32_t) : other(s[0]) {}
  template <class T>
  T operator()(T x) const {
    return x * scalarAs<T>(other);
  }
};
struct DivScalar {
  static constexpr int kTypes = kFloat;
  flagosScalar other;
  DivScalar(const flagosScalar* s, int32_t) : other(s[0]) {}
  template <class T>
  T operator()(T x) const {
    return x / scalarAs<T>(other);
  }
};

// Comparisons against a scalar: bool output.
template <typename Cmp>
flagosStatus_t compareScalar(flagosStream_t stream, const flagosTensor* o, int32_t no,
                             const flagosTensor* in, int32_t ni, const flagosScalar* sc,
                             int32_t ns) {
  if (no != 1 || ni != 1 || ns != 1 || o[0].dtype != FLAGOS_DTYPE_BOOL || !sameShape(o[0], in[0]))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = in[0].dtype;
  if (!dispatchTypes(kAll, dt, [](auto) {})) return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosScalar value = sc[0];
  Tensor out = copyTensor(o[0]), a = copyTensor(in[0]);
  return submit(stream, [out, a, dt, value] {
    const Tensor* ts[2] = {&out, &a};
    dispatchTypes(kAll, dt, [&](auto tag) {
      using T = decltype(tag);
      // Compare in double for a floating scalar against an integer tensor.
      const bool wide = std::is_integral_v<T> && value.dtype == FLAGOS_DTYPE_FLOAT64;
      const T v = scalarAs<T>(value);
      const double vd = value.f;
      const int es[2] = {1, sizeof(T)};
      auto it = makeIter<2>(ts, es);
      forEach<2>(it, out.numel(), [&](char** p, int64_t n, const int64_t* s) {
        if (wide) {
          loop1<bool, T>(p, n, s, [&](T x) { return Cmp()(static_cast<double>(x), vd); });
        } else {
          loop1<bool, T>(p, n, s, [&](T x) { return Cmp()(x, v); });
        }
      });
    });
  });
}

#define FLAGOS_BINARY(NAME, TYPES, BOOL_OUT, EXPR) \
  struct NAME {                                    \
    static constexpr int kTypes = TYPES;           \
    static constexpr bool kBoolOut = BOOL_OUT;     \
    NAME(const flagosScalar*, int32_t) {}          \
    template <class T>                             \
    auto operator()(T a, T b) const {              \
      return EXPR;                                 \
    }                                              \
  };

FLAGOS_BINARY(Mul, kAll, false, a* b)
FLAGOS_BINARY(Div, kFloat, false, a / b)
FLAGOS_BINARY(Maximum, kAll, false, a != a ? a : (b != b ? b : (a > b ? a : b)))
FLAGOS_BINARY(Minimum, kAll, false, a != a ? a : (b != b ? b : (a < b ? a : b)))
FLAGOS_BINARY(Pow, kFloat, false, std::pow(a, b))
FLAGOS_BINARY(Atan2, kFloat, false, std::atan2(a, b))
FLAGOS_BINARY(Eq, kAll, true, a == b)
FLAGOS_BINARY(Ne, kAll, true, a != b)
FLAGOS_BINARY(Lt, kAll, true, a < b)
FLAGOS_BINARY(Le, kAll, true, a <= b)
FLAGOS_BINARY(Gt, kAll, true, a > b)
FLAGOS_BINARY(Ge, kAll, true, a >= b)
FLAGOS_BINARY(SigmoidBackward, kFloat, false, a* b*(T(1) - b))
FLAGOS_BINARY(TanhBackward, kFloat, false, a*(T(1) - b * b))
FLAGOS_BINARY(SiluBackward, kFloat, false, a* sigmoidOf(b) * (T(1) + b * (T(1) - sigmoidOf(b))))
FLAGOS_BINARY(HardsigmoidBackward, kFloat, false, (b > T(-3) && b < T(3)) ? a / T(6) : T(0))
FLAGOS_BINARY(HardswishBackward, kFloat, false,
              b < T(-3) ? T(0) : (b <= T(3) ? a * (b / T(3) + T(0.5)) : a))
#undef FLAGOS_BINARY

// a + alpha * b (sub: alpha negated). One branch-free expression for every
// alpha (1 * b and -1 * b are exact), so the loop vectorizes.
struct Add {
  static constexpr int kTypes = kAll;
  static constexpr bool kBoolOut = false;
  double kf;
  int64_t ki;
  Add(const flagosScalar* s, int32_t n, int sign = 1)
      : kf(sign * (n > 0 ? scalarAs<double>(s[0], 1.0) : 1.0)),
        ki(sign * (n > 0 ? scalarAs<int64_t>(s[0], 1) : 1)) {}
  template <class T>
  T operator()(T a, T b) const {
    const T k = std::is_floating_point_v<T> ? static_cast<T>(kf) : static_cast<T>(ki);
    return static_cast<T>(a + k * b);
  }
};
struct Sub : Add {
  Sub(const flagosScalar* s, int32_t n) : Add(s, n, -1) {}
};

// Backward ops comparing `self` (b) against scalars.
struct ThresholdBackward {
  static constexpr int kTypes = kAll;
  static constexpr bool kBoolOut = false;
  flagosScalar th;
  ThresholdBackward(const flagosScalar* s, int32_t) : th(s[0]) {}
  template <class T>
  T operator()(T g, T x) const {
    return x <= scalarAs<T>(th) ? T(0) : g;
  }
};
struct HardtanhBackward {
  static constexpr int kTypes = kFloat;
  static constexpr bool kBoolOut = false;
  double lo, hi;
  HardtanhBackward(const flagosScalar* s, int32_t)
      : lo(scalarAs<double>(s[0])), hi(scalarAs<double>(s[1])) {}
  template <class T>
  T operator()(T g, T x) const {
    return (x <= T(lo) || x >= T(hi)) ? T(0) : g;
  }
};
struct LeakyReluBackward {
  static constexpr int kTypes = kFloat;
  static constexpr bool kBoolOut = false;
  double slope;
  LeakyReluBackward(const flagosScalar* s, int32_t) : slope(scalarAs<double>(s[0], 0.01)) {}
  template <class T>
  T operator()(T g, T x) const {
    return x > T(0) ? g : g * T(slope);
  }
};
struct GeluBackward {
  static constexpr int kTypes = kFloat;
  static constexpr bool kBoolOut = false;
  bool tanh_approx;
  GeluBackward(const flagosScalar* s, int32_t n)
      : tanh_approx(n > 0 && s[0].dtype != 0 && s[0].i == 1) {}
  template <class T>
  T operator()(T g, T x) const {
    if (tanh_approx) {
      const T k = T(0.7978845608028654), c = T(0.044715);
      const T inner = k * (x + c * x * x * x);
      const T t = std::tanh(inner);
      const T left = T(0.5) * x, right = T(1) + t;
      const T dinner = k * (T(1) + T(3) * c * x * x);
      return g * (T(0.5) * right + left * (T(1) - t * t) * dinner);
    }
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.7071067811865476)));
    const T pdf = std::exp(T(-0.5) * x * x) * T(0.3989422804014327);
    return g * (cdf + x * pdf);
  }
};

bool vecBinary(const GeluBackward& op, const float* g, const float* x, float* o, int64_t n) {
  return vec::applyGrad(op.tanh_approx ? vec::Grad::GeluTanhBackward : vec::Grad::GeluBackward, g,
                        x, o, n);
}
bool vecBinary(const SiluBackward&, const float* g, const float* x, float* o, int64_t n) {
  return vec::applyGrad(vec::Grad::SiluBackward, g, x, o, n);
}

// Ternary.
struct Where {
  static constexpr int kTypes = kAll;
  static constexpr bool kBoolFirst = true;
  Where(const flagosScalar*, int32_t) {}
  template <class T>
  T operator()(bool c, T a, T b) const {
    return c ? a : b;
  }
};
struct Addcmul {
  static constexpr int kTypes = kAll;
  static constexpr bool kBoolFirst = false;
  flagosScalar value;
  Addcmul(const flagosScalar* s, int32_t) : value(s[0]) {}
  template <class T>
  T operator()(T a, T b, T c) const {
    return static_cast<T>(a + scalarAs<T>(value) * b * c);
  }
};
struct Addcdiv {
  static constexpr int kTypes = kFloat;
  static constexpr bool kBoolFirst = false;
  flagosScalar value;
  Addcdiv(const flagosScalar* s, int32_t) : value(s[0]) {}
  template <class T>
  T operator()(T a, T b, T c) const {
    return a + scalarAs<T>(value) * b / c;
  }
};
struct LerpTensor {
  static constexpr int kTypes = kFloat;
  static constexpr bool kBoolFirst = false;
  LerpTensor(const flagosScalar*, int32_t) {}
  template <class T>
  T operator()(T a, T b, T w) const {
    return std::abs(w) < T(0.5) ? a + w * (b - a) : b - (b - a) * (T(1) - w);
  }
};
struct Lerp {
  static constexpr int kTypes = kFloat;
  static constexpr bool kBoolOut = false;
  double w;
  Lerp(const flagosScalar* s, int32_t) : w(scalarAs<double>(s[0])) {}
  template <class T>
  T operator()(T a, T b) const {
    const T wt = T(w);
    return std::abs(wt) < T(0.5) ? a + wt * (b - a) : b - (b - a) * (T(1) - wt);
  }
};

}  // namespace

void addPointwiseKernels(void (*add)(const char*, flagosKernelFn)) {
  add("neg", unary<Neg>);
  add("abs", unary<Abs>);
  add("exp", unary<Exp>);
  add("exp2", unary<Exp2>);
  add("expm1", unary<Expm1>);
  add("log", unary<Log>);
  add("log2", unary<Log2>);
  add("log10", unary<Log10>);
  add("log1p", unary<Log1p>);
  add("sqrt", unary<Sqrt>);
  add("rsqrt", unary<Rsqrt>);
  add("sin", unary<Sin>);
  add("cos", unary<Cos>);
  add("tan", unary<Tan>);
  add("asin", unary<Asin>);
  add("acos", unary<Acos>);
  add("atan", unary<Atan>);
  add("sinh", unary<Sinh>);
  add("cosh", unary<Cosh>);
  add("tanh", unary<Tanh>);
  add("asinh", unary<Asinh>);
  add("acosh", unary<Acosh>);
  add("atanh", unary<Atanh>);
  add("sigmoid", unary<Sigmoid>);
  add("erf", unary<Erf>);
  add("erfc", unary<Erfc>);
  add("ceil", unary<Ceil>);
  add("floor", unary<Floor>);
  add("round", unary<Round>);
  add("trunc", unary<Trunc>);
  add("frac", unary<Frac>);
  add("sign", unary<Sign>);
  add("reciprocal", unary<Reciprocal>);
  add("relu", unary<Relu>);
  add("silu", unary<Silu>);
  add("mish", unary<Mish>);
  add("hardswish", unary<Hardswish>);
  add("hardsigmoid", unary<Hardsigmoid>);
  add("gelu", unary<Gelu>);
  add("leaky_relu", unary<LeakyRelu>);
  add("elu", unary<Elu>);
  add("softplus", unary<Softplus>);
  add("hardtanh", unary<Hardtanh>);
  add("clamp", unary<Clamp>);
  add("clamp_min", unary<ClampMin>);
  add("clamp_max", unary<ClampMax>);
  add("threshold", unary<Threshold>);
  add("pow_scalar", unary<PowScalar>);
  add("add_scalar", unary<AddScalar>);
  add("sub_scalar", unary<SubScalar>);
  add("mul_scalar", unary<MulScalar>);
  add("div_scalar", unary<DivScalar>);
  add("add", binary<Add>);
  add("sub", binary<Sub>);
  add("mul", binary<Mul>);
  add("div", binary<Div>);
  add("maximum", binary<Maximum>);
  add("minimum", binary<Minimum>);
  add("pow", binary<Pow>);
  add("atan2", binary<Atan2>);
  add("eq", binary<Eq>);
  add("ne", binary<Ne>);
  add("lt", binary<Lt>);
  add("le", binary<Le>);
  add("gt", binary<Gt>);
  add("ge", binary<Ge>);
  add("lerp", binary<Lerp>);
  add("threshold_backward", binary<ThresholdBackward>);
  add("sigmoid_backward", binary<SigmoidBackward>);
  add("tanh_backward", binary<TanhBackward>);
  add("silu_backward", binary<SiluBackward>);
  add("gelu_backward", binary<GeluBackward>);
  add("hardswish_backward", binary<HardswishBackward>);
  add("hardsigmoid_backward", binary<HardsigmoidBackward>);
  add("hardtanh_backward", binary<HardtanhBackward>);
  add("leaky_relu_backward", binary<LeakyReluBackward>);
  add("eq_scalar", compareScalar<std::equal_to<>>);
  add("ne_scalar", compareScalar<std::not_equal_to<>>);
  add("lt_scalar", compareScalar<std::less<>>);
  add("le_scalar", compareScalar<std::less_equal<>>);
  add("gt_scalar", compareScalar<std::greater<>>);
  add("ge_scalar", compareScalar<std::greater_equal<>>);
  add("where", ternary<Where>);
  add("addcmul", ternary<Addcmul>);
  add("addcdiv", ternary<Addcdiv>);
  add("lerp_tensor", ternary<LerpTensor>);
  add("masked_fill", maskedFill);
  add("native_dropout_backward", dropoutBackward);
}

}  // namespace flagos_host::kernels
