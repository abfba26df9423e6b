"""transformers' Trainer as written for CUDA: one process, or under torchrun.

argv: [bf16]. The batch per device is COMBINED_BATCH / WORLD_SIZE, so one
process and N processes see the same combined batch each step. The
reference run passes use_cpu (FRAMEWORK_CPU=1), as a plain CPU job would.
"""

import os
import sys
import tempfile

from common import COMBINED_BATCH, STEPS, Rows, make_model, out_path, report
from transformers import Trainer, TrainerCallback, TrainingArguments

world = int(os.environ.get("WORLD_SIZE", "1"))
bf16 = "bf16" in sys.argv[1:]


class Losses(TrainerCallback):
    def __init__(self) -> None:
        self.losses = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append(logs["loss"])


losses = Losses()
with tempfile.TemporaryDirectory() as tmp:
    args = TrainingArguments(
        output_dir=tmp,
        per_device_train_batch_size=COMBINED_BATCH // world,
        max_steps=STEPS,
        learning_rate=1e-2,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=0,
        data_seed=0,
        bf16=bf16,
        use_cpu=os.environ.get("FRAMEWORK_CPU") == "1",
        disable_tqdm=True,
    )
    trainer = Trainer(model=make_model(), args=args, train_dataset=Rows(), callbacks=[losses])
    trainer.train()
    report(
        out_path(),
        trainer.model,
        int(os.environ.get("RANK", "0")),
        losses=losses.losses,
        n_gpu=args.n_gpu,
        parallel_mode=str(args.parallel_mode),
        wrapped=type(trainer.model_wrapped).__name__,
        device=str(next(trainer.model.parameters()).device),
        optimizer=type(trainer.optimizer.optimizer).__name__,
    )
