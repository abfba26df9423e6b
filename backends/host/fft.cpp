// The FFT library slot (include/flagos/fft.h) over KISS FFT (BSD-3-Clause;
// Debian's libkissfft-dev, its header-only C++ class kissfft.hh).
//
// Note [Host FFT]
// ~~~~~~~~~~~~~~~
// Every transform is computed in double precision, float32 ones included
// (read as double, written back rounded once): KISS FFT's float twiddles
// would otherwise put float32 results further from CPU's than torch's own
// tolerances allow on long signals. A plan holds one kissfft per transformed
// dim; execute works in a complex<double> buffer of the full (real-domain)
// extent: it loads the input, runs 1-D transforms line by line along each
// transformed dim (the lines of one dim spread over the kernel pool), and
// stores the output times the descriptor's scale. R2C loads the reals with
// zero imaginary parts and stores the first n/2 + 1 bins when one-sided; C2R
// transforms the other dims first, then completes each line along the
// halved dim by Hermitian symmetry (bin n - k = conj(bin k), which ignores
// the imaginary parts of bins 0 and n/2, as pocketfft and cuFFT do) and
// keeps the real part. A signal length with a prime factor above
// kMaxRadix is declined (KISS FFT's generic butterfly is quadratic in the
// factor; the core then takes the host tier, which CPU serves by
// Bluestein's algorithm). Without the header the plugin has no FFT table.
#include "host.h"

#ifdef FLAGOS_HOST_KISSFFT

#include <kissfft/kissfft.hh>

#include <complex>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/kernels.h"

