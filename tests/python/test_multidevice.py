"""Two host devices: selection, placement, copies between them, context managers.

The checks live in two_device_checks.py, run once in a process started with
FLAGOS_HOST_DEVICES=2; each is reported here as its own test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import two_device_checks
from conftest import check_ok, python_subprocess


@pytest.fixture(scope="module")
def results() -> dict[str, str]:
    script = Path(two_device_checks.__file__).read_text()
    proc = python_subprocess(script, FLAGOS_HOST_DEVICES="2")
    return json.loads(check_ok(proc).strip().splitlines()[-1])


@pytest.mark.parametrize("name", two_device_checks.CHECKS)
def test_two_devices(results, name):
    assert results[name] == "ok", results[name]
