// mm / addmm / bmm / baddbmm / addmm_activation on cuBLASLt, for float32,
// float64, float16 and bfloat16 (accumulating in float32, float64 for
// float64; no TF32, as torch's default float32 matmul precision).
//
// Note [Row-major GEMMs on a column-major library]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// cuBLASLt is column-major; a row-major C = A @ B is the column-major
// C^T = B^T @ A^T, so B goes in as cuBLAS's "A" and A as its "B". A
// row-major operand whose columns are contiguous (cs == 1) is read as the
// column-major transpose with ld = rs and no transpose op; one whose rows are
// contiguous (rs == 1, a transposed view such as a Linear weight's .t()) is
// read in place with the transpose op. Other layouts (both strides > 1) are
// NOT_SUPPORTED: the core retries once with contiguous copies. The output
// needs cs == 1.
//
// addmm's `self`: the output itself (in place, or the same layout), another
// full matrix with cs == 1 (cuBLASLt's C, beta applied), or, with beta == 1,
// a bias vector along the rows (Linear's bias): the BIAS epilogue adds it
// in the GEMM's own kernel (GELU_BIAS / RELU_BIAS for addmm_activation).
// Anything else is NOT_SUPPORTED (the core decomposes addmm).
//
// Plans (descriptors, layouts and the heuristic's algorithm) are cached per
// device by everything that selects them: the heuristic costs tens of
// microseconds, a cached plan a hash lookup.
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>

#include "kernels.h"

