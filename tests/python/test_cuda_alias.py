"""The cuda alias in this process: "cuda" means the flagos device everywhere a device goes.

The test process runs the host backend on a CPU-only torch, where
initialize() turns the alias on; the `alias` fixture makes sure it is on for
each test and leaves it as it found it. Switching (when the alias must stay
off), launch and the unmodified scripts are in test_cuda_alias_switch.py and
test_cuda_alias_scripts.py.
"""

from __future__ import annotations

import importlib
import inspect
import io
import re
import threading
import types
import warnings
import zipfile

import pytest
import torch
from conftest import check_ok
from flagos_torchfl import cuda_alias
from flagos_torchfl.cuda_alias import _factories, _names, _torch_cuda


@pytest.fixture(autouse=True)
def alias():
    was_active = cuda_alias.is_active()
    cuda_alias.activate()
    yield
    if not was_active:
        cuda_alias.deactivate()


def on_flagos(t) -> bool:
    return t.device.type == "flagos"


# ------------------------------------------------------------------ names


@pytest.mark.parametrize(
    "value, expected",
    [
        ("cuda", "flagos"),
        ("cuda:0", "flagos:0"),
        ("cuda:12", "flagos:12"),
        (torch.device("cuda"), torch.device("flagos")),
        (torch.device("cuda", 1), torch.device("flagos", 1)),
    ],
)
def test_cuda_names_map_to_flagos(value, expected):
    assert _names.is_cuda_device(value)
    assert _names.to_flagos(value) == expected
    assert type(_names.to_flagos(value)) is type(value)


@pytest.mark.parametrize(
    "value",
    [
        "cudagraphs",
        "cuda_graph",
        "cuda:",
        "cuda:0 ",
        " cuda",
        "CUDA",
        "cuda:x",
        "cuda:0.pt",
        "cpu",
        "flagos:0",
        "meta",
        torch.device("cpu"),
        0,
        None,
        b"cuda",
    ],
)
def test_only_whole_cuda_device_names_are_translated(value):
    assert not _names.is_cuda_device(value)
    assert _names.to_flagos(value) is value


def test_a_non_device_string_reaches_torch_unchanged():
    with pytest.raises(RuntimeError, match="cudagraphs"):
        torch.zeros(1, device="cudagraphs")


# ------------------------------------------------------------------ device arguments

DEVICES = ["cuda", "cuda:0", torch.device("cuda"), torch.device("cuda", 0), 0]

