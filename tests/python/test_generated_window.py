"""Generated window kernels (csrc/jit/gen/window.cpp, Note [Window kernels]):
unfold/fold (im2col/col2im), max/avg/adaptive-avg pooling and their
backwards on the generated tier, against CPU.

Each backend runs one fresh interpreter with FLAGOS_OP_<ID>=generated for the
window operators (host has native pooling kernels; opencl would take them
first too where it has some), then asserts through ft.op_stats() that the
generated tier ran those operators and the host fallback never did.
"""

from __future__ import annotations

from test_generated_tier import backend, run  # noqa: F401  (backend is a fixture)

WINDOW_OPS = (
    "im2col",
    "col2im",
    "max_pool2d",
    "max_pool2d_backward",
    "avg_pool2d",
    "avg_pool2d_backward",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool2d_backward",
    "adaptive_max_pool2d",
    "adaptive_max_pool2d_backward",
    "upsample_nearest2d",
    "upsample_nearest2d_backward",
)
ROUTES = {f"FLAGOS_OP_{op.upper()}": "generated" for op in WINDOW_OPS}
ATEN = {
    "im2col": "aten::im2col",
    "col2im": "aten::col2im",
    "max_pool2d": "aten::max_pool2d_with_indices",
    "max_pool2d_backward": "aten::max_pool2d_with_indices_backward",
    "avg_pool2d": "aten::avg_pool2d",
    "avg_pool2d_backward": "aten::avg_pool2d_backward",
    "adaptive_avg_pool2d": "aten::_adaptive_avg_pool2d",
    "adaptive_avg_pool2d_backward": "aten::_adaptive_avg_pool2d_backward",
    "adaptive_max_pool2d": "aten::adaptive_max_pool2d",
    "adaptive_max_pool2d_backward": "aten::adaptive_max_pool2d_backward",
    "upsample_nearest2d": "aten::upsample_nearest2d",
    "upsample_nearest2d_backward": "aten::upsample_nearest2d_backward",
}

WINDOW_VS_CPU = """
F = torch.nn.functional
torch.manual_seed(0)
x = torch.randn(2, 3, 9, 8)
inputs = {
    "contig": x,
    "channels_last": x.contiguous(memory_format=torch.channels_last),
    "transposed": torch.randn(2, 3, 8, 9).transpose(2, 3),   # not contiguous
    "unbatched": torch.randn(3, 9, 8),
}
xnan = x.clone()
xnan[0, 1, 2, 3] = float("nan")
xnan[1, 2, 4, 4] = float("nan")
xnan[1, 2, 4, 5] = float("nan")
inputs["nan"] = xnan
cols = torch.randn(2, 3 * 2 * 3, 5 * 6)  # fold's input for (9, 8), kernel (2, 3)
cases = {
    "unfold": (lambda t: F.unfold(t, (2, 3), dilation=(1, 2), padding=(1, 2), stride=(2, 1)),
               ["contig", "channels_last", "transposed", "unbatched"]),
    "fold": (lambda t: F.fold(t, (9, 8), (2, 3), padding=(1, 0), stride=(2, 1)), ["cols", "cols_t"]),
    "max_pool2d": (lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True, return_indices=True),
                   ["contig", "channels_last", "transposed", "unbatched", "nan"]),
    "max_pool2d_dilated": (lambda t: F.max_pool2d(t, (2, 3), (1, 2), (1, 1), dilation=2,
                                                  return_indices=True),
                           ["contig", "channels_last", "nan"]),
    "avg_pool2d": (lambda t: F.avg_pool2d(t, 3, 2, 1),
                   ["contig", "channels_last", "transposed", "unbatched"]),
    "avg_pool2d_ceil_no_pad": (lambda t: F.avg_pool2d(t, (3, 2), (2, 3), (1, 1), ceil_mode=True,
                                                      count_include_pad=False),
                               ["contig", "channels_last", "transposed"]),
    "avg_pool2d_divisor": (lambda t: F.avg_pool2d(t, 2, divisor_override=3),
                           ["contig", "channels_last"]),
    "adaptive_avg_pool2d": (lambda t: F.adaptive_avg_pool2d(t, (4, 5)),
                            ["contig", "channels_last", "transposed", "unbatched"]),
    "adaptive_avg_pool2d_up": (lambda t: F.adaptive_avg_pool2d(t, (11, 3)),
                               ["contig", "channels_last"]),
    "adaptive_max_pool2d": (lambda t: F.adaptive_max_pool2d(t, (4, 3), return_indices=True),
                            ["contig", "channels_last", "transposed", "unbatched", "nan"]),
    "nearest_size": (lambda t: F.interpolate(t, size=(13, 5), mode="nearest"),
                     ["contig", "channels_last", "transposed"]),
    "nearest_double": (lambda t: F.interpolate(t, scale_factor=2, mode="nearest"),
                       ["contig", "channels_last"]),
    "nearest_scale": (lambda t: F.interpolate(t, scale_factor=(1.7, 0.6), mode="nearest"),
                      ["contig", "transposed"]),
}
inputs["cols"] = cols
inputs["cols_t"] = torch.randn(2, 5 * 6, 3 * 2 * 3).transpose(1, 2)


def compare(fn, cpu_in, dtype):
    # bfloat16: CPU rounds some sums per step, the kernels once at the end.
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {}
    cpu_in = cpu_in.to(dtype)
    a = cpu_in.clone().requires_grad_()
    d = cpu_in.to(dev).requires_grad_()
    assert d.stride() == cpu_in.stride(), (d.stride(), cpu_in.stride())
    want, got = fn(a), fn(d)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for w, g in zip(want, got):
        torch.testing.assert_close(g.cpu(), w, equal_nan=True, **tol)
    grad = torch.randn_like(want[0])
    want[0].backward(grad)
    got[0].backward(grad.to(dev))
    torch.testing.assert_close(d.grad.cpu(), a.grad, equal_nan=True, **tol)


bad = {}
ran = 0
def sweep(dtypes):
    global ran
    for name, (fn, names) in cases.items():
        for key in names:
            for dtype in dtypes:
                try:
                    compare(fn, inputs[key], dtype)
                    ran += 1
                except Exception as e:
                    bad[f"{name}[{key}, {dtype}]"] = str(e)[:400]

sweep([torch.float32])
ft.wait_for_specializations()
fp64 = all(d["fp64"] for d in ft.kernel_cache_stats()["devices"])
sweep([torch.bfloat16] + ([torch.float64] if fp64 else []))
print(json.dumps({"bad": bad, "ran": ran, "tiers": ft.op_stats(), "stats": stats()}))
"""


def test_generated_window_kernels_match_cpu(backend, tmp_path):  # noqa: F811
    r = run(backend, WINDOW_VS_CPU, tmp_path, **ROUTES)
    assert r["bad"] == {}, r["bad"]
    assert r["ran"] >= 2 * 41, r["ran"]  # float32 and bfloat16 (float64 with fp64)
    for op in WINDOW_OPS:
        tiers = r["tiers"].get(ATEN[op], {})
        assert tiers.get("generated", 0) > 0, (op, tiers)
        assert tiers.get("fallback", 0) == 0, (op, tiers)
    assert r["stats"]["build_failures"] == 0 and r["stats"]["failed_calls"] == 0, r["stats"]
