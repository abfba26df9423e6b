"""Device arguments: factories, Tensor/Storage/Module moves, generators, default device.

Every callable that accepts a device is wrapped so that a CUDA device value
(_names.is_cuda_device) becomes the flagos device before the call; other
values pass through untouched. See Note [Wrappers, not a TorchFunctionMode]
in __init__.py for why this is done with global wrappers.

The tables below are the whole list; tests/python/test_cuda_alias.py checks
against the installed torch that every torch.* factory whose signature
takes `device` is in TORCH_FACTORIES, so a new torch minor that adds one is
noticed.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.utils._device

from ._names import flagos_device, is_cuda_device, legacy_type_name, to_flagos
from ._patcher import Patcher

# torch.* callables whose `device` is keyword-only.
TORCH_FACTORIES = (
    "arange",
    "as_tensor",
    "asarray",
    "bartlett_window",
    "blackman_window",
    "empty",
    "empty_like",
    "empty_permuted",
    "empty_quantized",
    "empty_strided",
    "eye",
    "from_dlpack",
    "from_file",
    "full",
    "full_like",
    "hamming_window",
    "hann_window",
    "kaiser_window",
    "linspace",
    "logspace",
    "normal",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "randperm",
    "range",
    "scalar_tensor",
    "sparse_bsc_tensor",
    "sparse_bsr_tensor",
    "sparse_compressed_tensor",
    "sparse_coo_tensor",
    "sparse_csc_tensor",
    "sparse_csr_tensor",
    "tensor",
    "tril_indices",
    "triu_indices",
    "zeros",
    "zeros_like",
)

# (namespace, name, position of `device` when it may be passed positionally)
OTHER_FACTORIES = (
    ("torch.fft", "fftfreq", None),
    ("torch.fft", "rfftfreq", None),
    ("torch.nested", "nested_tensor", None),
    ("torch.nested", "as_nested_tensor", 2),
)

# Tensor methods: (name, position of `device` after self, or None: keyword only).
TENSOR_METHODS = (
    ("to", 0),
    ("new_empty", None),
    ("new_empty_strided", None),
    ("new_full", None),
    ("new_ones", None),
    ("new_tensor", None),
    ("new_zeros", None),
    ("pin_memory", 0),
    ("is_pinned", 0),
)


def _wrap(fn, position: int | None):
    """fn with its `device` argument (keyword, or at `position`) mapped cuda -> flagos."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs:
            device = kwargs.get("device")
            if device is not None and is_cuda_device(device):
                kwargs["device"] = to_flagos(device)
        if position is not None and len(args) > position and is_cuda_device(args[position]):
            args = (*args[:position], to_flagos(args[position]), *args[position + 1 :])
        return fn(*args, **kwargs)

    wrapper.__flagos_cuda_alias__ = True
    return wrapper


def installed_wrappers() -> list:
    """The factory wrappers now installed (for torch.compile, see _compile.py)."""
    owners = [(torch, name) for name in TORCH_FACTORIES]
    owners += [(_resolve(namespace), name) for namespace, name, _ in OTHER_FACTORIES]
    found = (getattr(owner, name, None) for owner, name in owners)
    return [fn for fn in found if getattr(fn, "__flagos_cuda_alias__", False)]


def _resolve(dotted: str):
    obj = torch
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def _legacy_dtype(value: Any) -> torch.dtype | None:
    """The dtype of a CUDA legacy tensor type given as a string or an alias class."""
    name = legacy_type_name(value)
    if name is None:
        name = getattr(value, "__flagos_legacy_type__", None)
    if name is None:
        return None
    return getattr(torch, name).dtype


