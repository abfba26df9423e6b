"""The host plugin's OpenBLAS / oneDNN and torch's own copies in one process.

The host plugin (backends/host) links the system's OpenBLAS and oneDNN 2.x;
libtorch_cpu carries its own oneDNN and MKL. The core dlopens plugins with
RTLD_LOCAL, so each side must keep binding to its own copy:
  - both run in one process and give the same numbers (flagos native tier vs
    torch's CPU kernels, interleaved);
  - /proc/self/maps holds the system libdnnl / libopenblas next to
    libtorch_cpu;
  - the global symbol scope is the same before and after the plugin loads
    (nothing of torch is interposed), and whatever the global scope offers
    for the names the plugin imports from its libraries is its own copy
    (else the plugin's references would bind to torch's);
  - the plugin's libdnnl answers dnnl_version() itself.
Runs in a fresh interpreter (the plugin is loaded once per process).
"""

from __future__ import annotations

import json

import pytest
from conftest import check_ok, python_subprocess

CODE = r"""
import ctypes, ctypes.util, json, os, re
import torch

RTLD_DEFAULT = None  # glibc: ((void *) 0)


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


libc = ctypes.CDLL(None)
try:
    libc.dladdr
    libdl = libc
except AttributeError:  # glibc < 2.34
    libdl = ctypes.CDLL(ctypes.util.find_library("dl"))
libdl.dlsym.restype = ctypes.c_void_p
libdl.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
libdl.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]

# Names libtorch_cpu may export (MKL's Fortran BLAS) and names the plugin
# imports from OpenBLAS / oneDNN.
TORCH_SYMS = ["sgemm_", "sgemm", "dgemm_", "cblas_sgemm", "dnnl_version", "dnnl_sgemm"]
PLUGIN_SYMS = {
    "openblas": ["cblas_sgemm", "cblas_dgemm"],
    "dnnl": ["dnnl_version", "dnnl_engine_create", "dnnl_memory_create",
             "dnnl_primitive_execute", "dnnl_stream_create"],
}


def owner(name, handle=RTLD_DEFAULT):
    addr = libdl.dlsym(handle, name.encode())
    if not addr:
        return None
    info = DlInfo()
    if not libdl.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) or not info.dli_fname:
        return "?"
    return os.path.realpath(info.dli_fname.decode())


def mapped():
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/"):
                paths.add(os.path.realpath(parts[5]))
    return sorted(paths)


def find(paths, fragment):
    return [p for p in paths if fragment in os.path.basename(p)]


torch.set_num_threads(2)
torch.manual_seed(0)
x = torch.randn(2, 3, 16, 16)
w = torch.randn(8, 3, 3, 3)
a = torch.randn(32, 48)
b = torch.randn(48, 24)
cpu_before = (torch.nn.functional.conv2d(x, w, padding=1), a @ b)  # torch's kernels first
global_before = {s: owner(s) for s in TORCH_SYMS}

import flagos_torchfl as ft
ft.initialize(backend="host")
ft.reset_op_stats() if hasattr(ft, "reset_op_stats") else None
d = "flagos"
dev = (torch.nn.functional.conv2d(x.to(d), w.to(d), padding=1).cpu(), (a.to(d) @ b.to(d)).cpu())
cpu_after = (torch.nn.functional.conv2d(x, w, padding=1), a @ b)   # and again, interleaved
dev2 = torch.nn.functional.conv2d(x.to(d), w.to(d), padding=1).cpu()
for got, want in zip(dev + (dev2,), cpu_before + cpu_after[:1]):
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
for got, want in zip(cpu_after, cpu_before):
    torch.testing.assert_close(got, want, rtol=0, atol=0)

paths = mapped()
torch_dir = os.path.realpath(os.path.dirname(torch.__file__))
libs = {
    "torch_cpu": find(paths, "libtorch_cpu"),
    "dnnl": [p for p in find(paths, "libdnnl") if not p.startswith(torch_dir)],
    "openblas": [p for p in find(paths, "libopenblas") if not p.startswith(torch_dir)],
    "gomp": find(paths, "gomp"),
}
def handle(path):  # the loaded object's own lookup scope (itself, then its needed libraries)
    return ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOLOAD)._handle


plugin = [p for p in paths if os.path.basename(p).startswith("libflagos_host")]
plugin_own = {}
if plugin:
    h = handle(plugin[0])
    plugin_own = {s: owner(s, h) for v in PLUGIN_SYMS.values() for s in v}
h = handle(libs["torch_cpu"][0])
torch_own = {s: owner(s, h) for s in ["sgemm_", "dgemm_", "cblas_sgemm", "dnnl_version"]}
plugin_version = None
if libs["dnnl"]:
    class Version(ctypes.Structure):
        _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                    ("hash", ctypes.c_char_p)]
    own = ctypes.CDLL(libs["dnnl"][0], mode=os.RTLD_LOCAL | os.RTLD_NOLOAD)
    own.dnnl_version.restype = ctypes.POINTER(Version)
    v = own.dnnl_version().contents
    plugin_version = [v.major, v.minor, v.patch]
m = re.search(r"(?:oneDNN|MKL-DNN) v(\d+)\.(\d+)(?:\.(\d+))?", torch.__config__.show())
stats = ft.op_stats()
print(json.dumps({
    "libs": libs,
    "global_before": global_before,
    "global_after": {s: owner(s) for s in TORCH_SYMS},
    "plugin_imports": {k: {s: owner(s) for s in v} for k, v in PLUGIN_SYMS.items()},
    "plugin": plugin,
    "plugin_own": plugin_own,
    "torch_own": torch_own,
    "plugin_dnnl_version": plugin_version,
    "torch_dnnl_version": [int(g) for g in m.groups() if g] if m else None,
    "mkldnn": torch.backends.mkldnn.is_available(),
    "conv_tiers": stats.get("aten::convolution", {}),
    "mm_tiers": stats.get("aten::mm", {}),
    "torch_dir": torch_dir,
}))
"""


