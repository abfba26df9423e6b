"""initialize(), backend_info(), the plugin loader's failure paths, autoload and the CLI.

PrivateUse1 is set up once per process, so everything that needs a fresh
start-up runs in a subprocess (run_python).
"""

from __future__ import annotations

import json
import os
from importlib.metadata import entry_points

import flagos_torchfl as ft
import pytest
import torch
from conftest import check_ok

# Each broken test plugin (tests/plugins/broken_plugin.c), the status the
# loader gives it and words its reason must contain.
BROKEN = {
    "wrong_abi": ("failed", ["ABI mismatch", "99"]),
    "no_entry": ("failed", ["no entry point", "flagosVendorGetTables_v1"]),
    "probe_fails": ("skipped", ["probe failed", "no test device present"]),
    "init_fails": ("failed", ["init failed", "init failed on purpose"]),
    # ABI 1.1: kernel-table ids are checked at load (kernel.h)
    "unknown_kernel_id": ("failed", ["entry 1", "'reluu'", "not a semantic ID"]),
    "duplicate_kernel_id": ("failed", ["entries 0 and 1", "'relu'"]),
}

REPORT_SNIPPET = """
    import json, flagos_torchfl as ft
    try:
        ft.initialize({backend!r})
        info = ft.backend_info(verbose=False)
        print(json.dumps({{"ok": True, "backend": info["backend"],
                          "discovery": info["discovery"]}}))
    except Exception as err:
        print(json.dumps({{"ok": False, "type": type(err).__name__, "message": str(err)}}))
"""


def start(run_python, backend=None, **env) -> dict:
    """initialize(backend) in a fresh process; its outcome as a dict."""
    out = check_ok(run_python(REPORT_SNIPPET.format(backend=backend), **env))
    return json.loads(out.strip().splitlines()[-1])


def test_initialize_is_idempotent():
    count = torch.flagos.device_count()
    ft.initialize()
    ft.initialize("auto")
    ft.initialize("host")
    assert ft.is_initialized()
    assert torch.flagos.device_count() == count >= 1
    assert torch._C._get_privateuse1_backend_name() == "flagos"


def test_switching_backend_in_one_process_is_refused():
    with pytest.raises(RuntimeError, match="already initialized with backend 'host'"):
        ft.initialize("opencl")


@pytest.mark.parametrize("name", ["", "host!", "../host", "a b", "1host", 3])
def test_malformed_backend_name_is_a_value_error(name):
    with pytest.raises(ValueError, match="invalid backend argument"):
        ft.initialize(name)


@pytest.mark.parametrize("name", ["Host", "HOST", " host "])
def test_backend_names_are_case_insensitive(name):
    ft.initialize(name)  # the running backend: a no-op, not a refusal
    assert ft.backend_info(verbose=False)["backend"] == "host"


def test_flagos_backend_is_case_insensitive(run_python):
    out = check_ok(
        run_python(
            "import flagos_torchfl as ft; ft.initialize(); print(ft.backend_info(False)['backend'])",
            FLAGOS_BACKEND="Host",
        )
    )
    assert out.strip().splitlines()[-1] == "host"


def test_unknown_backend_is_a_value_error(run_python):
    result = start(run_python, "nosuch")
    assert result["type"] == "ValueError"
    assert "unknown backend 'nosuch'" in result["message"]
    assert "host" in result["message"]  # lists what was found


