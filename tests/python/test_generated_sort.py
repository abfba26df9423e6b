"""Generated sort kernels (csrc/jit/gen/sort.cpp, Note [Sort kernels]): sort
and topk as rank sorts, argmax/argmin/max.dim/min.dim, and bilinear
upsampling and its backward (csrc/jit/gen/window.cpp) on the generated tier,
against CPU.

Each backend runs one fresh interpreter with FLAGOS_OP_<ID>=generated for
these operators (host has native kernels for some of them), then asserts
through ft.op_stats() that the generated tier ran them and the host
fallback never did. Rows longer than the rank sort's limit (4096) are a
multi-pass merge sort over scratch memory (Note [Long sorts] in
csrc/jit/gen/sort.cpp), on the generated tier too.
"""

from __future__ import annotations

from test_generated_tier import backend, run  # noqa: F401  (backend is a fixture)

SORT_OPS = (
    "sort",
    "topk",
    "argmax",
    "argmin",
    "max_dim",
    "min_dim",
    "upsample_bilinear2d",
    "upsample_bilinear2d_backward",
)
ROUTES = {f"FLAGOS_OP_{op.upper()}": "generated" for op in SORT_OPS}
ATEN = {
    "sort": "aten::sort.stable",
    "topk": "aten::topk",
    "argmax": "aten::argmax",
    "argmin": "aten::argmin",
    "max_dim": "aten::max.dim",
    "min_dim": "aten::min.dim",
    "upsample_bilinear2d": "aten::upsample_bilinear2d",
    "upsample_bilinear2d_backward": "aten::upsample_bilinear2d_backward",
}

# Both scripts' check for sort(stable=False); `same` is each script's own.
UNSTABLE_SORT = """
def unstable_sort(dim, descending):
    # stable=False: values equal to CPU's, indices a permutation giving them.
    def check(x, d):
        w = torch.sort(x, dim=dim, descending=descending)
        g = torch.sort(d, dim=dim, descending=descending)
        same(g.values, w.values)
        same(x.gather(dim, g.indices.cpu()), w.values)
    return check
"""

