"""A fused RMSNorm as a custom kernel, one source per language (docs/extensions.md).

    python examples/fused_rmsnorm.py          # FLAGOS_BACKEND=opencl for PoCL

y = x * rsqrt(mean(x**2, -1) + eps) * weight in one pass over each row
(the eager composition is five operators and four temporaries). The forward
kernel also stores each row's rsqrt, which the backward kernel reuses:

    dx = r * w * dy - x * r**3 / n * sum(w * dy * x)     (per row)
    dw = sum over rows of dy * x * r                      (eager ops)

The kernels are wrapped as torch.library custom ops with a fake (meta)
implementation and an autograd formula, so the op works in eager mode,
under autograd and under torch.compile. Exits non-zero when flagos and the
CPU reference disagree.
"""

from __future__ import annotations

import functools
import sys

import flagos_torchfl as ft
import torch
from flagos_torchfl import extension as fx

# The `flagos` device type exists once a backend is up, and custom_op below
# registers for it (a second initialize() with no name does nothing).
ft.initialize()

# The work-group size of the OpenCL kernels: one work-group per row, a tree
# reduction in local memory. 64 fits every OpenCL device's limit.
WG = 64

OPENCL = """
#define WG 64
/* A tree reduction of each work item's v over the work-group. */
static float group_sum(float v, __local float* part) {
  const int lid = get_local_id(0);
  part[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = WG / 2; h > 0; h >>= 1) {
    if (lid < h) part[lid] += part[lid + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float total = part[0];
  barrier(CLK_LOCAL_MEM_FENCE); /* part is reused by the next call */
  return total;
}

__kernel void rms_norm_fwd(FLAGOS_TENSOR(float, y), FLAGOS_TENSOR(float, rstd),
                           FLAGOS_TENSOR(const float, x), FLAGOS_TENSOR(const float, w),
                           long n, float eps) {
  __local float part[WG];
  const long row = get_group_id(0);
  const int lid = get_local_id(0);
  __global const float* xr = FLAGOS_PTR(const float, x) + row * n;
  __global float* yr = FLAGOS_PTR(float, y) + row * n;
  __global const float* wp = FLAGOS_PTR(const float, w);
  float s = 0.0f;
  for (long j = lid; j < n; j += WG) s += xr[j] * xr[j];
  const float r = rsqrt(group_sum(s, part) / (float)n + eps);
  for (long j = lid; j < n; j += WG) yr[j] = xr[j] * r * wp[j];
  if (lid == 0) FLAGOS_PTR(float, rstd)[row] = r;
}

__kernel void rms_norm_bwd(FLAGOS_TENSOR(float, dx), FLAGOS_TENSOR(const float, dy),
                           FLAGOS_TENSOR(const float, x), FLAGOS_TENSOR(const float, w),
                           FLAGOS_TENSOR(const float, rstd), long n) {
  __local float part[WG];
  const long row = get_group_id(0);
  const int lid = get_local_id(0);
  __global const float* xr = FLAGOS_PTR(const float, x) + row * n;
  __global const float* dyr = FLAGOS_PTR(const float, dy) + row * n;
  __global float* dxr = FLAGOS_PTR(float, dx) + row * n;
  __global const float* wp = FLAGOS_PTR(const float, w);
  float s = 0.0f;
  for (long j = lid; j < n; j += WG) s += wp[j] * dyr[j] * xr[j];
  const float r = FLAGOS_PTR(const float, rstd)[row];
  const float c = r * r * r * group_sum(s, part) / (float)n;
  for (long j = lid; j < n; j += WG) dxr[j] = r * wp[j] * dyr[j] - xr[j] * c;
}
"""

