// torch.fft's primitives (aten::_fft_c2c, _fft_r2c, _fft_c2r) as native
// kernels over the plugin's FFT library slot (fft_library.h).
//
// Note [FFT through the library slot]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every torch.fft function (fft, ifft, rfft, irfft, hfft, ihfft, their 2-D
// and n-D forms, stft and istft) reaches the device as one of three ATen
// primitives; the catalog names them fft_c2c, fft_r2c and fft_c2r. When the
// plugin has an FFT table, the kernel index serves those ids with the
// kernels below: the bridge has already inferred the output (shape, dtype,
// strides, from ATen's meta function) and allocated it, so a kernel only
// turns the descriptors into a flagosFftDesc, takes the plan for it from a
// per-process cache (made once: vendor plans are slow to make and cheap to
// run) and enqueues it. Normalization (norm="ortho"/"forward") is the
// descriptor's scale. Anything the descriptor cannot say (a negative stride,
// a precision other than float/double, no transformed dim) and any plan the
// library declines is FLAGOS_ERROR_NOT_SUPPORTED: the bridge then takes its
// next tier, the host, and counts it, as for any native kernel that
// declines. The catalog passes `dim` twice, as its length and as the list
// (16 entries, the last repeated), because the order matters: R2C and C2R
// halve the last dim listed.
#include "dispatch/tiers/native/fft_library.h"

#include <cmath>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime/backend.h"

namespace flagos::semantic {
namespace {

// The catalog's scalars (ops/catalog.yaml, fft_*): dim's length, dim as 16
// entries, normalization, then forward / onesided / last_dim_size.
constexpr int kDimCount = 0;
constexpr int kDimList = 1;
constexpr int kDimListLen = 16;
constexpr int kNormalization = kDimList + kDimListLen;
constexpr int kLast = kNormalization + 1;
constexpr int kNumScalars = kLast + 1;

// at::native::fft_norm_mode.
constexpr int64_t kNormNone = 0;
constexpr int64_t kNormByRootN = 1;
constexpr int64_t kNormByN = 2;

// Plans made so far, by device and descriptor bytes; a declined descriptor
// is kept as a null plan so the library is asked once. Bounded: the oldest
// plan is destroyed past kMaxPlans (the plugin defers it past pending work).
class PlanCache {
 public:
  static constexpr size_t kMaxPlans = 256;

