"""Two-process training (DDP with gloo on the CPU) for tests/integrations/
test_trl_callback.py: every rank trains with the callback and writes its proof.
Usage: ``python -m torch.distributed.run --nproc_per_node 2 ddp_worker.py OUTPUT_DIR``."""

from __future__ import annotations

import sys

from transformers import Trainer
from trl_helpers import lm_dataset, tiny, trainer_args

from robuststats.integrations.transformers import add_noise

out = sys.argv[1]
model, tok = tiny()
trainer = Trainer(model=model, args=trainer_args(out, max_steps=2, save_steps=2),
                  train_dataset=lm_dataset(tok))
add_noise(trainer, {"scale": 0.05, "phases": "both", "seed": 3})
trainer.train()
