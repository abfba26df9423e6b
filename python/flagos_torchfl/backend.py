"""Start-up and reports: initialize(), backend_info(), op_stats(), _autoload().

The start-up flow (docs/architecture.md, "Start-up"): choose the backend name
(argument, FLAGOS_BACKEND, "auto"), make sure nobody else owns PrivateUse1,
let the core discover/probe/load a plugin and map devices, then register the
`flagos` device with PyTorch once per process.
"""

from __future__ import annotations

import atexit
import json
import re
import warnings
from pathlib import Path
from typing import Any

import torch

from . import _core, _state, config
from ._state import DEVICE_TYPE, is_initialized  # noqa: F401 (re-exported)
from ._text import format_bytes, table

_PLUGIN_DIR = Path(__file__).resolve().parent / "plugins"
# vendor.h: backend names are lower-case letters, digits and '_'.
_BACKEND_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_UNCLAIMED = "privateuseone"

# Execution tiers, in the order the dispatcher tries them, then the core's own ops.
TIERS = ("native", "generated", "decomposition", "fallback", "core")


def _choose_backend(backend: str | None) -> str:
    # "auto" in code defers to the operator's FLAGOS_BACKEND: scripts written
    # with initialize(backend="auto") run on the backend the environment
    # names, without an edit. A concrete name in code wins.
    from_env = backend in (None, "auto") and bool(config.backend())
    name = config.backend() if from_env else (backend if backend is not None else "auto")
    if isinstance(name, str):
        name = name.strip().lower()  # "OpenCL" is "opencl", as FLAGOS_BACKEND
    if not isinstance(name, str) or not _BACKEND_NAME.match(name):
        source = "FLAGOS_BACKEND" if from_env else "backend argument"
        raise ValueError(
            f"invalid {source} {name!r}: expected 'auto' or a plugin name made of "
            "letters, digits and '_' (e.g. 'host'; case-insensitive)"
        )
    return name


def _check_privateuse1_unclaimed() -> None:
    owner = torch._C._get_privateuse1_backend_name()
    if owner not in (_UNCLAIMED, DEVICE_TYPE):
        raise RuntimeError(
            f"PyTorch's PrivateUse1 device is already claimed by '{owner}' (another vendor's "
            "extension, often loaded by torch's backend autoload); flagos-torchfl cannot share "
            "it. Run with TORCH_DEVICE_BACKEND_AUTOLOAD=0 and import only flagos_torchfl, or "
            f"uninstall the extension that registers '{owner}'."
        )


def _search_paths() -> list[str]:
    return [*config.plugin_path(), str(_PLUGIN_DIR)]


