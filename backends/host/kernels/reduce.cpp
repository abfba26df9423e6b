// Reductions over a set of dims (sum, mean, amax, amin, max/min with
// indices, argmax/argmin) and the softmax family over one dim.
//
// The core passes the reduced dims as a bitmask of the input's dims and
// allocates the output with or without the kept size-1 dims (keepdim). A
// reduction walks the output's elements (in parallel) and, for each, the
// reduced sub-space: a flat pointer loop when the reduced dims are the
// innermost and contiguous, an odometer otherwise. Floating sums accumulate
// in double.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "accumulate.h"
#include "kernels.h"
#include "vecmath.h"

namespace flagos_host::kernels {
namespace {

// The iteration plan of one reduction.
struct Plan {
  int nk = 0, nr = 0;               // kept / reduced dims
  int64_t kshape[FLAGOS_MAX_DIMS];  // kept sizes (input order)
  int64_t kin[FLAGOS_MAX_DIMS];     // input strides of kept dims
  int64_t kout[FLAGOS_MAX_DIMS];    // output strides of kept dims
  int64_t rshape[FLAGOS_MAX_DIMS];  // reduced sizes
  int64_t rin[FLAGOS_MAX_DIMS];     // input strides of reduced dims
  int64_t kout2[FLAGOS_MAX_DIMS];   // strides of kept dims in a 2nd output
  int64_t nout = 1, nred = 1;
  bool inner_flat = false;  // reduced elements are in[base + i]
};

// False when the output does not fit the input and mask.
bool makePlan(const Tensor& in, const Tensor& out, uint64_t mask, Plan& p) {
  const int nd = in.ndim;
  const bool keep = out.ndim == nd;
  int od = 0;
  for (int d = 0; d < nd; ++d) {
    const bool red = mask >> d & 1u;
    if (red) {
      p.rshape[p.nr] = in.shape[d];
      p.rin[p.nr] = in.strides[d];
      p.nred *= in.shape[d];
      ++p.nr;
      if (keep) {
        if (out.shape[od] != 1) return false;
        ++od;
      }
    } else {
      if (od >= out.ndim || out.shape[od] != in.shape[d]) return false;
      p.kshape[p.nk] = in.shape[d];
      p.kin[p.nk] = in.strides[d];
      p.kout[p.nk] = out.strides[od];
      p.nout *= in.shape[d];
      ++p.nk;
      ++od;
    }
  }
  if (od != out.ndim) return false;
  // Flat when the reduced dims are row-major contiguous among themselves.
  int64_t expect = 1;
  p.inner_flat = true;
  for (int i = p.nr - 1; i >= 0; --i) {
    if (p.rshape[i] != 1 && p.rin[i] != expect) p.inner_flat = false;
    expect *= p.rshape[i];
  }
  return true;
}

// visit(offset_in_elements, flat_index) for every reduced element of one
// output element, in row-major order of the reduced dims.
template <typename F>
void forReduced(const Plan& p, int64_t base, const F& visit) {
  if (p.inner_flat) {
    for (int64_t i = 0; i < p.nred; ++i) visit(base + i, i);
    return;
  }
  int64_t coord[FLAGOS_MAX_DIMS] = {};
  int64_t off = base;
  for (int64_t i = 0; i < p.nred; ++i) {
    visit(off, i);
    for (int d = p.nr - 1; d >= 0; --d) {
      off += p.rin[d];
      if (++coord[d] < p.rshape[d]) break;
      off -= p.rin[d] * p.rshape[d];
      coord[d] = 0;
    }
  }
}

// body(in_offset, out_offset) for each output element, in parallel.
template <typename F>
void forOutputs(const Plan& p, const F& body) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(p.nred, 1));
  parallelFor(p.nout, grain, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      int64_t rem = o, ioff = 0, ooff = 0;
      for (int d = p.nk - 1; d >= 0; --d) {
        const int64_t c = rem % p.kshape[d];
        rem /= p.kshape[d];
        ioff += c * p.kin[d];
        ooff += c * p.kout[d];
      }
      body(ioff, ooff);
    }
  });
}