FACTORIES = {
    "zeros": lambda d: torch.zeros(2, 3, device=d),
    "ones": lambda d: torch.ones(2, device=d),
    "empty": lambda d: torch.empty(2, device=d),
    "full": lambda d: torch.full((2,), 1.5, device=d),
    "rand": lambda d: torch.rand(2, device=d),
    "randn": lambda d: torch.randn(2, device=d),
    "randint": lambda d: torch.randint(0, 5, (3,), device=d),
    "randperm": lambda d: torch.randperm(4, device=d),
    "arange": lambda d: torch.arange(4, device=d),
    "linspace": lambda d: torch.linspace(0, 1, 3, device=d),
    "eye": lambda d: torch.eye(2, device=d),
    "tensor": lambda d: torch.tensor([1.0, 2.0], device=d),
    "as_tensor": lambda d: torch.as_tensor([1, 2], device=d),
    "asarray": lambda d: torch.asarray([1, 2], device=d),
    "scalar_tensor": lambda d: torch.scalar_tensor(3.0, device=d),
    "normal": lambda d: torch.normal(0.0, 1.0, (2,), device=d),
    "empty_strided": lambda d: torch.empty_strided((2, 2), (2, 1), device=d),
    "zeros_like": lambda d: torch.zeros_like(torch.ones(2), device=d),
    "ones_like": lambda d: torch.ones_like(torch.ones(2), device=d),
    "empty_like": lambda d: torch.empty_like(torch.ones(2), device=d),
    "full_like": lambda d: torch.full_like(torch.ones(2), 7, device=d),
    "rand_like": lambda d: torch.rand_like(torch.ones(2), device=d),
    "randn_like": lambda d: torch.randn_like(torch.ones(2), device=d),
    "randint_like": lambda d: torch.randint_like(torch.ones(2), 5, device=d),
    "tril_indices": lambda d: torch.tril_indices(3, 3, device=d),
    "hann_window": lambda d: torch.hann_window(4, device=d),
    "fft.fftfreq": lambda d: torch.fft.fftfreq(4, device=d),
    "signal.windows.hann": lambda d: torch.signal.windows.hann(5, device=d),
    "Tensor.to": lambda d: torch.ones(2).to(d),
    "Tensor.to(device, dtype)": lambda d: torch.ones(2).to(d, torch.float16),
    "Tensor.to(device=)": lambda d: torch.ones(2).to(device=d, non_blocking=True),
    "Tensor.cuda": lambda d: torch.ones(2).cuda(d if d != "cuda" else None),
    "Tensor.new_zeros": lambda d: torch.ones(2).new_zeros(3, device=d),
    "Tensor.new_ones": lambda d: torch.ones(2).new_ones(3, device=d),
    "Tensor.new_empty": lambda d: torch.ones(2).new_empty(3, device=d),
    "Tensor.new_full": lambda d: torch.ones(2).new_full((3,), 2.0, device=d),
    "Tensor.new_tensor": lambda d: torch.ones(2).new_tensor([1.0], device=d),
    "Module.to": lambda d: next(torch.nn.Linear(2, 2).to(d).parameters()),
    "Module.cuda": lambda d: (
        next(torch.nn.Linear(2, 2).cuda(d if d != "cuda" else None).buffers(), None)
        or next(torch.nn.Linear(2, 2).cuda(d if d != "cuda" else None).parameters())
    ),
    "Module.to_empty": lambda d: next(
        torch.nn.Linear(2, 2, device="meta").to_empty(device=d).parameters()
    ),
    "Module(device=)": lambda d: torch.nn.Linear(2, 2, device=d).weight,
}


@pytest.mark.parametrize("device", DEVICES, ids=str)
@pytest.mark.parametrize("name", list(FACTORIES))
def test_every_way_to_name_cuda_gives_a_flagos_tensor(name, device):
    t = FACTORIES[name](device)
    assert on_flagos(t), f"{name}({device!r}) -> {t.device}"
    assert t.is_cuda


def test_values_match_cpu():
    cpu = torch.arange(12.0).reshape(3, 4)
    torch.testing.assert_close(cpu.cuda().mul(2).sum(0).cpu(), cpu.mul(2).sum(0))
    # Random numbers: reproducible by seed, as on CUDA (whose numbers differ
    # from CPU's too: Note [Generators of the flagos device]).
    torch.manual_seed(0)
    on_cuda = torch.randn(5, device="cuda").cpu()
    torch.manual_seed(0)
    assert torch.equal(on_cuda, torch.randn(5, device="cuda").cpu())


def test_flagos_and_cpu_arguments_are_untouched():
    assert torch.zeros(1, device="flagos").device.type == "flagos"
    assert torch.zeros(1, device="cpu").device.type == "cpu"
    assert torch.ones(1).cuda().to("cpu").device.type == "cpu"
    assert not torch.ones(1).is_cuda


def test_is_cuda_on_tensors_parameters_storages_and_packed_sequences():
    x = torch.ones(2, device="cuda")
    assert x.is_cuda and torch.nn.Parameter(x).is_cuda
    assert x.untyped_storage().is_cuda
    assert torch.ones(2).untyped_storage().cuda().is_cuda
    packed = torch.nn.utils.rnn.pack_sequence([torch.ones(2, 1)]).cuda()
    assert packed.is_cuda and on_flagos(packed.data)


def test_tensor_cuda_keeps_the_tensor_when_already_there():
    x = torch.ones(2, device="cuda")
    assert x.cuda() is x
    assert x.cuda(non_blocking=True).data_ptr() == x.data_ptr()