@pytest.fixture(scope="module")
def facts() -> dict:
    proc = python_subprocess(CODE, timeout=600)
    return json.loads(check_ok(proc).strip().splitlines()[-1])


def test_both_libraries_compute_the_same_in_one_process(facts):
    # CODE asserted flagos == CPU (interleaved); here: the device ran them natively
    assert facts["conv_tiers"].get("native", 0) >= 2, facts["conv_tiers"]
    assert facts["mm_tiers"].get("native", 0) >= 1, facts["mm_tiers"]
    assert set(facts["conv_tiers"]) == {"native"}, facts["conv_tiers"]


def test_plugin_and_torch_libraries_are_both_mapped(facts):
    libs = facts["libs"]
    assert libs["torch_cpu"], libs
    assert libs["openblas"], f"the host plugin's OpenBLAS is not mapped: {libs}"
    if not libs["dnnl"]:
        pytest.skip("the host plugin was built without oneDNN (find_package(dnnl) failed)")
    for p in libs["dnnl"] + libs["openblas"]:
        assert not p.startswith(facts["torch_dir"]), p


def test_loading_the_plugin_interposes_nothing_of_torch(facts):
    # the global scope resolves every name exactly as before the plugin came
    assert facts["global_after"] == facts["global_before"], (
        facts["global_before"],
        facts["global_after"],
    )
    # RTLD_LOCAL: the plugin's oneDNN stays out of the global scope, or at
    # least never shadows a symbol of torch's
    for name, path in facts["global_after"].items():
        if path and ("libdnnl" in path or "libopenblas" in path):
            assert facts["global_before"][name] == path, (name, path)


def test_the_plugin_binds_to_its_own_libraries(facts):
    # Symbols of a RTLD_LOCAL library bind to the global scope first: had
    # torch (or anything global) exported these names, the plugin would call
    # that copy. Whatever the global scope offers must be the plugin's own.
    libs = facts["libs"]
    for family, syms in facts["plugin_imports"].items():
        own = set(libs[family])
        for name, path in syms.items():
            assert path is None or path in own, (
                f"{name}: the global scope resolves it to {path}, not the plugin's {own}"
            )


def test_each_side_resolves_to_its_own_copy(facts):
    # lookups in each object's own scope (what its references see after the
    # global scope): the plugin -> system OpenBLAS / oneDNN; libtorch_cpu ->
    # itself (its MKL / oneDNN are compiled in) or nothing, never the plugin's
    libs = facts["libs"]
    assert facts["plugin"], "the host plugin is not mapped"
    for family, syms in (("openblas", ["cblas_sgemm", "cblas_dgemm"]), ("dnnl", ["dnnl_version"])):
        if not libs[family]:
            continue
        for name in syms:
            assert facts["plugin_own"][name] in libs[family], (name, facts["plugin_own"][name])
    plugin_libs = set(libs["dnnl"] + libs["openblas"] + facts["plugin"])
    for name, path in facts["torch_own"].items():
        assert path not in plugin_libs, f"torch's {name} resolves into the plugin's {path}"


def test_the_plugin_reports_its_own_onednn_version(facts):
    if not facts["libs"]["dnnl"]:
        pytest.skip("the host plugin was built without oneDNN")
    version = facts["plugin_dnnl_version"]
    assert version and version[0] >= 2, version
    if facts["torch_dnnl_version"] and facts["mkldnn"]:
        # two copies, each answering for itself (torch's is compiled in)
        print("plugin oneDNN", version, "torch oneDNN", facts["torch_dnnl_version"])