def _tensor_cuda(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
    """Tensor.cuda() under the alias: a copy on the flagos device (self if already there)."""
    return torch.Tensor.to(
        self, flagos_device(device), non_blocking=non_blocking, memory_format=memory_format
    )


def _make_is_cuda(original):
    def is_cuda(self) -> bool:
        """True on CUDA and, under the flagos cuda alias, on the flagos device."""
        return self.device.type == "flagos" or original.__get__(self)

    return property(is_cuda)


def _make_tensor_type(original):
    @functools.wraps(original)
    def type(self, dtype=None, non_blocking=False, **kwargs):
        target = _legacy_dtype(dtype)
        if target is None:
            return original(self, dtype, non_blocking, **kwargs)
        return torch.Tensor.to(self, "flagos", target, non_blocking=non_blocking)

    return type


def _make_set_default_tensor_type(original):
    @functools.wraps(original)
    def set_default_tensor_type(t, /):
        target = _legacy_dtype(t)
        if target is None:
            return original(t)
        # What torch.cuda.FloatTensor as the default type means: that dtype, on the device.
        torch.set_default_dtype(target)
        torch.set_default_device("flagos")

    return set_default_tensor_type


class _GeneratorMeta(type(torch._C.Generator)):
    """torch.Generator(device="cuda") builds a flagos generator; isinstance sees real ones."""

    def __call__(cls, device: Any = "cpu", *args, **kwargs):
        device = to_flagos(device)
        if cls is Generator:
            return torch._C.Generator(device, *args, **kwargs)
        return super().__call__(device, *args, **kwargs)

    def __instancecheck__(cls, obj: Any) -> bool:
        if cls is Generator:
            return isinstance(obj, torch._C.Generator)
        return super().__instancecheck__(obj)

    def __subclasscheck__(cls, sub: type) -> bool:
        if cls is Generator:
            return issubclass(sub, torch._C.Generator)
        return super().__subclasscheck__(sub)


class Generator(torch._C.Generator, metaclass=_GeneratorMeta):
    """torch.Generator while the cuda alias is active (pickles as torch._C.Generator)."""


def _keep_default_device_working(patcher: Patcher, listed: set, wrapped: dict) -> None:
    """Let torch's DeviceContext (set_default_device) recognize the wrapped factories.

    Torch hands a TorchFunctionMode the function it finds under the public
    name, which is now our wrapper; DeviceContext fills in the default
    device only for functions in its _device_constructors() set.
    """
    module = torch.utils._device
    constructors = frozenset(listed) | {wrapped[fn] for fn in listed if fn in wrapped}
    patcher.set(module, "_device_constructors", lambda: constructors)


def install(patcher: Patcher) -> None:
    # Built (and cached by torch) before anything is wrapped: the originals.
    listed = set(torch.utils._device._device_constructors())
    wrapped = {}
    for name in TORCH_FACTORIES:
        fn = getattr(torch, name, None)
        if fn is not None:
            wrapped[fn] = _wrap(fn, None)
            patcher.set(torch, name, wrapped[fn])
    for namespace, name, position in OTHER_FACTORIES:
        owner = _resolve(namespace)
        fn = getattr(owner, name, None)
        if fn is not None:
            wrapped[fn] = _wrap(fn, position)
            patcher.set(owner, name, wrapped[fn])
    _keep_default_device_working(patcher, listed, wrapped)

    tensor = torch.Tensor
    for name, position in TENSOR_METHODS:
        # position counts after self, the wrapper sees self as args[0]
        patcher.set(
            tensor,
            name,
            _wrap(getattr(tensor, name), position + 1 if position is not None else None),
        )
    patcher.set(tensor, "cuda", _tensor_cuda)
    patcher.set(tensor, "is_cuda", _make_is_cuda(torch._C.TensorBase.is_cuda))
    patcher.set(tensor, "type", _make_tensor_type(tensor.type))

    # Storages: UntypedStorage.cuda() and TypedStorage.to() both end in _StorageBase.to.
    storage_base = torch.storage._StorageBase
    patcher.set(storage_base, "to", _wrap(storage_base.to, None))
    storage_is_cuda = property(lambda self: self.device.type in ("cuda", "flagos"))
    for storage_class in (storage_base, torch.UntypedStorage, torch.TypedStorage):
        patcher.set(storage_class, "is_cuda", storage_is_cuda)

    patcher.set(torch, "Generator", Generator)

    # torch.set_default_device("cuda") and `with torch.device("cuda"):` both
    # build a DeviceContext (the latter from C++, by looking the class up).
    context = torch.utils._device.DeviceContext
    original_init = context.__init__

    def device_context_init(self, device):
        original_init(self, to_flagos(device) if is_cuda_device(device) else device)

    patcher.set(context, "__init__", device_context_init)
    patcher.set(
        torch,
        "set_default_tensor_type",
        _make_set_default_tensor_type(torch.set_default_tensor_type),
    )
