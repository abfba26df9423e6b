"""A Lightning module trained as written for CUDA: accelerator "gpu" (or
argv[1]: "cpu" for the reference, "flagos" for flagos without the cuda alias
through flagos_torchfl.integrations.lightning), devices argv[2] (1 or 2: DDP).

Lightning's DDP starts the other ranks by re-running this script; each
rank writes its report. The batch per device is COMBINED_BATCH / devices.
"""

import os
import sys

import lightning as L
import torch
from common import COMBINED_BATCH, STEPS, make_data, make_model, out_path, report

accelerator = sys.argv[1] if len(sys.argv) > 1 else "gpu"
devices = int(sys.argv[2]) if len(sys.argv) > 2 else 1
if accelerator == "flagos":
    import flagos_torchfl.integrations.lightning  # noqa: F401 - registers "flagos"


class Module(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = make_model()
        self.losses = []

    def training_step(self, batch, _):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.losses.append(loss.item())
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


# Without the alias, Lightning needs flagos's strategies (flagos_torchfl.integrations.lightning).
STRATEGIES = {
    (False, False): "auto",
    (False, True): "ddp",
    (True, False): "single_flagos",
    (True, True): "ddp_flagos",
}
x, y = make_data()
data = torch.utils.data.TensorDataset(x, y)
# Lightning would shuffle with its own DistributedSampler; an unshuffled one
# keeps the combined batch of step k the reference's batch k. LOCAL_RANK:
# Lightning's launcher sets it for the ranks it starts (rank 0 is this process).
sampler = torch.utils.data.DistributedSampler(
    data, num_replicas=devices, rank=int(os.environ.get("LOCAL_RANK", "0")), shuffle=False
)
loader = torch.utils.data.DataLoader(data, batch_size=COMBINED_BATCH // devices, sampler=sampler)
module = Module()
trainer = L.Trainer(
    accelerator=accelerator,
    devices=devices,
    strategy=STRATEGIES[accelerator == "flagos", devices > 1],
    max_steps=STEPS,
    gradient_clip_val=1.0,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(module, loader)
report(
    out_path(),
    module.net,
    trainer.global_rank,
    losses=module.losses,
    strategy=type(trainer.strategy).__name__,
    accelerator=type(trainer.accelerator).__name__,
    world_size=trainer.world_size,
    device=str(module.device),
)
