"""A flash-attention-style forward as a custom kernel (docs/extensions.md).

    python examples/flash_attention.py        # FLAGOS_BACKEND=opencl for PoCL

softmax(q @ k^T * scale, causal mask) @ v without the S x S score matrix:
keys and values are walked in tiles with an online softmax (a running
maximum m and sum l per query; earlier partial sums are rescaled by
exp(m_old - m_new) when the maximum grows), as FlashAttention does.

- OpenCL C: one work-group of BM queries; the group loads each BN-key tile
  of K and V into local memory once and every query of the group reads it
  there. Causal blocks stop at their last query's key.
- C: one work item per (batch x head, query), the same tiled online
  softmax over its keys; the plugin splits work items across its threads.

The forward also stores each query's log-sum-exp. The backward recomputes
the probabilities from it with eager operators (p = exp(q k^T scale -
lse)): no S x S matrix is kept between forward and backward, only
recomputed in the backward. Head dims up to 256, float32, q/k/v of shape
(batch, heads, seq, head_dim); the causal mask is top-left aligned, as in
torch.nn.functional.scaled_dot_product_attention(is_causal=True).
"""

from __future__ import annotations

import functools
import math
import sys

import flagos_torchfl as ft
import torch
from flagos_torchfl import extension as fx

ft.initialize()  # the `flagos` device type exists from here on (custom_op below)

BM = 16  # queries per OpenCL work-group
MAX_HEAD_DIM = 256

OPENCL = """
#define BM 16
#define BN 16
__kernel void flash_attn_fwd(FLAGOS_TENSOR(float, o), FLAGOS_TENSOR(float, lse),
                             FLAGOS_TENSOR(const float, q), FLAGOS_TENSOR(const float, k),
                             FLAGOS_TENSOR(const float, v), long s_q, long s_k, float scale,
                             int causal) {
  __local float kt[BN * HEAD_DIM];
  __local float vt[BN * HEAD_DIM];
  const int lid = get_local_id(0);
  const long block = get_group_id(0);
  const long qi = block * BM + lid;
  const long bh = get_global_id(1);
  __global const float* qp = FLAGOS_PTR(const float, q) + bh * s_q * HEAD_DIM;
  __global const float* kp = FLAGOS_PTR(const float, k) + bh * s_k * HEAD_DIM;
  __global const float* vp = FLAGOS_PTR(const float, v) + bh * s_k * HEAD_DIM;
  const bool active = qi < s_q;
  float qr[HEAD_DIM], acc[HEAD_DIM];
  for (int d = 0; d < HEAD_DIM; ++d) {
    qr[d] = active ? qp[qi * HEAD_DIM + d] * scale : 0.0f;
    acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  /* Every work item of the group runs the same tiles (barriers). */
  const long key_end = causal ? min(s_k, (block + 1) * BM) : s_k;
  for (long j0 = 0; j0 < key_end; j0 += BN) {
    for (int e = lid; e < BN * HEAD_DIM; e += BM) {
      const long j = j0 + e / HEAD_DIM;
      const int d = e % HEAD_DIM;
      kt[e] = j < s_k ? kp[j * HEAD_DIM + d] : 0.0f;
      vt[e] = j < s_k ? vp[j * HEAD_DIM + d] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (active) {
      float sc[BN];
      float m_new = m;
      for (int jj = 0; jj < BN; ++jj) {
        const long j = j0 + jj;
        float dot = 0.0f;
        for (int d = 0; d < HEAD_DIM; ++d) dot += qr[d] * kt[jj * HEAD_DIM + d];
        sc[jj] = (j < s_k && (!causal || j <= qi)) ? dot : -INFINITY;
        m_new = fmax(m_new, sc[jj]);
      }
      if (m_new != -INFINITY) {
        const float corr = exp(m - m_new);
        l *= corr;
        for (int d = 0; d < HEAD_DIM; ++d) acc[d] *= corr;
        for (int jj = 0; jj < BN; ++jj) {
          const float p = exp(sc[jj] - m_new);
          l += p;
          for (int d = 0; d < HEAD_DIM; ++d) acc[d] += p * vt[jj * HEAD_DIM + d];
        }
        m = m_new;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (active) {
    __global float* op = FLAGOS_PTR(float, o) + (bh * s_q + qi) * HEAD_DIM;
    for (int d = 0; d < HEAD_DIM; ++d) op[d] = acc[d] / l;
    FLAGOS_PTR(float, lse)[bh * s_q + qi] = m + log(l);
  }
}
"""

