// Small ops models meet on the side: bitwise_not / logical_not, isposinf /
// isneginf, tril / triu (masks) and any / all (bool outputs). Strided, every
// numeric dtype and bool; serial except through the shared iterator.
#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "iter.h"
#include "kernels.h"

namespace flagos_host::kernels {
namespace {

// f(tag) for bool and the numeric dtypes.
template <typename F>
bool dispatchAll(flagosDtype_t d, F&& f) {
  if (d == FLAGOS_DTYPE_BOOL) {
    f(bool{});
    return true;
  }
  if (d == FLAGOS_DTYPE_UINT8) {
    f(uint8_t{});
    return true;
  }
  if (d == FLAGOS_DTYPE_INT8) {
    f(int8_t{});
    return true;
  }
  if (d == FLAGOS_DTYPE_INT16) {
    f(int16_t{});
    return true;
  }
  return dispatchNumeric(d, f);
}

// out = f(x) elementwise; kBool: the output is bool.
template <typename Op>
flagosStatus_t unary(flagosStream_t stream, const flagosTensor* o, int32_t no,
                     const flagosTensor* in, int32_t ni, const flagosScalar*, int32_t) {
  if (no != 1 || ni != 1 || !sameShape(o[0], in[0])) return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = in[0].dtype;
  if (!dispatchAll(dt, [](auto) {})) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (Op::kBoolOut ? o[0].dtype != FLAGOS_DTYPE_BOOL : o[0].dtype != dt)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  if (!Op::kFloat && (dt == FLAGOS_DTYPE_FLOAT32 || dt == FLAGOS_DTYPE_FLOAT64))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor out = copyTensor(o[0]), x = copyTensor(in[0]);
  return submit(stream, [out, x, dt] {
    dispatchAll(dt, [&](auto tag) {
      using T = decltype(tag);
      using To = std::conditional_t<Op::kBoolOut, bool, T>;
      const Tensor* ts[2] = {&out, &x};
      const int es[2] = {static_cast<int>(sizeof(To)), static_cast<int>(sizeof(T))};
      forEach<2>(makeIter<2>(ts, es), out.numel(), [&](char** p, int64_t n, const int64_t* s) {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<To*>(p[0] + i * s[0]) =
              static_cast<To>(Op::f(*reinterpret_cast<const T*>(p[1] + i * s[1])));
      });
    });
  });
}

struct BitwiseNot {
  static constexpr bool kBoolOut = false, kFloat = false;
  template <typename T>
  static T f(T v) {
    if constexpr (std::is_same_v<T, bool>)
      return !v;
    else if constexpr (std::is_floating_point_v<T>)
      return v;  // refused before
    else
      return static_cast<T>(~v);
  }
};
struct LogicalNot {
  static constexpr bool kBoolOut = true, kFloat = true;
  template <typename T>
  static bool f(T v) {
    return !v;
  }
};
struct IsPosInf {
  static constexpr bool kBoolOut = true, kFloat = true;
  template <typename T>
  static bool f(T v) {
    if constexpr (std::is_floating_point_v<T>)
      return std::isinf(v) && v > 0;
    else
      return false;
  }
};
struct IsNegInf {
  static constexpr bool kBoolOut = true, kFloat = true;
  template <typename T>
  static bool f(T v) {
    if constexpr (std::is_floating_point_v<T>)
      return std::isinf(v) && v < 0;
    else
      return false;
  }
};

// tril/triu(self, diagonal) over the last two dims; out may alias self.
template <bool kLower>
flagosStatus_t triangle(flagosStream_t stream, const flagosTensor* o, int32_t no,
                        const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 1 || ni != 1 || ns != 1 || !sameShape(o[0], in[0]) || o[0].ndim < 2 ||
      o[0].dtype != in[0].dtype || !dispatchAll(in[0].dtype, [](auto) {}))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor out = copyTensor(o[0]), x = copyTensor(in[0]);
  const int64_t diag = sc[0].i;
  return submit(stream, [out, x, diag] {
    dispatchAll(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      const int nd = x.ndim;
      const int64_t R = x.shape[nd - 2], C = x.shape[nd - 1];
      const int64_t B = (R * C) != 0 ? x.numel() / (R * C) : 0;
      for (int64_t b = 0; b < B; ++b) {
        int64_t rem = b, xo = 0, oo = 0;
        for (int d = nd - 3; d >= 0; --d) {
          const int64_t c = rem % x.shape[d];
          rem /= x.shape[d];
          xo += c * x.strides[d];
          oo += c * out.strides[d];
        }
        for (int64_t i = 0; i < R; ++i)
          for (int64_t j = 0; j < C; ++j) {
            const bool keep = kLower ? (j - i <= diag) : (j - i >= diag);
            const T v = x.ptr<T>()[xo + i * x.strides[nd - 2] + j * x.strides[nd - 1]];
            out.ptr<T>()[oo + i * out.strides[nd - 2] + j * out.strides[nd - 1]] = keep ? v : T(0);
          }
      }
    });
  });
}

