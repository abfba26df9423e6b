"""`flagos-torchfl bench`: latency, throughput, peak memory, per-operator times and tiers."""

from __future__ import annotations

from tool_models.cli import MLP, TIERS, explain, read_json, run_cli


def test_bench_reports_latency_memory_ops_and_cpu_ratio(tmp_path):
    report = tmp_path / "bench.json"
    proc = run_cli(
        "bench",
        MLP,
        "--backend",
        "host",
        "--train",
        "--steps",
        "4",
        "--warmup",
        "2",
        "--compare",
        "cpu",
        "--json",
        str(report),
    )
    assert proc.returncode == 0, explain(proc)
    data = read_json(report)
    lat = data["latency"]
    assert 0 < lat["p50_ms"] <= lat["p95_ms"] and lat["mean_ms"] > 0
    assert data["batch"] == 8 and abs(lat["samples_per_s"] - 8 * lat["steps_per_s"]) < 1e-6
    assert data["steps"] == 4 and data["warmup"] == 2 and data["mode"] == "train"
    assert data["peak_memory_bytes"] > 0
    ops = {op["op"]: op for op in data["ops"]}
    assert {"aten::addmm", "aten::threshold_backward"} <= set(ops)
    assert all(op["tier"] in TIERS for op in data["ops"])
    assert ops["aten::addmm"]["predicted"] is False  # counted by op_stats() during the step
    assert abs(sum(op["share"] for op in data["ops"]) - 1) < 1e-6
    assert data["compare"]["device"] == "cpu" and data["compare"]["ratio_mean"] > 0
    for text in (
        "P50 ms",
        "P95 ms",
        "flagos / cpu mean latency",
        "peak device memory",
        "aten::addmm",
    ):
        assert text in proc.stdout


def test_bench_rejects_bad_step_counts():
    proc = run_cli("bench", MLP, "--backend", "host", "--steps", "0")
    assert proc.returncode == 1 and "--steps must be >= 1" in proc.stderr
