"""Bridges to other evaluation and training tools (imported on demand; each needs its
optional extra).

- :mod:`robuststats.integrations.lmeval`: run lm-evaluation-harness under robuststats
  noise (``pip install robuststats[lmeval]``). The reverse direction, lm-eval samples as
  item outcomes, is :func:`robuststats.outcomes.read_lmeval_runs` (no lm-eval needed).
- :mod:`robuststats.integrations.transformers`: noise-aware training in Hugging Face
  trainers (``Trainer``, TRL's ``SFTTrainer`` and ``GRPOTrainer``): ``NoiseCallback``, noise
  per part of a step and a proof of noise next to the checkpoints
  (``pip install robuststats[trl]``).
"""