// A contiguous input viewed as [outer, red, inner] with the middle reduced
// and inner > 1 (e.g. a sum over dim 0): reading a column per output would
// stride through memory, so each task sums whole rows of a column block
// into an accumulator row instead. False when the layout is not that.
struct ColumnPlan {
  int64_t outer = 1, red = 1, inner = 1;
};
bool makeColumnPlan(const Tensor& in, const Tensor& out, uint64_t mask, ColumnPlan& c) {
  if (!in.contiguous() || !out.contiguous() || in.ndim == 0) return false;
  int first = -1, last = -1;
  for (int d = 0; d < in.ndim; ++d) {
    if (!(mask >> d & 1u)) continue;
    if (first < 0) first = d;
    if (last >= 0 && last != d - 1) return false;  // not one block
    last = d;
  }
  if (first < 0 || last == in.ndim - 1) return false;  // nothing, or inner-flat
  for (int d = 0; d < in.ndim; ++d) {
    if (d < first)
      c.outer *= in.shape[d];
    else if (d <= last)
      c.red *= in.shape[d];
    else
      c.inner *= in.shape[d];
  }
  return c.inner > 1 && c.red > 0;
}

template <typename T, typename TO, typename A, bool kMean>
void sumColumns(const ColumnPlan& c, const T* src, TO* dst) {
  constexpr int64_t kBlock = 512;  // accumulator row: 4 KiB of double
  const int64_t blocks = (c.inner + kBlock - 1) / kBlock;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(c.red * kBlock, 1));
  // float rows are summed in float over 16 rows at a time, then into the
  // double accumulators (as rowSum): float adds vectorize twice as wide.
  using Part = std::conditional_t<std::is_same_v<T, float>, float, A>;
  constexpr int64_t kRows = std::is_same_v<T, float> ? 16 : 1;
  parallelFor(c.outer * blocks, grain, [&](int64_t b, int64_t e) {
    A acc[kBlock];
    Part part[kBlock];
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / blocks, k0 = (t % blocks) * kBlock;
      const int64_t w = std::min(kBlock, c.inner - k0);
      for (int64_t k = 0; k < w; ++k) acc[k] = 0;
      const T* base = src + o * c.red * c.inner + k0;
      for (int64_t r0 = 0; r0 < c.red; r0 += kRows) {
        for (int64_t k = 0; k < w; ++k) part[k] = 0;
        for (int64_t r = r0; r < std::min(c.red, r0 + kRows); ++r) {
          const T* row = base + r * c.inner;
          for (int64_t k = 0; k < w; ++k) part[k] += static_cast<Part>(row[k]);
        }
        for (int64_t k = 0; k < w; ++k) acc[k] += static_cast<A>(part[k]);
      }
      TO* out = dst + o * c.inner + k0;
      for (int64_t k = 0; k < w; ++k)
        out[k] = kMean ? static_cast<TO>(static_cast<double>(acc[k]) / static_cast<double>(c.red))
                       : static_cast<TO>(acc[k]);
    }
  });
}

uint64_t dimsMask(const flagosScalar* sc, int32_t ns, int idx, int ndim) {
  if (idx >= ns || sc[idx].dtype == 0) return ndim ? ((uint64_t{1} << ndim) - 1) : 0;
  return static_cast<uint64_t>(sc[idx].i);
}

template <typename T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

