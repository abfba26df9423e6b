"""`flagos-torchfl run`: run an unmodified (CUDA) script on the flagos device.

    flagos-torchfl run train.py --epochs 3           # like `python train.py --epochs 3`
    flagos-torchfl run --backend host train.py
    flagos-torchfl run -m mypkg.train --epochs 3     # like `python -m mypkg.train`
    python -m flagos_torchfl run train.py

The backend is brought up and the cuda alias activated (whatever native CUDA
there is: asking for `run` asks for flagos; FLAGOS_ALIAS_CUDA=0 still turns
the alias off) before the script's first line, then the script runs as
`__main__` with sys.argv set as `python` would set it. FLAGOS_BACKEND is
exported, so processes the script starts (DataLoader workers under spawn,
mp.spawn, subprocesses) come up the same way through torch's backend
autoload. The exit status is the script's: sys.exit(n) gives n, an uncaught
exception prints its traceback and gives 1.

Setting FLAGOS_BACKEND and running `python train.py` has the same effect
without this command (autoload at `import torch`).
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `run` subcommand's arguments."""
    parser.add_argument(
        "--backend",
        default=None,
        help="plugin name or 'auto' (default: $FLAGOS_BACKEND, else auto)",
    )
    parser.add_argument(
        "-m",
        dest="module",
        action="store_true",
        help="run a module (like python -m) instead of a script file",
    )
    parser.add_argument("target", metavar="SCRIPT", help="script path (or module name with -m)")
    parser.add_argument(
        "args", nargs=argparse.REMAINDER, metavar="...", help="arguments passed to the script"
    )


def set_up(backend: str | None = None) -> str:
    """Initialize the backend and activate the cuda alias; returns the backend name.

    Raises what initialize() raises when no backend can start.
    """
    from . import _core, config, cuda_alias, initialize

    name = backend or config.backend() or "auto"
    initialize(name)
    chosen = _core.C()._backend_info()["name"]
    config.export_backend(chosen)  # children start the same backend (autoload)
    if cuda_alias.setting() != "0":
        cuda_alias.activate()
    return chosen


def _exit_status(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"), as python does
    return 1


def run(target: str, args: list[str], module: bool = False) -> int:
    """Run `target` as __main__ with `args`; returns its exit status."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [target, *args]  # with -m, runpy replaces argv[0] by the module's path
    # What python puts first on sys.path: the script's folder, or (-m) the working directory.
    first = os.getcwd() if module else os.path.dirname(os.path.abspath(target))
    sys.path[:1] = [first]
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as stop:
        return _exit_status(stop.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        return 130
    except BaseException:  # noqa: BLE001 - the script's error, reported like python does
        kind, value, tb = sys.exc_info()
        # Drop our own frames (this function, runpy) from the traceback.
        while tb is not None and not _is_script_frame(tb, target, module):
            tb = tb.tb_next
        traceback.print_exception(kind, value, tb or value.__traceback__)
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return 0


def _is_script_frame(tb, target: str, module: bool) -> bool:
    filename = tb.tb_frame.f_code.co_filename
    if module:
        return not filename.startswith((os.path.dirname(runpy.__file__), os.path.dirname(__file__)))
    return os.path.abspath(filename) == os.path.abspath(target)


def command(args: argparse.Namespace) -> int:
    """The `run` subcommand."""
    if not args.module and not os.path.isfile(args.target):
        print(f"flagos-torchfl run: can't open file {args.target!r}", file=sys.stderr)
        return 2
    set_up(args.backend)
    return run(args.target, args.args, module=args.module)