SORT_VS_CPU = (
    """
F = torch.nn.functional
torch.manual_seed(0)
nan = float("nan")

def ties(*shape):
    # Few distinct values (ties), NaN, infinities and signed zeros.
    t = torch.randint(-3, 4, shape).double()
    flat = t.view(-1)
    flat[::7] = nan
    flat[3::11] = float("inf")
    flat[5::13] = -float("inf")
    flat[2::17] = -0.0
    return t

def distinct(*shape):
    # Distinct values (topk's tie order is unspecified), a few NaN.
    n = 1
    for s in shape:
        n *= s
    t = (torch.randperm(n).double() - n / 2).view(shape)
    t.view(-1)[4::19] = nan
    return t

inputs = {
    "ties": ties(5, 9, 6),
    "ties_t": ties(6, 9, 5).transpose(0, 2),     # not contiguous
    "distinct": distinct(4, 10, 7),
    "distinct_t": distinct(7, 10, 4).permute(2, 1, 0),
    "row": ties(33),
    "scalar": torch.tensor(1.5, dtype=torch.float64),
    "image": torch.randn(2, 3, 9, 8, dtype=torch.float64),
    "image_cl": torch.randn(2, 3, 9, 8, dtype=torch.float64).contiguous(
        memory_format=torch.channels_last),
    "image_t": torch.randn(2, 3, 8, 9, dtype=torch.float64).transpose(2, 3),
}

def same(got, want, strides=False):
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    if strides:
        assert got.stride() == want.stride() or got.numel() <= 1, (got.stride(), want.stride())
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, rtol=0, atol=0)

def exact(fn):
    # Every output equal to CPU's (values and indices).
    def check(x, d):
        want, got = fn(x), fn(d)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        for w, g in zip(want, got):
            same(g, w, strides=True)
    return check

def unsorted_topk(k, dim, largest):
    # sorted=False: CPU's order is unspecified; compare after sorting both.
    def check(x, d):
        w = torch.topk(x, k, dim, largest, sorted=False)
        g = torch.topk(d, k, dim, largest, sorted=False)
        ws, wi = torch.sort(w.values, dim=dim, descending=largest, stable=True)
        gs, gi = torch.sort(g.values.cpu(), dim=dim, descending=largest, stable=True)
        same(gs, ws)
        same(g.indices.cpu().gather(dim, gi), w.indices.gather(dim, wi))
        same(x.gather(dim, g.indices.cpu()), g.values.cpu())
    return check

"""
    + UNSTABLE_SORT
    + """
def bilinear(**kw):
    def check(x, d):
        tol = {"rtol": 2e-2, "atol": 2e-2} if x.dtype == torch.bfloat16 else {}
        a = x.clone().requires_grad_()
        b = d.clone().requires_grad_()
        want = F.interpolate(a, mode="bilinear", **kw)
        got = F.interpolate(b, mode="bilinear", **kw)
        torch.testing.assert_close(got.cpu(), want, **tol)
        grad = torch.randn_like(want)
        want.backward(grad)
        got.backward(grad.to(dev))
        torch.testing.assert_close(b.grad.cpu(), a.grad, **tol)
    return check

SORTABLE = ["ties", "ties_t", "row", "scalar"]
DISTINCT = ["distinct", "distinct_t"]
IMAGES = ["image", "image_cl", "image_t"]
cases = {
    "sort_stable": (exact(lambda t: torch.sort(t, dim=1, stable=True)), SORTABLE[:2]),
    "sort_stable_desc_dim0": (
        exact(lambda t: torch.sort(t, dim=0, descending=True, stable=True)), SORTABLE),
    "sort_stable_last": (exact(lambda t: torch.sort(t, dim=-1, stable=True)), SORTABLE),
    "argsort_stable_desc": (
        exact(lambda t: torch.argsort(t, dim=-1, descending=True, stable=True)), SORTABLE),
    "sort_unstable": (unstable_sort(1, False), SORTABLE[:2] + DISTINCT),
    "sort_unstable_desc": (unstable_sort(2, True), SORTABLE[:2] + DISTINCT),
    "topk": (exact(lambda t: torch.topk(t, 3, dim=1)), DISTINCT),
    "topk_smallest_dim0": (exact(lambda t: torch.topk(t, 2, dim=0, largest=False)), DISTINCT),
    "topk_last": (exact(lambda t: torch.topk(t, 5)), DISTINCT),
    "topk_unsorted": (unsorted_topk(4, 1, True), DISTINCT),
    "topk_unsorted_smallest": (unsorted_topk(3, 2, False), DISTINCT),
    "argmax": (exact(lambda t: torch.argmax(t)), SORTABLE + DISTINCT),
    "argmin_keepdim": (exact(lambda t: torch.argmin(t, keepdim=True)), SORTABLE[:2] + DISTINCT),
    "argmax_dim": (exact(lambda t: torch.argmax(t, dim=1)), SORTABLE[:2] + DISTINCT),
    "argmin_dim_keepdim": (exact(lambda t: torch.argmin(t, dim=0, keepdim=True)),
                           SORTABLE + DISTINCT),
    "max_dim": (exact(lambda t: torch.max(t, dim=1)), SORTABLE[:2] + DISTINCT),
    "max_dim_keepdim": (exact(lambda t: torch.max(t, dim=-1, keepdim=True)), SORTABLE),
    "min_dim": (exact(lambda t: torch.min(t, dim=2)), SORTABLE[:2] + DISTINCT),
    "min_dim_keepdim": (exact(lambda t: torch.min(t, dim=0, keepdim=True)), SORTABLE),
    "bilinear_size": (bilinear(size=(13, 5)), IMAGES),
    "bilinear_size_align": (bilinear(size=(4, 17), align_corners=True), IMAGES),
    "bilinear_same_h": (bilinear(size=(9, 3)), IMAGES[:2]),
    "bilinear_scale": (bilinear(scale_factor=(1.7, 0.6)), IMAGES),
    "bilinear_scale_align": (bilinear(scale_factor=2.5, align_corners=True), IMAGES[:2]),
    "bilinear_one": (bilinear(size=(1, 1), align_corners=True), IMAGES[:1]),
}

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.int16, torch.uint8]
bad = {}
ran = 0
def sweep(dtypes):
    global ran
    for name, (check, names) in cases.items():
        for key in names:
            for dtype in dtypes:
                x = inputs[key]
                if name.startswith("bilinear"):
                    if dtype not in (torch.float32, torch.float64, torch.bfloat16):
                        continue
                elif not dtype.is_floating_point:
                    x = x.nan_to_num(0, 100, -100)
                    if dtype == torch.uint8:
                        if key in DISTINCT:
                            continue  # not distinct in 8 bits
                        x = x.abs()
                x = x.to(dtype)
                d = torch.empty_strided(x.shape, x.stride(), dtype=dtype, device=dev)
                d.copy_(x)
                try:
                    check(x, d)
                    ran += 1
                except Exception as e:
                    bad[f"{name}[{key}, {dtype}]"] = str(e)[:400]

sweep([torch.float32])
ft.wait_for_specializations()
fp64 = all(d["fp64"] for d in ft.kernel_cache_stats()["devices"])
sweep(FLOATS[1:] + INTS + ([torch.float64] if fp64 else []))
tiers = ft.op_stats()

# Rows longer than 4096: a merge sort in several passes, still generated.
long = torch.randn(2, 5000)
w = torch.sort(long, dim=1, stable=True)
g = torch.sort(long.to(dev), dim=1, stable=True)
long_ok = torch.equal(g.values.cpu(), w.values) and torch.equal(g.indices.cpu(), w.indices)
# Values aliasing the input (out=): declined too (the rank sort reads the row).
x = inputs["ties"].float()
d = x.to(dev)
i = torch.empty(x.shape, dtype=torch.long, device=dev)
torch.sort(d, dim=1, stable=True, out=(d, i))
w = torch.sort(x, dim=1, stable=True)
try:
    same(d, w.values)
    same(i, w.indices)
    alias_ok = True
except AssertionError as e:
    alias_ok = str(e)[:400]
after = ft.op_stats().get("aten::sort.stable", {})
after_out = ft.op_stats().get("aten::sort.values_stable", {})
print(json.dumps({"bad": bad, "ran": ran, "tiers": tiers, "after": after, "long_ok": long_ok,
                  "alias_ok": alias_ok, "after_out": after_out,
                  "stats": stats()}))
"""
)


