"""torch.compile's inductor on the flagos device (docs/architecture.md, "Compiled kernels").

When the active plugin has a compiler slot, initialize() registers:

- a dynamo DeviceInterface (device.py): current device, streams, events,
  properties, and a compute capability naming plugin, version and
  architecture (part of inductor's cache keys);
- the Python wrapper's device lines (device.py, DeviceOpOverrides);
- a SIMD scheduling whose kernels are flagos fused kernels (scheduling.py,
  kernel.py): inductor's fused pointwise and reduction loops become a body
  in a neutral C subset, framed in the plugin's language by the core's
  Dialect (csrc/jit/gen/fused.h), compiled through the compiler slot into
  the kernel cache and launched through the ABI (runtime.py). Matmul,
  convolution and what inductor does not fuse stay extern calls to the
  eager flagos operators.

Registration is lazy (importing inductor costs seconds): inductor asks the
device module when it first compiles for flagos, through torch.flagos's
``_inductor_backend_init`` (torch >= 2.15) or its ``Scheduling`` /
``PythonWrapperCodegen`` / ``CppWrapperCodegen`` attributes (earlier
releases); the cuda alias's torch.compile asks register() directly.
FLAGOS_COMPILE=off leaves inductor alone (and the cuda alias then keeps
torch.compile on aot_eager, with its warning).
"""

from __future__ import annotations

from .. import _state

_registered = False
_compiles = False


def enabled() -> bool:
    """Whether FLAGOS_COMPILE allows the inductor backend (default: on)."""
    from .. import config

    return config.compile_enabled()


def registered() -> bool:
    return _registered


def register() -> bool:
    """Registers the flagos inductor backend; True where it compiles kernels.

    A plugin without a compiler gets the backend too, so that graphs of
    extern operators (matmul, convolution) compile and a graph that needs a
    fused kernel fails with a clear message, but register() answers False
    and the cuda alias keeps torch.compile on aot_eager. FLAGOS_COMPILE=off:
    nothing is registered.
    """
    global _registered, _compiles
    if _registered:
        return _compiles
    if not enabled():
        return False
    core = _state.require_initialized()
    language = core._custom_kernel_language()
    import torch
    from torch._dynamo.device_interface import register_interface_for_device
    from torch._inductor.codegen.common import (
        register_backend_for_device,
        register_device_op_overrides,
    )

    from .device import FlagosDeviceOpOverrides, FlagosInterface
    from .scheduling import FlagosScheduling, FlagosWrapperCodegen, set_device_limits

    device = _state.DEVICE_TYPE
    props = torch.flagos.get_device_properties(0)
    group = props.preferred_work_group_size or min(256, props.max_work_group_size or 256)
    group = 1 << (max(1, group).bit_length() - 1)  # group reductions need a power of two
    devices = core._backend_info()["devices"]
    set_device_limits(
        language=language,
        work_groups=language in ("opencl-c", "cuda-c"),
        group_size=group,
        fp64=all(d.get("fp64") for d in devices),
    )
    register_interface_for_device(device, FlagosInterface)
    for i in range(torch.flagos.device_count()):
        register_interface_for_device(f"{device}:{i}", FlagosInterface)
    register_device_op_overrides(device, FlagosDeviceOpOverrides())
    from .graph_pass import FlagosGraphPass

    register_backend_for_device(
        device,
        FlagosScheduling,
        FlagosWrapperCodegen,
        NoCppWrapper,
        device_custom_pass=FlagosGraphPass(language, group),
    )
    _keep_convolutions_in_their_layout()
    _draw_random_numbers_as_eager_does()
    _registered, _compiles = True, bool(language)
    return _compiles


