"""Every environment variable flagos-torchfl reads, in one table.

This module is the only place the Python package reads the environment, and
its table also documents the variables read by the C++ core, the plugins and
the build, so that ``docs/env.md`` (generated from it) lists them all.
tests/python/test_config.py checks both directions: every ``FLAGOS_*`` name
the sources read is in the table, and every name in the table is read
somewhere.

Regenerate the docs after editing the table::

    python -m flagos_torchfl env --markdown > docs/env.md
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvVar:
    name: str
    default: str  # as the user would write it; "" = unset
    read_by: str  # which part of the project reads it
    meaning: str


ENV_VARS: tuple[EnvVar, ...] = (
    EnvVar(
        "FLAGOS_BACKEND",
        "",
        "python",
        "Backend to bring up: a plugin name (`host`, ...) or `auto` (the highest-ranked "
        "usable plugin; real accelerators rank above CPU-hosted devices). Used by "
        '`initialize()` when called without `backend=` or with `backend="auto"`. When set, `import torch` also '
        "initializes flagos-torchfl through torch's backend autoload; unset, nothing "
        "happens until `initialize()` is called. Names are case-insensitive (`OpenCL` is "
        "`opencl`). A name no plugin has (a typo) is an error, also at `import torch`, "
        "unless `FLAGOS_BACKEND_LENIENT=1`.",
    ),
    EnvVar(
        "FLAGOS_BACKEND_LENIENT",
        "0",
        "python",
        "`1`: a `FLAGOS_BACKEND` that names no plugin (or is malformed) only warns at "
        "`import torch`, and the program runs without the flagos device (the behaviour "
        "before strict names). Default `0`: `import torch` fails with the list of plugins "
        "found, so a typo cannot silently run a job on CPU.",
    ),
    EnvVar(
        "FLAGOS_PLUGIN_PATH",
        "",
        "python",
        "Extra plugin locations, separated by `os.pathsep` (`:`): folders (every `lib*.so` "
        "inside is a candidate) or plugin files. Searched before the package's own "
        "`plugins/` folder.",
    ),
    EnvVar(
        "FLAGOS_VISIBLE_DEVICES",
        "",
        "python",
        "Comma-separated physical device indices the process may use, in the order "
        "PyTorch numbers them (`2,0` makes physical device 2 `flagos:0`). Unset: all devices.",
    ),
    EnvVar(
        "FLAGOS_LOG_FALLBACK",
        "0",
        "python",
        "`1`: print one line to stderr the first time each operator runs on the host "
        "fallback tier. The counts are always kept (`op_stats()`).",
    ),
    EnvVar(
        "FLAGOS_ALIAS_CUDA",
        "auto",
        "python",
        'The `cuda` alias ("cuda" means the flagos device): `0` never; `1` whenever a '
        "flagos backend is initialized, even where native CUDA works (so does setting "
        "`FLAGOS_BACKEND`); `auto` only where native CUDA is not usable.",
    ),
    EnvVar(
        "FLAGOS_AMP_DTYPE",
        "",
        "python",
        'Dtype of `torch.autocast("flagos")` without `dtype=`, e.g. `bfloat16` or '
        "`float16`. Unset: the backend's default (host: bfloat16; others: float16).",
    ),
    EnvVar(
        "FLAGOS_COMM",
        "auto",
        "core",
        "Route of collectives: `vendor` (the plugin's collectives library; an error without "
        "one), `host` (staged through the host over gloo) or `auto` (vendor when the plugin "
        "has one, else host).",
    ),
    EnvVar(
        "FLAGOS_OP_<ID>",
        "",
        "core",
        "Routing override for one semantic operator (`<ID>` in any case, e.g. "
        "`FLAGOS_OP_RELU=fallback`): `native`, `generated` or `fallback`. Unknown IDs and "
        "values are errors.",
    ),
    EnvVar(
        "FLAGOS_FORCE_FALLBACK",
        "",
        "core",
        "Operators sent straight to the host fallback: a comma-separated list of semantic "
        "IDs or ATen overload names (`relu,aten::add.Tensor`), or, when the value contains a "
        "regex metacharacter, an ECMAScript regex matched against the whole ID and the whole "
        "overload name (`add.*`). Unknown names are errors.",
    ),
    EnvVar(
        "FLAGOS_AUTOCOMPARE",
        "0",
        "core",
        "`1`: replay every catalog operator call that ran on the device (native, generated "
        "or decomposition tier) on CPU copies of its inputs and compare each output: an "
        "element passes when abs(d - c) <= atol + rtol * abs(c) (integers exact; float32 "
        "rtol=atol=1e-4; for GEMM, convolution, reductions, norms and losses atol is scaled "
        "by the output's largest magnitude). The first divergence is printed to stderr, all "
        "are counted; `torch.ops.flagos._autocompare_report()` gives per overload the calls "
        "checked, the divergent ones, and max_abs/max_rel: the largest abs(d - c) and "
        "abs(d - c) / abs(c) (where abs(c) > atol) over every checked element, passing or "
        "not. "
        "`raise`: raise a RuntimeError instead. Also "
        '`torch.ops.flagos._set_autocompare("1")`. Slow: for debugging.',
    ),
    EnvVar(
        "FLAGOS_AUTOCOMPARE_INJECT",
        "",
        "core",
        "Testing only: a semantic operator ID or ATen overload whose device outputs "
        "`FLAGOS_AUTOCOMPARE` perturbs by +1 after the call (to prove it reports).",
    ),
    EnvVar(
        "FLAGOS_HOST_DEVICES",
        "1",
        "host plugin",
        "Number of devices the `host` plugin exposes, 0..64 (`0`: the plugin reports no device).",
    ),
    EnvVar(
        "FLAGOS_HOST_MEMORY_LIMIT",
        "",
        "host plugin",
        "Memory of each `host` device in bytes, at least 4K, with an optional suffix `K`, "
        "`M`, `G`, `T` (also `KB`, `KiB`, ...; all powers of 1024), e.g. `64M`. Unset: half "
        "of the physical RAM. Allocations beyond it raise `torch.OutOfMemoryError`.",
    ),
    EnvVar(
        "FLAGOS_HOST_CC",
        "cc",
        "host plugin",
        "C compiler the `host` plugin runs (no shell) to build generated kernels (language "
        "`c`): a program on `PATH` or a path, optionally followed by space-separated words "
        "(`ccache cc`). Read at every build. Missing: builds fail and operators take the "
        "other tiers.",
    ),
    EnvVar(
        "FLAGOS_HOST_COMM_TIMEOUT_MS",
        "300000",
        "host plugin",
        "Timeout in milliseconds of the `host` plugin's collectives when the caller gives "
        "none (a positive integer).",
    ),
    EnvVar(
        "FLAGOS_OPENCL_DEVICE_TYPE",
        "all",
        "opencl plugin",
        "Which OpenCL devices the `opencl` plugin uses: `gpu`, `cpu`, `accelerator` or `all` "
        "(case-insensitive). Under `all`, GPUs and accelerators are chosen over CPU devices "
        "when there are any.",
    ),
    EnvVar(
        "FLAGOS_OPENCL_MEMORY_LIMIT",
        "",
        "opencl plugin",
        "Bytes each OpenCL device may hand out, same syntax as `FLAGOS_HOST_MEMORY_LIMIT`; "
        "capped at the device's `CL_DEVICE_GLOBAL_MEM_SIZE` (for PoCL's CPU device set by "
        "`POCL_MEMORY_LIMIT`). Unset: that size.",
    ),
    EnvVar(
        "FLAGOS_OPENCL_WARMUP",
        "on",
        "opencl plugin",
        "The `opencl` plugin's SDK warm-up: after device init a background thread builds and "
        "launches a tiny program (starts PoCL's LLVM), the helper kernels and CLBlast's "
        "SGEMM/DGEMM (NN, NT, TN, TT), SGEMV and batched SGEMM on 8x8 buffers of its own, so a "
        "fresh process's first GEMMs find them built; it yields the compile lock to callers and "
        "is stopped and joined at shutdown and exit. `on` (also 1/true/yes), `off` "
        "(0/false/no), or `verbose` (on, one line per step on stderr).",
    ),
    EnvVar(
        "FLAGOS_OPENCL_SMALL_GEMM",
        "262144",
        "opencl plugin",
        "The largest GEMM, in multiply-adds (batch * M * N * K, a plain integer), that the "
        "`opencl` plugin runs on its own small-GEMM kernel instead of CLBlast: one launch with "
        "any strides and the addmm bias read in place, without CLBlast's ~10 us of per-call "
        "host work. `0`: CLBlast for every GEMM. The default (64^3) was measured on PoCL's "
        "CPU device.",
    ),
    EnvVar(
        "FLAGOS_CUDA_LIBRARY_PATH",
        "",
        "cuda plugin",
        "Folders, separated by `:`, where the `cuda` plugin looks for the CUDA SDK's libraries "
        "(NVRTC, cuBLASLt) after the loader's own path. Unset: `initialize()` sets it to the "
        "`lib` folders of the installed `nvidia` wheels (what torch's CUDA builds and "
        "`nvidia-cuda-nvrtc` install). The driver, `libcuda.so.1`, comes from the loader's path.",
    ),
    EnvVar(
        "FLAGOS_DEVICE_BACKEND",
        "cuda",
        "device check",
        "The plugin the device check (`scripts/device_check.sh`, `tests/device/`) compares "
        "with native CUDA. `host` with `FLAGOS_CHECK_NATIVE=cpu` tries the checks' scripts on "
        "a machine without a GPU.",
    ),
    EnvVar(
        "FLAGOS_CHECK_NATIVE",
        "cuda",
        "device check",
        "The device the device check measures flagos against: `cuda` (torch's own; the "
        "GPU machine) or `cpu` (a dry run of the scripts).",
    ),
    EnvVar(
        "FLAGOS_CHECK_BUILD_SECONDS",
        "240",
        "device check",
        "Time limit of `scripts/device_check.sh`'s stage: building the core and the cuda plugin.",
    ),
    EnvVar(
        "FLAGOS_CHECK_CONFORMANCE_SECONDS",
        "120",
        "device check",
        "Time limit of `scripts/device_check.sh`'s stage: building and running the ABI conformance suite on the cuda plugin; `0` skips it.",
    ),
    EnvVar(
        "FLAGOS_CHECK_EXAMPLES_SECONDS",
        "90",
        "device check",
        "Time limit of `scripts/device_check.sh`'s stage: the custom-kernel examples.",
    ),
    EnvVar(
        "FLAGOS_CHECK_OPINFO_SECONDS",
        "150",
        "device check",
        "Time limit of `scripts/device_check.sh`'s stage: each of the two OpInfo sweeps and the model zoo (they run at once; each gets 60 s more to finish).",
    ),
    EnvVar(
        "FLAGOS_CHECK_BENCH_SECONDS",
        "200",
        "device check",
        "Time limit of `scripts/device_check.sh`'s stage: `benchmarks/bench_cuda.py`.",
    ),
    EnvVar(
        "FLAGOS_CHECK_BENCH_ARGS",
        "",
        "device check",
        "Extra arguments of `benchmarks/bench_cuda.py` in the device check "
        "(`--quick`, `--sections copy,eager`).",
    ),
    EnvVar(
        "FLAGOS_PREBUILT",
        "",
        "device check",
        "A `build.tar.xz` an earlier device check left in its results: the check unpacks "
        "it instead of building (a second run in one GPU session).",
    ),
    EnvVar(
        "FLAGOS_ENV_PREPARE_ONLY",
        "0",
        "scripts",
        "`1`: `scripts/torch_env.sh` installs a release's packages into its virtualenv and "
        "stops before building flagos into it (`scripts/test.sh` fetches the torch matrix in "
        "the background this way while the main suite runs).",
    ),
    EnvVar(
        "FLAGOS_PLUGINS",
        "",
        "scripts",
        "CMake cache variable (`-DFLAGOS_PLUGINS=cuda`): the plugin folders to build, "
        "`;`-separated; empty builds every folder of `backends/`. For a machine that lacks "
        "the other plugins' SDKs (the GPU machine has no OpenBLAS for `host`).",
    ),
    EnvVar(
        "FLAGOS_NVRTC_LIBRARY",
        "",
        "C++ tests",
        "The NVRTC library (`libnvrtc.so.13`, a path) the kernel-generator tests compile the "
        "`cuda-c` dialect with, when the build found none beside `nvrtc.h`.",
    ),
    EnvVar(
        "FLAGOS_COMPILE",
        "on",
        "python",
        "`off` (also `0`/`false`/`no`): `torch.compile` does not get the flagos inductor "
        "backend (fused kernels through the plugin's compiler); inductor then cannot target "
        "the device, and under the cuda alias `torch.compile` runs with `aot_eager` (graphs "
        "captured, eager kernels) with a warning. For debugging a compiled model against its "
        "eager kernels. Plugins without a compiler always get the `aot_eager` substitution.",
    ),
    EnvVar(
        "FLAGOS_CACHE_DIR",
        "",
        "core",
        "Folder of the kernel cache: generated kernels are kept in its `kernels/` folder, "
        "shared by processes. Unset: `$XDG_CACHE_HOME/flagos`, else `~/.cache/flagos`. An "
        "unwritable folder leaves the cache in memory (one warning). `flagos-torchfl doctor` "
        "checks that it is writable.",
    ),
    EnvVar(
        "FLAGOS_CACHE_MAX_BYTES",
        "512MiB",
        "core",
        "Bound of the on-disk kernel cache, same syntax as `FLAGOS_HOST_MEMORY_LIMIT`; least "
        "recently used kernels are removed first.",
    ),
    EnvVar(
        "FLAGOS_SPECIALIZE",
        "after:3",
        "core",
        "When a shape-specialized generated kernel is built in the background: `off` (generic "
        "kernels only), `eager` (on a shape's first call), `after:N` (on its N-th call). Calls "
        "never wait for it: the generic kernel runs until it is ready.",
    ),
    EnvVar(
        "FLAGOS_PRELOAD",
        "on",
        "core",
        "What a process leaves for the next one under the cache dir: at exit each device's "
        "kernel cache writes a manifest (its fp64 answer, the generated kernels used, in order of "
        "first use, with their launch shapes) and the bridge writes the operator signatures whose "
        "output shapes it inferred; at `initialize()` the next process skips the fp64 probe, "
        "loads those kernels from disk on the background pool (never compiling), then launches "
        "each with no work so the driver's first-launch work is done early, and skips the "
        "meta-tensor shape inference for those signatures (Note [Kernel preload], Note [First "
        "launch], Note [Shape inference across processes]). `on` (also 1) or `off` (0).",
    ),
    EnvVar(
        "FLAGOS_COMPILE_THREADS",
        "1",
        "core",
        "Threads of the background compiler pool that builds specialized kernels (1-64).",
    ),
    EnvVar(
        "FLAGOS_BACKGROUND_NICE",
        "10",
        "core",
        "Nice value (0-19) of the background compiler pool's threads, so kernel builds, "
        "preloads and warm-up launches yield the cores to the foreground; 0 keeps the "
        "process's priority.",
    ),
    EnvVar(
        "FLAGOS_WORK_GROUP_SIZE",
        "",
        "core",
        "Local size of every generated-kernel launch (1 to the device's limit). Empty: the "
        "plugin's preferred size, else min(256, the device's maximum work-group size).",
    ),
    EnvVar(
        "FLAGOS_EXIT_TIMEOUT",
        "30",
        "python",
        "Seconds the interpreter's exit waits for background builds still running (queued ones "
        "are dropped at once); a build that outlives it is left unfinished and not cached "
        "(Note [Stopping background work]).",
    ),
    EnvVar(
        "FLAGOS_KERNEL_FAULT",
        "",
        "core",
        "Testing only: a semantic operator ID whose generated kernel sources get a compile error "
        "appended (to prove a failed build falls to the next tier and is reported). Only builds "
        "see it: use a fresh `FLAGOS_CACHE_DIR`, or the good kernel is loaded from disk.",
    ),
    EnvVar(
        "FLAGOS_CONFORMANCE_PLUGIN",
        "",
        "C++ tests",
        "Plugin library the ABI conformance suite (`abi_conformance_test`) checks when no "
        "path is given on its command line. Unset: the host plugin.",
    ),
    EnvVar(
        "FLAGOS_OPINFO_REPORT",
        "",
        "Python tests",
        "Path where `tests/python/test_opinfo_catalog.py` writes its per-operator results as "
        "JSON (input of `codegen/gen_operator_support.py`). Unset: no report.",
    ),
    EnvVar(
        "FLAGOS_STRESS_RUNS",
        "6",
        "Python tests",
        "Short processes per backend of `tests/python/test_exit_stress.py` (each must exit 0 "
        "with background kernel builds still running at exit).",
    ),
    EnvVar(
        "FLAGOS_REQUIRE_ZOO",
        "",
        "Python tests",
        "`1`: the model-zoo and alias-stack tests fail instead of skipping when torchvision, timm "
        "or transformers is missing (CI's torch 2.14.1 environment sets it).",
    ),
    EnvVar(
        "FLAGOS_TORCH_MATRIX",
        "1",
        "scripts",
        "`0`: `scripts/test.sh` skips the other torch releases (the torch 2.11.0, 2.15.0 and "
        "2.14.1 virtualenvs of `scripts/torch_env.sh`).",
    ),
    EnvVar(
        "FLAGOS_TEST_WORKERS",
        "2",
        "scripts",
        "How many test processes `scripts/test.sh` runs each Python suite in (pytest-xdist's "
        "`-n`; a file to a process at a time).",
    ),
    EnvVar(
        "FLAGOS_ENV_CACHE",
        "/var/cache/flagos-torchfl",
        "scripts",
        "Where `scripts/torch_env.sh` keeps its virtualenvs (outside the clone, so CI downloads "
        "each torch release once per machine).",
    ),
    EnvVar(
        "FLAGOS_CLBLAST_DIRECT",
        "",
        "benchmarks",
        "Path of the `clblast_direct` yardstick of `benchmarks/bench_gemm_opencl.py` (CLBlast "
        "called directly); default: the first `build/*/benchmarks/clblast_direct`.",
    ),
    EnvVar(
        "FLAGOS_BUILD_DIR",
        "build/cmake",
        "setup.py",
        "CMake build folder of `pip install --no-build-isolation .`; one per torch release "
        "(`scripts/torch_env.sh` uses `build/torch-<version>`).",
    ),
    EnvVar(
        "FLAGOS_BUILD_JOBS",
        "2",
        "setup.py",
        "Parallel compile jobs of `pip install --no-build-isolation .`.",
    ),
    EnvVar(
        "FLAGOS_BUILD_TESTS",
        "ON",
        "setup.py",
        "`OFF` skips building the C++ tests and test plugins.",
    ),
    EnvVar(
        "FLAGOS_ENABLE_CATALOG",
        "ON",
        "setup.py",
        "`OFF` builds a core without the operator catalog: every non-core operator takes the "
        "host fallback (for bringing up a new plugin).",
    ),
)

_BY_NAME = {var.name: var for var in ENV_VARS}


def documents(name: str) -> bool:
    """Is `name` in the table, itself or as a family like FLAGOS_OP_<ID>?"""
    return name in _BY_NAME or any(
        "<" in var.name and name.startswith(var.name.split("<")[0]) for var in ENV_VARS
    )


def _get(name: str) -> str:
    """The variable's value, or its default; only names in the table."""
    return os.environ.get(name, _BY_NAME[name].default).strip()


