"""PyTorch's whole OpInfo database on flagos (the cuda plugin) against native
CUDA on the same GPU: every OpInfo that CUDA supports in float32 and bfloat16,
up to three samples each, compared with assert_close, and the tier each
catalog overload ran on (op_stats: a host fallback on a GPU is a synchronize
and two bus copies, so each is listed).

    python tests/device/opinfo_vs_cuda.py OUT.json [--seconds 150] [--samples 3]

Tolerances: float32 rtol 1e-4, atol 1e-5 (the CPU sweep's: two GPU kernels
sum in different orders); bfloat16 rtol 1.6e-2 (two ulps at any magnitude;
torch's default) and atol 1e-2 (one ulp at 1.0 is 7.8e-3: cancellation near
zero leaves an absolute error of that size). Random OpInfos are left out (a
separate issue puts the RNG on the device). A GPU fault (a sticky CUDA error)
ends the sweep, recorded as such: every later result would be void.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import torch  # noqa: E402
from torch.utils._pytree import tree_flatten, tree_map  # noqa: E402

RANDOM = (
    "dropout",
    "bernoulli",
    "normal",
    "rand",
    "uniform",
    "multinomial",
    "rrelu",
    "randint",
    "cauchy",
    "exponential",
    "geometric",
    "log_normal",
    "fractional_max_pool",
    "pca_lowrank",
    "svd_lowrank",
)
# Not comparable: uninitialized memory (empty*), CUDA's own runtime compiler
# (jiterator) and CUDA-only kernels (the memory-efficient and flash attention
# entry points, which no other device has; SDPA's math path covers them).
NOT_COMPARABLE = ("empty", "new_empty", "jiterator_", "_efficient_attention", "_flash_attention")
TOLERANCE = {torch.float32: (1e-4, 1e-5), torch.bfloat16: (1.6e-2, 1e-2)}


def opinfo_id(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def run(fn, sample):
    return fn(sample.input, *sample.args, **sample.kwargs)


def flagos_sample(sample):
    """The sample on flagos: native CUDA tensors copied over, CPU tensors left
    where they are (some arguments must be CPU tensors), and a `device=`
    argument of factories pointed at flagos."""

    def move(x):
        if isinstance(x, torch.Tensor) and x.device.type == common.NATIVE:
            return common.to_flagos(x)
        if isinstance(x, torch.device) and x.type == common.NATIVE:
            return torch.device(common.FLAGOS, 0)
        if isinstance(x, str) and x.split(":")[0] == common.NATIVE:
            return common.FLAGOS
        return x

    moved = sample.transform(move)  # tensors (and dtypes) only
    moved.args = tuple(move(a) for a in moved.args)
    moved.kwargs = {k: move(v) for k, v in moved.kwargs.items()}
    return moved


def device_alive() -> bool:
    try:
        torch.flagos.synchronize()
        return True
    except Exception:  # noqa: BLE001 - a sticky fault: the context is gone
        return False


def check_op(op, dtype, max_samples: int, ft) -> dict:
    rtol, atol = TOLERANCE[dtype]
    record = {"passed": 0, "failed": 0, "errors": [], "fallback": {}, "tiers": {}}
    try:
        samples = list(op.sample_inputs(common.NATIVE, dtype, requires_grad=False))[:max_samples]
    except Exception as err:  # noqa: BLE001
        record["skip"] = f"no samples: {str(err).splitlines()[0][:120]}"
        return record
    ft.reset_op_stats()
    for i, sample in enumerate(samples):
        if float(sample.kwargs.get("dropout_p", 0) or 0) > 0:
            continue
        try:
            expected = tree_map(common.to_cpu, run(op.op, sample))
        except Exception:  # noqa: BLE001 - native CUDA rejects it: not a test
            continue
        try:
            dev_sample = flagos_sample(sample)
            actual = run(op.op, dev_sample)
            for t in tree_flatten(actual)[0]:
                if isinstance(t, torch.Tensor) and t.device.type != common.FLAGOS:
                    raise AssertionError(f"result on {t.device}")
            actual = tree_map(common.to_cpu, actual)
            torch.testing.assert_close(
                actual, expected, rtol=rtol, atol=atol, equal_nan=True, check_device=False
            )
            record["passed"] += 1
        except Exception as err:  # noqa: BLE001 - recorded
            record["failed"] += 1
            record["errors"].append(f"sample {i}: {str(err).splitlines()[0][:200]}")
    for overload, tiers in ft.op_stats().items():
        record["tiers"][overload] = tiers
        if tiers.get("fallback"):
            record["fallback"][overload] = tiers["fallback"]
    if record["passed"] + record["failed"] == 0:
        record["skip"] = "native CUDA rejects every sample"
    return record


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--seconds", type=float, default=150.0)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    args = parser.parse_args()
    info = common.init()
    import flagos_torchfl as ft
    from torch.testing._internal.common_methods_invocations import op_db

    results = common.Results(args.out, {**common.meta(), "backend": info["backend"]})
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",")]
    start = time.perf_counter()
    stopped = None
    for k, dtype in enumerate(dtypes):
        # Each dtype gets its share of what is left.
        deadline = start + args.seconds * (k + 1) / len(dtypes)
        for op in op_db:
            if time.perf_counter() > deadline:
                stopped = stopped or f"time budget reached in {dtype}"
                break
            if (
                any(r in op.name for r in RANDOM)
                or any(op.name.startswith(n) or n in op.name for n in NOT_COMPARABLE)
                or dtype not in op.supported_dtypes(common.NATIVE)
            ):
                continue
            key = f"{opinfo_id(op)}|{str(dtype).replace('torch.', '')}"
            record = check_op(op, dtype, args.samples, ft)
            results.add(key, record)
            if record["failed"] and not device_alive():
                stopped = f"GPU fault after {key}: the CUDA context is lost"
                break
        if stopped and "fault" in stopped:
            break
    results.data["meta"]["stopped"] = stopped
    results.data["meta"]["seconds"] = round(time.perf_counter() - start, 1)
    results.data["meta"]["kernel_cache"] = ft.kernel_cache_stats()
    results.flush()
    recs = [r for r in results.data["records"].values() if "skip" not in r]
    ok = sum(1 for r in recs if r["failed"] == 0)
    print(f"opinfo vs native CUDA: {ok}/{len(recs)} OpInfo x dtype pass; stopped: {stopped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