# CUDA C: the OpenCL kernel's shape, a block of BM queries sharing each
# key/value tile in shared memory; blockIdx.y is the (batch x head).
CUDA = """
#define BM 16
#define BN 16
extern "C" __global__ void flash_attn_fwd(FLAGOS_TENSOR(float, o), FLAGOS_TENSOR(float, lse),
                                          FLAGOS_TENSOR(const float, q),
                                          FLAGOS_TENSOR(const float, k),
                                          FLAGOS_TENSOR(const float, v), long long s_q,
                                          long long s_k, float scale, int causal) {
  __shared__ float kt[BN * HEAD_DIM];
  __shared__ float vt[BN * HEAD_DIM];
  const int lid = threadIdx.x;
  const long long block = blockIdx.x;
  const long long qi = block * BM + lid;
  const long long bh = blockIdx.y;
  const float* qp = FLAGOS_PTR(const float, q) + bh * s_q * HEAD_DIM;
  const float* kp = FLAGOS_PTR(const float, k) + bh * s_k * HEAD_DIM;
  const float* vp = FLAGOS_PTR(const float, v) + bh * s_k * HEAD_DIM;
  const bool active = qi < s_q;
  float qr[HEAD_DIM], acc[HEAD_DIM];
  for (int d = 0; d < HEAD_DIM; ++d) {
    qr[d] = active ? qp[qi * HEAD_DIM + d] * scale : 0.0f;
    acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  /* Every thread of the block runs the same tiles (barriers). */
  const long long causal_end = (block + 1) * BM;
  const long long key_end = causal && causal_end < s_k ? causal_end : s_k;
  for (long long j0 = 0; j0 < key_end; j0 += BN) {
    for (int e = lid; e < BN * HEAD_DIM; e += BM) {
      const long long j = j0 + e / HEAD_DIM;
      const int d = e % HEAD_DIM;
      kt[e] = j < s_k ? kp[j * HEAD_DIM + d] : 0.0f;
      vt[e] = j < s_k ? vp[j * HEAD_DIM + d] : 0.0f;
    }
    __syncthreads();
    if (active) {
      float sc[BN];
      float m_new = m;
      for (int jj = 0; jj < BN; ++jj) {
        const long long j = j0 + jj;
        float dot = 0.0f;
        for (int d = 0; d < HEAD_DIM; ++d) dot += qr[d] * kt[jj * HEAD_DIM + d];
        sc[jj] = (j < s_k && (!causal || j <= qi)) ? dot : -INFINITY;
        m_new = fmaxf(m_new, sc[jj]);
      }
      if (m_new != -INFINITY) {
        const float corr = expf(m - m_new);
        l *= corr;
        for (int d = 0; d < HEAD_DIM; ++d) acc[d] *= corr;
        for (int jj = 0; jj < BN; ++jj) {
          const float p = expf(sc[jj] - m_new);
          l += p;
          for (int d = 0; d < HEAD_DIM; ++d) acc[d] += p * vt[jj * HEAD_DIM + d];
        }
        m = m_new;
      }
    }
    __syncthreads();
  }
  if (active) {
    float* op = FLAGOS_PTR(float, o) + (bh * s_q + qi) * HEAD_DIM;
    for (int d = 0; d < HEAD_DIM; ++d) op[d] = acc[d] / l;
    FLAGOS_PTR(float, lse)[bh * s_q + qi] = m + logf(l);
  }
}
"""

