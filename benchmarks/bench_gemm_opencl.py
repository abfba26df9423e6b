"""GEMM via flagos vs direct CLBlast on the opencl plugin.

torch.mm / addmm / bmm on the `flagos` device (FLAGOS_BACKEND=opencl, whose
kernel table runs CLBlast SGEMM, and its own small-GEMM kernel up to
FLAGOS_OPENCL_SMALL_GEMM multiply-adds: Note [Small GEMMs]) against the same
CLBlast routine called straight through its C API (ctypes) on a context and
queue of its own, as benchmarks/clblast_direct.cpp does. Both sides time one call + a device
synchronize (direct: clFinish).

The two sides are interleaved in ONE process, call by call: each round
times --iters pairs per case (one flagos and one direct call, their order
alternating from pair to pair), over --rounds rounds; the result is each
side's median call time and the median (and quartiles) of the per-pair
ratio. On a small shared machine the CPU available
to PoCL's worker threads changes from one moment to the next (on 2 vCPUs a
neighbour taking one of them doubles a 256^3 SGEMM, 1.2 -> 2.4 ms, for
clblast_direct as much as for flagos), so timing one side in one long block
and the other afterwards measures the machine, not the plugin.

speed = direct ms / flagos ms (1.0: no adapter overhead; target >= 0.95).
Both sides do one full wait per call, from Python: the flagos side
torch.flagos.synchronize() (the stream's last event, i.e. the CLBlast
command, then a clFinish of the idle synchronous queue), the direct side
clFinish through ctypes. Done in C on PoCL, the plugin's way (profiling
queue, CLBlast's event out-parameter, clWaitForEvents on it, the extra idle
clFinish) and the plain clFinish cost the same within ~0.1 us a call, so
the gap at tiny sizes is the torch/flagos call path, not the
synchronization (Note [GEMM overhead] in backends/opencl/kernels/gemm.cpp).
addmm's flagos side also broadcasts the bias into the output (one extra
kernel) where the direct side runs SGEMM with beta = 1 on C as it is.

    FLAGOS_BACKEND=opencl python3 benchmarks/bench_gemm_opencl.py
    ... --subprocess-direct [--clblast-direct PATH]   # also the C++ binary, not interleaved
"""

from __future__ import annotations

import argparse
import array
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# CLBlast C API constants (clblast_c.h).
ROW_MAJOR, NO_TRANS = 101, 111