  // The plan for @p desc on @p device in @p plan, made on first use
  // (nullptr: the library declines it). Any other failure is returned, not
  // cached: the bridge raises it with the plugin's message.
  flagosStatus_t get(const flagosFftTable& fft, int32_t device, const flagosFftDesc& desc,
                     flagosFftPlan_t* plan) {
    std::string key(reinterpret_cast<const char*>(&device), sizeof(device));
    key.append(reinterpret_cast<const char*>(&desc), sizeof(desc));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      *plan = it->second;
      return FLAGOS_SUCCESS;
    }
    *plan = nullptr;
    const flagosStatus_t s = fft.planCreate(device, &desc, plan);
    if (s == FLAGOS_ERROR_NOT_SUPPORTED) {
      *plan = nullptr;
    } else if (s != FLAGOS_SUCCESS) {
      return s;
    }
    plans_.emplace(key, *plan);
    order_.push_back(key);
    if (order_.size() > kMaxPlans) {
      auto old = plans_.find(order_.front());
      if (old->second) fft.planDestroy(old->second);
      plans_.erase(old);
      order_.pop_front();
    }
    return FLAGOS_SUCCESS;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, flagosFftPlan_t> plans_;
  std::deque<std::string> order_;
};

PlanCache& planCache() {
  static auto* cache = new PlanCache();  // never destroyed: plans outlive static destructors
  return *cache;
}

// The real precision of a side, or 0 for anything the slot does not take.
flagosDtype_t realType(flagosDtype_t t) {
  if (t == FLAGOS_DTYPE_FLOAT32 || t == FLAGOS_DTYPE_COMPLEX64) return FLAGOS_DTYPE_FLOAT32;
  if (t == FLAGOS_DTYPE_FLOAT64 || t == FLAGOS_DTYPE_COMPLEX128) return FLAGOS_DTYPE_FLOAT64;
  return 0;
}

bool isComplex(flagosDtype_t t) {
  return t == FLAGOS_DTYPE_COMPLEX64 || t == FLAGOS_DTYPE_COMPLEX128;
}

// Fills @p d from the call; false: not expressible (-> the next tier).
bool describe(flagosFftKind_t kind, const flagosTensor& out, const flagosTensor& in,
              const flagosScalar* scalars, flagosFftDesc* d) {
  std::memset(d, 0, sizeof(*d));
  d->struct_size = sizeof(*d);
  d->kind = kind;
  if (in.ndim < 1 || in.ndim != out.ndim || in.ndim > FLAGOS_MAX_DIMS) return false;
  const bool complex_in = kind != FLAGOS_FFT_R2C, complex_out = kind != FLAGOS_FFT_C2R;
  if (isComplex(in.dtype) != complex_in || isComplex(out.dtype) != complex_out) return false;
  d->dtype = realType(in.dtype);
  if (d->dtype == 0 || realType(out.dtype) != d->dtype) return false;
  d->ndim = in.ndim;
  for (int i = 0; i < in.ndim; ++i) {
    if (in.strides[i] < 0 || out.strides[i] < 0) return false;
    d->in_sizes[i] = in.shape[i];
    d->out_sizes[i] = out.shape[i];
    d->in_strides[i] = in.strides[i];
    d->out_strides[i] = out.strides[i];
  }
  const int64_t count = scalars[kDimCount].i;
  if (count < 1 || count > kDimListLen || count > in.ndim) return false;
  d->num_dims = static_cast<int32_t>(count);
  uint32_t seen = 0;
  double n = 1;
  for (int k = 0; k < count; ++k) {
    int64_t dim = scalars[kDimList + k].i;
    if (dim < 0) dim += in.ndim;
    if (dim < 0 || dim >= in.ndim || (seen >> dim & 1u)) return false;
    seen |= 1u << dim;
    d->dims[k] = static_cast<int32_t>(dim);
    n *= static_cast<double>(kind == FLAGOS_FFT_C2R ? out.shape[dim] : in.shape[dim]);
  }
  // Batch dims and all but the halved dim keep their size.
  const int32_t last = d->dims[count - 1];
  for (int i = 0; i < in.ndim; ++i)
    if (i != last && in.shape[i] != out.shape[i]) return false;
  switch (kind) {
    case FLAGOS_FFT_C2C:
      d->inverse = scalars[kLast].i ? 0 : 1;  // the schema's `forward`
      if (in.shape[last] != out.shape[last]) return false;
      break;
    case FLAGOS_FFT_R2C:
      d->onesided = scalars[kLast].i ? 1 : 0;
      if (out.shape[last] != (d->onesided ? in.shape[last] / 2 + 1 : in.shape[last])) return false;
      break;
    default:  // C2R: the output's last dim is last_dim_size
      d->inverse = 1;
      d->onesided = 1;
      if (out.shape[last] != scalars[kLast].i || in.shape[last] != out.shape[last] / 2 + 1)
        return false;
      break;
  }
  switch (scalars[kNormalization].i) {
    case kNormNone:
      d->scale = 1.0;
      break;
    case kNormByRootN:
      d->scale = 1.0 / std::sqrt(n);
      break;
    case kNormByN:
      d->scale = 1.0 / n;
      break;
    default:
      return false;
  }
  return true;
}

flagosStatus_t runFft(flagosFftKind_t kind, flagosStream_t stream, const flagosTensor* outputs,
                      int32_t num_outputs, const flagosTensor* inputs, int32_t num_inputs,
                      const flagosScalar* scalars, int32_t num_scalars) {
  const flagosFftTable* fft = flagos::backend().tables.fft;
  if (!fft || num_outputs != 1 || num_inputs != 1 || num_scalars != kNumScalars)
    return FLAGOS_ERROR_NOT_SUPPORTED;
  flagosFftDesc desc;
  if (!describe(kind, outputs[0], inputs[0], scalars, &desc)) return FLAGOS_ERROR_NOT_SUPPORTED;
  const int32_t device = flagos::physicalDevice(flagos::currentDevice());
  flagosFftPlan_t plan = nullptr;
  if (flagosStatus_t s = planCache().get(*fft, device, desc, &plan)) return s;
  if (!plan) return FLAGOS_ERROR_NOT_SUPPORTED;
  return fft->execute(plan, stream, inputs[0].data, outputs[0].data);
}

flagosStatus_t fftC2C(flagosStream_t stream, const flagosTensor* outputs, int32_t num_outputs,
                      const flagosTensor* inputs, int32_t num_inputs, const flagosScalar* scalars,
                      int32_t num_scalars) {
  return runFft(FLAGOS_FFT_C2C, stream, outputs, num_outputs, inputs, num_inputs, scalars,
                num_scalars);
}

flagosStatus_t fftR2C(flagosStream_t stream, const flagosTensor* outputs, int32_t num_outputs,
                      const flagosTensor* inputs, int32_t num_inputs, const flagosScalar* scalars,
                      int32_t num_scalars) {
  return runFft(FLAGOS_FFT_R2C, stream, outputs, num_outputs, inputs, num_inputs, scalars,
                num_scalars);
}

flagosStatus_t fftC2R(flagosStream_t stream, const flagosTensor* outputs, int32_t num_outputs,
                      const flagosTensor* inputs, int32_t num_inputs, const flagosScalar* scalars,
                      int32_t num_scalars) {
  return runFft(FLAGOS_FFT_C2R, stream, outputs, num_outputs, inputs, num_inputs, scalars,
                num_scalars);
}

}  // namespace

flagosKernelFn fftLibraryKernel(const char* id) {
  if (std::strcmp(id, "fft_c2c") == 0) return fftC2C;
  if (std::strcmp(id, "fft_r2c") == 0) return fftR2C;
  if (std::strcmp(id, "fft_c2r") == 0) return fftC2R;
  return nullptr;
}

}  // namespace flagos::semantic