def _nvidia_library_folders() -> list[str]:
    """The lib folders of the installed `nvidia` wheels (NVRTC, cuBLASLt, ...), for the
    cuda plugin: they are on no loader path (backends/cuda/libraries.cpp)."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec else []
    return sorted(str(p) for root in roots for p in Path(root).glob("*/lib") if p.is_dir())


def _register_with_torch() -> None:
    """Name PrivateUse1 'flagos' and install torch.flagos; each step only once."""
    from . import flagos as device_module

    torch.utils.rename_privateuse1_backend(DEVICE_TYPE)  # same name again is a no-op
    if getattr(torch, DEVICE_TYPE, None) is not device_module:
        torch._register_device_module(DEVICE_TYPE, device_module)
    if not hasattr(torch.Tensor, f"is_{DEVICE_TYPE}"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )
    from . import distributed

    distributed.register()  # the fccl c10d backend for the flagos device


def initialize(backend: str | None = None) -> None:
    """Bring up the `flagos` device.

    Args:
        backend: a plugin name ("host", ...) or "auto"; None or "auto" take
            FLAGOS_BACKEND when it is set, else "auto" (the highest-ranked
            usable plugin).

    Plugins are searched in FLAGOS_PLUGIN_PATH, then the package's plugins/
    folder; FLAGOS_VISIBLE_DEVICES picks and orders the devices. Idempotent:
    a second call with no backend, "auto" or the same name does nothing.

    Raises:
        ValueError: the name is malformed, or no plugin has that name.
        RuntimeError: the plugin (or every candidate, under "auto") failed;
            the message names each plugin and why; or PrivateUse1 is owned by
            another extension; or a different backend is already running.
    """
    name = _choose_backend(backend)
    if _state.backend_name is not None:
        if name not in ("auto", _state.backend_name):
            raise RuntimeError(
                f"flagos-torchfl is already initialized with backend '{_state.backend_name}'; "
                f"cannot switch to '{name}' in the same process (start a new process)"
            )
        return
    _check_privateuse1_unclaimed()
    if not config.cuda_library_path():
        config.set_cuda_library_path(_nvidia_library_folders())
    C = _core.C()  # loads the core's operator registrations
    try:
        C._initialize(name, _search_paths(), config.visible_devices())
    except RuntimeError as err:
        report = C._discovery_report()
        # A plugin is known by the name it reported or, if it never loaded
        # far enough to say, by its file name (as the core matches it).
        if name != "auto" and not any(
            r["name"] == name or Path(r["path"]).name == f"libflagos_{name}.so" for r in report
        ):
            raise ValueError(f"unknown backend '{name}': {err}") from err
        raise
    _register_with_torch()
    # Note [Stopping background work]: first thing at interpreter exit, while
    # the SDK is whole, background builds are stopped and waited for.
    atexit.register(C._stop_background_work, config.exit_timeout())
    C._set_log_fallback(config.log_fallback())
    _state.backend_name = next(
        r["name"] for r in C._discovery_report() if r["status"] == "selected"
    )
    # After the device is up (the alias checks is_initialized()): the
    # backend's mixed-precision policy, then "cuda" as a logical device name
    # where no native CUDA works (docs/cuda-alias.md).
    from . import amp, cuda_alias

    amp.install()
    cuda_alias.activate_cuda_alias()


def _autoload() -> None:
    """torch's `torch.backends` entry point, run inside `import torch`.

    Does nothing unless FLAGOS_BACKEND is set. A FLAGOS_BACKEND that names no
    plugin, or is malformed, raises (torch then fails `import torch` with
    our message as the cause): a typo must not run a job on CPU. With
    FLAGOS_BACKEND_LENIENT=1 that too is only a warning. Any other failure
    (a plugin that exists but cannot start) is a warning, so that
    `import torch` keeps working and initialize() shows the full error.
    """
    if not config.backend():
        return
    try:
        initialize()
    except ValueError as err:
        if not config.backend_lenient():
            raise ValueError(
                f"FLAGOS_BACKEND={config.backend()}: {err}\n(set FLAGOS_BACKEND_LENIENT=1 to "
                "run without the flagos device instead, or unset FLAGOS_BACKEND)"
            ) from None
        _warn_unavailable(err)
    except Exception as err:  # noqa: BLE001 - see docstring
        _warn_unavailable(err)


def _warn_unavailable(err: Exception) -> None:
    warnings.warn(
        f"flagos-torchfl: FLAGOS_BACKEND={config.backend()} is set, but the flagos device "
        f"could not be initialized at `import torch`: {err}. The 'flagos' device is not "
        "available; call flagos_torchfl.initialize() to see the full error, or unset "
        "FLAGOS_BACKEND.",
        RuntimeWarning,
        stacklevel=3,
    )


_require_initialized = _state.require_initialized


def backend_info(verbose: bool = True) -> dict[str, Any]:
    """What is running: device type, backend, versions, devices, kernels, comm.

    Returns a plain dict (JSON-serializable) and, when `verbose`, also prints
    a readable summary of it.
    """
    C = _require_initialized()
    from . import __version__, distributed

    raw = C._backend_info()
    devices = []
    for dev in raw["devices"]:
        free, total = C._mem_get_info(dev["index"])
        devices.append({**dev, "free_memory": free})
    info = {
        "device_type": DEVICE_TYPE,
        "backend": raw["name"],
        "plugin_version": raw["version"],
        "plugin_path": raw["path"],
        "abi": raw["abi"],
        "sdk": raw["sdk_name"],
        "sdk_version": raw["sdk_version"],
        "driver_version": raw["driver_version"],
        "host_addressable": bool(raw["host_addressable"]),
        "device_count": len(devices),
        "devices": devices,
        "native_kernels": raw["native_kernels"],
        "compiler": raw["compiler"],
        "kernel_cache": kernel_cache_stats(),
        "collectives": raw["collectives"] or "host (gloo)",
        "fft": raw.get("fft"),
        "linalg": raw.get("linalg"),
        "device_activity": bool(raw.get("device_activity")),
        "kineto_profiler": bool(raw.get("kineto_profiler")),
        "comm": distributed.comm_info(),
        "discovery": [dict(r) for r in C._discovery_report()],
        "flagos_torchfl_version": __version__,
        "torch_version": torch.__version__,
    }
    if verbose:
        print(format_backend_info(info))
    return info


def format_backend_info(info: dict[str, Any]) -> str:
    """The readable summary backend_info() prints."""
    rows = [
        ["device type", info["device_type"]],
        ["backend", f"{info['backend']} {info['plugin_version']} (ABI {info['abi']})"],
        ["plugin", info["plugin_path"]],
        ["SDK", f"{info['sdk']} {info['sdk_version']}".strip()],
        ["driver", info["driver_version"] or "-"],
        ["devices", str(info["device_count"])],
    ]
    for dev in info["devices"]:
        rows.append(
            [
                f"  {info['device_type']}:{dev['index']}",
                f"{dev['name']} [{dev['arch']}], physical {dev['physical']}, "
                f"{dev['compute_units']} compute units, {format_bytes(dev['total_memory'])} "
                f"({format_bytes(dev['free_memory'])} free)",
            ]
        )
    rows += [
        ["native kernels", str(info["native_kernels"])],
        ["compiler", info["compiler"] or "none (no generated kernels)"],
        ["kernel cache", format_kernel_cache(info["kernel_cache"])],
        ["collectives", info["collectives"]],
        ["fft library", info.get("fft") or "none (torch.fft takes the host tier)"],
        [
            "linalg library",
            f"{info['linalg']['library']} ({', '.join(info['linalg']['members'])})"
            if info.get("linalg")
            else "none (torch.linalg takes the host tier)",
        ],
        [
            "profiler",
            "device activity (torch.profiler, PrivateUse1)"
            if info.get("device_activity")
            else "CPU rows only in torch.profiler (no tracing table or Kineto registry)",
        ],
        ["comm route", f"{info['comm']['route']} ({info['comm']['library']})"],
    ]
    lines = [
        f"flagos-torchfl {info['flagos_torchfl_version']} on torch {info['torch_version']}",
        table(rows),
        "  discovery:",
    ]
    report = [
        [r["name"], r["status"], str(r["priority"]), r["reason"] or r["path"]]
        for r in info["discovery"]
    ]
    if report:
        lines.append(table([["plugin", "status", "rank", "reason / path"], *report], "    "))
    else:
        lines.append("    (no candidates)")
    return "\n".join(lines)


def kernel_cache_stats() -> dict[str, Any]:
    """The generated tier's kernel cache: policy and counters, summed over devices.

    Keys: ``policy`` (FLAGOS_SPECIALIZE), ``compiler`` (language or None),
    ``launches``, ``specialized_launches``, ``declined`` (calls the generator
    did not cover), ``failed_calls`` (calls that met a failed compile), the
    cache counters ``memory_hits``, ``memory_misses``, ``disk_hits``,
    ``disk_writes``, ``disk_corrupt``, ``disk_evictions``, ``sync_builds``
    (compiles a call waited for), ``async_builds`` (background
    specializations), ``build_failures``, ``async_pending``,
    ``build_seconds``, ``entries``, ``preloaded`` (kernels an earlier
    process's manifest had loaded in the background: Note [Kernel preload]),
    ``first_launches`` (those kernels' launches repeated with no work right
    after loading, so the driver's first-launch work is done before the
    first call: Note [First launch]), ``warm_launches`` (specializations
    launched once with no work before they replace the generic kernel: Note
    [Warm before publishing]), ``reduce_launches`` (launches of reductions
    by strategy: ``rows``, ``columns``, ``group``; Note [Reduction
    strategies]), and ``devices`` (the cache counters per device).
    """
    _require_initialized()
    op = getattr(torch.ops.flagos, "_kernel_cache_stats", None)
    if op is None:  # a core built without the catalog has no generated tier
        return {"policy": "off", "compiler": None, "devices": []}
    raw = json.loads(op())
    for key in _CACHE_COUNTERS:
        raw[key] = sum(d[key] for d in raw["devices"])
    return raw


_CACHE_COUNTERS = (
    "preloaded",
    "memory_hits",
    "memory_misses",
    "disk_hits",
    "disk_writes",
    "disk_corrupt",
    "disk_evictions",
    "sync_builds",
    "async_builds",
    "build_failures",
    "async_pending",
    "build_seconds",
    "entries",
)


def wait_for_specializations() -> None:
    """Block until background kernel specialization is idle (tests, benchmarks)."""
    _require_initialized()
    op = getattr(torch.ops.flagos, "_kernel_cache_wait", None)
    if op is not None:
        op()


def format_kernel_cache(stats: dict[str, Any]) -> str:
    """One line: policy, kernels held, compiles and disk hits."""
    if not stats.get("compiler"):
        return "- (no compiler)"
    return (
        f"specialize {stats['policy']}, {stats['entries']} kernels, "
        f"{stats['sync_builds']}+{stats['async_builds']} builds, {stats['disk_hits']} disk hits"
    )


def format_op_stats(stats: dict[str, dict[str, int]]) -> str:
    """op_stats() as a readable table, one operator per line, busiest first."""
    rows = [["operator", *TIERS]]
    for op, counts in sorted(stats.items(), key=lambda kv: -sum(kv[1].values())):
        rows.append([op, *(str(counts.get(t, 0)) for t in TIERS)])
    return table(rows)


def op_stats() -> dict[str, dict[str, int]]:
    """Calls per operator and execution tier since start-up or the last reset.

    Tiers (TIERS): native, generated, decomposition, fallback (host), core.
    """
    return {op: dict(tiers) for op, tiers in _core.C()._op_stats().items()}


def reset_op_stats() -> None:
    """Zero the counters op_stats() reports."""
    _core.C()._reset_op_stats()
