"""An accelerate training loop as written for CUDA (run with `accelerate launch`).

One process: the combined batch (COMBINED_BATCH) per step. N processes:
COMBINED_BATCH / N each, gradients averaged by accelerate's DDP, so the
parameters must match the one-process run.
"""

import torch
from accelerate import Accelerator
from common import COMBINED_BATCH, STEPS, make_data, make_model, out_path, report

accelerator = Accelerator()
per_process = COMBINED_BATCH // accelerator.num_processes
x, y = make_data()
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(x, y), batch_size=per_process, shuffle=False
)
model = make_model()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
losses = []
for xb, yb in loader:
    loss = torch.nn.functional.mse_loss(model(xb), yb)
    accelerator.backward(loss)
    accelerator.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    losses.append(accelerator.gather(loss.detach()).mean().item())
assert len(losses) == STEPS, len(losses)
report(
    out_path(),
    accelerator.unwrap_model(model),
    accelerator.process_index,
    losses=losses,
    distributed_type=str(accelerator.distributed_type),
    num_processes=accelerator.num_processes,
    device=str(next(model.parameters()).device),
)