C = """
#define BN 16
FLAGOS_KERNEL(flash_attn_fwd) {
  float* o = FLAGOS_TENSOR_ARG(float, 0);
  float* lse = FLAGOS_TENSOR_ARG(float, 1);
  const float* q = FLAGOS_TENSOR_ARG(const float, 2);
  const float* k = FLAGOS_TENSOR_ARG(const float, 3);
  const float* v = FLAGOS_TENSOR_ARG(const float, 4);
  const int64_t s_q = FLAGOS_SCALAR_ARG(int64_t, 5);
  const int64_t s_k = FLAGOS_SCALAR_ARG(int64_t, 6);
  const float scale = FLAGOS_SCALAR_ARG(float, 7);
  const int32_t causal = FLAGOS_SCALAR_ARG(int32_t, 8);
  FLAGOS_ITEMS(item) {
    const int64_t bh = (int64_t)item / s_q, qi = (int64_t)item % s_q;
    const float* qr = q + (bh * s_q + qi) * HEAD_DIM;
    const float* kp = k + bh * s_k * HEAD_DIM;
    const float* vp = v + bh * s_k * HEAD_DIM;
    float qs[HEAD_DIM], acc[HEAD_DIM], sc[BN];
    for (int d = 0; d < HEAD_DIM; ++d) { qs[d] = qr[d] * scale; acc[d] = 0.0f; }
    float m = -INFINITY, l = 0.0f;
    const int64_t key_end = causal ? (qi + 1 < s_k ? qi + 1 : s_k) : s_k;
    for (int64_t j0 = 0; j0 < key_end; j0 += BN) {
      const int n = key_end - j0 < BN ? (int)(key_end - j0) : BN;
      float m_new = m;
      for (int jj = 0; jj < n; ++jj) {
        const float* kr = kp + (j0 + jj) * HEAD_DIM;
        float dot = 0.0f;
        for (int d = 0; d < HEAD_DIM; ++d) dot += qs[d] * kr[d];
        sc[jj] = dot;
        m_new = dot > m_new ? dot : m_new;
      }
      const float corr = expf(m - m_new);
      l *= corr;
      for (int d = 0; d < HEAD_DIM; ++d) acc[d] *= corr;
      /* A loop of its own, so the compiler can use vector exp. */
      for (int jj = 0; jj < n; ++jj) sc[jj] = expf(sc[jj] - m_new);
      for (int jj = 0; jj < n; ++jj) {
        const float p = sc[jj];
        const float* vr = vp + (j0 + jj) * HEAD_DIM;
        l += p;
        for (int d = 0; d < HEAD_DIM; ++d) acc[d] += p * vr[d];
      }
      m = m_new;
    }
    float* orow = o + (bh * s_q + qi) * HEAD_DIM;
    for (int d = 0; d < HEAD_DIM; ++d) orow[d] = acc[d] / l;
    lse[bh * s_q + qi] = m + logf(l);
  }
}
"""


