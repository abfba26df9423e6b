"""A short soak of a training loop: memory flat after warm-up (issue 15).

stress_scripts/soak.py trains a CNN and a transformer layer with cycling
batch sizes and samples RSS and memory_reserved() after its first quarter.
The suite runs 20 s on host (10-minute runs per backend are by hand:
docs/reliability.md). Bounds: the caching allocator reaches a steady state,
so reserved memory must not move at all; RSS may move by page-level noise
(the 10-minute runs grew 1.9 MiB on host and 0.9 MiB on opencl), far below
what leaking one small tensor per step would add at 100+ steps a second.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import check_ok

SOAK = Path(__file__).resolve().parent / "stress_scripts" / "soak.py"


def test_a_training_loop_keeps_memory_flat(run_python):
    proc = run_python(
        f"import runpy, sys; sys.argv = [{str(SOAK)!r}, 'host', '20']; "
        f"runpy.run_path({str(SOAK)!r}, run_name='__main__')",
        timeout=180,
    )
    r = json.loads(check_ok(proc).strip().splitlines()[-1])
    assert r["steps"] > 100, r
    assert r["reserved_growth_mib"] == 0.0, r
    assert r["rss_growth_mib"] < 16, r