def backend() -> str | None:
    """FLAGOS_BACKEND lower-cased (names are case-insensitive), or None when unset or empty."""
    return _get("FLAGOS_BACKEND").lower() or None


def plugin_path() -> list[str]:
    """FLAGOS_PLUGIN_PATH split on os.pathsep, empty entries dropped."""
    return [p for p in _get("FLAGOS_PLUGIN_PATH").split(os.pathsep) if p]


def cuda_library_path() -> str:
    """FLAGOS_CUDA_LIBRARY_PATH as given ("" = unset); the cuda plugin reads it."""
    return _get("FLAGOS_CUDA_LIBRARY_PATH")


def set_cuda_library_path(folders: list[str]) -> None:
    """Sets FLAGOS_CUDA_LIBRARY_PATH for the cuda plugin (initialize(), when unset)."""
    os.environ["FLAGOS_CUDA_LIBRARY_PATH"] = ":".join(folders)


def visible_devices() -> str:
    """FLAGOS_VISIBLE_DEVICES as given ("" = all); the core parses it."""
    return _get("FLAGOS_VISIBLE_DEVICES")


def backend_lenient() -> bool:
    """FLAGOS_BACKEND_LENIENT as a flag: 1/true/yes/on."""
    return _get("FLAGOS_BACKEND_LENIENT").lower() in ("1", "true", "yes", "on")