def test_generator_on_cuda():
    g = torch.Generator(device="cuda")
    assert g.device.type == "flagos" and isinstance(g, torch.Generator)
    assert isinstance(torch.Generator(), torch.Generator)  # the CPU default is unchanged
    g.manual_seed(3)
    a = torch.randn(4, device="cuda", generator=g)
    g.manual_seed(3)
    assert torch.equal(a, torch.randn(4, device="cuda", generator=g))


def test_default_device_and_device_context():
    with torch.device("cuda"):
        assert on_flagos(torch.empty(1)) and on_flagos(torch.nn.Linear(2, 2).weight)
    assert torch.empty(1).device.type == "cpu"
    torch.set_default_device("cuda:0")
    try:
        assert on_flagos(torch.zeros(2)) and on_flagos(torch.arange(3))
        assert torch.get_default_device() == torch.device("flagos", 0)
    finally:
        torch.set_default_device(None)
    assert torch.zeros(1).device.type == "cpu"


def test_legacy_cuda_tensor_types():
    x = torch.cuda.FloatTensor(2, 3)
    assert on_flagos(x) and x.shape == (2, 3) and x.dtype == torch.float32
    y = torch.cuda.LongTensor([1, 2])
    assert on_flagos(y) and y.tolist() == [1, 2]
    assert isinstance(y, torch.cuda.LongTensor) and not isinstance(y, torch.cuda.FloatTensor)
    assert not isinstance(torch.ones(1), torch.cuda.FloatTensor)
    half = torch.ones(2).type(torch.cuda.HalfTensor)
    assert on_flagos(half) and half.dtype == torch.float16
    assert torch.ones(2).type("torch.cuda.DoubleTensor").dtype == torch.float64
    assert torch.ones(2).type("torch.DoubleTensor").device.type == "cpu"


def test_set_default_tensor_type_cuda():
    dtype = torch.get_default_dtype()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # set_default_tensor_type is deprecated
        torch.set_default_tensor_type("torch.cuda.FloatTensor")
    try:
        assert on_flagos(torch.zeros(1)) and torch.zeros(1).dtype == torch.float32
    finally:
        torch.set_default_device(None)
        torch.set_default_dtype(dtype)


def test_custom_backward_and_checkpoint_recompute_see_the_alias():
    # The autograd engine runs flagos backward on its own threads
    # (Note [Wrappers, not a TorchFunctionMode]).
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, grad):
            assert threading.current_thread() is not None
            return grad * 2 + torch.zeros(grad.shape, device="cuda")

    a = torch.ones(3, device="cuda", requires_grad=True)
    Double.apply(a).sum().backward()
    assert a.grad.tolist() == [2.0, 2.0, 2.0]

    lin = torch.nn.Linear(4, 4).cuda()

    def block(x):
        return lin(x) + torch.ones(4, device="cuda")

    x = torch.randn(2, 4, device="cuda", requires_grad=True)
    torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False).sum().backward()
    assert on_flagos(x.grad)


def test_other_threads_see_the_alias():
    results = []

    def work():
        results.append(torch.zeros(1, device="cuda").device.type)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert results == ["flagos"]


# ------------------------------------------------------------------ torch.cuda


def test_torch_cuda_answers_for_flagos():
    assert torch.cuda.is_available()
    assert torch.cuda.is_initialized()
    assert torch.cuda.device_count() == torch.flagos.device_count() >= 1
    assert torch.cuda.current_device() == 0
    torch.cuda.set_device(0)
    torch.cuda.set_device("cuda:0")
    torch.cuda.set_device(torch.device("cuda", 0))
    name = torch.flagos.get_device_name(0)
    assert torch.cuda.get_device_name() == torch.cuda.get_device_name(0) == name
    props = torch.cuda.get_device_properties("cuda:0")
    assert props.name == name and props.total_memory > 0 and props.multi_processor_count >= 1
    assert (props.major, props.minor) == torch.cuda.get_device_capability() == (0, 0)
    assert torch.cuda.is_bf16_supported()
    assert not torch.cuda.is_current_stream_capturing()
    assert torch.cuda.get_arch_list() == []
    with torch.cuda.device(0):
        assert torch.cuda.current_device() == 0
    with torch.cuda.device_of(torch.ones(1, device="cuda")):
        pass
    torch.cuda.synchronize()
    torch.cuda.synchronize("cuda:0")
    torch.cuda.init()
    torch.cuda._lazy_init()


