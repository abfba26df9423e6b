"""`validate --level 5 --config FILE`: the regression run, levels 1-4 for a list of models.

    regression(config_path, backend=None) -> {"models": [...], "ok", "failed": [spec, ...]}

The config is TOML (tomllib, Python 3.11+) or JSON (by extension: .json is JSON, anything else TOML):

    [defaults]                 # optional; every key of a model entry may be set here
    level = 3                  # 1..4 (default 4)
    dtypes = ["float32"]       # level 1
    steps = 20                 # level 3 (default 100)
    nprocs = 2                 # level 4

    [[models]]
    spec = "tool_models/mlp.py"      # as the other commands take it
    level = 4

    [[models]]
    spec = "mypkg.models:tiny"

(`models` may also be a list of spec strings.) A relative file spec is read
relative to the config file's folder when it exists there. Keys of an entry:
spec, level, dtypes, steps, lr, atol, rtol, loss_tol, nprocs, ddp_steps,
min_scaling. Every model runs all its levels (keep going: a regression report
wants every failure); level 1 (operators, no model) runs once per dtype list
and its result is repeated under each model.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

KEYS = {
    "spec": str,
    "level": int,
    "dtypes": list,
    "steps": int,
    "lr": float,
    "atol": float,
    "rtol": float,
    "loss_tol": float,
    "nprocs": int,
    "ddp_steps": int,
    "min_scaling": float,
}
DEFAULTS: dict[str, Any] = {"level": 4}


def _check_entry(entry: dict[str, Any], where: str) -> None:
    for key, value in entry.items():
        if key not in KEYS:
            raise ValueError(f"{where}: unknown key {key!r}; expected one of {sorted(KEYS)}")
        expected = KEYS[key]
        if expected is float and isinstance(value, int):
            continue
        if not isinstance(value, expected) or isinstance(value, bool):
            raise ValueError(f"{where}: {key} must be a {expected.__name__}, not {value!r}")
    if "level" in entry and entry["level"] not in (1, 2, 3, 4):
        raise ValueError(f"{where}: level must be 1..4, not {entry['level']}")


def load_config(path: str | Path) -> list[dict[str, Any]]:
    """The model entries of a config file, defaults applied, specs resolved."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"validate --level 5: config file not found: {path}")
    text = path.read_text()
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: {err}") from err
    else:
        try:
            import tomllib  # Python 3.11+
        except ImportError as err:
            raise ValueError(f"{path}: TOML needs Python 3.11+ (tomllib); use JSON") from err
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ValueError(f"{path}: {err}") from err
    defaults = dict(data.get("defaults", {}))
    _check_entry(defaults, f"{path} [defaults]")
    models = data.get("models")
    if not isinstance(models, list) or not models:
        raise ValueError(f"{path}: expected a non-empty 'models' list")
    entries = []
    for i, item in enumerate(models):
        entry = {"spec": item} if isinstance(item, str) else dict(item)
        where = f"{path} models[{i}]"
        _check_entry(entry, where)
        if "spec" not in entry:
            raise ValueError(f"{where}: missing 'spec'")
        target, sep, func = entry["spec"].partition(":")
        if target.endswith(".py") and not Path(target).is_absolute():
            beside = path.parent / target
            if beside.is_file():
                entry["spec"] = str(beside) + sep + func
        entries.append({**DEFAULTS, **defaults, **entry})
    return entries


def _run_model(entry: dict[str, Any], backend: str | None, level1: dict) -> dict[str, Any]:
    from .validate import validate

    passed_on = ("steps", "lr", "atol", "rtol", "loss_tol", "nprocs", "ddp_steps", "min_scaling")
    kwargs = {k: entry[k] for k in passed_on if k in entry}
    dtypes = tuple(entry.get("dtypes", ("float32", "bfloat16")))
    t0 = time.perf_counter()
    try:
        result = validate(
            level=entry["level"],
            model=entry["spec"],
            backend=backend,
            dtypes=dtypes,
            keep_going=True,
            level1_cache=level1,
            **kwargs,
        )
    except Exception as err:  # noqa: BLE001 - a broken model is a failed entry, not a crash
        result = {
            "model": entry["spec"],
            "requested_level": entry["level"],
            "levels": [
                {
                    "level": 0,
                    "name": "load",
                    "ok": False,
                    "criterion": "the model spec loads",
                    "message": f"{entry['spec']}: {type(err).__name__}: {err}",
                    "cases": [
                        {
                            "name": "load",
                            "ok": False,
                            "message": f"{type(err).__name__}: {err}",
                            "time": time.perf_counter() - t0,
                        }
                    ],
                }
            ],
            "ok": False,
            "failed_level": 0,
        }
    result["spec"] = entry["spec"]
    result["config"] = entry
    return result


def regression(config: str | Path, backend: str | None = None) -> dict[str, Any]:
    """Run every model of `config` (see the module docstring)."""
    from .. import backend_info, initialize

    entries = load_config(config)
    initialize(backend)
    level1: dict = {}
    models = [_run_model(entry, backend, level1) for entry in entries]
    failed = [m["spec"] for m in models if not m["ok"]]
    return {
        "backend": backend_info(verbose=False)["backend"],
        "config": str(config),
        "requested_level": 5,
        "models": models,
        "ok": not failed,
        "failed": failed,
    }


def junit_cases(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One JUnit case per model x level x case, named `MODEL.levelN.NAME.CASE`."""
    cases = []
    for m in result["models"]:
        name = Path(m["spec"].partition(":")[0]).name + (
            ":" + m["spec"].partition(":")[2] if ":" in m["spec"] else ""
        )
        for lv in m["levels"]:
            for c in lv["cases"]:
                cases.append(
                    {
                        "name": f"{name}.level{lv['level']}.{lv['name']}.{c['name']}",
                        "ok": c["ok"],
                        "message": c.get("message", ""),
                        "time": c.get("time", 0.0),
                    }
                )
    return cases


def format_result(result: dict[str, Any]) -> str:
    from ._output import paint, render, use_colour

    colour = use_colour()
    rows = [["model", "levels", "result", "first failure"]]
    for m in result["models"]:
        passed = [str(lv["level"]) for lv in m["levels"] if lv["ok"]]
        failed = next((lv for lv in m["levels"] if not lv["ok"]), None)
        rows.append(
            [
                m["spec"],
                f"1..{m['requested_level']} (passed: {','.join(passed) or '-'})",
                "pass" if m["ok"] else "fail",
                (
                    # Level 0 is the model spec failing to load (_run_model): say so.
                    f"{'does not load' if failed['level'] == 0 else 'level ' + str(failed['level'])}"
                    f": {failed['message']}"[:110]
                    if failed
                    else ""
                ),
            ]
        )
    lines = [
        f"regression on {result['backend']}: {result['config']}",
        render(rows, colour_column=2),
    ]
    verdict = "pass" if result["ok"] else "FAIL"
    lines.append(
        "\nresult: "
        + paint(verdict, verdict.lower(), colour)
        + (
            f" ({len(result['failed'])} model(s) failed: {', '.join(result['failed'])})"
            if result["failed"]
            else ""
        )
    )
    return "\n".join(lines)