// sum / mean. Scalars: dims, keepdim, dtype.
template <bool kMean>
flagosStatus_t sumKernel(flagosStream_t stream, const flagosTensor* o, int32_t no,
                         const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != 1 || ni != 1) return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t idt = in[0].dtype, odt = o[0].dtype;
  const bool floating = idt == FLAGOS_DTYPE_FLOAT32 || idt == FLAGOS_DTYPE_FLOAT64;
  const bool integral =
      idt == FLAGOS_DTYPE_INT32 || idt == FLAGOS_DTYPE_INT64 || idt == FLAGOS_DTYPE_BOOL;
  if (floating ? odt != idt : !(integral && odt == FLAGOS_DTYPE_INT64 && !kMean))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor out = copyTensor(o[0]), a = copyTensor(in[0]);
  Plan plan;
  const uint64_t mask = dimsMask(sc, ns, 0, a.ndim);
  if (!makePlan(a, out, mask, plan)) return FLAGOS_ERROR_NOT_SUPPORTED;
  ColumnPlan columns;
  const bool by_columns = makeColumnPlan(a, out, mask, columns);
  return submit(stream, [out, a, plan, idt, by_columns, columns] {
    auto run = [&](auto tag, auto otag) {
      using T = decltype(tag);
      using TO = decltype(otag);
      using A = Acc<TO>;
      const T* src = a.ptr<T>();
      TO* dst = out.ptr<TO>();
      if (by_columns) {
        sumColumns<T, TO, A, kMean>(columns, src, dst);
        return;
      }
      forOutputs(plan, [&](int64_t ioff, int64_t ooff) {
        A acc = 0;
        if (plan.inner_flat) {
          double vsum;
          if constexpr (std::is_same_v<T, float>) {
            if (vec::rowSum(src + ioff, plan.nred, &vsum)) {
              acc = vsum;
            } else {
              acc = sumFlat<T, A>(src + ioff, plan.nred);
            }
          } else {
            acc = sumFlat<T, A>(src + ioff, plan.nred);
          }
        } else {
          forReduced(plan, ioff, [&](int64_t off, int64_t) { acc += static_cast<A>(src[off]); });
        }
        if (kMean) {
          dst[ooff] = static_cast<TO>(static_cast<double>(acc) / static_cast<double>(plan.nred));
        } else {
          dst[ooff] = static_cast<TO>(acc);
        }
      });
    };
    switch (idt) {
      case FLAGOS_DTYPE_FLOAT32:
        run(float{}, float{});
        break;
      case FLAGOS_DTYPE_FLOAT64:
        run(double{}, double{});
        break;
      case FLAGOS_DTYPE_INT32:
        run(int32_t{}, int64_t{});
        break;
      case FLAGOS_DTYPE_INT64:
        run(int64_t{}, int64_t{});
        break;
      case FLAGOS_DTYPE_BOOL:
        run(bool{}, int64_t{});
        break;
    }
  });
}

template <typename T>
bool isNan(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(x);
  return false;
}

// `better(a, b)`: a should replace b. NaN wins and sticks.
template <bool kMax, typename T>
bool better(T a, T b) {
  if (isNan(b)) return false;
  if (isNan(a)) return true;
  return kMax ? a > b : a < b;
}

// amax / amin (dims, keepdim) and max_all / min_all (no scalars).
template <bool kMax>
flagosStatus_t extremeKernel(flagosStream_t stream, const flagosTensor* o, int32_t no,
                             const flagosTensor* in, int32_t ni, const flagosScalar* sc,
                             int32_t ns) {
  if (no != 1 || ni != 1 || o[0].dtype != in[0].dtype) return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = in[0].dtype;
  if (!dispatchNumeric(dt, [](auto) {})) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor out = copyTensor(o[0]), a = copyTensor(in[0]);
  Plan plan;
  if (!makePlan(a, out, dimsMask(sc, ns, 0, a.ndim), plan) || plan.nred == 0)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  return submit(stream, [out, a, plan, dt] {
    dispatchNumeric(dt, [&](auto tag) {
      using T = decltype(tag);
      const T* src = a.ptr<T>();
      T* dst = out.ptr<T>();
      forOutputs(plan, [&](int64_t ioff, int64_t ooff) {
        bool first = true;
        T best{};
        forReduced(plan, ioff, [&](int64_t off, int64_t) {
          const T v = src[off];
          if (first || better<kMax>(v, best)) best = v;
          first = false;
        });
        dst[ooff] = best;
      });
    });
  });
}