// any/all(self, dims, keepdim) -> bool.
template <bool kAny>
flagosStatus_t anyAll(flagosStream_t stream, const flagosTensor* o, int32_t no,
                      const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 1 || ni != 1 || ns != 2 || o[0].dtype != FLAGOS_DTYPE_BOOL ||
      !dispatchAll(in[0].dtype, [](auto) {}))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor out = copyTensor(o[0]), x = copyTensor(in[0]);
  const uint64_t mask = sc[0].dtype == 0 ? (x.ndim ? (uint64_t{1} << x.ndim) - 1 : 0)
                                         : static_cast<uint64_t>(sc[0].i);
  // Output strides per input dim (0 for reduced dims).
  std::array<int64_t, FLAGOS_MAX_DIMS> ostr{};
  const bool keep = out.ndim == x.ndim;
  int od = 0, kept = 0;
  for (int d = 0; d < x.ndim; ++d) {
    const bool red = mask >> d & 1u;
    if (!red) ++kept;
    if (red && !keep) continue;
    if (od >= out.ndim) return FLAGOS_ERROR_NOT_SUPPORTED;
    ostr[d] = red ? 0 : out.strides[od];
    if (!red && out.shape[od] != x.shape[d]) return FLAGOS_ERROR_NOT_SUPPORTED;
    ++od;
  }
  if (od != out.ndim) return FLAGOS_ERROR_NOT_SUPPORTED;
  return submit(stream, [out, x, ostr0 = ostr] {
    const int64_t n_out = out.numel();
    // Initialise every output element (strided) via an odometer over out.
    {
      int64_t coord[FLAGOS_MAX_DIMS] = {};
      for (int64_t k = 0; k < n_out; ++k) {
        int64_t off = 0;
        for (int d = 0; d < out.ndim; ++d) off += coord[d] * out.strides[d];
        out.ptr<bool>()[off] = !kAny;
        for (int d = out.ndim - 1; d >= 0; --d) {
          if (++coord[d] < out.shape[d]) break;
          coord[d] = 0;
        }
      }
    }
    dispatchAll(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = x.numel();
      int64_t coord[FLAGOS_MAX_DIMS] = {};
      for (int64_t k = 0; k < n; ++k) {
        int64_t xo = 0, oo = 0;
        for (int d = 0; d < x.ndim; ++d) {
          xo += coord[d] * x.strides[d];
          oo += coord[d] * ostr0[d];
        }
        const bool v = x.ptr<T>()[xo] != T(0);
        bool& r = out.ptr<bool>()[oo];
        r = kAny ? (r || v) : (r && v);
        for (int d = x.ndim - 1; d >= 0; --d) {
          if (++coord[d] < x.shape[d]) break;
          coord[d] = 0;
        }
      }
    });
  });
}

}  // namespace

void addMiscKernels(void (*add)(const char*, flagosKernelFn)) {
  add("bitwise_not", unary<BitwiseNot>);
  add("logical_not", unary<LogicalNot>);
  add("isposinf", unary<IsPosInf>);
  add("isneginf", unary<IsNegInf>);
  add("tril", triangle<true>);
  add("triu", triangle<false>);
  add("any", anyAll<true>);
  add("all", anyAll<false>);
}

}  // namespace flagos_host::kernels
