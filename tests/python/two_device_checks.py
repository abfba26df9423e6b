"""Checks that need two flagos devices; test_multidevice.py runs this file as a
script with FLAGOS_HOST_DEVICES=2 (PrivateUse1 is set up once per process).
Prints {check name: "ok" or the traceback} as JSON.
"""

import json
import traceback

import torch


def check_count():
    assert torch.flagos.device_count() == 2


def check_set_device():
    torch.flagos.set_device(1)
    try:
        assert torch.flagos.current_device() == 1
        assert torch.randn(3, device="flagos").device == torch.device("flagos", 1)
    finally:
        torch.flagos.set_device(0)
    assert torch.randn(3, device="flagos").device == torch.device("flagos", 0)


def check_compute_on_device_1():
    a = torch.arange(12.0).view(3, 4)
    d = a.to("flagos:1")
    assert torch.equal((d * 2 + 1).cpu(), a * 2 + 1)
    product = d @ d.t()
    assert product.device.index == 1 and torch.equal(product.cpu(), a @ a.t())


def check_cross_device_copy():
    a = torch.randn(5, 7)
    d0 = a.to("flagos:0")
    d1 = d0.to("flagos:1")
    assert d1.device.index == 1 and torch.equal(d1.cpu(), a)
    assert torch.equal(d1.t().to("flagos:0").cpu(), a.t())  # strided source
    dst = torch.empty(7, 5, device="flagos:1").t()  # strided destination
    dst.copy_(d0)
    assert torch.equal(dst.cpu(), a)


def check_device_context():
    with torch.flagos.device(1):
        assert torch.zeros(2, device="flagos").device.index == 1
        with torch.flagos.device("flagos:0"):
            assert torch.flagos.current_device() == 0
        assert torch.flagos.current_device() == 1
        with torch.flagos.device(torch.device("flagos", 1)):
            assert torch.flagos.current_device() == 1
    assert torch.flagos.current_device() == 0


def check_device_of():
    t1 = torch.ones(1, device="flagos:1")
    with torch.flagos.device_of(t1):
        assert torch.flagos.current_device() == 1
    with torch.flagos.device_of(torch.ones(1)):  # a CPU tensor: no-op
        assert torch.flagos.current_device() == 0
    assert torch.flagos.current_device() == 0


def check_memory_per_device():
    before0, before1 = torch.flagos.memory_allocated(0), torch.flagos.memory_allocated(1)
    x = torch.empty(1 << 20, dtype=torch.uint8, device="flagos:1")
    assert torch.flagos.memory_allocated(1) >= before1 + (1 << 20)
    assert torch.flagos.memory_allocated(0) == before0
    del x


def check_streams_per_device():
    s = torch.flagos.Stream("flagos:1")
    assert s.device_index == 1
    with torch.flagos.stream(s):
        y = torch.ones(4, device="flagos:1") * 3
    s.synchronize()
    assert torch.flagos.current_device() == 0 and y.sum().item() == 12


def check_synchronize_each_device():
    torch.ones(8, device="flagos:1").mul_(2)
    torch.flagos.synchronize(0)
    torch.flagos.synchronize("flagos:1")
    assert torch.flagos.current_stream(1).query()


CHECKS = {
    name[len("check_") :]: fn for name, fn in list(globals().items()) if name.startswith("check_")
}

if __name__ == "__main__":
    import flagos_torchfl as ft

    ft.initialize("host")
    results = {}
    for name, check in CHECKS.items():
        try:
            check()
            results[name] = "ok"
        except Exception:
            results[name] = traceback.format_exc()
    print(json.dumps(results))
