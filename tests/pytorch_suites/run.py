"""PyTorch's own device-generic test suites on flagos (issue 36).

PyTorch ships its operator semantics as tests instantiated per device type
(torch/testing/_internal/common_device_type.py); a PrivateUse1 device gets
them through PrivateUse1TestBase. The test files are not in the wheels, and
CI cannot reach PyTorch's repository, so this is a command a person runs
over a checkout of PyTorch's test/ folder at the installed torch's commit
(`python -c "import torch; print(torch.version.git_version)"`):

    python3 tests/pytorch_suites/run.py --src PYTORCH/test [--backend host] [--suites a,b]

Each suite runs twice, on CPU (PYTORCH_TESTING_DEVICE_ONLY_FOR=cpu) and on
flagos, each with its JUnit report. A failure is *ours* when the same test
(device name taken out) does not fail on CPU: that separates version skew
of the files from our bugs. Ours that match exclusions.txt (fnmatch
patterns, each with its reason) are reported as excluded; any other makes
the exit status 1. The table goes to stdout (docs/testing.md keeps it).
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

SUITES = [
    "test_view_ops",
    "test_indexing",
    "test_type_promotion",
    "test_shape_ops",
    "test_tensor_creation_ops",
    "test_reductions",
    "test_binary_ufuncs",
    "test_unary_ufuncs",
]
HERE = Path(__file__).resolve().parent


def exclusions() -> list[tuple[str, str]]:
    """(pattern, reason) per line of exclusions.txt: `pattern  # reason`."""
    out = []
    for line in (HERE / "exclusions.txt").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pattern, _, reason = line.partition("#")
        if not reason.strip():
            raise SystemExit(f"exclusions.txt: '{pattern.strip()}' has no reason")
        out.append((pattern.strip(), reason.strip()))
    return out


def generic(name: str) -> str:
    """A test's name with its device taken out (CPU and PRIVATEUSE1 classes alike)."""
    name = re.sub(r"(PRIVATEUSE1|FLAGOS|CPU)(?=::|$)", "", name)
    return re.sub(r"_(flagos|cpu)(?=_|$)", "", name)


def not_run() -> dict[str, str]:
    """{test function name: reason} of not_run.txt: tests left out on every
    device because they crash the installed torch's own CPU kernels (the
    process dies and the suite's report with it)."""
    out = {}
    for line in (HERE / "not_run.txt").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, reason = line.partition("#")
        if not reason.strip():
            raise SystemExit(f"not_run.txt: '{name.strip()}' has no reason")
        out[name.strip()] = reason.strip()
    return out


def read_report(report: Path) -> dict[str, str]:
    """{generic test name: passed|failed|skipped} of one JUnit report."""
    results = {}
    for case in ET.parse(report).iter("testcase"):
        name = generic(f"{case.get('classname')}::{case.get('name')}")
        kind = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                kind = "failed"
            elif child.tag == "skipped" and kind != "failed":
                kind = "skipped"
        results[name] = kind
    return results


def run_suite(
    src: Path,
    suite: str,
    device: str,
    backend: str,
    timeout: int,
    workers: int,
    reports: Path | None,
) -> dict[str, str]:
    """{generic test name: passed|failed|skipped} of one suite on one device."""
    # Absolute entries: pytest runs in a temporary directory.
    inherited = [
        os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    path = os.pathsep.join([str(HERE), *inherited])
    env = dict(os.environ, PYTORCH_TESTING_DEVICE_ONLY_FOR=device, PYTHONPATH=path)
    if device == "flagos":
        env["FLAGOS_BACKEND"] = backend
    else:
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "compat",
                f"--junitxml={report}",
                *(["-n", str(workers)] if workers > 1 else []),
                *(["-k", " and ".join(f"not {n}" for n in sorted(not_run()))] if not_run() else []),
                str(src / f"{suite}.py"),
            ],
            env=env,
            cwd=tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            timeout=timeout,
            check=False,
        )
        if not report.exists():
            tail = "\n".join(proc.stderr.splitlines()[-20:])
            raise SystemExit(f"{suite} on {device}: no report (the run crashed):\n{tail}")
        if reports is not None:
            reports.mkdir(parents=True, exist_ok=True)
            shutil.copy(report, reports / f"{suite}-{device}.xml")
        return read_report(report)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--src", type=Path, required=True, help="PyTorch's test/ folder")
    ap.add_argument("--backend", default="host")
    ap.add_argument("--suites", default=",".join(SUITES))
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per suite and device")
    ap.add_argument("--workers", type=int, default=1, help="pytest-xdist processes per run")
    ap.add_argument("--reports", type=Path, help="keep each run's JUnit report in this folder")
    ap.add_argument(
        "--cpu-reports",
        type=Path,
        help="take the CPU baseline from SUITE-cpu.xml in this folder (an earlier run's "
        "--reports, same files and torch) instead of running it again",
    )
    args = ap.parse_args()
    suites = [n if n.startswith("test_") else f"test_{n}" for n in args.suites.split(",")]
    unknown = [n for n in suites if not (args.src / f"{n}.py").is_file()]
    if unknown:
        ap.error(f"no such suite in {args.src}: {', '.join(unknown)} (known: {', '.join(SUITES)})")
    rules = exclusions()
    print(
        "| suite | tests on flagos | passed | skipped | failures also on CPU | ours excluded | ours |"
    )
    print("|---|---|---|---|---|---|---|")
    ours_all = []
    used: set[str] = set()
    empty = []
    for suite in suites:
        kept = args.cpu_reports / f"{suite}-cpu.xml" if args.cpu_reports else None
        cpu = (
            read_report(kept)
            if kept is not None and kept.exists()
            else run_suite(
                args.src, suite, "cpu", args.backend, args.timeout, args.workers, args.reports
            )
        )
        dev = run_suite(
            args.src, suite, "flagos", args.backend, args.timeout, args.workers, args.reports
        )
        if not dev:  # nothing collected or ran: not a pass
            empty.append(suite)
        failed = [n for n, k in dev.items() if k == "failed"]
        skew = [n for n in failed if cpu.get(n) == "failed"]
        ours = [n for n in failed if cpu.get(n) != "failed"]
        excluded = [n for n in ours if any(fnmatch.fnmatch(n, p) for p, _ in rules)]
        used.update(p for p, _ in rules for n in excluded if fnmatch.fnmatch(n, p))
        left = [n for n in ours if n not in excluded]
        ours_all += left
        counts = {k: sum(1 for v in dev.values() if v == k) for k in ("passed", "skipped")}
        print(
            f"| {suite} | {len(dev)} | {counts['passed']} | {counts['skipped']} | {len(skew)} "
            f"| {len(excluded)} | {len(left)} |",
            flush=True,
        )
    for name in ours_all:
        print("ours:", name)
    for suite in empty:
        print("no test ran on flagos:", suite)
    # The list only shrinks: an entry no failure of this run matched is
    # reported, so that it is taken out once its cause is fixed.
    ran = suites
    for pattern, _ in rules:
        if pattern.split(".")[0] in ran and pattern not in used:
            print("exclusion matched nothing this run:", pattern)
    return 1 if ours_all or empty else 0


if __name__ == "__main__":
    sys.exit(main())