def test_torch_accelerator_says_cuda_like_torch_cuda():
    """Note [One accelerator identity under the alias]: frameworks (accelerate's
    PartialState) pick the device type and collective from
    torch.accelerator; "flagos" there made `accelerate launch --multi_gpu`
    train unsynchronised replicas. torch's own modules keep "flagos"."""
    import accelerate_like  # noqa: F401 - a module outside torch, as a framework is

    acc = torch.accelerator.current_accelerator()
    assert acc == torch.device("cuda")
    assert torch.accelerator.current_accelerator(check_available=True) == torch.device("cuda")
    assert torch.get_device_module(acc.type) is torch.cuda
    assert accelerate_like.device_type_and_backend() == ("cuda", "nccl")
    for device in ("cuda:0", torch.device("cuda", 0), 0):
        torch.accelerator.set_device_index(device)
        assert torch.accelerator.current_device_index() == 0
        torch.accelerator.synchronize(device)
        assert torch.accelerator.memory_allocated(device) >= 0
    with torch.accelerator.device_index(0):
        assert torch.accelerator.current_device_index() == 0


def _scripted_body(x: torch.Tensor) -> torch.Tensor:
    ones = torch.ones(x.shape, dtype=x.dtype, device=x.device)
    return torch.zeros_like(x) + ones + torch.unbind(x, 0)[0]


def test_torchscript_compiles_calls_of_wrapped_factories():
    """The alias's Python wrappers of torch.zeros_like & co. compile as the
    builtins they wrap (cuda_alias/_script.py); TorchScript failed with
    "... expected, got builtin_function_or_method"."""
    scripted = torch.jit.script(_scripted_body)
    x = torch.ones(2, 3, device="cuda")
    assert on_flagos(scripted(x))
    torch.testing.assert_close(scripted(x).cpu(), _scripted_body(x.cpu()))
    assert "aten::zeros_like" in str(scripted.graph)


def test_deactivate_unregisters_the_wrappers_from_torchscript():
    from torch.jit import _builtins

    wrapper = torch.zeros_like
    assert _builtins._find_builtin(wrapper) == "aten::zeros_like"
    cuda_alias.deactivate()
    try:
        assert torch.zeros_like is not wrapper
        assert _builtins._find_builtin(wrapper) is None
    finally:
        cuda_alias.activate()


def test_torch_internals_see_the_flagos_accelerator():
    """torch's own modules pass the accelerator to C++ (DataLoader's pin-memory
    device, c10d's device_id check), where it is PrivateUse1: they see flagos."""
    loader = torch.utils.data.DataLoader(torch.arange(4.0), batch_size=2, pin_memory=True)
    batches = list(loader)
    assert all(b.is_pinned() for b in batches)
    from torch.distributed import distributed_c10d  # noqa: F401 - imports under the alias

    code = compile("torch.accelerator.current_accelerator()", "<torch>", "eval")
    assert eval(code, {"torch": torch, "__name__": "torch.fake_internal"}) == torch.device("flagos")


def test_torch_cuda_memory():
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    x = torch.empty(1 << 18, device="cuda")
    assert torch.cuda.memory_allocated() >= before + x.nbytes
    assert torch.cuda.max_memory_allocated(0) >= torch.cuda.memory_allocated()
    assert torch.cuda.memory_reserved() >= torch.cuda.memory_allocated()
    assert torch.cuda.memory_cached() == torch.cuda.memory_reserved()  # old name
    stats = torch.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.cuda.memory_allocated()
    free, total = torch.cuda.mem_get_info()
    assert 0 <= free <= total
    assert "memory summary" in torch.cuda.memory_summary()
    del x
    torch.cuda.empty_cache()
    torch.cuda.reset_max_memory_allocated()
    torch.cuda.reset_accumulated_memory_stats()
    assert torch.cuda.memory.memory_allocated() == torch.cuda.memory_allocated()