@functools.cache
def _kernel(head_dim: int) -> fx.Kernel:
    """One build per head dim (a compile-time constant: private arrays, unrolled loops)."""
    define = f"-DHEAD_DIM={head_dim}"
    options = {
        "opencl": define,
        "cuda": define,
        # Reassociated sums vectorize. No -march=native: the host device's
        # cache identity is "x86_64", so a cache copied to an older CPU would
        # load instructions it lacks.
        "c": f"{define} -O3 -fno-math-errno -fassociative-math "
        "-fno-signed-zeros -fno-trapping-math",
    }
    return fx.compile_kernel("flash_attn_fwd", {"opencl": OPENCL, "cuda": CUDA, "c": C}, options)


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if any(t.dtype != torch.float32 for t in (q, k, v)):
        raise TypeError("flash_attention takes float32 q, k, v")
    if q.dim() != 4 or k.shape != v.shape or q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError(
            "flash_attention takes q (B, H, Sq, D) and k, v (B, H, Sk, D), got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if not 1 <= q.shape[3] <= MAX_HEAD_DIM:
        raise ValueError(f"head dim {q.shape[3]} is outside 1..{MAX_HEAD_DIM}")


@torch.library.custom_op("flagos_examples::flash_attn_fwd", mutates_args=(), device_types="flagos")
def flash_attn_fwd(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    _check(q, k, v)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    b, h, s_q, d = q.shape
    s_k = k.shape[2]
    o = torch.empty_like(q)
    lse = q.new_empty(b, h, s_q)
    if o.numel() == 0:
        return o, lse
    if s_k == 0:
        return o.zero_(), lse.fill_(-math.inf)
    args = (o, lse, q, k, v, s_q, s_k, fx.float32(scale), fx.int32(int(causal)))
    if fx.language() in ("opencl-c", "cuda-c"):
        blocks = (s_q + BM - 1) // BM
        _kernel(d)(*args, global_size=(blocks * BM, b * h), local_size=(BM, 1))
    else:
        _kernel(d)(*args, global_size=b * h * s_q)
    return o, lse


@flash_attn_fwd.register_fake
def _(q, k, v, causal, scale):
    _check(q, k, v)
    return torch.empty_like(q, memory_format=torch.contiguous_format), q.new_empty(q.shape[:3])


def _causal_mask(s_q: int, s_k: int, device: torch.device) -> torch.Tensor:
    return torch.ones(s_q, s_k, dtype=torch.bool, device=device).triu(1)


def _setup_context(ctx, inputs, output):
    q, k, v, causal, scale = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.causal, ctx.scale = causal, scale


def _backward(ctx, do, _dlse):
    """Recomputes the probabilities from the saved log-sum-exp (eager ops)."""
    q, k, v, o, lse = ctx.saved_tensors
    s = q @ k.transpose(-2, -1) * ctx.scale
    if ctx.causal:
        s = s.masked_fill(_causal_mask(q.shape[2], k.shape[2], q.device), -math.inf)
    p = torch.exp(s - lse.unsqueeze(-1))
    dv = p.transpose(-2, -1) @ do
    dp = do @ v.transpose(-2, -1)
    delta = (do * o).sum(-1, keepdim=True)
    ds = p * (dp - delta) * ctx.scale
    dq = ds @ k
    dk = ds.transpose(-2, -1) @ q
    return dq, dk, dv, None, None


flash_attn_fwd.register_autograd(_backward, setup_context=_setup_context)


def flash_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale=None
) -> torch.Tensor:
    """softmax(q k^T * scale [causal]) v; scale defaults to 1/sqrt(head_dim)."""
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    return flash_attn_fwd(q, k, v, causal, float(scale))[0]


def reference(q, k, v, causal: bool = False, scale=None) -> torch.Tensor:
    """The same math as eager operators, with the S x S matrix (the benchmarks' baseline)."""
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    s = q @ k.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(_causal_mask(q.shape[2], k.shape[2], q.device), -math.inf)
    return torch.softmax(s, dim=-1) @ v


def main() -> int:
    torch.manual_seed(0)
    ok = True
    print(f"flash attention on {ft.backend_info(verbose=False)['backend']} ({fx.language()}):")
    for causal in (False, True):
        q, k, v = (torch.randn(2, 3, 77, 64) for _ in range(3))
        do = torch.randn_like(q)
        qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
        out_c = torch.nn.functional.scaled_dot_product_attention(qc, kc, vc, is_causal=causal)
        out_c.backward(do)
        qf, kf, vf = (t.to("flagos").requires_grad_() for t in (q, k, v))
        out_f = flash_attention(qf, kf, vf, causal=causal)
        out_f.backward(do.to("flagos"))
        errors = {
            "out": (out_f.detach().cpu() - out_c.detach()).abs().max().item(),
            "dq": (qf.grad.cpu() - qc.grad).abs().max().item(),
            "dk": (kf.grad.cpu() - kc.grad).abs().max().item(),
            "dv": (vf.grad.cpu() - vc.grad).abs().max().item(),
        }
        print(f"  causal={causal}: " + ", ".join(f"{n} {e:.1e}" for n, e in errors.items()))
        ok = ok and all(e < 1e-4 for e in errors.values())
    print("OK" if ok else "FAILED: flagos differs from CPU")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