namespace flagos_cuda::kernels {
namespace {

constexpr uint64_t kWorkspace = uint64_t{32} << 20;  // cuBLAS's advice for Hopper

struct Mat {
  uint64_t data;  // device address of element (0, 0)
  int64_t rows, cols, rs, cs;
};

// How cuBLAS reads a row-major operand (Note [Row-major GEMMs ...]):
// the op, and the column-major layout (rows, cols, ld) it is read with.
struct ColMajor {
  cublasOperation_t op;
  uint64_t rows, cols;
  int64_t ld;
};

bool colMajorOf(const Mat& m, ColMajor* out) {
  const int64_t r = m.rows, c = m.cols;
  if ((m.cs == 1 || c <= 1) && (r <= 1 || m.rs >= std::max<int64_t>(1, c))) {
    *out = {CUBLAS_OP_N, static_cast<uint64_t>(c), static_cast<uint64_t>(r),
            r <= 1 ? std::max<int64_t>(1, c) : m.rs};
    return true;
  }
  if ((m.rs == 1 || r <= 1) && (c <= 1 || m.cs >= std::max<int64_t>(1, r))) {
    *out = {CUBLAS_OP_T, static_cast<uint64_t>(r), static_cast<uint64_t>(c),
            c <= 1 ? std::max<int64_t>(1, r) : m.cs};
    return true;
  }
  return false;
}

int alignmentOf(uint64_t address) {
  int a = 256;
  while (a > 1 && address % static_cast<uint64_t>(a) != 0) a /= 2;
  return a;
}

struct Types {
  cudaDataType_t data, scale;
  cublasComputeType_t compute;
};

bool typesOf(flagosDtype_t dt, Types* t) {
  switch (dt) {
    case FLAGOS_DTYPE_FLOAT32:
      *t = {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
      return true;
    case FLAGOS_DTYPE_FLOAT64:
      *t = {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
      return true;
    case FLAGOS_DTYPE_FLOAT16:
      *t = {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
      return true;
    case FLAGOS_DTYPE_BFLOAT16:
      *t = {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
      return true;
    default:
      return false;
  }
}

double scalarValue(const flagosScalar& s, double absent) {
  if (s.dtype == 0) return absent;
  const int code = s.dtype >> 8;
  return (code == 2 || code == 4) ? s.f : static_cast<double>(s.i);  // float codes (status.h)
}

// Everything that selects a plan.
using PlanKey = std::tuple<int, uint64_t, uint64_t, uint64_t, int, int, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int, int>;

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const noexcept {
    size_t h = 1469598103934665603ull;
    auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    std::apply([&](auto... v) { (mix(static_cast<uint64_t>(v)), ...); }, k);
    return h;
  }
};

struct Plan {
  std::mutex mu;  // the descriptor's bias pointer is set per call
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

struct Plans {
  std::mutex mu;
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;
};

Plans& plansOf(Device& device) {
  std::lock_guard<std::mutex> lock(device.kernels_mutex);
  if (!device.kernels_state) device.kernels_state = std::make_shared<Plans>();
  return *static_cast<Plans*>(device.kernels_state.get());
}

struct Problem {
  Types types;
  ColMajor a, b;  // cuBLAS's A (our B) and B (our A)
  ColMajor c, d;  // C and D: rows N, cols M
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0, stride_d = 0;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  uint64_t pa = 0, pb = 0, pc = 0, pd = 0, bias = 0;
};

cublasLtMatrixLayout_t layout(const Lt& l, const Types& t, const ColMajor& m, int64_t batch,
                              int64_t stride) {
  cublasLtMatrixLayout_t out = nullptr;
  if (l.cublasLtMatrixLayoutCreate(&out, t.data, m.rows, m.cols, m.ld) != CUBLAS_STATUS_SUCCESS)
    return nullptr;
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    l.cublasLtMatrixLayoutSetAttribute(out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                       sizeof(count));
    l.cublasLtMatrixLayoutSetAttribute(out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                       sizeof(stride));
  }
  return out;
}

// The plan for @p p on @p device, made on first use; nullptr with a message
// (NOT_SUPPORTED when the heuristic finds no algorithm).
Plan* planFor(Device& device, cublasLtHandle_t handle, const Problem& p, flagosStatus_t* status) {
  const Lt& l = *lt();
  const PlanKey key{static_cast<int>(p.types.data),
                    p.d.rows,
                    p.d.cols,
                    p.a.op == CUBLAS_OP_N ? p.a.cols : p.a.rows,
                    static_cast<int>(p.a.op),
                    static_cast<int>(p.b.op),
                    p.a.ld,
                    p.b.ld,
                    p.c.ld,
                    p.d.ld,
                    p.batch,
                    p.stride_a,
                    p.stride_b,
                    p.stride_c,
                    static_cast<int>(p.epilogue),
                    alignmentOf(p.pa),
                    alignmentOf(p.pb),
                    alignmentOf(p.pc),
                    alignmentOf(p.pd)};
  Plans& plans = plansOf(device);
  std::lock_guard<std::mutex> lock(plans.mu);
  auto found = plans.plans.find(key);
  if (found != plans.plans.end()) return found->second.get();
  auto plan = std::make_unique<Plan>();
  if (l.cublasLtMatmulDescCreate(&plan->desc, p.types.compute, p.types.scale) !=
      CUBLAS_STATUS_SUCCESS) {
    *status = fail(FLAGOS_ERROR_DEVICE, "cuda gemm: cublasLtMatmulDescCreate failed");
    return nullptr;
  }
  l.cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &p.a.op,
                                   sizeof(p.a.op));
  l.cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &p.b.op,
                                   sizeof(p.b.op));
  l.cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &p.epilogue,
                                   sizeof(p.epilogue));
  if (p.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    const void* bias = reinterpret_cast<const void*>(p.bias);
    l.cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                     sizeof(bias));
  }
  plan->a = layout(l, p.types, p.a, p.batch, p.stride_a);
  plan->b = layout(l, p.types, p.b, p.batch, p.stride_b);
  plan->c = layout(l, p.types, p.c, p.batch, p.stride_c);
  plan->d = layout(l, p.types, p.d, p.batch, p.stride_d);
  cublasLtMatmulPreference_t pref = nullptr;
  l.cublasLtMatmulPreferenceCreate(&pref);
  l.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                         &kWorkspace, sizeof(kWorkspace));
  const uint32_t align[4] = {
      static_cast<uint32_t>(alignmentOf(p.pa)), static_cast<uint32_t>(alignmentOf(p.pb)),
      static_cast<uint32_t>(alignmentOf(p.pc)), static_cast<uint32_t>(alignmentOf(p.pd))};
  l.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                         &align[0], sizeof(uint32_t));
  l.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                         &align[1], sizeof(uint32_t));
  l.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                         &align[2], sizeof(uint32_t));
  l.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                         &align[3], sizeof(uint32_t));
  cublasLtMatmulHeuristicResult_t result{};
  int found_count = 0;
  const cublasStatus_t st =
      plan->a && plan->b && plan->c && plan->d
          ? l.cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a, plan->b, plan->c, plan->d,
                                             pref, 1, &result, &found_count)
          : CUBLAS_STATUS_INVALID_VALUE;
  l.cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found_count == 0) {
    *status = fail(FLAGOS_ERROR_NOT_SUPPORTED, "cuda gemm: no cuBLASLt algorithm (%s)",
                   ltStatusText(st).c_str());
    return nullptr;  // the descriptors leak once per unsupported shape: rare
  }
  plan->algo = result.algo;
  plan->workspace = result.workspaceSize;
  return plans.plans.emplace(key, std::move(plan)).first->second.get();
}