def test_torch_cuda_rng():
    torch.cuda.manual_seed(7)
    torch.cuda.manual_seed_all(7)
    assert torch.cuda.initial_seed() == 7
    state = torch.cuda.get_rng_state()
    assert state.device.type == "cpu" and state.dtype == torch.uint8
    a = torch.rand(3, device="cuda")
    torch.cuda.set_rng_state(state)
    assert torch.equal(a, torch.rand(3, device="cuda"))
    states = torch.cuda.get_rng_state_all()
    torch.cuda.set_rng_state_all(states)
    assert len(torch.cuda.default_generators) == torch.cuda.device_count()
    assert torch.cuda.default_generators[0].device.type == "flagos"
    with torch.random.fork_rng(device_type="cuda"):
        torch.cuda.manual_seed(1)
        torch.rand(1, device="cuda")
    torch.cuda.seed()
    torch.cuda.seed_all()


def test_torch_cuda_streams_and_events():
    side = torch.cuda.Stream()
    assert isinstance(side, torch.cuda.Stream) and isinstance(side, torch.Stream)
    assert (
        side.device_type == torch._C._autograd.DeviceType.PrivateUse1
        or side.device.type == "flagos"
    )
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    x = torch.ones(64, 64, device="cuda")
    start.record()
    side.wait_stream(torch.cuda.current_stream())  # x was made on the current stream
    with torch.cuda.stream(side):
        y = x @ x
    torch.cuda.current_stream().wait_stream(side)
    y.record_stream(torch.cuda.current_stream())
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0 and end.query()
    assert isinstance(torch.cuda.current_stream(), torch.cuda.Stream)
    assert torch.cuda.default_stream().stream_id == 0
    assert y[0, 0].item() == 64.0
    torch.cuda.set_stream(torch.cuda.default_stream())


def test_torch_cuda_hints_warn_once_and_do_nothing():
    with pytest.warns(UserWarning, match="no effect under the flagos cuda alias"):
        torch.cuda.set_per_process_memory_fraction(0.5)
    torch.cuda.nvtx.range_push("step")
    torch.cuda.nvtx.range_pop()
    with torch.cuda.nvtx.range("block"):
        pass


@pytest.mark.parametrize(
    "call",
    [
        lambda: torch.cuda.CUDAGraph(),
        lambda: torch.cuda.graph(None),
        lambda: torch.cuda.make_graphed_callables(None, ()),
        lambda: torch.cuda.utilization(),
        lambda: torch.cuda.current_blas_handle(),
        lambda: torch.cuda.ExternalStream(0),
        lambda: torch.cuda.FloatStorage(2),
        lambda: torch.cuda.profiler.start(),
    ],
    ids=[
        "CUDAGraph",
        "graph",
        "make_graphed_callables",
        "utilization",
        "blas_handle",
        "ExternalStream",
        "FloatStorage",
        "profiler.start",
    ],
)
def test_unsupported_torch_cuda_apis_raise_a_clear_error(call):
    with pytest.raises(NotImplementedError, match="not supported under the flagos cuda alias"):
        call()


def test_every_torch_cuda_name_is_classified():
    # Each name of this torch's torch.cuda.__all__ gets a flagos meaning or a
    # clear error; what is kept as it was must be harmless without CUDA.
    for name in torch.cuda.__all__:
        original = _original_cuda_attr(name)
        group = _torch_cuda.classify(name, original)
        if group == "kept":
            assert isinstance(original, (types.ModuleType, bool, type)), name
        elif callable(original):
            assert getattr(torch.cuda, name) is not original, name


def _original_cuda_attr(name):
    return cuda_alias._patcher.original(torch.cuda, name)