def compile_enabled() -> bool:
    """FLAGOS_COMPILE is not off/0/false/no: torch.compile may use the flagos inductor backend."""
    return _get("FLAGOS_COMPILE").lower() not in ("off", "0", "false", "no")


def log_fallback() -> bool:
    """FLAGOS_LOG_FALLBACK as a flag: 1/true/yes/on."""
    return _get("FLAGOS_LOG_FALLBACK").lower() in ("1", "true", "yes", "on")


def alias_cuda() -> str:
    """FLAGOS_ALIAS_CUDA lower-cased: "0", "1" or "auto" (also when unset or empty)."""
    return _get("FLAGOS_ALIAS_CUDA").lower() or "auto"


def amp_dtype() -> str | None:
    """FLAGOS_AMP_DTYPE ("bfloat16", ...), None when unset; flagos_torchfl.amp parses it."""
    return _get("FLAGOS_AMP_DTYPE") or None


def cache_dir() -> str:
    """FLAGOS_CACHE_DIR, else $XDG_CACHE_HOME/flagos, else ~/.cache/flagos (as the core)."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    default = os.path.join(xdg, "flagos") if xdg else "~/.cache/flagos"
    return os.path.expanduser(_get("FLAGOS_CACHE_DIR") or default)


def no_color() -> bool:
    """NO_COLOR (no-color.org) is set to anything non-empty: the tools print no colour."""
    return bool(os.environ.get("NO_COLOR"))


def library_path() -> list[str]:
    """LD_LIBRARY_PATH split on os.pathsep (flagos-torchfl doctor looks for clashes there)."""
    return [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]


def launcher_ranks() -> tuple[int, int, int]:
    """(RANK, WORLD_SIZE, LOCAL_RANK) as torchrun sets them; (0, 1, 0) outside it."""
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return rank, world, int(os.environ.get("LOCAL_RANK", str(rank)))


def under_launcher() -> bool:
    """True when a launcher (torchrun) set RANK or WORLD_SIZE."""
    return "RANK" in os.environ or "WORLD_SIZE" in os.environ


def quiet_kineto() -> None:
    """Kineto's log level 5 unless the user set KINETO_LOG_LEVEL: under a CUDA-build
    torch without a GPU it prints "gpuGetDeviceCount failed" as an ERROR when a
    profiler starts (tools/bench.py); read when Kineto first starts."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")