namespace flagos_host {
namespace {

using Complex = std::complex<double>;

// Largest prime factor a signal length may have (Note [Host FFT]).
constexpr int64_t kMaxRadix = 4096;

int64_t largestPrimeFactor(int64_t n) {
  int64_t largest = 1;
  for (int64_t p = 2; p * p <= n; ++p) {
    while (n % p == 0) {
      largest = p;
      n /= p;
    }
  }
  return n > 1 ? n : largest;
}

// What a plan computes; shared with the tasks in flight, so planDestroy
// never frees it under one.
struct Plan {
  flagosFftDesc desc{};
  int64_t full[FLAGOS_MAX_DIMS] = {};      // the work buffer's extent (real-domain sizes)
  int64_t wstrides[FLAGOS_MAX_DIMS] = {};  // its row-major strides
  int64_t total = 1;                       // its elements
  std::vector<kissfft<double>> ffts;       // per transformed dim, in desc.dims order
};

// Calls fn(tensor offset, work offset) for every index of @p shape, in
// row-major order, with counters instead of a division per element.
template <typename Fn>
void walk(const Plan& p, const int64_t* shape, const int64_t* strides, Fn&& fn) {
  const int nd = p.desc.ndim;
  int64_t n = 1;
  for (int i = 0; i < nd; ++i) n *= shape[i];
  int64_t index[FLAGOS_MAX_DIMS] = {};
  int64_t off = 0, woff = 0;
  for (int64_t e = 0; e < n; ++e) {
    fn(off, woff);
    for (int i = nd - 1; i >= 0; --i) {
      if (++index[i] < shape[i]) {
        off += strides[i];
        woff += p.wstrides[i];
        break;
      }
      off -= strides[i] * (shape[i] - 1);
      woff -= p.wstrides[i] * (shape[i] - 1);
      index[i] = 0;
    }
  }
}

// The 1-D transform k of @p p along its dim, over every line of @p w.
void transformAlong(const Plan& p, int k, Complex* w) {
  const int d = p.desc.dims[k];
  const int64_t n = p.full[d], inner = p.wstrides[d];
  const int64_t lines = p.total / n;
  const kissfft<double>& fft = p.ffts[k];
  const int64_t grain = std::max<int64_t>(1, 16384 / n);
  kernels::parallelFor(lines, grain, [&](int64_t begin, int64_t end) {
    std::vector<Complex> line(n), result(n);
    for (int64_t l = begin; l < end; ++l) {
      Complex* base = w + (l / inner) * n * inner + l % inner;
      for (int64_t j = 0; j < n; ++j) line[j] = base[j * inner];
      fft.transform(line.data(), result.data());
      for (int64_t j = 0; j < n; ++j) base[j * inner] = result[j];
    }
  });
}

template <typename T>
void run(const Plan& p, const void* input, void* output) {
  const flagosFftDesc& d = p.desc;
  std::vector<Complex> work(p.total);
  Complex* w = work.data();
  const T* in = static_cast<const T*>(input);
  T* out = static_cast<T*>(output);
  if (d.kind == FLAGOS_FFT_R2C) {
    walk(p, d.in_sizes, d.in_strides, [&](int64_t o, int64_t wo) { w[wo] = Complex(in[o], 0); });
  } else {
    walk(p, d.in_sizes, d.in_strides,
         [&](int64_t o, int64_t wo) { w[wo] = Complex(in[2 * o], in[2 * o + 1]); });
  }
  const int last = d.num_dims - 1;
  for (int k = 0; k < last; ++k) transformAlong(p, k, w);
  if (d.kind == FLAGOS_FFT_C2R) {
    // Complete each line along the halved dim: bin n - k = conj(bin k).
    const int h = d.dims[last];
    const int64_t n = p.full[h], inner = p.wstrides[h], half = d.in_sizes[h];
    const int64_t lines = p.total / n;
    for (int64_t l = 0; l < lines; ++l) {
      Complex* base = w + (l / inner) * n * inner + l % inner;
      for (int64_t j = half; j < n; ++j) base[j * inner] = std::conj(base[(n - j) * inner]);
    }
  }
  transformAlong(p, last, w);
  const double scale = d.scale;
  if (d.kind == FLAGOS_FFT_C2R) {
    walk(p, d.out_sizes, d.out_strides,
         [&](int64_t o, int64_t wo) { out[o] = static_cast<T>(w[wo].real() * scale); });
  } else {
    walk(p, d.out_sizes, d.out_strides, [&](int64_t o, int64_t wo) {
      out[2 * o] = static_cast<T>(w[wo].real() * scale);
      out[2 * o + 1] = static_cast<T>(w[wo].imag() * scale);
    });
  }
}

// Checks @p d against fft.h's rules; records the message and returns false.
bool validDesc(const flagosFftDesc* d) {
  using flagos_kit::fail;
  if (d->struct_size < offsetof(flagosFftDesc, scale) + sizeof(d->scale))
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host fft planCreate: struct_size %u too small",
                d->struct_size),
           false;
  const bool kind_ok = (d->kind == FLAGOS_FFT_C2C && d->onesided == 0) ||
                       (d->kind == FLAGOS_FFT_R2C && d->inverse == 0) ||
                       (d->kind == FLAGOS_FFT_C2R && d->inverse == 1 && d->onesided == 1);
  const bool dtype_ok = d->dtype == FLAGOS_DTYPE_FLOAT32 || d->dtype == FLAGOS_DTYPE_FLOAT64;
  if (!kind_ok || !dtype_ok || d->ndim < 1 || d->ndim > FLAGOS_MAX_DIMS || d->num_dims < 1 ||
      d->num_dims > d->ndim) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                "host fft planCreate: bad kind %d, inverse %d, onesided %d, dtype %u, ndim %d or "
                "num_dims %d",
                d->kind, d->inverse, d->onesided, d->dtype, d->ndim, d->num_dims),
           false;
  }
  bool seen[FLAGOS_MAX_DIMS] = {};
  for (int k = 0; k < d->num_dims; ++k) {
    const int32_t dim = d->dims[k];
    if (dim < 0 || dim >= d->ndim || seen[dim])
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "host fft planCreate: dims[%d] = %d is out of range or repeated", k, dim),
             false;
    seen[dim] = true;
  }
  const int h = d->dims[d->num_dims - 1];
  for (int i = 0; i < d->ndim; ++i) {
    const bool sizes_ok = d->in_sizes[i] >= 1 && d->out_sizes[i] >= 1 &&
                          (i == h || d->in_sizes[i] == d->out_sizes[i]);
    if (!sizes_ok || d->in_strides[i] < 0 || d->out_strides[i] < 0)
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "host fft planCreate: dim %d has sizes %lld -> %lld, strides %lld -> %lld", i,
                  static_cast<long long>(d->in_sizes[i]), static_cast<long long>(d->out_sizes[i]),
                  static_cast<long long>(d->in_strides[i]),
                  static_cast<long long>(d->out_strides[i])),
             false;
  }
  const int64_t n = d->kind == FLAGOS_FFT_C2R ? d->out_sizes[h] : d->in_sizes[h];
  const int64_t half = n / 2 + 1;
  const bool halved_ok = d->kind == FLAGOS_FFT_C2C   ? d->in_sizes[h] == d->out_sizes[h]
                         : d->kind == FLAGOS_FFT_C2R ? d->in_sizes[h] == half
                                                     : d->out_sizes[h] == (d->onesided ? half : n);
  if (!halved_ok)
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                "host fft planCreate: the halved dim %d has sizes %lld -> %lld", h,
                static_cast<long long>(d->in_sizes[h]), static_cast<long long>(d->out_sizes[h])),
           false;
  return true;
}

}  // namespace
}  // namespace flagos_host