def test_backends_flags_are_harmless():
    # torch.testing._internal (imported by the OpInfo tests in this process)
    # freezes these flags for its own suites; a user script never has that.
    with torch.backends.__allow_nonbracketed_mutation():
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.deterministic = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        assert torch.backends.cudnn.benchmark and torch.backends.cudnn.deterministic
        x = torch.randn(4, 4, device="cuda")
        torch.testing.assert_close((x @ x).cpu(), x.cpu() @ x.cpu())
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = True


# ------------------------------------------------------------------ factory table


def _takes_device(obj) -> bool:
    try:
        return "device" in inspect.signature(obj).parameters
    except (TypeError, ValueError):  # builtins: the signature is the doc's first line
        doc = getattr(obj, "__doc__", None)
        head = doc.strip().splitlines()[0] if isinstance(doc, str) and doc.strip() else ""
        return re.search(r"\bdevice\s*[=:]", head) is not None


def test_every_torch_factory_taking_device_is_wrapped():
    handled_elsewhere = {"get_device_module", "set_default_device"}  # torch.cuda / DeviceContext
    wrapped = set(_factories.TORCH_FACTORIES) | handled_elsewhere
    missing = []
    for name in dir(torch):
        obj = cuda_alias._patcher.original(torch, name) if hasattr(torch, name) else None
        if name.startswith("_") or isinstance(obj, (types.ModuleType, type)) or not callable(obj):
            continue
        if _takes_device(obj) and name not in wrapped:
            missing.append(name)
    assert not missing, f"add to cuda_alias/_factories.py TORCH_FACTORIES: {missing}"
    for namespace in ("fft", "nested"):
        module = getattr(torch, namespace)
        for name in dir(module):
            obj = getattr(module, name)
            if not name.startswith("_") and callable(obj) and not isinstance(obj, type):
                if _takes_device(obj):
                    assert getattr(obj, "__flagos_cuda_alias__", False), f"torch.{namespace}.{name}"


# ------------------------------------------------------------------ checkpoints


def save_as_if_on_cuda(obj, **kwargs) -> bytes:
    """torch.save, with every flagos storage tagged "cuda:N" as a CUDA machine writes it."""

    def tag(storage):
        if storage.device.type == "flagos":
            return f"cuda:{storage.device.index or 0}"
        return None

    entry = (0, tag, lambda obj, location: None)
    registry = torch.serialization._package_registry
    registry.insert(0, entry)
    try:
        buf = io.BytesIO()
        torch.save(obj, buf, **kwargs)
        return buf.getvalue()
    finally:
        registry.remove(entry)


@pytest.fixture
def cuda_checkpoint(alias):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2).cuda()
    state = {"model": model.state_dict(), "step": torch.tensor(5).cuda()}
    raw = save_as_if_on_cuda(state)
    pickled = next(
        zipfile.ZipFile(io.BytesIO(raw)).read(n)
        for n in zipfile.ZipFile(io.BytesIO(raw)).namelist()
        if n.endswith("data.pkl")
    )
    assert b"cuda:0" in pickled and b"flagos" not in pickled  # really looks like a CUDA checkpoint
    expected = {k: v.cpu() for k, v in model.state_dict().items()}
    return raw, expected


@pytest.mark.parametrize(
    "map_location",
    [
        None,
        "cuda",
        "cuda:0",
        torch.device("cuda"),
        torch.device("cuda", 0),
        {"cuda:0": "cuda:0"},
        lambda storage, location: storage.cuda(0),
        lambda storage, location: storage.cuda(),
    ],
    ids=[
        "None",
        "cuda",
        "cuda:0",
        "device(cuda)",
        "device(cuda,0)",
        "dict",
        "lambda .cuda(0)",
        "lambda .cuda()",
    ],
)
def test_cuda_checkpoint_loads_onto_flagos(cuda_checkpoint, map_location):
    raw, expected = cuda_checkpoint
    loaded = torch.load(io.BytesIO(raw), map_location=map_location)
    for key, value in expected.items():
        assert on_flagos(loaded["model"][key]), key
        assert torch.equal(loaded["model"][key].cpu(), value), key
    assert loaded["step"].item() == 5 and on_flagos(loaded["step"])
    model = torch.nn.Linear(3, 2).cuda()
    model.load_state_dict(loaded["model"])