class DirectCLBlast:
    """CLBlast straight on OpenCL: its own context and in-order queue on the
    first GPU/accelerator, else the first device (the plugin's choice)."""

    def __init__(self) -> None:
        self.cl = ctypes.CDLL("libOpenCL.so.1")
        self.blast = ctypes.CDLL("libclblast.so.1")
        vp, cl = ctypes.c_void_p, self.cl
        cl.clCreateContext.restype = vp
        cl.clCreateCommandQueue.restype = vp
        cl.clCreateBuffer.restype = vp
        count = ctypes.c_uint32()
        cl.clGetPlatformIDs(0, None, ctypes.byref(count))
        platforms = (vp * count.value)()
        cl.clGetPlatformIDs(count.value, platforms, None)
        self.device = vp()
        found = False
        for kind in (0x4 | 0x8, 0xFFFFFFFF):  # GPU|ACCELERATOR, then ALL
            for p in platforms:
                if (
                    cl.clGetDeviceIDs(
                        vp(p), ctypes.c_uint64(kind), 1, ctypes.byref(self.device), None
                    )
                    == 0
                ):
                    found = True
                    break
            if found:
                break
        if not found:
            sys.exit("direct CLBlast: no OpenCL device")
        name = ctypes.create_string_buffer(256)
        cl.clGetDeviceInfo(self.device, ctypes.c_uint32(0x102B), 255, name, None)  # CL_DEVICE_NAME
        self.name = name.value.decode()
        err = ctypes.c_int32()
        self.ctx = vp(
            cl.clCreateContext(None, 1, ctypes.byref(self.device), None, None, ctypes.byref(err))
        )
        self.queue = vp(
            cl.clCreateCommandQueue(self.ctx, self.device, ctypes.c_uint64(0), ctypes.byref(err))
        )
        if err.value != 0:
            sys.exit(f"direct CLBlast: OpenCL setup failed ({err.value})")
        sz, f32 = ctypes.c_size_t, ctypes.c_float
        qp, ep = ctypes.POINTER(vp), vp
        self.blast.CLBlastSgemm.argtypes = (
            [ctypes.c_int] * 3 + [sz] * 3 + [f32, vp, sz, sz, vp, sz, sz, f32, vp, sz, sz, qp, ep]
        )
        self.blast.CLBlastSgemmStridedBatched.argtypes = (
            [ctypes.c_int] * 3
            + [sz] * 3
            + [f32, vp, sz, sz, sz, vp, sz, sz, sz, f32, vp, sz, sz, sz, sz, qp, ep]
        )

    def buffer(self, elements: int, seed: int) -> ctypes.c_void_p:
        """A float32 buffer filled like clblast_direct's (no NaN, no denormals)."""
        err = ctypes.c_int32()
        buf = ctypes.c_void_p(
            self.cl.clCreateBuffer(
                self.ctx, ctypes.c_uint64(1), ctypes.c_size_t(elements * 4), None, ctypes.byref(err)
            )
        )
        mod = 11 + seed
        host = array.array("f", [(i % mod) / mod - 0.5 for i in range(elements)])
        self.cl.clEnqueueWriteBuffer(
            self.queue,
            buf,
            1,
            ctypes.c_size_t(0),
            ctypes.c_size_t(elements * 4),
            ctypes.c_void_p(host.buffer_info()[0]),
            0,
            None,
            None,
        )
        return buf

    def gemm(self, batch: int, m: int, n: int, k: int, beta: float):
        """A callable running C = A @ B (+ beta C) once and waiting for it."""
        a, b, c = (
            self.buffer(batch * m * k, 2),
            self.buffer(batch * k * n, 6),
            self.buffer(batch * m * n, 0),
        )
        q = ctypes.byref(self.queue)
        if batch == 1:

            def call() -> None:
                s = self.blast.CLBlastSgemm(
                    ROW_MAJOR,
                    NO_TRANS,
                    NO_TRANS,
                    m,
                    n,
                    k,
                    1.0,
                    a,
                    0,
                    k,
                    b,
                    0,
                    n,
                    beta,
                    c,
                    0,
                    n,
                    q,
                    None,
                )
                self.cl.clFinish(self.queue)
                if s != 0:
                    raise RuntimeError(f"CLBlastSgemm: {s}")

        else:

            def call() -> None:
                s = self.blast.CLBlastSgemmStridedBatched(
                    ROW_MAJOR,
                    NO_TRANS,
                    NO_TRANS,
                    m,
                    n,
                    k,
                    1.0,
                    a,
                    0,
                    k,
                    m * k,
                    b,
                    0,
                    n,
                    k * n,
                    beta,
                    c,
                    0,
                    n,
                    m * n,
                    batch,
                    q,
                    None,
                )
                self.cl.clFinish(self.queue)
                if s != 0:
                    raise RuntimeError(f"CLBlastSgemmStridedBatched: {s}")

        return call


def flagos_case(op: str, batch: int, m: int, n: int, k: int):
    import torch

    dev = torch.device("flagos")
    sync = torch.flagos.synchronize
    if op == "bmm":
        a, b = torch.randn(batch, m, k).to(dev), torch.randn(batch, k, n).to(dev)

        def call() -> None:
            torch.bmm(a, b)
            sync()

    elif op == "addmm":
        bias, a, b = torch.randn(n).to(dev), torch.randn(m, k).to(dev), torch.randn(k, n).to(dev)

        def call() -> None:
            torch.addmm(bias, a, b)
            sync()

    else:
        a, b = torch.randn(m, k).to(dev), torch.randn(k, n).to(dev)

        def call() -> None:
            torch.mm(a, b)
            sync()

    return call


def find_direct(given: str | None) -> Path:
    candidates = [given] if given else []
    candidates += [os.environ.get("FLAGOS_CLBLAST_DIRECT", "")]
    candidates += [str(p) for p in sorted(ROOT.glob("build/*/benchmarks/clblast_direct"))]
    for c in candidates:
        if c and Path(c).is_file():
            return Path(c)
    sys.exit("clblast_direct not found: build it (CMake, CLBlast found) or pass --clblast-direct")