@pytest.mark.parametrize(
    "env_value, expected",
    [("host", "host"), ("nosuch", "ValueError"), ("Bad Name", "ValueError")],
)
def test_flagos_backend_env_chooses_the_backend(run_python, env_value, expected):
    result = start(run_python, None, FLAGOS_BACKEND=env_value, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert (result["backend"] if result["ok"] else result["type"]) == expected
    if env_value == "Bad Name":
        assert "FLAGOS_BACKEND" in result["message"]


def assert_auto_choice(result: dict) -> None:
    """Under auto the selected plugin ranks highest among those that work."""
    assert result["ok"], result
    working = [r for r in result["discovery"] if r["status"] in ("selected", "usable")]
    (selected,) = [r for r in working if r["status"] == "selected"]
    assert selected["name"] == result["backend"]
    assert selected["priority"] == max(r["priority"] for r in working)


@pytest.mark.parametrize("backend", [None, "auto"])
def test_auto_picks_the_highest_ranked_working_plugin(run_python, backend):
    assert_auto_choice(start(run_python, backend, TORCH_DEVICE_BACKEND_AUTOLOAD="0"))


def test_backend_argument_overrides_the_env(run_python):
    result = start(run_python, "host", FLAGOS_BACKEND="nosuch", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert result["ok"] and result["backend"] == "host"


def test_visible_devices_select_and_order_physical_devices(run_python):
    out = check_ok(
        run_python(
            """
            import torch, flagos_torchfl as ft
            ft.initialize("host")
            info = ft.backend_info(verbose=False)
            print(torch.flagos.device_count(), [d["physical"] for d in info["devices"]])
            """,
            FLAGOS_HOST_DEVICES="3",
            FLAGOS_VISIBLE_DEVICES="2,0",
        )
    )
    assert out.strip().splitlines()[-1] == "2 [2, 0]"


@pytest.mark.parametrize("spec, words", [("5", "out of range"), ("0,x", "not a device index")])
def test_bad_visible_devices_are_clear_errors(run_python, spec, words):
    result = start(run_python, "host", FLAGOS_HOST_DEVICES="2", FLAGOS_VISIBLE_DEVICES=spec)
    assert not result["ok"]
    assert "FLAGOS_VISIBLE_DEVICES" in result["message"] and words in result["message"]


def test_backend_info_describes_the_running_backend(capsys):
    info = ft.backend_info()
    printed = capsys.readouterr().out
    json.dumps(info)  # plain data
    assert info["device_type"] == "flagos"
    assert info["backend"] == "host"
    assert info["abi"] == "1.4"
    assert info["sdk"] == "host" and info["sdk_version"]
    assert info["plugin_path"].endswith("libflagos_host.so")
    assert info["device_count"] == len(info["devices"]) == torch.flagos.device_count()
    for dev in info["devices"]:
        assert dev["total_memory"] > 0 and 0 <= dev["free_memory"] <= dev["total_memory"]
        assert dev["compute_units"] >= 1 and dev["name"] and dev["arch"]
    assert isinstance(info["native_kernels"], int) and info["native_kernels"] >= 0
    assert info["compiler"] is None or isinstance(info["compiler"], str)
    # The plugin's collectives library, or staging through the host over gloo without one.
    assert info["collectives"] == (ft._core.C()._backend_info()["collectives"] or "host (gloo)")
    selected = [r for r in info["discovery"] if r["status"] == "selected"]
    assert [r["name"] for r in selected] == ["host"]
    assert info["torch_version"] == torch.__version__
    for words in (
        "device type",
        "flagos",
        "host",
        "ABI 1.4",
        "collectives",
        "fft library",
        "linalg library",
        "discovery",
    ):
        assert words in printed
    assert ft.backend_info(verbose=False)["backend"] == "host"
    assert capsys.readouterr().out == ""  # verbose=False prints nothing


@pytest.mark.parametrize("breakage", sorted(BROKEN))
def test_explicit_broken_plugin_fails_naming_plugin_and_reason(run_python, test_plugin, breakage):
    result = start(run_python, f"test_{breakage}", FLAGOS_PLUGIN_PATH=test_plugin(breakage))
    assert not result["ok"] and result["type"] == "RuntimeError", result
    assert f"test_{breakage}" in result["message"]
    for words in BROKEN[breakage][1]:
        assert words in result["message"]


@pytest.mark.parametrize("breakage", sorted(BROKEN))
def test_auto_skips_broken_plugin_and_reports_why(run_python, test_plugin, breakage):
    path = test_plugin(breakage)
    result = start(run_python, "auto", FLAGOS_PLUGIN_PATH=path)
    assert_auto_choice(result)
    assert result["backend"] != f"test_{breakage}"
    (entry,) = [r for r in result["discovery"] if os.path.samefile(r["path"], path)]
    status, words = BROKEN[breakage]
    assert entry["status"] == status
    for word in words:
        assert word in entry["reason"]


def test_plugin_path_accepts_folders(run_python, test_plugin):
    folder = os.path.dirname(test_plugin("probe_fails"))
    result = start(run_python, "auto", FLAGOS_PLUGIN_PATH=folder)
    assert_auto_choice(result)
    found = {r["name"] for r in result["discovery"]}
    assert "test_probe_fails" in found and "test_init_fails" in found


def test_privateuse1_claimed_by_another_extension_is_refused(run_python):
    out = check_ok(
        run_python(
            """
            import torch, flagos_torchfl as ft
            torch.utils.rename_privateuse1_backend("othervendor")  # as another vendor would
            try:
                ft.initialize("host")
            except RuntimeError as err:
                print("refused:", err)
            """
        )
    )
    assert "refused:" in out and "already claimed by 'othervendor'" in out


def _has_entry_point() -> bool:
    return any(
        ep.value == "flagos_torchfl:_autoload" for ep in entry_points(group="torch.backends")
    )


@pytest.fixture
def installed():
    if not _has_entry_point():
        if os.environ.get("CI"):
            pytest.fail("the torch.backends entry point is missing: pip install -e . first")
        pytest.skip("flagos-torchfl is not pip-installed (no torch.backends entry point)")


def test_autoload_brings_the_device_up_at_import_torch(run_python, installed):
    out = check_ok(
        run_python(
            """
            import sys, torch
            x = torch.randn(2, device="flagos")
            print(x.device, (x * 2).cpu().equal(x.cpu() * 2))
            """,
            FLAGOS_BACKEND="host",
        )
    )
    assert out.strip().splitlines()[-1] == "flagos:0 True"


def test_autoload_without_flagos_backend_does_nothing(run_python, installed):
    out = check_ok(run_python("import torch; print(torch._C._get_privateuse1_backend_name())"))
    assert out.strip() == "privateuseone"


def test_autoload_typo_fails_import_torch_naming_the_plugins(run_python, installed):
    # A typo used to warn and run the whole job on CPU with exit status 0.
    proc = run_python("import torch; print('imported')", FLAGOS_BACKEND="hots")
    assert proc.returncode != 0 and "imported" not in proc.stdout
    assert "FLAGOS_BACKEND=hots: unknown backend 'hots'" in proc.stderr
    assert "host (" in proc.stderr  # the candidates found
    assert "FLAGOS_BACKEND_LENIENT=1" in proc.stderr  # the way out


def test_autoload_typo_with_lenient_warns_and_continues(run_python, installed):
    proc = run_python(
        "import torch; print('imported', torch.ones(1).item())",
        FLAGOS_BACKEND="nosuch",
        FLAGOS_BACKEND_LENIENT="1",
    )
    assert check_ok(proc).strip() == "imported 1.0"
    assert "FLAGOS_BACKEND=nosuch" in proc.stderr and "unknown backend 'nosuch'" in proc.stderr


def test_import_package_before_torch_with_autoload(run_python, installed):
    # Note [Autoload re-entry]: our import of torch runs the entry point mid-import.
    out = check_ok(
        run_python(
            "import flagos_torchfl as ft, torch; print(ft.is_initialized(), torch.flagos.device_count())",
            FLAGOS_BACKEND="host",
        )
    )
    assert out.strip() == "True 1"


@pytest.mark.parametrize(
    "args, code, words",
    [
        (["info", "--backend", "host"], 0, "device type"),
        (["info", "--backend", "nosuch"], 1, "error: unknown backend 'nosuch'"),
        (["demo", "--backend", "host"], 0, "matches CPU"),
        (["env"], 0, "FLAGOS_BACKEND"),
    ],
)
def test_cli(run_python, args, code, words):
    proc = run_python(
        f"import sys; from flagos_torchfl.__main__ import main; sys.exit(main({args!r}))"
    )
    assert proc.returncode == code, proc.stderr
    assert words in proc.stdout + proc.stderr
    if code == 0:
        assert "DIFFERS" not in proc.stdout


def test_cli_info_json(run_python):
    out = check_ok(
        run_python(
            "from flagos_torchfl.__main__ import main; main(['info', '--json'])",
            FLAGOS_BACKEND="host",
        )
    )
    assert json.loads(out)["backend"] == "host"


def test_auto_in_code_defers_to_flagos_backend(run_python):
    """initialize(backend="auto") runs on the backend FLAGOS_BACKEND names (no code edit).

    opencl ranks below host on a CPU-only machine, so plain auto would pick host.
    """
    code = """
        import flagos_torchfl as ft
        ft.initialize(backend="auto")
        print(ft.backend_info(verbose=False)["backend"])
        """
    probe = run_python(code.replace('"auto"', '"opencl"'), TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    if probe.returncode != 0:
        pytest.skip(f"no usable opencl plugin: {probe.stderr[-300:]}")
    proc = run_python(code, FLAGOS_BACKEND="opencl", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "opencl"


def test_a_named_backend_opens_only_its_own_plugin(run_python, test_plugin, tmp_path):
    # Other vendors' files beside it: one whose entry point aborts, a FIFO
    # named like a plugin (dlopen would block on it forever), a folder.
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "libflagos_test_entry_crashes.so").symlink_to(test_plugin("entry_crashes"))
    os.mkfifo(folder / "libflagos_fifo.so")
    (folder / "libflagos_folder.so").mkdir()
    result = start(run_python, "host", FLAGOS_PLUGIN_PATH=str(folder))
    assert result["ok"] and result["backend"] == "host", result
    opened = {os.path.basename(r["path"]) for r in result["discovery"]}
    assert opened == {"libflagos_host.so"}, result["discovery"]


def test_auto_skips_what_is_not_a_regular_file(run_python, tmp_path):
    folder = tmp_path / "plugins"
    folder.mkdir()
    os.mkfifo(folder / "libflagos_fifo.so")
    (folder / "libflagos_folder.so").mkdir()
    result = start(run_python, "auto", FLAGOS_PLUGIN_PATH=str(folder))
    assert_auto_choice(result)
    opened = {os.path.basename(r["path"]) for r in result["discovery"]}
    assert not opened & {"libflagos_fifo.so", "libflagos_folder.so"}, result["discovery"]