// The last two dims of @p t (batch 0 of a 3-D tensor).
Mat matOf(const flagosTensor& t) {
  const int r = t.ndim - 2;
  return Mat{reinterpret_cast<uint64_t>(t.data), t.shape[r], t.shape[r + 1], t.strides[r],
             t.strides[r + 1]};
}

bool sameLayout(const flagosTensor& a, const flagosTensor& b) {
  if (a.data != b.data || a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim; ++d)
    if (a.shape[d] != b.shape[d] || (a.shape[d] != 1 && a.strides[d] != b.strides[d])) return false;
  return true;
}

// A bias vector along the output's rows: N elements, contiguous.
bool isRowBias(const flagosTensor& self, int64_t n) {
  if (self.ndim == 1) return self.shape[0] == n && (self.strides[0] == 1 || n == 1);
  if (self.ndim == 2)
    return self.shape[0] == 1 && self.shape[1] == n && (self.strides[1] == 1 || n == 1);
  return false;
}

// kRank: 2 (mm family) or 3 (bmm family); kWithSelf: addmm/baddbmm/addmm_activation;
// kActivation: addmm_activation (scalar use_gelu).
template <int kRank, bool kWithSelf, bool kActivation = false>
flagosStatus_t gemmKernel(flagosStream_t stream, const flagosTensor* o, int32_t no,
                          const flagosTensor* in, int32_t ni, const flagosScalar* sc, int32_t ns) {
  const int first = kWithSelf ? 1 : 0;
  if (no != 1 || ni != first + 2 || (kWithSelf && ns < 2) || (kActivation && ns < 3))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosDtype_t dt = o[0].dtype;
  Problem p;
  if (!typesOf(dt, &p.types)) return FLAGOS_ERROR_NOT_SUPPORTED;
  for (int i = 0; i < ni; ++i)
    if (in[i].dtype != dt) return FLAGOS_ERROR_NOT_SUPPORTED;
  const flagosTensor& out = o[0];
  const flagosTensor& ta = in[first];
  const flagosTensor& tb = in[first + 1];
  if (out.ndim != kRank || ta.ndim != kRank || tb.ndim != kRank) return FLAGOS_ERROR_NOT_SUPPORTED;
  const int r = kRank - 2;
  const int64_t M = out.shape[r], N = out.shape[r + 1], K = ta.shape[r + 1];
  if (K == 0) return FLAGOS_ERROR_NOT_SUPPORTED;  // only beta * self: a later tier
  const Mat A = matOf(ta), B = matOf(tb), C = matOf(out);
  // Note [Row-major GEMMs on a column-major library]: D^T = B^T A^T.
  if (!colMajorOf(B, &p.a) || !colMajorOf(A, &p.b)) return FLAGOS_ERROR_NOT_SUPPORTED;
  if (!(C.cs == 1 || N <= 1) || !(M <= 1 || C.rs >= std::max<int64_t>(1, N)))
    return FLAGOS_ERROR_NOT_SUPPORTED;
  p.d = {CUBLAS_OP_N, static_cast<uint64_t>(N), static_cast<uint64_t>(M),
         M <= 1 ? std::max<int64_t>(1, N) : C.rs};
  p.c = p.d;
  p.pa = B.data;
  p.pb = A.data;
  p.pd = C.data;
  p.pc = C.data;
  if (kRank == 3) {
    p.batch = out.shape[0];
    p.stride_a = tb.strides[0];
    p.stride_b = ta.strides[0];
    p.stride_d = out.strides[0];
    p.stride_c = out.strides[0];
  }
  double beta = kWithSelf ? scalarValue(sc[0], 1.0) : 0.0;
  const double alpha = kWithSelf ? scalarValue(sc[1], 1.0) : 1.0;
  if (kWithSelf && beta != 0.0) {
    const flagosTensor& self = in[0];
    if (sameLayout(self, out)) {
      // C is the output itself: beta scales what is there.
    } else if (kRank == 2 && beta == 1.0 && isRowBias(self, N)) {
      p.epilogue = CUBLASLT_EPILOGUE_BIAS;
      p.bias = reinterpret_cast<uint64_t>(self.data);
      beta = 0.0;
    } else if (self.ndim == kRank && self.shape[r] == M && self.shape[r + 1] == N &&
               (self.strides[r + 1] == 1 || N <= 1) &&
               (M <= 1 || self.strides[r] >= std::max<int64_t>(1, N)) &&
               (kRank == 2 || self.shape[0] == out.shape[0])) {
      p.c = {CUBLAS_OP_N, static_cast<uint64_t>(N), static_cast<uint64_t>(M),
             M <= 1 ? std::max<int64_t>(1, N) : self.strides[r]};
      p.pc = reinterpret_cast<uint64_t>(self.data);
      if (kRank == 3) p.stride_c = self.strides[0];
    } else {
      return FLAGOS_ERROR_NOT_SUPPORTED;
    }
  }
  if (kActivation) {
    const bool gelu = scalarValue(sc[2], 0.0) != 0.0;
    if (p.epilogue == CUBLASLT_EPILOGUE_BIAS)
      p.epilogue = gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_RELU_BIAS;
    else if (beta == 0.0 || !kWithSelf)
      p.epilogue = gelu ? CUBLASLT_EPILOGUE_GELU : CUBLASLT_EPILOGUE_RELU;
    else
      return FLAGOS_ERROR_NOT_SUPPORTED;  // an activation after a full C: a later tier
  }
  const Lt* l = lt();
  if (l == nullptr) return FLAGOS_ERROR_NOT_SUPPORTED;
  Device& device = *stream->device;
  flagosStatus_t st = useContext(device, "gemm");
  if (st != FLAGOS_SUCCESS) return st;
  cublasLtHandle_t handle = ltHandle(device);
  if (handle == nullptr) return FLAGOS_ERROR_DEVICE;
  Plan* plan = planFor(device, handle, p, &st);
  if (plan == nullptr) return st;
  void* workspace = nullptr;
  if (plan->workspace > 0) {
    st = streamScratch(stream, kWorkspace, &workspace);
    if (st != FLAGOS_SUCCESS) return st;
  }
  const float alpha32 = static_cast<float>(alpha), beta32 = static_cast<float>(beta);
  const bool f64 = dt == FLAGOS_DTYPE_FLOAT64;
  const void* alpha_ptr = f64 ? static_cast<const void*>(&alpha) : &alpha32;
  const void* beta_ptr = f64 ? static_cast<const void*>(&beta) : &beta32;
  std::lock_guard<std::mutex> lock(plan->mu);
  if (p.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    const void* bias = reinterpret_cast<const void*>(p.bias);
    l->cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                      sizeof(bias));
  }
  TraceMark mark = traceBegin(stream, FLAGOS_TRACE_KERNEL, "gemm");
  const cublasStatus_t done =
      l->cublasLtMatmul(handle, plan->desc, alpha_ptr, reinterpret_cast<const void*>(p.pa), plan->a,
                        reinterpret_cast<const void*>(p.pb), plan->b, beta_ptr,
                        reinterpret_cast<const void*>(p.pc), plan->c, reinterpret_cast<void*>(p.pd),
                        plan->d, &plan->algo, workspace, plan->workspace, stream->stream);
  traceEnd(stream, mark);
  if (done != CUBLAS_STATUS_SUCCESS) {
    return fail(FLAGOS_ERROR_DEVICE, "cuda gemm: cublasLtMatmul failed: %s",
                ltStatusText(done).c_str());
  }
  return FLAGOS_SUCCESS;
}

}  // namespace

void addGemmKernels(void (*add)(const char* id, flagosKernelFn fn)) {
  add("mm", gemmKernel<2, false>);
  add("addmm", gemmKernel<2, true>);
  add("bmm", gemmKernel<3, false>);
  add("baddbmm", gemmKernel<3, true>);
  add("addmm_activation", gemmKernel<2, true, true>);
}

}  // namespace flagos_cuda::kernels
