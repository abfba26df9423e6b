"""`flagos-torchfl doctor`: environment checks, each a finding with severity and fix.

    doctor(backend=None) -> {"findings": [...], "errors": n, "warnings": n}

A finding is {"check", "severity" (ok / warn / error), "message", "fix"}.
Checks: torch version, PrivateUse1 ownership, plugin discovery (and why each
plugin was skipped), SDK / driver / ABI versions, the autocast default per
backend, same-named runtime libraries from different places (LD_LIBRARY_PATH,
`ldconfig -p`, this process's /proc/self/maps), several vendor runtimes
loaded at once, WSL, a writable kernel cache folder, and the cuda alias next
to torch's own stack (what torch introspects on torch.cuda; torch._dynamo's
import).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from .. import config
from ._output import add_output_arguments, paint, render, use_colour, write_json, write_junit

MIN_TORCH = (2, 11)
# Libraries whose duplicates cause trouble: vendor runtimes, ICD loaders,
# BLAS and OpenMP runtimes (two of them in one process fight over threads).
_WATCHED = re.compile(
    r"^lib(OpenCL|cuda|cudart|cublas|cublasLt|cudnn|nccl|amdhip64|rocblas|rccl|hsa-runtime64|"
    r"ze_loader|ze_intel_gpu|ascendcl|hccl|cnrt|cndrv|mlu|topsrt|openblas|mkl_rt|blas|lapack|"
    r"gomp|iomp5|omp|flagos_[a-z0-9_]+)\.so(\.[0-9.]+)?$"
)
# A vendor runtime each: more than one of these loaded at once is worth a warning.
_RUNTIMES = {
    "libcuda": "NVIDIA CUDA driver",
    "libamdhip64": "AMD HIP",
    "libze_loader": "Intel Level Zero",
    "libascendcl": "Huawei Ascend CANN",
    "libcnrt": "Cambricon CNRT",
    "libtopsrt": "Enflame TopsRider",
    "libOpenCL": "OpenCL ICD loader",
}
_SEVERITIES = ("ok", "warn", "error")


def _finding(check: str, severity: str, message: str, fix: str = "") -> dict[str, str]:
    return {"check": check, "severity": severity, "message": message, "fix": fix}


def _digest(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return hashlib.sha1(f.read()).hexdigest()[:12]
    except OSError:
        return "?"


def _torch_version() -> list[dict[str, str]]:
    import torch

    found = tuple(int(x) for x in re.findall(r"\d+", torch.__version__)[:2])
    if found >= MIN_TORCH:
        return [_finding("torch", "ok", f"torch {torch.__version__}")]
    want = ".".join(map(str, MIN_TORCH))
    return [
        _finding(
            "torch",
            "error",
            f"torch {torch.__version__} is older than {want}",
            f"pip install 'torch>={want}' and rebuild flagos-torchfl against it",
        )
    ]


def _privateuse1() -> list[dict[str, str]]:
    import torch

    owner = torch._C._get_privateuse1_backend_name()
    if owner in ("privateuseone", "flagos"):
        return [_finding("PrivateUse1", "ok", f"PrivateUse1 is '{owner}'")]
    return [
        _finding(
            "PrivateUse1",
            "error",
            f"PyTorch's PrivateUse1 device is claimed by '{owner}'",
            "run with TORCH_DEVICE_BACKEND_AUTOLOAD=0, or uninstall the extension that "
            f"registers '{owner}'",
        )
    ]


_REASON_FIXES = (
    (
        "dlopen failed",
        "install the vendor SDK/runtime the plugin links against, or add its "
        "folder to LD_LIBRARY_PATH (`ldd PLUGIN` shows what is missing)",
    ),
    ("ABI", "use a plugin built for this flagos-torchfl (same ABI major version)"),
    (
        "no device",
        "check the driver (device nodes, permissions), or the plugin's device "
        "selection variable (FLAGOS_OPENCL_DEVICE_TYPE, FLAGOS_HOST_DEVICES)",
    ),
    ("not a flagos plugin", "remove the file from FLAGOS_PLUGIN_PATH / the plugins folder"),
)


def _fix_for(reason: str) -> str:
    for needle, fix in _REASON_FIXES:
        if needle.lower() in reason.lower():
            return fix
    return "see the reason; `flagos-torchfl info` lists every candidate"


def _backend(backend: str | None) -> tuple[list[dict[str, str]], dict[str, Any] | None]:
    from .. import _core, amp, backend_info, initialize

    findings = []
    info = None
    try:
        initialize(backend)
        info = backend_info(verbose=False)
    except (RuntimeError, ValueError, ImportError) as err:
        findings.append(
            _finding(
                "backend",
                "error",
                f"the flagos device could not be initialized: {err}",
                "read the per-plugin reasons below; `FLAGOS_BACKEND=host` always works on CPU",
            )
        )
    try:
        report = [dict(r) for r in _core.C()._discovery_report()]
    except (ImportError, RuntimeError):
        report = []
    if not report and info is None:
        findings.append(
            _finding(
                "plugins",
                "error",
                "no plugin candidates found",
                "put libflagos_<vendor>.so in FLAGOS_PLUGIN_PATH or the package's plugins/ folder",
            )
        )
    for r in report:
        where = r["path"]
        if r["status"] in ("selected", "usable"):
            findings.append(
                _finding(
                    f"plugin {r['name']}", "ok", f"{r['status']} (rank {r['priority']}), {where}"
                )
            )
        else:
            findings.append(
                _finding(
                    f"plugin {r['name']}",
                    "warn",
                    f"{r['status']}: {r['reason'] or 'no reason given'} ({where})",
                    _fix_for(r["reason"] or ""),
                )
            )
    if info is not None:
        sdk = f"{info['sdk']} {info['sdk_version']}".strip()
        findings.append(
            _finding(
                "versions",
                "ok",
                f"backend {info['backend']} {info['plugin_version']}, ABI {info['abi']}, SDK {sdk}, "
                f"driver {info['driver_version'] or '-'}, {info['device_count']} device(s)",
            )
        )
        if info["device_count"] == 0:
            findings.append(
                _finding(
                    "devices",
                    "warn",
                    f"backend {info['backend']} reports no device",
                    "check the driver, FLAGOS_VISIBLE_DEVICES and the plugin's device variables",
                )
            )
        policy = amp.get_policy()
        findings.append(
            _finding(
                f"autocast {info['backend']}",
                "ok",
                f"torch.autocast('flagos') default dtype on {info['backend']}: "
                f"{str(policy.dtype).replace('torch.', '')} ({policy.source})",
            )
        )
        # Other usable plugins' preferences are device properties, known
        # only once a plugin is initialized (one backend per process).
    return findings, info


def _ldconfig() -> list[str]:
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    arch = "x86-64" if platform.machine() == "x86_64" else platform.machine()
    paths = []
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)", line)
        if m and (arch in m.group(2) or "64" not in m.group(2)):
            paths.append(m.group(3))
    return paths


def _loaded() -> list[str]:
    try:
        text = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    return sorted({line.split()[-1] for line in text.splitlines() if ".so" in line.split()[-1]})


def _libraries() -> list[dict[str, str]]:
    """Same-named libraries from different places: LD_LIBRARY_PATH, ldconfig, this process."""
    # name -> {realpath: [where found]}
    places: dict[str, dict[str, list[str]]] = {}

    def add(path: str, where: str) -> None:
        name = os.path.basename(path)
        if not _WATCHED.match(name) or not os.path.exists(path):
            return
        places.setdefault(name, {}).setdefault(os.path.realpath(path), []).append(where)

    for folder in config.library_path():
        try:
            for entry in sorted(os.listdir(folder)):
                add(os.path.join(folder, entry), "LD_LIBRARY_PATH")
        except OSError:
            continue
    for path in _ldconfig():
        add(path, "ldconfig")
    loaded = _loaded()
    for path in loaded:
        add(path, "loaded")

    findings = []
    for name, found in sorted(places.items()):
        distinct = {}
        for real, where in found.items():
            distinct.setdefault(_digest(real), []).append((real, where))
        if len(distinct) < 2:
            continue

        def groups_with(source: str, distinct=distinct) -> int:
            return sum(any(source in w for _, w in g) for g in distinct.values())

        # Two copies loaded, or two on LD_LIBRARY_PATH: which one code gets depends on
        # load order. One on LD_LIBRARY_PATH shadowing the system's: worth a warning.
        # A wheel's bundled copy (torch/lib/libgomp) next to the system's is normal.
        if groups_with("loaded") > 1 or groups_with("LD_LIBRARY_PATH") > 1:
            severity = "error"
        elif groups_with("LD_LIBRARY_PATH") and groups_with("ldconfig"):
            severity = "warn"
        else:
            continue
        listing = "; ".join(
            f"{real} ({', '.join(sorted(set(w)))})"
            for group in distinct.values()
            for real, w in group
        )
        findings.append(
            _finding(
                f"library {name}",
                severity,
                f"{len(distinct)} different copies of {name}"
                + (" loaded in this process" if groups_with("loaded") > 1 else "")
                + f": {listing}",
                "keep one copy on the library path (remove or reorder LD_LIBRARY_PATH entries, "
                "or uninstall the duplicate SDK); which one a plugin gets depends on search order",
            )
        )
    runtimes = sorted(
        {
            label
            for path in loaded
            for stem, label in _RUNTIMES.items()
            if os.path.basename(path).startswith(stem + ".so")
        }
    )
    if len(runtimes) > 1:
        findings.append(
            _finding(
                "vendor runtimes",
                "warn",
                "several vendor runtimes are loaded in this process: " + ", ".join(runtimes),
                "select one backend (FLAGOS_BACKEND) and remove the other plugins from the "
                "plugin path if they conflict",
            )
        )
    if not findings:
        findings.append(_finding("libraries", "ok", "no conflicting runtime libraries found"))
    return findings


def _wsl() -> list[dict[str, str]]:
    try:
        version = Path("/proc/version").read_text().lower()
    except OSError:
        version = ""
    dxg = Path("/dev/dxg").exists()
    if "microsoft" not in version and not dxg:
        return []
    if dxg:
        return [
            _finding(
                "WSL",
                "ok",
                "WSL with /dev/dxg: GPU drivers come from the Windows host (/usr/lib/wsl/lib)",
                "do not install Linux GPU drivers inside WSL; keep /usr/lib/wsl/lib on the "
                "library path",
            )
        ]
    return [
        _finding(
            "WSL",
            "warn",
            "WSL without /dev/dxg: no GPU is passed through",
            "use WSL 2 with a GPU driver on the Windows host (wsl --update)",
        )
    ]


def _cache_dir() -> list[dict[str, str]]:
    path = Path(config.cache_dir())
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        if path.exists():
            with tempfile.NamedTemporaryFile(dir=path):
                pass
            return [_finding("kernel cache", "ok", f"{path} is writable")]
        if probe.is_dir() and os.access(probe, os.W_OK):
            return [_finding("kernel cache", "ok", f"{path} will be created (in {probe})")]
    except OSError:
        pass
    return [
        _finding(
            "kernel cache",
            "warn",
            f"{path} is not writable: generated kernels cannot be cached",
            "set FLAGOS_CACHE_DIR to a writable folder",
        )
    ]


def _alias() -> list[dict[str, str]]:
    """The cuda alias next to torch's own stack: what torch introspects, and dynamo's import."""
    from .. import cuda_alias

    if not cuda_alias.is_active():
        return [_finding("cuda alias", "ok", "off: 'cuda' is left to native CUDA")]
    findings = [
        _finding(
            "cuda alias",
            "error",
            f"torch.cuda.* replacement breaks torch's introspection: {problem}",
            "report this as a flagos-torchfl bug; FLAGOS_ALIAS_CUDA=0 turns the alias off",
        )
        for problem in cuda_alias.incompatibilities()
    ]
    try:  # what torchvision, timm, torch.compile and optimizers import
        import torch._dynamo  # noqa: F401
    except Exception as err:  # noqa: BLE001 - any failure is the finding
        findings.append(
            _finding(
                "cuda alias",
                "error",
                f"import torch._dynamo fails with the alias on: {type(err).__name__}: {err}",
                "report this as a flagos-torchfl bug; FLAGOS_ALIAS_CUDA=0 turns the alias off",
            )
        )
    if not findings:
        findings.append(
            _finding("cuda alias", "ok", "on: torch.cuda answers for flagos; torch._dynamo imports")
        )
    return findings


def doctor(backend: str | None = None) -> dict[str, Any]:
    """Run every check; the result is JSON-ready (see the module docstring)."""
    findings = _torch_version() + _privateuse1()
    more, info = _backend(backend)
    findings += more + (_alias() if info else []) + _libraries() + _wsl() + _cache_dir()
    count = {s: sum(f["severity"] == s for f in findings) for s in _SEVERITIES}
    return {
        "backend": info["backend"] if info else None,
        "findings": findings,
        "errors": count["error"],
        "warnings": count["warn"],
    }


def format_findings(result: dict[str, Any]) -> str:
    colour = use_colour()
    rows = [["severity", "check", "finding"]]
    fixes = []
    for f in result["findings"]:
        rows.append([f["severity"], f["check"], f["message"]])
        if f["severity"] != "ok" and f["fix"]:
            fixes.append(
                f"  {paint(f['severity'], f['severity'], colour)} {f['check']}: {f['fix']}"
            )
    out = render(rows, colour_column=0)
    if fixes:
        out += "\n\nfixes:\n" + "\n".join(fixes)
    out += f"\n\n{result['errors']} error(s), {result['warnings']} warning(s)"
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend", default=None, help="plugin to bring up (default: $FLAGOS_BACKEND, else auto)"
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    add_output_arguments(parser, junit=True)


def command(args: argparse.Namespace) -> int:
    result = doctor(args.backend)
    write_json(args.json, result)
    write_junit(
        args.junit,
        "flagos-torchfl.doctor",
        [
            {
                "name": f["check"],
                "ok": f["severity"] == "ok" or (f["severity"] == "warn" and not args.strict),
                "message": f"{f['message']}" + (f"; fix: {f['fix']}" if f["fix"] else ""),
            }
            for f in result["findings"]
        ],
    )
    if args.json != "-":
        print(format_findings(result))
    return 1 if result["errors"] or (args.strict and result["warnings"]) else 0
