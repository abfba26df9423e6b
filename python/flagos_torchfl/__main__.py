"""The `flagos-torchfl` command (also `python -m flagos_torchfl`).

    flagos-torchfl info [--backend NAME] [--json]   what is running (backend_info)
    flagos-torchfl demo [--backend NAME]            a quick start, checked against CPU
    flagos-torchfl env [--markdown]                 the FLAGOS_* variables (docs/env.md)
    flagos-torchfl run [--backend NAME] SCRIPT ...  a (CUDA) script on flagos (launch.py)
    flagos-torchfl ops | coverage | doctor | bench | validate   migration tools (tools/,
                                                    docs/tools.md)

Each subcommand is one row of _COMMANDS (help, its arguments, its function);
later tools (coverage, validate, bench, doctor, selftest) add theirs the same way.
Exit status: 0 on success, 1 when a check fails or the backend cannot start (`run`:
the script's own).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from . import launch, selftest
from .tools import bench, coverage, doctor, ops, validate


def _info(args: argparse.Namespace) -> int:
    from . import backend_info, initialize

    initialize(args.backend)
    info = backend_info(verbose=not args.json)
    if args.json:
        print(json.dumps(info, indent=2))
    return 0


def _demo(args: argparse.Namespace) -> int:
    import torch

    from . import backend_info, initialize, op_stats, reset_op_stats
    from .backend import format_op_stats

    initialize(args.backend)
    reset_op_stats()
    x_cpu = torch.randn(128, 128, generator=torch.Generator().manual_seed(0))
    x = x_cpu.to("flagos")
    checks = {
        "relu": (torch.relu(x), torch.relu(x_cpu)),
        "matmul": (x @ x.T, x_cpu @ x_cpu.T),
        "softmax": (torch.softmax(x, dim=1), torch.softmax(x_cpu, dim=1)),
        "sum": (x.sum(dim=0), x_cpu.sum(dim=0)),
    }
    failed = 0
    for name, (on_device, on_cpu) in checks.items():
        ok = on_device.device.type == "flagos" and torch.allclose(
            on_device.cpu(), on_cpu, rtol=1e-4, atol=1e-4
        )
        failed += not ok
        print(f"{name:8s} on {on_device.device}: {'matches CPU' if ok else 'DIFFERS FROM CPU'}")
    print()
    backend_info()
    print("\noperators and the tier they ran on:")
    print(format_op_stats(op_stats()))
    return 1 if failed else 0


def _env(args: argparse.Namespace) -> int:
    from . import config
    from ._text import table

    if args.markdown:
        print(config.markdown(), end="")
        return 0
    rows = [["variable", "value", "read by"]]
    rows += [
        [var.name, "unset" if value is None else value, var.read_by]
        for var, value in config.current()
    ]
    print(table(rows, indent=""))
    print("\nmeanings: docs/env.md (or: flagos-torchfl env --markdown)")
    return 0


def _backend_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        default=None,
        help="plugin name or 'auto' (default: $FLAGOS_BACKEND, else auto)",
    )


def _info_arguments(parser: argparse.ArgumentParser) -> None:
    _backend_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the dict as JSON")


def _env_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--markdown", action="store_true", help="print docs/env.md")


Command = tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]

# name -> (help, add its arguments, run it and return the exit status)
_COMMANDS: dict[str, Command] = {
    "info": ("show the backend, devices, versions and plugin discovery", _info_arguments, _info),
    "demo": (
        "run a quick start on the flagos device and check it against CPU",
        _backend_argument,
        _demo,
    ),
    "env": ("list the FLAGOS_* environment variables and their values here", _env_arguments, _env),
    "run": (
        "run a (CUDA) script on the flagos device, like python SCRIPT",
        launch.add_arguments,
        launch.command,
    ),
    "ops": (
        "list the operator catalog and the tier each operator takes on a backend",
        ops.add_arguments,
        ops.command,
    ),
    "coverage": (
        "record the operators a model uses and the tier each would take per backend",
        coverage.add_arguments,
        coverage.command,
    ),
    "doctor": (
        "check the environment: plugins, SDKs, ABI, torch, conflicting libraries",
        doctor.add_arguments,
        doctor.command,
    ),
    "bench": (
        "time a model: latency percentiles, throughput, memory, per-operator times",
        bench.add_arguments,
        bench.command,
    ),
    "selftest": (
        "under torchrun: all_reduce correctness and bandwidth of the communication plane",
        selftest.add_arguments,
        selftest.command,
    ),
    "validate": (
        "the validation ladder against CPU: operators, inference, training, DDP, regression",
        validate.add_arguments,
        validate.command,
    ),
}


class _DefaultsFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" to an option's help unless X is None/False or
    the help already says its default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        if action.option_strings and action.nargs != 0:
            return text + " (default: %(default)s)"
        return text


def torch_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return "not installed"


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="flagos-torchfl", description="flagos-torchfl: one PyTorch device for any accelerator"
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"flagos-torchfl {__version__} (torch {torch_version()})",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_arguments, _) in _COMMANDS.items():
        # Defaults shown in every --help.
        add_arguments(
            sub.add_parser(
                name,
                help=help_text,
                description=help_text,
                formatter_class=_DefaultsFormatter,
            )
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from .tools._output import json_only_stdout

    try:
        with json_only_stdout(getattr(args, "json", None) == "-"):
            return _COMMANDS[args.command][2](args)
    except (ImportError, RuntimeError, ValueError) as err:
        print(f"flagos-torchfl {args.command}: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
