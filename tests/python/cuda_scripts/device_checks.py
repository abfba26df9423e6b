"""The device checks and torch.cuda queries scattered through real training scripts."""

import json

import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
report = {"cuda_available": torch.cuda.is_available()}

torch.manual_seed(0)
model = nn.Linear(4, 2).to(device)
x = torch.randn(3, 4, device=device)
report["x_is_cuda"] = x.is_cuda
report["param_is_cuda"] = next(model.parameters()).is_cuda
report["param_device"] = str(next(model.parameters()).device)
output = model(x)
cpu_model = nn.Linear(4, 2)
cpu_model.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
report["output_matches_cpu"] = torch.allclose(output.cpu(), cpu_model(x.cpu()), atol=1e-6)

if torch.cuda.is_available():
    report["device_count"] = torch.cuda.device_count()
    report["current_device"] = torch.cuda.current_device()
    report["device_name"] = torch.cuda.get_device_name(0)
    props = torch.cuda.get_device_properties(device)
    report["total_memory_positive"] = props.total_memory > 0
    report["capability"] = list(torch.cuda.get_device_capability())
    report["bf16"] = torch.cuda.is_bf16_supported()
    print(f"Using {torch.cuda.get_device_name()} with {props.total_memory / 1024**3:.1f} GB")

    # Devices given every way scripts give them.
    report["devices"] = [
        str(t.device)
        for t in (
            torch.zeros(1, device="cuda"),
            torch.zeros(1, device="cuda:0"),
            torch.zeros(1, device=torch.device("cuda", 0)),
            torch.zeros(1, device=0),
            torch.ones(1).cuda(),
            torch.ones(1).cuda(0),
            torch.ones(1).to("cuda"),
            torch.ones(1).to("cuda", torch.float16),
            torch.ones(1).to(device=torch.device("cuda:0")),
            torch.empty_like(x, device="cuda"),
            x.new_zeros(2),
            x.new_ones(2, device="cuda"),
            torch.tensor([1.0, 2.0], device="cuda"),
            torch.arange(3, device="cuda"),
            torch.randn(2, device="cuda"),
        )
    ]

    # Seeded generator on the device: the same numbers twice.
    g = torch.Generator(device="cuda")
    g.manual_seed(42)
    first = torch.randn(3, device="cuda", generator=g)
    g.manual_seed(42)
    report["generator_repeats"] = torch.equal(first, torch.randn(3, device="cuda", generator=g))

    # Streams and events.
    side = torch.cuda.Stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    side.wait_stream(torch.cuda.current_stream())  # x was made on the current stream
    with torch.cuda.stream(side):
        y = x * 2
    torch.cuda.current_stream().wait_stream(side)
    y.record_stream(torch.cuda.current_stream())
    end.record()
    end.synchronize()
    report["elapsed_ms_nonnegative"] = start.elapsed_time(end) >= 0
    report["stream_result"] = y.sum().item()

    with torch.cuda.device(0):
        report["in_device_ctx"] = torch.cuda.current_device()
    with torch.device("cuda"):
        report["default_device_ctx"] = str(torch.empty(1).device)
    torch.set_default_device("cuda")
    report["default_device"] = str(torch.ones(1).device)
    torch.set_default_device(None)

    before = torch.cuda.memory_allocated()
    big = torch.empty(1 << 20, device="cuda")
    report["memory_grows"] = torch.cuda.memory_allocated() > before
    del big
    torch.cuda.empty_cache()
    report["reserved_after_empty_cache"] = torch.cuda.memory_reserved() >= 0
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.synchronize()

print(json.dumps(report))
