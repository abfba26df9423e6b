"""NVRTC through ctypes, for the tests that compile CUDA C on a machine without
a GPU (NVRTC needs none): the torch.compile fused kernels and the custom-kernel
examples in the cuda plugin's language (backends/cuda). Found as the cuda
plugin finds it: FLAGOS_NVRTC_LIBRARY, else the `nvidia` wheels' lib folders
(nvidia-cuda-nvrtc, which scripts/setup.sh installs, or a CUDA torch's).
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
from pathlib import Path


@functools.cache
def library() -> ctypes.CDLL | None:
    """libnvrtc, with its builtins loaded first (Note [NVRTC's builtins]); None if absent."""
    candidates = [os.environ.get("FLAGOS_NVRTC_LIBRARY", "")]
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidates += sorted(str(p) for p in Path(root).glob("*/lib/libnvrtc.so.*"))
    for path in candidates:
        if not path or "builtins" in path or ".alt." in path or not os.path.exists(path):
            continue
        lib = ctypes.CDLL(path)
        major, minor = ctypes.c_int(), ctypes.c_int()
        lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        builtins = Path(path).parent / f"libnvrtc-builtins.so.{major.value}.{minor.value}"
        if builtins.exists():
            ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
        return lib
    return None


def compile_cubin(source: str, options: tuple[str, ...] = (), arch: str = "sm_90") -> str:
    """Compiles `source` for `arch` with the cuda plugin's options; returns ""
    on success, else NVRTC's log."""
    lib = library()
    assert lib is not None, "NVRTC not found"
    program = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(program), source.encode(), b"flagos.cu", 0, None, None)
    assert rc == 0, f"nvrtcCreateProgram: {rc}"
    words = [f"--gpu-architecture={arch}", "-default-device", *options]
    argv = (ctypes.c_char_p * len(words))(*[w.encode() for w in words])
    rc = lib.nvrtcCompileProgram(program, len(words), argv)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(program, log)
    lib.nvrtcDestroyProgram(ctypes.byref(program))
    return "" if rc == 0 else log.value.decode(errors="replace")
