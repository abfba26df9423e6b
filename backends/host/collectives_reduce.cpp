// Element-wise reductions for host-shm: dst = op(srcs...) per element.
//
// Work goes in blocks of kBlock elements through a local accumulator, so a
// destination that is also a source is fine and each element is rounded
// once: float16 and bfloat16 accumulate in float, integers in 64 bits
// (sum and prod wrap like two's-complement arithmetic of the element type,
// avg is the exact sum divided by the number of ranks, truncated toward
// zero). Sources are summed in rank order, so every rank computes the same
// bits. Floating-point max/min propagate NaN.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "collectives.h"
#include "half.h"

namespace flagos_host::coll {
namespace {

constexpr uint64_t kBlock = 512;

// How an element type loads into and stores from its accumulator.
template <typename T, typename A>
struct Plain {
  using Elem = T;
  using Acc = A;
  static A load(T v) { return static_cast<A>(v); }
  static T store(A v) { return static_cast<T>(v); }
};
struct Half {
  using Elem = uint16_t;
  using Acc = float;
  static float load(uint16_t v) { return halfToFloat(v); }
  static uint16_t store(float v) { return floatToHalf(v); }
};
struct BFloat {
  using Elem = uint16_t;
  using Acc = float;
  static float load(uint16_t v) { return bf16ToFloat(v); }
  static uint16_t store(float v) { return floatToBf16(v); }
};

// The unsigned type of an integer accumulator, for wrap-around arithmetic
// (spelled out: std::make_unsigned does not know __int128 in strict modes).
template <typename A>
struct Unsigned;
template <>
struct Unsigned<int64_t> {
  using type = uint64_t;
};
template <>
struct Unsigned<__int128> {
  using type = unsigned __int128;
};

template <typename A>
A combine(flagosRedOp_t op, A x, A y) {
  if constexpr (std::is_floating_point_v<A>) {
    switch (op) {
      case FLAGOS_RED_PROD:
        return x * y;
      case FLAGOS_RED_MAX:
        return std::isnan(y) || y > x ? y : x;
      case FLAGOS_RED_MIN:
        return std::isnan(y) || y < x ? y : x;
      default:
        return x + y;  // SUM, AVG
    }
  } else {
    using U = typename Unsigned<A>::type;  // wrap-around, never signed overflow
    switch (op) {
      case FLAGOS_RED_PROD:
        return static_cast<A>(static_cast<U>(x) * static_cast<U>(y));
      case FLAGOS_RED_MAX:
        return y > x ? y : x;
      case FLAGOS_RED_MIN:
        return y < x ? y : x;
      default:
        return static_cast<A>(static_cast<U>(x) + static_cast<U>(y));
    }
  }
}

// The loop, specialised per operator so that the inner loops vectorise.
template <typename Traits, flagosRedOp_t kOp>
void reduceLoop(char* dst, const char* const* srcs, int32_t nsrcs, uint64_t n) {
  using T = typename Traits::Elem;
  using A = typename Traits::Acc;
  A acc[kBlock];
  for (uint64_t begin = 0; begin < n; begin += kBlock) {
    const uint64_t m = n - begin < kBlock ? n - begin : kBlock;
    const T* s0 = reinterpret_cast<const T*>(srcs[0]) + begin;
    for (uint64_t i = 0; i < m; ++i) acc[i] = Traits::load(s0[i]);
    for (int32_t r = 1; r < nsrcs; ++r) {
      const T* s = reinterpret_cast<const T*>(srcs[r]) + begin;
      for (uint64_t i = 0; i < m; ++i) acc[i] = combine<A>(kOp, acc[i], Traits::load(s[i]));
    }
    if constexpr (kOp == FLAGOS_RED_AVG) {
      for (uint64_t i = 0; i < m; ++i) acc[i] = acc[i] / static_cast<A>(nsrcs);
    }
    char* d = dst + begin * sizeof(T);
    for (uint64_t i = 0; i < m; ++i) {
      const T v = Traits::store(acc[i]);
      std::memcpy(d + i * sizeof(T), &v, sizeof(T));  // dst may be unaligned user memory
    }
  }
}

template <typename Traits>
void reduceAs(char* dst, const char* const* srcs, int32_t nsrcs, uint64_t n, flagosRedOp_t op) {
  switch (op) {
    case FLAGOS_RED_SUM:
      return reduceLoop<Traits, FLAGOS_RED_SUM>(dst, srcs, nsrcs, n);
    case FLAGOS_RED_PROD:
      return reduceLoop<Traits, FLAGOS_RED_PROD>(dst, srcs, nsrcs, n);
    case FLAGOS_RED_MAX:
      return reduceLoop<Traits, FLAGOS_RED_MAX>(dst, srcs, nsrcs, n);
    case FLAGOS_RED_MIN:
      return reduceLoop<Traits, FLAGOS_RED_MIN>(dst, srcs, nsrcs, n);
    default:
      return reduceLoop<Traits, FLAGOS_RED_AVG>(dst, srcs, nsrcs, n);
  }
}

}  // namespace

bool reducible(flagosDtype_t dtype) {
  switch (dtype) {
    case FLAGOS_DTYPE_FLOAT32:
    case FLAGOS_DTYPE_FLOAT64:
    case FLAGOS_DTYPE_FLOAT16:
    case FLAGOS_DTYPE_BFLOAT16:
    case FLAGOS_DTYPE_INT32:
    case FLAGOS_DTYPE_INT64:
    case FLAGOS_DTYPE_INT8:
    case FLAGOS_DTYPE_UINT8:
      return true;
    default:
      return false;
  }
}

void reduceInto(char* dst, const char* const* srcs, int32_t nsrcs, uint64_t n, flagosDtype_t dtype,
                flagosRedOp_t op) {
  switch (dtype) {
    case FLAGOS_DTYPE_FLOAT32:
      return reduceAs<Plain<float, float>>(dst, srcs, nsrcs, n, op);
    case FLAGOS_DTYPE_FLOAT64:
      return reduceAs<Plain<double, double>>(dst, srcs, nsrcs, n, op);
    case FLAGOS_DTYPE_FLOAT16:
      return reduceAs<Half>(dst, srcs, nsrcs, n, op);
    case FLAGOS_DTYPE_BFLOAT16:
      return reduceAs<BFloat>(dst, srcs, nsrcs, n, op);
    // Integers accumulate in 64 bits: the exact sum of up to kMaxRanks
    // 32-bit values fits, so avg is exact; sum and prod wrap when stored.
    case FLAGOS_DTYPE_INT32:
      return reduceAs<Plain<int32_t, int64_t>>(dst, srcs, nsrcs, n, op);
    case FLAGOS_DTYPE_INT8:
      return reduceAs<Plain<int8_t, int64_t>>(dst, srcs, nsrcs, n, op);
    case FLAGOS_DTYPE_UINT8:
      return reduceAs<Plain<uint8_t, int64_t>>(dst, srcs, nsrcs, n, op);
    case FLAGOS_DTYPE_INT64:
      return reduceAs<Plain<int64_t, __int128>>(dst, srcs, nsrcs, n, op);
    default:
      throw CommError(FLAGOS_ERROR_INTERNAL, "host-shm: reduceInto: unexpected dtype");
  }
}

}  // namespace flagos_host::coll
