"""Bridges to other evaluation tools (imported on demand; each needs its optional extra).

- :mod:`robuststats.integrations.lmeval`: run lm-evaluation-harness under robuststats
  noise (``pip install robuststats[lmeval]``). The reverse direction, lm-eval samples as
  item outcomes, is :func:`robuststats.outcomes.read_lmeval_runs` (no lm-eval needed).
"""