def test_cuda_checkpoint_loads_on_cpu(cuda_checkpoint):
    raw, expected = cuda_checkpoint
    loaded = torch.load(io.BytesIO(raw), map_location="cpu")
    assert all(loaded["model"][k].device.type == "cpu" for k in expected)
    remapped = torch.load(io.BytesIO(raw), map_location={"cuda:0": "cpu"})
    assert all(remapped["model"][k].device.type == "cpu" for k in expected)


def test_legacy_format_cuda_checkpoint_loads():
    state = {"w": torch.arange(4.0).cuda()}
    raw = save_as_if_on_cuda(state, _use_new_zipfile_serialization=False)
    assert b"cuda:0" in raw
    for map_location in (None, "cuda:0"):
        loaded = torch.load(io.BytesIO(raw), map_location=map_location, weights_only=False)
        assert on_flagos(loaded["w"]) and loaded["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_saving_keeps_flagos_tags():
    buf = io.BytesIO()
    torch.save(torch.ones(2, device="cuda"), buf)
    assert b"flagos:0" in zipfile.ZipFile(io.BytesIO(buf.getvalue())).read(
        next(
            n
            for n in zipfile.ZipFile(io.BytesIO(buf.getvalue())).namelist()
            if n.endswith("data.pkl")
        )
    )


# ------------------------------------------------------------------ data loading


def test_pinned_dataloader_with_workers():
    from torch.utils.data import DataLoader, TensorDataset

    data = TensorDataset(torch.arange(32.0).reshape(16, 2), torch.arange(16))
    loader = DataLoader(data, batch_size=4, num_workers=2, pin_memory=True)
    total = 0.0
    for x, y in loader:
        assert x.is_pinned() and y.is_pinned()
        x, y = x.cuda(non_blocking=True), y.to("cuda", non_blocking=True)
        assert on_flagos(x) and on_flagos(y)
        total += x.sum().item()
    assert total == sum(range(32))


# ------------------------------------------------------------------ on and off


def _snapshot():
    owners = [
        torch,
        torch.Tensor,
        torch.cuda,
        torch.cuda.memory,
        torch.cuda.random,
        torch.cuda.amp,
        torch.amp,
        torch.amp.autocast_mode,
        torch.amp.grad_scaler.GradScaler,
        torch.amp.autocast_mode.autocast,
        torch.storage._StorageBase,
        torch.UntypedStorage,
        torch.TypedStorage,
        torch.utils._device,
        torch.utils._device.DeviceContext,
        torch.fft,
        torch.nested,
        torch.cuda.streams,
        torch.cuda.nvtx,
        torch.cuda.profiler,
        torch.cuda.amp.autocast_mode,
        torch.nn.DataParallel,
        importlib.import_module("torch._utils"),
        importlib.import_module("torch.nn.parallel.data_parallel"),
    ]
    if torch.distributed.is_available():
        owners.append(torch.distributed)
    return {id(o): dict(vars(o)) for o in owners}, list(torch.serialization._package_registry)


def test_deactivate_restores_torch_exactly():
    cuda_alias.deactivate()
    try:
        before, registry = _snapshot()
        assert not torch.cuda.is_available() and not torch.ones(1, device="flagos").is_cuda
        cuda_alias.activate()
        assert torch.cuda.is_available()
        cuda_alias.deactivate()
        after, registry_after = _snapshot()
        assert registry_after == registry
        for key, attrs in before.items():
            changed = [
                n for n in set(attrs) | set(after[key]) if attrs.get(n) is not after[key].get(n)
            ]
            assert not changed, changed
        # torch's own error again: a CPU build has no CUDA, a CUDA wheel no GPU.
        with pytest.raises((AssertionError, RuntimeError), match="CUDA|NVIDIA driver"):
            torch.zeros(1, device="cuda")
    finally:
        cuda_alias.activate()


def test_activate_is_idempotent_and_reports():
    count = cuda_alias.status()["patched_attributes"]
    cuda_alias.activate()
    status = cuda_alias.status()
    assert status["active"] and status["patched_attributes"] == count > 100
    assert status["native_cuda"] is False


# ------------------------------------------------------------------ DataParallel


def test_data_parallel_on_one_device():
    torch.manual_seed(0)
    module = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    reference = module(x)
    model = torch.nn.DataParallel(module).cuda()
    assert model.device_ids == [0] and model.src_device_obj == torch.device("flagos", 0)
    out = model(x)  # inputs may be on the CPU, as with CUDA
    assert on_flagos(out)
    torch.testing.assert_close(out.cpu(), reference)
    out.sum().backward()
    assert on_flagos(model.module.weight.grad)
    explicit = torch.nn.DataParallel(
        torch.nn.Linear(3, 2).cuda(), device_ids=[0], output_device="cuda:0"
    )
    assert on_flagos(explicit(torch.randn(2, 3).cuda()))


def test_data_parallel_over_several_devices_is_a_clear_error():
    model = torch.nn.DataParallel(torch.nn.Linear(3, 2).cuda())
    model.device_ids = [0, 1]  # as on a machine with two devices
    with pytest.raises(NotImplementedError, match="DistributedDataParallel"):
        model(torch.randn(2, 3))


# ------------------------------------------------------------------ torch.compile


def test_torch_compile_uses_inductor_on_flagos():
    from flagos_torchfl.inductor import runtime

    torch._dynamo.reset()

    def f(x):
        return torch.relu(x) + torch.ones(3, device="cuda")

    x = torch.tensor([-1.0, 0.5, 2.0], device="cuda")
    counters = torch._dynamo.utils.counters
    counters.clear()
    before = runtime.launches()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no aot_eager substitution, nothing to warn about
        out = torch.compile(f)(x)
    assert on_flagos(out) and out.tolist() == [1.0, 1.5, 3.0]
    assert runtime.launches() == before + 1  # relu, ones and add: one fused kernel
    assert not counters["graph_break"]  # the torch.ones wrapper stays in the graph
    assert torch.compile(f, backend="eager")(x).tolist() == [1.0, 1.5, 3.0]
    torch._dynamo.reset()


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_compile_modes_with_cuda_graphs_run_without_them(mode):
    """Note [Compile modes without CUDA graphs]: these modes crashed under the
    alias in inductor's CUDA-graph checks (CUDA-only bindings)."""
    from flagos_torchfl.cuda_alias import _compile

    torch._dynamo.reset()
    _compile._warned_modes.discard(mode)

    def f(x):
        return torch.relu(x) * 2

    x = torch.tensor([-1.0, 0.5, 2.0], device="cuda")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(f, mode=mode)(x)
    assert on_flagos(out) and out.tolist() == [0.0, 1.0, 4.0]
    assert [w for w in caught if "CUDA graphs are not available" in str(w.message)]
    torch._dynamo.reset()


def test_torch_compile_off_runs_aot_eager_with_a_warning(run_python):
    out = check_ok(
        run_python(
            """
            import warnings, torch, flagos_torchfl as ft
            ft.initialize()
            def f(x):
                return torch.relu(x) + torch.ones(3, device="cuda")
            x = torch.tensor([-1.0, 0.5, 2.0], device="cuda")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = torch.compile(f)(x)
            from torch._inductor.codegen import common
            print(out.device.type, out.tolist(), common.get_scheduling_for_device("flagos"))
            print([str(w.message) for w in caught if "aot_eager" in str(w.message)])
            """,
            FLAGOS_BACKEND="host",
            FLAGOS_COMPILE="off",
        )
    )
    first, second = out.splitlines()[-2:]
    assert first == "flagos [1.0, 1.5, 3.0] None"
    assert "FLAGOS_COMPILE=off" in second and "backend='aot_eager'" in second
