"""Faults: damaged plugin files, device OOM, threads, DataLoader workers.

Rows of docs/reliability.md's fault table. Each case runs in a fresh
interpreter and must end in a clear error or correct results, never a crash
or a hang.
"""

from __future__ import annotations

import os

import pytest
from conftest import NEEDS_OPENCL_PLUGIN, check_ok

DAMAGED = {"garbage": bytes(range(256)) * 16, "empty": b"", "text": b"not an ELF file\n"}


@pytest.mark.parametrize("what", list(DAMAGED))
def test_a_damaged_plugin_file_is_skipped_by_auto_and_named_when_chosen(run_python, tmp_path, what):
    bad = tmp_path / "libflagos_damaged.so"
    bad.write_bytes(DAMAGED[what])
    out = check_ok(
        run_python(
            f"""
            import flagos_torchfl as ft
            ft.initialize("auto")
            info = ft.backend_info(verbose=False)
            print(info["backend"])
            print([c for c in info["discovery"] if c["path"] == {str(bad)!r}])
            """,
            FLAGOS_PLUGIN_PATH=f"{tmp_path}:{os.path.dirname(ft_plugins())}",
        )
    )
    backend, candidates = out.strip().splitlines()[-2:]
    assert backend in ("host", "opencl"), out
    assert "failed" in candidates or "skipped" in candidates, candidates
    proc = run_python(
        """
        import flagos_torchfl as ft
        ft.initialize("damaged")
        """,
        FLAGOS_PLUGIN_PATH=str(tmp_path),  # chosen by name: a clear error naming it, no crash
    )
    assert proc.returncode == 1 and str(bad) in proc.stderr, (what, proc.stderr[-1500:])
    assert "Traceback" in proc.stderr and "Segmentation" not in proc.stderr


def ft_plugins() -> str:
    import flagos_torchfl as ft

    return os.path.join(os.path.dirname(ft.__file__), "plugins", "libflagos_host.so")


def test_a_missing_or_unreadable_plugin_folder_is_skipped(run_python, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "libflagos_x.so").write_bytes(b"")
    locked.chmod(0)
    try:
        out = check_ok(
            run_python(
                """
                import flagos_torchfl as ft
                ft.initialize("host")
                print(ft.backend_info(verbose=False)["backend"])
                """,
                FLAGOS_PLUGIN_PATH=f"{tmp_path / 'missing'}:{locked}:{os.path.dirname(ft_plugins())}",
            )
        )
    finally:
        locked.chmod(0o700)
    assert out.strip().splitlines()[-1] == "host"


@NEEDS_OPENCL_PLUGIN
def test_opencl_out_of_memory_is_torch_oom_and_recoverable(run_python):
    out = check_ok(
        run_python(
            """
            import torch, flagos_torchfl as ft
            ft.initialize("opencl")
            keep = [torch.ones(1 << 20, device="flagos") for _ in range(8)]   # 32 MiB
            try:
                more = [torch.ones(1 << 20, device="flagos") for _ in range(64)]
                print("no oom")
            except torch.OutOfMemoryError as err:
                print("oom", "out of memory" in str(err))
            more = None
            x = torch.arange(1000.0, device="flagos")
            print("after", (x * 2).sum().item() == 999000.0, len(keep))
            """,
            FLAGOS_OPENCL_MEMORY_LIMIT="64M",
        )
    )
    assert out.strip().splitlines()[-2:] == ["oom True", "after True 8"], out


@pytest.mark.parametrize("backend", ["host", pytest.param("opencl", marks=NEEDS_OPENCL_PLUGIN)])
def test_four_threads_on_their_own_streams_match_cpu(run_python, backend):
    out = check_ok(
        run_python(
            f"""
            import threading, torch, flagos_torchfl as ft
            ft.initialize("{backend}")
            torch.manual_seed(0)
            w = torch.randn(32, 32)
            mismatches, errors = [], []

            def work(seed):
                try:
                    g = torch.Generator().manual_seed(seed)
                    s = torch.flagos.Stream()
                    wd = w.to("flagos")
                    with torch.flagos.stream(s):
                        for i in range(40):
                            x = torch.randn(8 + i % 5, 32, generator=g)
                            got = torch.nn.functional.gelu(x.to("flagos") @ wd).softmax(-1)
                            want = torch.nn.functional.gelu(x @ w).softmax(-1)
                            if not torch.allclose(got.cpu(), want, rtol=1e-4, atol=1e-5):
                                mismatches.append((seed, i))
                except Exception as err:
                    errors.append(repr(err))

            threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
            for t in threads: t.start()
            for t in threads: t.join()
            print("mismatches", len(mismatches), "errors", errors)
            """,
            timeout=600,
        )
    )
    assert out.strip().splitlines()[-1] == "mismatches 0 errors []", out


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers_with_pin_memory_feed_device_training(run_python, method):
    out = check_ok(
        run_python(
            f"""
            import torch, flagos_torchfl as ft
            from torch.utils.data import DataLoader, TensorDataset

            def train(device, loader):
                torch.manual_seed(0)
                m = torch.nn.Linear(6, 3).to(device)
                opt = torch.optim.SGD(m.parameters(), lr=0.1)
                for x, y in loader:
                    opt.zero_grad()
                    loss = torch.nn.functional.cross_entropy(m(x.to(device, non_blocking=True)),
                                                             y.to(device, non_blocking=True))
                    loss.backward()
                    opt.step()
                return m.weight.detach().cpu()

            if __name__ == "__main__":
                ft.initialize("host")
                torch.ones(1, device="flagos")  # the device is up before the workers start
                g = torch.Generator().manual_seed(1)
                data = TensorDataset(torch.randn(64, 6, generator=g), torch.randint(0, 3, (64,), generator=g))
                loader = DataLoader(data, batch_size=8, num_workers=2, pin_memory=True,
                                    multiprocessing_context="{method}")
                first = next(iter(loader))[0]
                print("pinned", first.is_pinned())
                got = train("flagos", loader)
                want = train("cpu", DataLoader(data, batch_size=8))
                print("equal", torch.allclose(got, want, rtol=1e-5, atol=1e-6))
            """,
            timeout=300,
        )
    )
    assert out.strip().splitlines()[-2:] == ["pinned True", "equal True"], out
