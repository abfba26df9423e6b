"""The cuda alias never breaks torch's own stack (issue: real environments).

Each check runs in a fresh interpreter, as a user's script would: initialize()
turns the alias on (no native CUDA here), and only then does the script
import the libraries that introspect torch.cuda at import time (torch._dynamo
through torchvision, timm, transformers, torch.optim) or start workers.
Libraries that are not installed are skipped, except where
FLAGOS_REQUIRE_ZOO=1 (CI's model-zoo environment) makes that a failure.
"""

from __future__ import annotations

from conftest import check_ok, needs_package

PRELUDE = """
import torch, flagos_torchfl as ft
ft.initialize("host")
from flagos_torchfl import cuda_alias
assert cuda_alias.is_active(), cuda_alias.status()
"""


def run(run_python, body: str) -> str:
    return check_ok(run_python(PRELUDE + body, timeout=600, FLAGOS_BACKEND="host"))


def test_dynamo_imports_after_the_alias(run_python):
    out = run(
        run_python,
        """
import torch._dynamo
import torch._dynamo.variables.torch
assert hasattr(torch.cuda.use_mem_pool, "__wrapped__") or not hasattr(torch.cuda, "use_mem_pool")
print("dynamo ok")
""",
    )
    assert "dynamo ok" in out


def test_optimizers_construct_and_step_under_the_alias(run_python):
    out = run(
        run_python,
        """
model = torch.nn.Linear(4, 2).cuda()
for make in (torch.optim.SGD, torch.optim.AdamW):
    opt = make(model.parameters(), lr=0.1)
    model(torch.randn(3, 4, device="cuda")).sum().backward()
    opt.step()
print("optim ok", model.weight.device)
""",
    )
    assert "optim ok flagos:0" in out


def test_torch_compile_of_a_small_model(run_python):
    out = run(
        run_python,
        """
import warnings
warnings.simplefilter("ignore")
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2)).cuda()
x = torch.randn(3, 4, device="cuda")
out = torch.compile(model)(x)
torch.testing.assert_close(out.cpu(), model.cpu()(x.cpu()))
print("compile ok")
""",
    )
    assert "compile ok" in out


def test_dataloader_with_workers_under_the_alias(run_python):
    out = run(
        run_python,
        """
data = torch.utils.data.TensorDataset(torch.arange(32.0).reshape(16, 2))
loader = torch.utils.data.DataLoader(data, batch_size=4, num_workers=2, pin_memory=True)
total = sum(batch.cuda().sum().item() for (batch,) in loader)
assert total == float(sum(range(32))), total
print("loader ok")
""",
    )
    assert "loader ok" in out


def test_torchvision_model_on_cuda(run_python):
    needs_package("torchvision")
    out = run(
        run_python,
        """
import torchvision
torch.manual_seed(0)
model = torchvision.models.resnet18(weights=None).eval()
x = torch.randn(1, 3, 32, 32)
ref = model(x)
out = model.to("cuda")(x.to("cuda"))
torch.testing.assert_close(out.cpu(), ref, rtol=1e-3, atol=1e-4)
print("torchvision ok")
""",
    )
    assert "torchvision ok" in out


def test_timm_imports_and_builds(run_python):
    needs_package("timm")
    out = run(
        run_python,
        """
import timm
model = timm.create_model("resnet10t", num_classes=4).cuda().eval()
print("timm ok", tuple(model(torch.randn(1, 3, 32, 32, device="cuda")).shape))
""",
    )
    assert "timm ok (1, 4)" in out


def test_transformers_imports_and_runs(run_python):
    needs_package("transformers")
    out = run(
        run_python,
        """
from transformers import GPT2Config, GPT2LMHeadModel
config = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2)
model = GPT2LMHeadModel(config).cuda().eval()
assert model.lm_head.weight is model.transformer.wte.weight  # tied after .cuda()
logits = model(torch.randint(0, 64, (1, 8), device="cuda")).logits
print("transformers ok", logits.device)
""",
    )
    assert "transformers ok flagos:0" in out