struct flagosFftPlan_st {
  static constexpr uint32_t kMagic = flagos_kit::magicOf("FFTP");
  uint32_t magic = kMagic;
  int32_t device = 0;
  std::shared_ptr<const flagos_host::Plan> plan;
};

namespace flagos_host {
namespace {

flagosStatus_t planCreate(int32_t device, const flagosFftDesc* desc, flagosFftPlan_t* out) {
  return guard("fft planCreate", [&]() -> flagosStatus_t {
    if (desc == nullptr || out == nullptr)
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host fft planCreate: NULL desc or plan");
    if (findDevice("fft planCreate", device) == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
    if (!validDesc(desc)) return FLAGOS_ERROR_INVALID_ARGUMENT;
    auto p = std::make_shared<Plan>();
    std::memcpy(&p->desc, desc, sizeof(p->desc));
    p->desc.struct_size = sizeof(p->desc);
    const flagosFftDesc& d = p->desc;
    for (int i = 0; i < d.ndim; ++i)
      p->full[i] = d.kind == FLAGOS_FFT_C2R ? d.out_sizes[i] : d.in_sizes[i];
    for (int i = d.ndim - 1; i >= 0; --i) {
      p->wstrides[i] = p->total;
      p->total *= p->full[i];
    }
    for (int k = 0; k < d.num_dims; ++k) {
      const int64_t n = p->full[d.dims[k]];
      if (largestPrimeFactor(n) > kMaxRadix)
        return fail(FLAGOS_ERROR_NOT_SUPPORTED,
                    "host fft planCreate: length %lld has a prime factor above %lld",
                    static_cast<long long>(n), static_cast<long long>(kMaxRadix));
      p->ffts.emplace_back(static_cast<size_t>(n), d.inverse != 0);
    }
    auto* handle = new flagosFftPlan_st();
    handle->device = device;
    handle->plan = std::move(p);
    *out = handle;
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t execute(flagosFftPlan_t plan, flagosStream_t stream, const void* input,
                       void* output) {
  return guard("fft execute", [&]() -> flagosStatus_t {
    if (!flagos_kit::validHandle("fft execute", "plan", plan, flagosFftPlan_st::kMagic))
      return FLAGOS_ERROR_INVALID_ARGUMENT;
    if (input == nullptr || output == nullptr)
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host fft execute: NULL input or output");
    std::shared_ptr<const Plan> p = plan->plan;
    const int64_t cost = p->total * static_cast<int64_t>(sizeof(Complex));
    return kernels::submit(
        stream,
        [p, input, output] {
          if (p->desc.dtype == FLAGOS_DTYPE_FLOAT32) {
            run<float>(*p, input, output);
          } else {
            run<double>(*p, input, output);
          }
        },
        cost);
  });
}

flagosStatus_t planDestroy(flagosFftPlan_t plan) {
  return guard("fft planDestroy", [&]() -> flagosStatus_t {
    if (plan == nullptr) return FLAGOS_SUCCESS;
    if (!flagos_kit::validHandle("fft planDestroy", "plan", plan, flagosFftPlan_st::kMagic))
      return FLAGOS_ERROR_INVALID_ARGUMENT;
    plan->magic = 0;
    delete plan;  // tasks in flight keep the Plan itself (shared)
    return FLAGOS_SUCCESS;
  });
}

}  // namespace

const flagosFftTable* fftTable() {
  static const flagosFftTable table = [] {
    flagosFftTable t{};
    t.struct_size = sizeof(t);
    t.library = "kissfft " FLAGOS_HOST_KISSFFT_VERSION;
    t.planCreate = planCreate;
    t.execute = execute;
    t.planDestroy = planDestroy;
    return t;
  }();
  return &table;
}

}  // namespace flagos_host

#else  // !FLAGOS_HOST_KISSFFT

namespace flagos_host {
const flagosFftTable* fftTable() {
  return nullptr;  // built without KISS FFT: torch.fft takes the host tier
}
}  // namespace flagos_host

#endif