def test_generated_sort_kernels_match_cpu(backend, tmp_path):  # noqa: F811
    r = run(backend, SORT_VS_CPU, tmp_path, **ROUTES)
    assert r["bad"] == {}, r["bad"]
    assert r["ran"] >= 300, r["ran"]
    for op in SORT_OPS:
        tiers = r["tiers"].get(ATEN[op], {})
        assert tiers.get("generated", 0) > 0, (op, tiers)
        assert tiers.get("fallback", 0) == 0, (op, tiers)
    assert r["stats"]["build_failures"] == 0 and r["stats"]["failed_calls"] == 0, r["stats"]
    # The long row was generated (Note [Long sorts]); the aliased output was
    # declined (no generated launch), another tier sorted it; both match CPU.
    assert r["long_ok"]
    assert r["alias_ok"] is True, r["alias_ok"]
    before = r["tiers"][ATEN["sort"]]
    assert r["after"].get("generated", 0) == before.get("generated", 0) + 1, (r["after"], before)
    assert sum(r["after"].values()) == sum(before.values()) + 1, (r["after"], before)
    out = r["after_out"]  # the out= overload
    assert out.get("generated", 0) == 0 and sum(out.values()) == 1, out


LONG_VS_CPU = (
    """
torch.manual_seed(0)
nan, inf = float("nan"), float("inf")

def ties(*shape, levels=7):
    # Many duplicates, NaN, infinities and signed zeros.
    t = torch.randint(-(levels // 2), levels // 2 + 1, shape).double()
    flat = t.view(-1)
    flat[::7] = nan
    flat[3::11] = inf
    flat[5::13] = -inf
    flat[2::17] = -0.0
    return t

def distinct(n, rows=1):
    # Distinct values (topk's tie order is unspecified), exact in float32.
    return torch.stack([(torch.randperm(n) - n // 2).double() for _ in range(rows)])

inputs = {
    "5000": ties(2, 5000),
    "10000": ties(10000),
    "65537": ties(65537, levels=1001),
    "4099_mid": ties(3, 4099, 2),                   # dim 1 of 3: strided rows
    "6001_t": ties(6001, 3).t(),                    # not contiguous
    "8192_pow2": ties(4, 8192, levels=3),
}

def same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, rtol=0, atol=0)

def stable_sort(dim, descending):
    def check(x, d):
        w = torch.sort(x, dim=dim, descending=descending, stable=True)
        g = torch.sort(d, dim=dim, descending=descending, stable=True)
        same(g.values, w.values)
        same(g.indices, w.indices)
    return check

"""
    + UNSTABLE_SORT
    + """
def argsort(dim, descending):
    def check(x, d):
        same(torch.argsort(d, dim=dim, descending=descending, stable=True),
             torch.argsort(x, dim=dim, descending=descending, stable=True))
    return check

def msort(x, d):
    same(torch.msort(d), torch.msort(x))

cases = {
    "sort_asc": (stable_sort(-1, False), list(inputs)),
    "sort_desc": (stable_sort(-1, True), list(inputs)),
    "sort_mid_dim": (stable_sort(1, True), ["4099_mid"]),
    "sort_mid_dim_asc": (stable_sort(1, False), ["4099_mid"]),
    "sort_dim0": (stable_sort(0, False), ["10000", "65537"]),
    "sort_unstable": (unstable_sort(-1, False), ["5000", "6001_t"]),
    "sort_unstable_desc": (unstable_sort(-1, True), ["8192_pow2"]),
    "argsort_desc": (argsort(-1, True), ["5000", "10000"]),
}
FLOATS = [torch.float32, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]
bad = {}
ran = 0
fp64 = None
def to_dev(x):
    d = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=dev)
    d.copy_(x)
    return d
def sweep(dtypes):
    global ran
    for name, (check, names) in cases.items():
        for key in names:
            for dtype in dtypes:
                x = inputs[key]
                if not dtype.is_floating_point:
                    x = x.nan_to_num(0, 100, -100)
                    if dtype in (torch.uint8, torch.bool):
                        x = x.abs()
                    if dtype == torch.int8:
                        x = x.clamp(-128, 127)
                if dtype == torch.float16 and key == "65537":
                    x = x.clamp(-1000, 1000)
                x = x.to(dtype)
                try:
                    check(x, to_dev(x))
                    ran += 1
                except Exception as e:
                    bad[f"{name}[{key}, {dtype}]"] = str(e)[:400]

sweep([torch.float32])
fp64 = all(d["fp64"] for d in ft.kernel_cache_stats()["devices"])
sweep(FLOATS[1:] + INTS + ([torch.float64] if fp64 else []))

# msort (sort along dim 0) of long columns.
for dtype in [torch.float32, torch.int32]:
    x = inputs["10000"].nan_to_num(0, 100, -100).to(dtype).view(2500, 4)
    try:
        msort(x, to_dev(x))
        ran += 1
    except Exception as e:
        bad[f"msort[{dtype}]"] = str(e)[:400]

# topk of long rows: exact against CPU on distinct values (k small, k = len),
# and values / gather consistency with NaN present.
topk_in = {"9000": distinct(9000, 3), "65536": distinct(65536), "4097": distinct(4097, 2)}
for key, x in topk_in.items():
    n = x.shape[-1]
    for dtype in [torch.float32, torch.int64] + ([torch.float64] if fp64 else []):
        xt = x.to(dtype)
        for k in (1, 7, n // 3, n):
            for largest in (True, False):
                try:
                    w = torch.topk(xt, k, largest=largest)
                    g = torch.topk(to_dev(xt), k, largest=largest)
                    same(g.values, w.values)
                    same(g.indices, w.indices)
                    ran += 1
                except Exception as e:
                    bad[f"topk[{key}, {dtype}, k={k}, {largest}]"] = str(e)[:400]
x = inputs["5000"].float()
for largest in (True, False):
    try:
        w = torch.topk(x, 100, dim=1, largest=largest)
        g = torch.topk(to_dev(x), 100, dim=1, largest=largest)
        same(g.values, w.values)
        same(x.gather(1, g.indices.cpu()), w.values)
        ran += 1
    except Exception as e:
        bad[f"topk_nan[{largest}]"] = str(e)[:400]
print(json.dumps({"bad": bad, "ran": ran, "tiers": ft.op_stats(), "stats": stats()}))
"""
)


def test_generated_sort_long_rows_match_cpu(backend, tmp_path):  # noqa: F811
    # Note [Long sorts]: rows longer than 4096 on the generated tier, every
    # call, against CPU (values and, for stable sorts, indices exactly).
    r = run(backend, LONG_VS_CPU, tmp_path, **ROUTES)
    assert r["bad"] == {}, r["bad"]
    assert r["ran"] >= 150, r["ran"]
    for aten in ("aten::sort.stable", "aten::sort", "aten::topk"):
        tiers = r["tiers"].get(aten, {})
        if aten == "aten::sort" and not tiers:
            continue  # sort(stable=False) may reach sort.stable directly
        assert tiers.get("generated", 0) > 0, (aten, tiers)
        assert tiers.get("generated", 0) == sum(tiers.values()), (aten, tiers)
    assert r["stats"]["build_failures"] == 0 and r["stats"]["failed_calls"] == 0, r["stats"]
    assert r["stats"]["declined"] == 0, r["stats"]