def environment() -> dict[str, str]:
    """A copy of the whole environment, to start child processes from."""
    return dict(os.environ)


def export_backend(name: str) -> None:
    """Set FLAGOS_BACKEND=name for the processes this one starts (torchrun workers,
    spawned DataLoader workers): they bring the same backend up at `import torch`."""
    os.environ["FLAGOS_BACKEND"] = name


def host_devices() -> int:
    """FLAGOS_HOST_DEVICES (the host plugin reads it; reported by tools)."""
    return int(_get("FLAGOS_HOST_DEVICES"))


def exit_timeout() -> float:
    """FLAGOS_EXIT_TIMEOUT in seconds (default 30); ValueError for a bad value."""
    text = _get("FLAGOS_EXIT_TIMEOUT").strip() or "30"
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < 1e6:
        raise ValueError(f"FLAGOS_EXIT_TIMEOUT={text!r}: expected seconds, e.g. 30 or 2.5")
    return seconds


def host_memory_limit() -> int | None:
    """FLAGOS_HOST_MEMORY_LIMIT in bytes, None when unset."""
    value = _get("FLAGOS_HOST_MEMORY_LIMIT")
    return parse_bytes(value) if value else None


_SIZE = re.compile(r"^(\d+)\s*(?:([KMGT])(?:I?B)?|B)?$", re.IGNORECASE)


