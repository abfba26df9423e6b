// cuBLASLt opened at run time (libcublasLt.so.13 from the nvidia-cublas
// wheel; torch's CUDA build has usually loaded it already), one handle per
// device, and the per-stream workspace its matmuls take.
#include <cinttypes>

#include "kernels.h"

namespace flagos_cuda::kernels {
namespace {

struct Opened {
  Lt lt;
  std::string reason;  // "" when usable
};

Opened& opened() {
  static Opened* o = [] {
    auto* o = new Opened();  // never freed: GEMMs may run at process exit
    std::string tried;
    void* lib = openLibrary({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, &tried);
    if (lib == nullptr) {
      o->reason = "cuBLASLt not found: tried " + tried;
      return o;
    }
#define FLAGOS_CUBLASLT_BIND(name)                                        \
  if (!bind(lib, #name, &o->lt.name)) {                                   \
    o->reason = std::string("the cuBLASLt library found lacks ") + #name; \
    return o;                                                             \
  }
    FLAGOS_CUBLASLT_FUNCTIONS(FLAGOS_CUBLASLT_BIND)
#undef FLAGOS_CUBLASLT_BIND
    return o;
  }();
  return *o;
}

struct Handles {
  std::mutex mu;
  std::vector<cublasLtHandle_t> handles;  // per physical device
};

Handles& handles() {
  static Handles* h = new Handles;  // never destroyed: used until exit
  return *h;
}

}  // namespace

const Lt* lt() {
  Opened& o = opened();
  if (o.reason.empty()) return &o.lt;
  fail(FLAGOS_ERROR_NOT_SUPPORTED, "cuda gemm: %s", o.reason.c_str());
  return nullptr;
}

std::string ltStatusText(cublasStatus_t status) {
  return "cuBLAS status " + std::to_string(static_cast<int>(status));
}

cublasLtHandle_t ltHandle(Device& device) {
  const Lt* l = lt();
  if (l == nullptr) return nullptr;
  Handles& h = handles();
  std::lock_guard<std::mutex> lock(h.mu);
  if (h.handles.size() <= static_cast<size_t>(device.index))
    h.handles.resize(static_cast<size_t>(device.index) + 1, nullptr);
  cublasLtHandle_t& slot = h.handles[static_cast<size_t>(device.index)];
  if (slot == nullptr) {
    if (useContext(device, "gemm") != FLAGOS_SUCCESS) return nullptr;
    const cublasStatus_t st = l->cublasLtCreate(&slot);
    if (st != CUBLAS_STATUS_SUCCESS) {
      slot = nullptr;
      fail(FLAGOS_ERROR_DEVICE, "cuda gemm: cublasLtCreate failed: %s", ltStatusText(st).c_str());
    }
  }
  return slot;
}

flagosStatus_t streamScratch(flagosStream_t stream, uint64_t bytes, void** scratch) {
  std::lock_guard<std::mutex> lock(stream->scratch_mutex);
  if (stream->scratch_bytes < bytes) {
    flagosStatus_t st = useContext(*stream->device, "gemm");
    if (st != FLAGOS_SUCCESS) return st;
    if (stream->scratch != nullptr) {
      // The old workspace may still be in use by queued work on this stream.
      cu().cuStreamSynchronize(stream->stream);
      cu().cuMemFree(reinterpret_cast<CUdeviceptr>(stream->scratch));
      stream->scratch = nullptr;
      stream->scratch_bytes = 0;
    }
    CUdeviceptr p = 0;
    st = check(cu().cuMemAlloc(&p, bytes), "gemm", "cuMemAlloc (workspace)");
    if (st != FLAGOS_SUCCESS) return st;
    stream->scratch = reinterpret_cast<void*>(p);
    stream->scratch_bytes = bytes;
  }
  *scratch = stream->scratch;
  return FLAGOS_SUCCESS;
}

}  // namespace flagos_cuda::kernels