def _keep_convolutions_in_their_layout() -> None:
    """No layout optimization in graphs with flagos tensors.

    Inductor's heuristics (tuned on GPUs) turn convolution inputs and weights
    channels-last. On flagos that takes the slower channels-last convolution
    path, and the eager convolution_backward's gradient layout then differed
    from its meta kernel's for a 1x1 feature map (torchvision ResNet-18's last
    stage), which inductor's stride asserts caught. There is no per-device
    switch for this decision in torch 2.13-2.15 (GraphLowering.decide_layout_opt),
    so it is wrapped: graphs without flagos tensors decide as before.
    """
    import torch
    from torch._inductor.graph import GraphLowering

    decide = GraphLowering.decide_layout_opt
    if getattr(decide, "_flagos", False):
        return

    def decide_layout_opt(gm, *args, **kwargs):
        for node in gm.graph.nodes:
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor) and val.device.type == _state.DEVICE_TYPE:
                return False
        return decide(gm, *args, **kwargs)

    decide_layout_opt._flagos = True
    GraphLowering.decide_layout_opt = staticmethod(decide_layout_opt)


def _has_flagos_tensors(gm, example_inputs) -> bool:
    """Whether a dynamo graph touches the flagos device (its inputs, or a
    factory call such as ``torch.rand(n, device="flagos")`` inside it)."""
    import torch

    device = _state.DEVICE_TYPE
    for value in example_inputs:
        if isinstance(value, torch.Tensor) and value.device.type == device:
            return True
    for node in getattr(getattr(gm, "graph", None), "nodes", ()):
        value = node.meta.get("example_value", node.meta.get("val"))
        if isinstance(value, torch.Tensor) and value.device.type == device:
            return True
    return False


def _draw_random_numbers_as_eager_does() -> None:
    """Random operators in graphs with flagos tensors stay the eager operators.

    Inductor replaces them (fx_passes/replace_random.py) by its own draws:
    one random seed per graph from the generator, then a counter-based
    number per element at (that seed, the element's index) inside the fused
    kernels. Those are not the numbers eager flagos draws (Note [Random
    numbers on the device]): a compiled dropout would mask other elements
    than the eager one for the same seed, and the stream would no longer be
    the same on every backend. With inductor's config.fallback_random,
    native_dropout, bernoulli, rand, randn, randint and the distributions
    stay ATen calls: the eager flagos operators, that is one generated
    kernel each (dropout's mask and scale in one), drawing at the
    generator's offset and advancing it as eager does, so compiled and
    eager runs draw the same bits. What is lost is fusing the draw with its
    neighbours (a dropout reads and writes its tensor once more).

    config.fallback_random is global and read while AOT autograd
    decomposes, before any per-device hook: compile_fx (the entry of
    torch.compile's inductor backend) is wrapped so that it is set for
    graphs with flagos tensors only.
    """
    import functools

    import torch._inductor.compile_fx as compile_fx_module
    from torch._inductor import config

    compile_fx = compile_fx_module.compile_fx
    if getattr(compile_fx, "_flagos", False):
        return

    @functools.wraps(compile_fx)
    def wrapped(model_, example_inputs_, *args, **kwargs):
        if not config.fallback_random and _has_flagos_tensors(model_, example_inputs_):
            with config.patch(fallback_random=True):
                return compile_fx(model_, example_inputs_, *args, **kwargs)
        return compile_fx(model_, example_inputs_, *args, **kwargs)

    wrapped._flagos = True
    compile_fx_module.compile_fx = wrapped


class NoCppWrapper:
    """Inductor's C++ wrapper (config.cpp_wrapper, AOTInductor) is not built for flagos."""

    @staticmethod
    def create(*args, **kwargs):
        raise RuntimeError(
            "torch.compile on flagos: the C++ wrapper (cpp_wrapper / AOTInductor) is not "
            "supported; the default Python wrapper is"
        )


def codegen_class(name: str) -> None:
    """torch < 2.15 reads Scheduling & co. from torch.flagos when inductor first looks at
    the device: register here, with our graph pass, and answer None, so that inductor
    does not register the classes a second time without it. Inductor reads these
    through getattr(..., None), which would swallow an error: it is shown instead."""
    try:
        register()
    except Exception as err:  # noqa: BLE001  (shown, not swallowed)
        import warnings

        warnings.warn(
            f"flagos: the inductor backend failed to register ({type(err).__name__}: {err}); "
            "torch.compile cannot target the flagos device",
            RuntimeWarning,
            stacklevel=2,
        )
    return None