# CUDA C (the cuda plugin, NVRTC): the OpenCL kernels' shape, a block of WG
# threads per row and a tree reduction in shared memory.
CUDA = """
#define WG 64
__device__ static float group_sum(float v, float* part) {
  const int lid = threadIdx.x;
  part[lid] = v;
  __syncthreads();
  for (int h = WG / 2; h > 0; h >>= 1) {
    if (lid < h) part[lid] += part[lid + h];
    __syncthreads();
  }
  const float total = part[0];
  __syncthreads(); /* part is reused by the next call */
  return total;
}

extern "C" __global__ void rms_norm_fwd(FLAGOS_TENSOR(float, y), FLAGOS_TENSOR(float, rstd),
                                        FLAGOS_TENSOR(const float, x),
                                        FLAGOS_TENSOR(const float, w), long long n, float eps) {
  __shared__ float part[WG];
  const long long row = blockIdx.x;
  const int lid = threadIdx.x;
  const float* xr = FLAGOS_PTR(const float, x) + row * n;
  float* yr = FLAGOS_PTR(float, y) + row * n;
  const float* wp = FLAGOS_PTR(const float, w);
  float s = 0.0f;
  for (long long j = lid; j < n; j += WG) s += xr[j] * xr[j];
  const float r = rsqrtf(group_sum(s, part) / (float)n + eps);
  for (long long j = lid; j < n; j += WG) yr[j] = xr[j] * r * wp[j];
  if (lid == 0) FLAGOS_PTR(float, rstd)[row] = r;
}

extern "C" __global__ void rms_norm_bwd(FLAGOS_TENSOR(float, dx), FLAGOS_TENSOR(const float, dy),
                                        FLAGOS_TENSOR(const float, x),
                                        FLAGOS_TENSOR(const float, w),
                                        FLAGOS_TENSOR(const float, rstd), long long n) {
  __shared__ float part[WG];
  const long long row = blockIdx.x;
  const int lid = threadIdx.x;
  const float* xr = FLAGOS_PTR(const float, x) + row * n;
  const float* dyr = FLAGOS_PTR(const float, dy) + row * n;
  float* dxr = FLAGOS_PTR(float, dx) + row * n;
  const float* wp = FLAGOS_PTR(const float, w);
  float s = 0.0f;
  for (long long j = lid; j < n; j += WG) s += wp[j] * dyr[j] * xr[j];
  const float r = FLAGOS_PTR(const float, rstd)[row];
  const float c = r * r * r * group_sum(s, part) / (float)n;
  for (long long j = lid; j < n; j += WG) dxr[j] = r * wp[j] * dyr[j] - xr[j] * c;
}
"""

# One work item per row; the plugin splits the rows across its threads.
C = """
FLAGOS_KERNEL(rms_norm_fwd) {
  float* y = FLAGOS_TENSOR_ARG(float, 0);
  float* rstd = FLAGOS_TENSOR_ARG(float, 1);
  const float* x = FLAGOS_TENSOR_ARG(const float, 2);
  const float* w = FLAGOS_TENSOR_ARG(const float, 3);
  const int64_t n = FLAGOS_SCALAR_ARG(int64_t, 4);
  const float eps = FLAGOS_SCALAR_ARG(float, 5);
  FLAGOS_ITEMS(row) {
    const float* xr = x + row * n;
    float* yr = y + row * n;
    float s = 0.0f;
    for (int64_t j = 0; j < n; ++j) s += xr[j] * xr[j];
    const float r = 1.0f / sqrtf(s / (float)n + eps);
    for (int64_t j = 0; j < n; ++j) yr[j] = xr[j] * r * w[j];
    rstd[row] = r;
  }
}

FLAGOS_KERNEL(rms_norm_bwd) {
  float* dx = FLAGOS_TENSOR_ARG(float, 0);
  const float* dy = FLAGOS_TENSOR_ARG(const float, 1);
  const float* x = FLAGOS_TENSOR_ARG(const float, 2);
  const float* w = FLAGOS_TENSOR_ARG(const float, 3);
  const float* rstd = FLAGOS_TENSOR_ARG(const float, 4);
  const int64_t n = FLAGOS_SCALAR_ARG(int64_t, 5);
  FLAGOS_ITEMS(row) {
    const float* xr = x + row * n;
    const float* dyr = dy + row * n;
    float* dxr = dx + row * n;
    float s = 0.0f;
    for (int64_t j = 0; j < n; ++j) s += w[j] * dyr[j] * xr[j];
    const float r = rstd[row];
    const float c = r * r * r * s / (float)n;
    for (int64_t j = 0; j < n; ++j) dxr[j] = r * w[j] * dyr[j] - xr[j] * c;
  }
}
"""