// max.dim / min.dim -> (values, indices) and argmax / argmin -> indices.
// Scalars: dim (absent: all dims, flattened index), keepdim.
template <bool kMax, bool kValues>
flagosStatus_t argKernel(flagosStream_t stream, const flagosTensor* o, int32_t no,
                         const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  if (no != (kValues ? 2 : 1) || ni != 1 || ns < 1) return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosTensor& idx_t = o[kValues ? 1 : 0];
  if (idx_t.dtype != FLAGOS_DTYPE_INT64 || (kValues && o[0].dtype != in[0].dtype))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = in[0].dtype;
  if (!dispatchNumeric(dt, [](auto) {})) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor a = copyTensor(in[0]), idx = copyTensor(idx_t);
  Tensor vals = kValues ? copyTensor(o[0]) : idx;
  const uint64_t mask = sc[0].dtype == 0 ? (a.ndim ? (uint64_t{1} << a.ndim) - 1 : 0)
                                         : (a.ndim ? uint64_t{1} << sc[0].i : 0);
  Plan plan, vplan;
  if (!makePlan(a, idx, mask, plan) || !makePlan(a, vals, mask, vplan) || plan.nred == 0)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  // The values output has the same kept dims, maybe other strides.
  std::memcpy(plan.kout2, vplan.kout, sizeof(plan.kout2));
  return submit(stream, [a, idx, vals, plan, dt] {
    dispatchNumeric(dt, [&](auto tag) {
      using T = decltype(tag);
      const T* src = a.ptr<T>();
      int64_t* di = idx.ptr<int64_t>();
      T* dv = kValues ? vals.ptr<T>() : nullptr;
      const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(plan.nred, 1));
      parallelFor(plan.nout, grain, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          int64_t rem = o, ioff = 0, ooff = 0, voff = 0;
          for (int d = plan.nk - 1; d >= 0; --d) {
            const int64_t c = rem % plan.kshape[d];
            rem /= plan.kshape[d];
            ioff += c * plan.kin[d];
            ooff += c * plan.kout[d];
            voff += c * plan.kout2[d];
          }
          bool first = true;
          T best{};
          int64_t best_i = 0;
          forReduced(plan, ioff, [&](int64_t off, int64_t i) {
            const T v = src[off];
            if (first || better<kMax>(v, best)) {
              best = v;
              best_i = i;
            }
            first = false;
          });
          di[ooff] = best_i;
          if (kValues) dv[voff] = best;
        }
      });
    });
  });
}

// One contiguous float32 row of softmax / log_softmax on the vector path
// (Note [Vector math]); false: take the scalar loop. x and y may alias.
template <bool kLog>
bool softmaxRowVec(const float* x, float* y, int64_t len) {
  float mx;
  if (!vec::rowMax(x, len, &mx)) return false;
  if (std::isinf(mx) && mx < 0) mx = 0;  // all -inf: avoid inf - inf
  double sum = 0;
  vec::expShiftSum(x, mx, kLog ? nullptr : y, len, &sum);
  if constexpr (kLog) {
    const float shift = mx + static_cast<float>(std::log(sum));
    for (int64_t i = 0; i < len; ++i) y[i] = x[i] - shift;
  } else {
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < len; ++i) y[i] *= inv;
  }
  return true;
}

// Softmax family over one dim. Scalars: dim, half_to_float / input_dtype.
enum class SoftmaxKind { Forward, LogForward, Backward, LogBackward };

