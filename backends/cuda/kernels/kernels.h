// Internal header of the cuda plugin's native kernels (the kernel table):
// GEMMs on cuBLASLt, opened at run time like every SDK library.
#pragma once

#include <cublasLt.h>

#include "../cuda_plugin.h"

namespace flagos_cuda::kernels {

// The cuBLASLt entry points the GEMMs use (cublaslt.cpp).
struct Lt {
// clang-format off
#define FLAGOS_CUBLASLT_FUNCTIONS(X) \
  X(cublasLtCreate) X(cublasLtGetVersion) X(cublasLtMatmulDescCreate) \
  X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) \
  X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmulPreferenceCreate) \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)
// clang-format on
#define FLAGOS_CUBLASLT_DECLARE(name) decltype(&::name) name = nullptr;
  FLAGOS_CUBLASLT_FUNCTIONS(FLAGOS_CUBLASLT_DECLARE)
#undef FLAGOS_CUBLASLT_DECLARE
};

// cuBLASLt, opened once; nullptr with the reason recorded as the thread's
// last error (FLAGOS_ERROR_NOT_SUPPORTED: the GEMM takes a later tier).
const Lt* lt();
// The device's cuBLASLt handle, made on first use; nullptr with a message.
cublasLtHandle_t ltHandle(Device& device);
// The stream's scratch of at least @p bytes (cuBLASLt's workspace), kept
// with the stream (flagosStream_st::scratch) and grown when too small.
flagosStatus_t streamScratch(flagosStream_t stream, uint64_t bytes, void** scratch);
// "CUBLAS_STATUS_NOT_SUPPORTED (15)".
std::string ltStatusText(cublasStatus_t status);

// Adds mm, addmm, bmm, baddbmm and addmm_activation (gemm.cpp).
void addGemmKernels(void (*add)(const char* id, flagosKernelFn fn));

}  // namespace flagos_cuda::kernels