def subprocess_direct(binary: Path, n: int, iters: int, warmup: int) -> dict:
    out = subprocess.run(
        [str(binary), str(n), str(n), str(n), str(iters), str(warmup)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def parse_case(text: str) -> tuple[str, int, int, int, int]:
    """mm:N, mm:MxNxK, addmm:MxNxK, bmm:BxMxNxK."""
    op, _, dims = text.partition(":")
    d = [int(x) for x in dims.split("x")]
    if op == "bmm":
        return (op, d[0], d[1], d[2], d[3]) if len(d) == 4 else (op, d[0], d[1], d[1], d[1])
    if len(d) == 1:
        d = d * 3
    return (op, 1, d[0], d[1], d[2])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[16, 64, 128, 256, 512, 768, 1024],
        help="square mm sizes",
    )
    p.add_argument(
        "--cases",
        nargs="*",
        default=["addmm:32x10x256", "addmm:256x512x256", "bmm:8x128"],
        help="more: addmm:MxNxK, bmm:BxN, bmm:BxMxNxK",
    )
    p.add_argument("--iters", type=int, default=10, help="call pairs per case and round")
    p.add_argument("--rounds", type=int, default=5, help="rounds over all cases")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument(
        "--round-ms", type=float, default=1500, help="fewer pairs per round for slow cases"
    )
    p.add_argument(
        "--subprocess-direct",
        action="store_true",
        help="also run the clblast_direct binary per mm size",
    )
    p.add_argument("--clblast-direct", help="path of the clblast_direct executable")
    args = p.parse_args()
    if os.environ.get("FLAGOS_BACKEND") != "opencl":
        sys.exit("run with FLAGOS_BACKEND=opencl (the plugin whose mm is CLBlast)")

    import flagos_torchfl as ft
    import torch

    ft.initialize("opencl")  # also without torch's autoload (FLAGOS_BACKEND)
    torch.manual_seed(0)
    direct = DirectCLBlast()
    cases = [("mm", 1, n, n, n) for n in args.sizes] + [parse_case(c) for c in args.cases]
    calls = []
    for op, batch, m, n, k in cases:
        f = flagos_case(op, batch, m, n, k)
        d = direct.gemm(batch, m, n, k, 1.0 if op == "addmm" else 0.0)
        for _ in range(args.warmup):  # the first call of a shape builds CLBlast's kernels
            f()
            d()
        calls.append((f, d))

    ft.reset_op_stats()
    times: list[dict[str, list[float]]] = [{"flagos": [], "direct": [], "speed": []} for _ in cases]
    for r in range(args.rounds):
        for i, (f, d) in enumerate(calls):
            t = times[i]
            # Pairs of calls, the order alternating: both sides of a pair see
            # the same machine; fewer pairs for slow cases (--round-ms).
            pairs = args.iters
            if t["flagos"]:
                per_pair = statistics.median(t["flagos"]) + statistics.median(t["direct"])
                pairs = max(2, min(args.iters, int(args.round_ms / per_pair)))
            for j in range(pairs):
                order = (
                    ((f, "flagos"), (d, "direct"))
                    if (r + j) % 2 == 0
                    else ((d, "direct"), (f, "flagos"))
                )
                got = {}
                for call, side in order:
                    t0 = time.perf_counter()
                    call()
                    got[side] = (time.perf_counter() - t0) * 1e3
                    t[side].append(got[side])
                t["speed"].append(got["direct"] / got["flagos"])
    stats = ft.op_stats()

    rows = []
    for (op, batch, m, n, k), t in zip(cases, times, strict=True):
        fl, di = statistics.median(t["flagos"]), statistics.median(t["direct"])
        flops = 2.0 * batch * m * n * k
        shape = f"{m}x{n}x{k}" if batch == 1 else f"{batch}x{m}x{n}x{k}"
        native = stats.get(f"aten::{op}", {}).get("native", 0)
        row = {
            "op": op,
            "shape": shape,
            "flagos_ms": round(fl, 3),
            "direct_ms": round(di, 3),
            "speed": round(statistics.median(t["speed"]), 3),
            "speed_q1": round(statistics.quantiles(t["speed"], n=4)[0], 3),
            "speed_q3": round(statistics.quantiles(t["speed"], n=4)[2], 3),
            "pairs": len(t["speed"]),
            "flagos_gflops": round(flops / (fl * 1e6), 2),
            "native_calls": native,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    geo = statistics.geometric_mean([r["speed"] for r in rows])
    print(
        json.dumps(
            {
                "geomean_speed": round(geo, 3),
                "min_speed": min(r["speed"] for r in rows),
                "device": direct.name,
            }
        )
    )

    if args.subprocess_direct:  # the C++ baseline, not interleaved (noisy on a shared machine)
        binary = find_direct(args.clblast_direct)
        for n in args.sizes:
            res = subprocess_direct(binary, n, args.iters, args.warmup)
            print(
                json.dumps(
                    {"clblast_direct_binary": n, "p50_ms": res["p50_ms"], "min_ms": res["min_ms"]}
                )
            )


if __name__ == "__main__":
    main()