template <SoftmaxKind kKind>
flagosStatus_t softmaxKernel(flagosStream_t stream, const flagosTensor* o, int32_t no,
                             const flagosTensor* in, int32_t ni, const flagosScalar* sc,
                             int32_t ns) {
  constexpr bool kBackward = kKind == SoftmaxKind::Backward || kKind == SoftmaxKind::LogBackward;
  if (no != 1 || ni != (kBackward ? 2 : 1) || ns < 2) return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = o[0].dtype;
  for (int i = 0; i < ni; ++i)
    if (in[i].dtype != dt || in[i].ndim != o[0].ndim) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (!kBackward && sc[1].i != 0) return FLAGOS_ERROR_NOT_SUPPORTED;  // half_to_float
  if (kBackward && sc[1].dtype != 0 && sc[1].i != dt) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (!dispatchFloating(dt, [](auto) {})) return FLAGOS_ERROR_NOT_SUPPORTED;
  Tensor out = copyTensor(o[0]), x = copyTensor(in[0]);
  Tensor y = kBackward ? copyTensor(in[1]) : Tensor{};
  const int nd = out.ndim;
  const int dim = nd == 0 ? 0 : static_cast<int>(sc[0].i);
  if (nd > 0 && (dim < 0 || dim >= nd)) return FLAGOS_ERROR_NOT_SUPPORTED;
  return submit(stream, [out, x, y, dim, nd, dt] {
    dispatchFloating(dt, [&](auto tag) {
      using T = decltype(tag);
      const int64_t len = nd ? out.shape[dim] : 1;
      const int64_t so = nd ? out.strides[dim] : 1, sx = nd ? x.strides[dim] : 1;
      const int64_t sy = kBackward && nd ? y.strides[dim] : 1;
      // Outer index space: every dim but `dim`.
      int64_t outer = 1, oshape[FLAGOS_MAX_DIMS], ostr[3][FLAGOS_MAX_DIMS];
      int no2 = 0;
      for (int d = 0; d < nd; ++d) {
        if (d == dim) continue;
        oshape[no2] = out.shape[d];
        ostr[0][no2] = out.strides[d];
        ostr[1][no2] = x.strides[d];
        ostr[2][no2] = kBackward ? y.strides[d] : 0;
        outer *= out.shape[d];
        ++no2;
      }
      if (len == 0 || out.numel() == 0) return;
      parallelFor(outer, std::max<int64_t>(1, 8192 / len), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          int64_t rem = r, oo = 0, ox = 0, oy = 0;
          for (int d = no2 - 1; d >= 0; --d) {
            const int64_t c = rem % oshape[d];
            rem /= oshape[d];
            oo += c * ostr[0][d];
            ox += c * ostr[1][d];
            oy += c * ostr[2][d];
          }
          T* po = out.ptr<T>() + oo;
          const T* px = x.ptr<T>() + ox;
          if constexpr (!kBackward) {
            if constexpr (std::is_same_v<T, float>) {
              if (sx == 1 && so == 1 &&
                  softmaxRowVec<kKind == SoftmaxKind::LogForward>(px, po, len))
                continue;
            }
            T mx = -std::numeric_limits<T>::infinity();
            for (int64_t i = 0; i < len; ++i) mx = std::max(mx, px[i * sx]);
            if (std::isinf(mx) && mx < 0) mx = 0;  // all -inf: avoid inf - inf
            double sum = 0;
            if constexpr (kKind == SoftmaxKind::Forward) {
              // exp once, into the output; then scale (x and out may alias).
              for (int64_t i = 0; i < len; ++i) {
                const T e = std::exp(px[i * sx] - mx);
                po[i * so] = e;
                sum += e;
              }
              const T inv = static_cast<T>(1.0 / sum);
              for (int64_t i = 0; i < len; ++i) po[i * so] *= inv;
            } else {
              for (int64_t i = 0; i < len; ++i) sum += std::exp(px[i * sx] - mx);
              const T shift = mx + static_cast<T>(std::log(sum));
              for (int64_t i = 0; i < len; ++i) po[i * so] = px[i * sx] - shift;
            }
          } else {
            // x = grad_output, y = output of the forward.
            const T* py = y.ptr<T>() + oy;
            double dot = 0;
            const bool flat = sx == 1 && sy == 1;
            if constexpr (kKind == SoftmaxKind::Backward) {
              if (flat)
                dot = dotFlat(px, py, len);
              else
                for (int64_t i = 0; i < len; ++i)
                  dot += static_cast<double>(px[i * sx]) * py[i * sy];
              for (int64_t i = 0; i < len; ++i)
                po[i * so] = static_cast<T>(py[i * sy] * (px[i * sx] - dot));
            } else {
              if (flat)
                dot = sumFlat<T, double>(px, len);
              else
                for (int64_t i = 0; i < len; ++i) dot += px[i * sx];
              for (int64_t i = 0; i < len; ++i)
                po[i * so] =
                    static_cast<T>(px[i * sx] - std::exp(static_cast<double>(py[i * sy])) * dot);
            }
          }
        }
      });
    });
  });
}

}  // namespace

void addReduceKernels(void (*add)(const char*, flagosKernelFn)) {
  add("sum", sumKernel<false>);
  add("mean", sumKernel<true>);
  add("amax", extremeKernel<true>);
  add("amin", extremeKernel<false>);
  add("max_all", extremeKernel<true>);
  add("min_all", extremeKernel<false>);
  add("argmax", argKernel<true, false>);
  add("argmin", argKernel<false, false>);
  add("max_dim", argKernel<true, true>);
  add("min_dim", argKernel<false, true>);
  add("softmax", softmaxKernel<SoftmaxKind::Forward>);
  add("log_softmax", softmaxKernel<SoftmaxKind::LogForward>);
  add("softmax_backward", softmaxKernel<SoftmaxKind::Backward>);
  add("log_softmax_backward", softmaxKernel<SoftmaxKind::LogBackward>);
}

}  // namespace flagos_host::kernels