# Reassociation lets the C compiler vectorize the row sums (as PyTorch's own
# CPU kernels do); the result differs from a sequential sum by rounding only.
# No -march=native: the host device's cache identity is "x86_64", so a cache
# copied to an older CPU would load instructions it lacks.
OPTIONS = {"c": "-O3 -fno-math-errno -fassociative-math -fno-signed-zeros -fno-trapping-math"}


@functools.cache
def _kernel(name: str) -> fx.Kernel:
    return fx.compile_kernel(name, {"opencl": OPENCL, "cuda": CUDA, "c": C}, OPTIONS)


def _launch_size(rows: int) -> dict:
    """One work-group (block) per row in OpenCL C and CUDA C, one work item per row in C."""
    if fx.language() in ("opencl-c", "cuda-c"):
        return {"global_size": rows * WG, "local_size": WG}
    return {"global_size": rows}


def _check(x: torch.Tensor, weight: torch.Tensor) -> None:
    if x.dtype != torch.float32 or weight.dtype != torch.float32:
        raise TypeError(f"rms_norm takes float32 tensors, got {x.dtype} and {weight.dtype}")
    if weight.dim() != 1 or x.shape[-1] != weight.shape[0]:
        raise ValueError(f"weight of shape {tuple(weight.shape)} does not match x {tuple(x.shape)}")


@torch.library.custom_op("flagos_examples::rms_norm_fwd", mutates_args=(), device_types="flagos")
def rms_norm_fwd(
    x: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    _check(x, weight)
    x, weight = x.contiguous(), weight.contiguous()
    n = x.shape[-1]
    rows = x.numel() // n if n else 0
    y = torch.empty_like(x)
    rstd = x.new_empty(x.shape[:-1])
    if rows and n:
        _kernel("rms_norm_fwd")(y, rstd, x, weight, n, fx.float32(eps), **_launch_size(rows))
    return y, rstd


@rms_norm_fwd.register_fake
def _(x, weight, eps):
    _check(x, weight)
    return torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty(x.shape[:-1])


@torch.library.custom_op("flagos_examples::rms_norm_bwd", mutates_args=(), device_types="flagos")
def rms_norm_bwd(
    dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> torch.Tensor:
    dy, x, weight, rstd = (t.contiguous() for t in (dy, x, weight, rstd))
    n = x.shape[-1]
    rows = x.numel() // n if n else 0
    dx = torch.empty_like(x)
    if rows and n:
        _kernel("rms_norm_bwd")(dx, dy, x, weight, rstd, n, **_launch_size(rows))
    return dx


@rms_norm_bwd.register_fake
def _(dy, x, weight, rstd):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _setup_context(ctx, inputs, output):
    x, weight, _ = inputs
    ctx.save_for_backward(x, weight, output[1])


def _backward(ctx, dy, _drstd):
    x, weight, rstd = ctx.saved_tensors
    dx = rms_norm_bwd(dy, x, weight, rstd) if ctx.needs_input_grad[0] else None
    dw = None
    if ctx.needs_input_grad[1]:
        dw = (dy * x * rstd.unsqueeze(-1)).reshape(-1, x.shape[-1]).sum(0)
    return dx, dw, None


rms_norm_fwd.register_autograd(_backward, setup_context=_setup_context)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The fused RMSNorm over the last dimension."""
    return rms_norm_fwd(x, weight, eps)[0]


def reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The same math as eager operators (the benchmarks' baseline)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def main() -> int:
    torch.manual_seed(0)
    x = torch.randn(64, 37, 1000)
    w = torch.randn(1000)
    dy = torch.randn_like(x)
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    reference(xc, wc).backward(dy)
    xf = x.to("flagos").requires_grad_()
    wf = w.to("flagos").requires_grad_()
    y = rms_norm(xf, wf)
    y.backward(dy.to("flagos"))
    errors = {
        "y": (y.detach().cpu() - reference(x, w)).abs().max().item(),
        "dx": (xf.grad.cpu() - xc.grad).abs().max().item(),
        "dw": ((wf.grad.cpu() - wc.grad).abs().max() / wc.grad.abs().max()).item(),
    }
    print(f"fused RMSNorm on {ft.backend_info(verbose=False)['backend']} ({fx.language()}):")
    for name, err in errors.items():
        print(f"  {name}: max difference from CPU {err:.2e}")
    ok = all(err < 1e-4 for err in errors.values())
    print("OK" if ok else "FAILED: flagos differs from CPU")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
