"""The device check's results (scripts/device_check.sh) as a markdown report:
issue 30's targets with the ratios measured, the OpInfo sweep's failures and
host fallbacks, the model zoo, and the conformance suite's summary.

    python scripts/device_report.py OUT_DIR > OUT_DIR/report.md
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def fmt(x, digits=2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def get(d: dict, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def targets(bench: dict) -> list[str]:
    r = bench.get("records", {})
    rows = ["| measure | floor | goal | measured | |", "|---|---|---|---|---|"]

    def row(name, floor, goal, value, higher=True, unit="x"):
        ok = None if value is None else (value >= floor if higher else value <= floor)
        mark = "-" if ok is None else ("met" if ok else "**missed**")
        rows.append(f"| {name} | {floor}{unit} | {goal}{unit} | {fmt(value)}{unit} | {mark} |")

    row(
        "ResNet-50 train step fp32 (speed vs native)",
        0.90,
        0.97,
        get(r, "resnet50", "fp32", "flagos_speed_vs_native"),
    )
    row(
        "ResNet-50 train step bf16 autocast",
        0.90,
        0.97,
        get(r, "resnet50", "bf16_autocast", "flagos_speed_vs_native"),
    )
    row("GPT-2 small train step bf16, AdamW", 0.90, 0.97, get(r, "gpt2", "flagos_speed_vs_native"))
    for op in ("add", "relu", "mm"):
        row(f"eager {op}: time per op / native's", 1.5, "", get(r, "eager", op, "ratio"), False)
    row(
        "gelu 256M floats, fraction of copy",
        0.7,
        0.85,
        get(r, "pointwise", "flagos", "fraction_of_copy"),
        unit="",
    )
    for op in ("sum_last", "softmax", "layer_norm"):
        row(
            f"{op}, fraction of copy",
            0.5,
            0.7,
            get(r, "reductions", op, "flagos", "fraction_of_copy"),
            unit="",
        )
    row(
        "new shape, worst first / steady",
        3.0,
        1.5,
        get(r, "new_shape", "flagos", "worst_first_over_steady"),
        False,
    )
    row("torch.compile block vs inductor", 0.8, 1.0, get(r, "compile", "flagos_speed_vs_inductor"))
    return rows


def opinfo(sweep: dict) -> list[str]:
    recs = sweep.get("records", {})
    if not recs:
        return ["(no OpInfo results)"]
    lines = []
    for dtype in ("float32", "bfloat16"):
        mine = {k: v for k, v in recs.items() if k.endswith("|" + dtype) and "skip" not in v}
        if not mine:
            continue
        ok = [k for k, v in mine.items() if v["failed"] == 0]
        fb = [k for k, v in mine.items() if v.get("fallback")]
        lines.append(
            f"- {dtype}: {len(ok)}/{len(mine)} OpInfos match native CUDA "
            f"({100 * len(ok) / len(mine):.1f}%); {len(fb)} touch the host fallback"
        )
        bad = sorted(k for k in mine if k not in ok)
        if bad:
            lines.append(f"  - failing: {', '.join(b.split('|')[0] for b in bad[:60])}")
    for name, meta in sweep.get("meta", {}).items():
        lines.append(f"- {name}: {meta.get('seconds')} s, stopped: {meta.get('stopped')}")
    return lines


def zoo(z: dict) -> list[str]:
    recs = z.get("records", {})
    if not recs:
        return ["(no model-zoo results)"]
    rows = [
        "| model | loss native | loss flagos | grad err flagos | CPU floor | passed | fallbacks |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in recs.items():
        if "error" in r:
            rows.append(f"| {name} | | | | | error: {r['error'][:80]} | |")
            continue
        rows.append(
            f"| {name} | {fmt(r['loss_cuda'], 5)} | {fmt(r['loss_flagos'], 5)} | "
            f"{r['grad_err_flagos']:.2e} | {r['grad_err_cpu_floor']:.2e} | {r['passed']} | "
            f"{len(r.get('fallback', {}))} |"
        )
    return rows


def conformance(text: str) -> list[str]:
    lines = [ln for ln in text.splitlines() if re.match(r"\[  (PASSED|FAILED) ", ln)]
    lines += [ln for ln in text.splitlines() if "tests ran" in ln or "SKIPPED" in ln]
    return lines or ["(no conformance output)"]


def main() -> int:
    out = Path(sys.argv[1])
    bench, models = load(out / "bench.json"), load(out / "zoo.json")
    sweep = {"records": {}, "meta": {}}
    for part in sorted(out.glob("opinfo*.json")):
        data = load(part)
        sweep["records"].update(data.get("records", {}))
        sweep["meta"][part.stem] = data.get("meta", {})
    meta = bench.get("meta") or models.get("meta") or {}
    print(
        f"# Device check: {meta.get('gpu', '?')}, torch {meta.get('torch', '?')}, "
        f"CUDA {meta.get('cuda', '?')}, {meta.get('when', '?')}\n"
    )
    print("## Targets (flagos on the cuda plugin against native CUDA, one run)\n")
    print("\n".join(targets(bench)))
    print("\n## Benchmarks (raw)\n\n```json")
    print(json.dumps(bench.get("records", {}), indent=1)[:12000])
    print("```\n\n## OpInfo against native CUDA\n")
    print("\n".join(opinfo(sweep)))
    print("\n## Model zoo against native CUDA\n")
    print("\n".join(zoo(models)))
    conf = out / "conformance.txt"
    print("\n## ABI conformance (cuda plugin)\n\n```")
    print("\n".join(conformance(conf.read_text() if conf.exists() else "")))
    print("```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
