// Internal header of the opencl plugin's native kernels (CLBlast GEMM/GEMV).
//
//   blas.h       operand views: device address -> (cl_mem, element offset)
//                and strides -> CLBlast row-major + transpose + leading dim
//   operand.cpp  resolving tensors, scalars, CLBlast status codes
//   helpers.cpp  a tiny OpenCL program per device: zero / broadcast-copy
//   gemm.cpp     mm, addmm, bmm, baddbmm: CLBlast, small ones on
//   gemm_small.cpp  the plugin's own kernel (Note [Small GEMMs])
//   gemv.cpp     mv, addmv, dot
//   loss.cpp     nll_loss / nll_loss2d and backwards (own OpenCL program)
//   table.cpp    the flagosKernelTable
//
// Every kernel checks everything first and returns NOT_SUPPORTED before it
// enqueues anything, so the core's next tier starts from untouched outputs.
#pragma once

#include <clblast_c.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "../opencl.h"
#include "flagos/kernel.h"

namespace flagos_opencl::kernels {

// A tensor resolved to its buffer; offset and strides in elements.
struct Operand {
  cl_mem buffer = nullptr;
  size_t offset = 0;
  int32_t ndim = 0;
  int64_t shape[3] = {1, 1, 1};
  int64_t strides[3] = {0, 0, 0};
};

// Result of resolving: ok, or the status the kernel returns at once.
struct Resolved {
  flagosStatus_t status = FLAGOS_SUCCESS;
  bool ok() const { return status == FLAGOS_SUCCESS; }
};

// The buffer and byte offset behind @p t's elements (any rank, no empty
// dims, non-negative strides on dims of size > 1, element-aligned) on
// @p stream's device. NOT_SUPPORTED for other layouts; INVALID_ARGUMENT
// (message recorded) for a foreign address or another device's memory.
Resolved resolveBytes(const char* op, flagosStream_t stream, const flagosTensor& t, cl_mem* buffer,
                      uint64_t* offset);
// resolveBytes for rank <= 3, as CLBlast takes it: element offset, strides
// of size-1 dims zeroed.
Resolved resolveOperand(const char* op, flagosStream_t stream, const flagosTensor& t, Operand* out);

// One matrix of an operand (its last two dims) as CLBlast reads it: a
// row-major matrix, transposed or not, with a leading dimension.
struct MatView {
  int64_t rows = 0, cols = 0;  // logical (after the transpose)
  int64_t rs = 0, cs = 0;      // element strides
  bool trans = false;          // stored as a cols x rows row-major matrix
  size_t ld = 1;
};

// The logical matrix of the last two dims of @p op.
MatView matrixOf(const Operand& op);
// Decides trans/ld; false when neither stride is usable (broadcast, gaps).
bool blasView(MatView* m);
// The transposed matrix (rows <-> cols), for C^T = B^T A^T.
MatView transposed(const MatView& m);

inline CLBlastTranspose clTrans(bool t) {
  return t ? CLBlastTransposeYes : CLBlastTransposeNo;
}

// flagosScalar -> double (absent: @p fallback).
double scalarValue(const flagosScalar& s, double fallback);

// Same dtype everywhere, float32 or float64 (the latter only with fp64).
bool supportedDtype(flagosStream_t stream, flagosDtype_t dt, const flagosTensor* tensors,
                    int32_t count);

// Maps a CLBlast failure to the kernel's status (NOT_SUPPORTED for the
// argument checks and missing features, DEVICE otherwise) with a message.
flagosStatus_t blasFailure(const char* op, int code);

// ------------------------------------------------------------- helpers ---

// A small program of the plugin's own, built from @p source for @p device
// with @p options plus -DFLAGOS_FP64 when the device has fp64 (*fp64 says
// which). nullptr with *error set when it fails (helpers.cpp).
cl_program buildSmallProgram(Device* device, const char* source, const std::string& options,
                             bool* fp64, std::string* error);

// The plugin's own programs (loss.cpp, gemm_small.cpp): one T per OpenCL
// context, made and passed to @p build on first use, never destroyed. The
// program keeps its context alive, so a context handle is never reused
// while its entry lives (after a shutdown and a new init the old entry is
// just unused). With @p build NULL: the existing one, or nullptr.
template <typename T>
T* perContext(Device* device, void (*build)(Device*, T*)) {
  static std::mutex mu;
  static auto* items = new std::map<cl_context, std::unique_ptr<T>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = items->find(device->context);
  if (it != items->end()) return it->second.get();
  if (build == nullptr) return nullptr;
  std::unique_ptr<T>& item = (*items)[device->context];
  item = std::make_unique<T>();
  build(device, item.get());
  return item.get();
}

// Per-device helper kernels (helpers.cpp), built on first use.
struct Helpers;
// nullptr after recording the error.
Helpers* helpersFor(Device* device);
bool hasFp64(Device* device);

// 3-D strided region of @p dtype: shape s[3], element strides.
struct Region {
  cl_mem buffer;
  size_t offset;
  int64_t shape[3];
  int64_t strides[3];
};

// Enqueues dst := 0, or dst := broadcast(src) (src strides 0 where it
// broadcasts). Call inside flagosStream_st::enqueue; @p event may be NULL.
cl_int enqueueZero(Helpers* h, cl_command_queue q, flagosDtype_t dt, const Region& dst,
                   cl_event* event);
cl_int enqueueExpand(Helpers* h, cl_command_queue q, flagosDtype_t dt, const Region& dst,
                     const Region& src, cl_event* event);

// Region of @p out (rank <= 3, right-aligned into 3 dims).
Region regionOf(const Operand& out);
// addmm/addmv-style `self` (scaled by beta): resolved on @p stream and seen
// with @p out's shape in *region; *expand false when self already is the
// output (addmm_), so nothing needs copying. NOT_SUPPORTED when it does not
// broadcast; resolveOperand's status when it cannot be resolved.
flagosStatus_t resolveSelf(const char* op, flagosStream_t stream, const flagosTensor& self,
                           const Operand& out, Region* region, bool* expand);

// ---------------------------------------------------------- small GEMM ---
// Note [Small GEMMs] in gemm_small.cpp: GEMMs of up to the device's
// small_gemm_macs multiply-adds run on the plugin's own kernel.

// One operand of a small GEMM: buffer, element offset, element strides of
// its batch, row and column dims (0 where it broadcasts).
struct MatArg {
  cl_mem buffer = nullptr;
  size_t offset = 0;
  int64_t batch = 0, rows = 0, cols = 0;
};

// C = alpha * A @ B + beta * self, batch x (M x K) @ (K x N); self is read
// only when beta != 0.
struct SmallGemm {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  double alpha = 1.0, beta = 0.0;
  MatArg c, a, b, self;
};

// Small enough for the device's limit, and every in-matrix offset fits an int.
bool smallGemmFits(const Device* device, const SmallGemm& g);
struct SmallGemmProgram;
// The device's program, built on first use; nullptr when it did not build
// (the caller then uses CLBlast). Call under the compile lock unless
// smallGemmWarm().
SmallGemmProgram* smallGemmProgram(Device* device);
// Whether the kernel for @p dt is built and was launched once on @p device:
// its one work-group size is compiled, so calls need no compile lock.
bool smallGemmWarm(Device* device, flagosDtype_t dt);
// Enqueues @p g; call inside flagosStream_st::enqueue. @p event may be NULL.
cl_int enqueueSmallGemm(SmallGemmProgram* p, cl_command_queue q, flagosDtype_t dt,
                        const SmallGemm& g, cl_event* event);
// The SDK warm-up's launch: a 2x2 GEMM of @p dt inside @p buffer (>= 12
// zeroed elements), so the first call finds the kernel built.
void warmUpSmallGemm(Device* device, cl_command_queue queue, flagosDtype_t dt, cl_mem buffer);

// ------------------------------------------------------------- entries ---

void addGemmKernels(void (*add)(const char*, flagosKernelFn));
void addGemvKernels(void (*add)(const char*, flagosKernelFn));
void addLossKernels(void (*add)(const char*, flagosKernelFn));

// Builds the loss program and launches its float kernels once on @p queue
// (the SDK warm-up, Note [SDK warm-up]); the caller holds the compile lock.
void warmUpLoss(Device* device, cl_command_queue queue);

}  // namespace flagos_opencl::kernels