def parse_bytes(text: str) -> int:
    """'64M' -> 67108864; suffixes K, M, G, T (KB, KiB, ...) are powers of 1024,
    as the host plugin reads FLAGOS_HOST_MEMORY_LIMIT."""
    match = _SIZE.match(text.strip())
    if not match:
        raise ValueError(f"not a byte size: {text!r} (expected e.g. 1048576, 512K, 64M, 2GiB)")
    return int(match.group(1)) << (10 * "_KMGT".index((match.group(2) or "_").upper()))


def markdown() -> str:
    """docs/env.md: the table above as markdown."""
    lines = [
        "# Environment variables",
        "",
        "<!-- Generated by `python -m flagos_torchfl env --markdown > docs/env.md` from the table in",
        "python/flagos_torchfl/config.py; edit the table, not this file. -->",
        "",
        "| name | default | read by | meaning |",
        "|---|---|---|---|",
    ]
    for var in ENV_VARS:
        default = f"`{var.default}`" if var.default else "unset"
        lines.append(f"| `{var.name}` | {default} | {var.read_by} | {var.meaning} |")
    lines += [
        "",
        "PyTorch's own `TORCH_DEVICE_BACKEND_AUTOLOAD=0` turns off the backend autoload "
        "that `FLAGOS_BACKEND` relies on at `import torch`.",
    ]
    return "\n".join(lines) + "\n"


def current() -> list[tuple[EnvVar, str | None]]:
    """Each variable with its value in this process (None when unset)."""
    return [(var, os.environ.get(var.name)) for var in ENV_VARS if "<" not in var.name] + [
        (var, f"{k}={v}")
        for var in ENV_VARS
        if "<" in var.name
        for k, v in sorted(os.environ.items())
        if k.startswith(var.name.split("<")[0])
    ]
