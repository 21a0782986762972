"""Evaluation tasks: items with exact-match final answers, GSM8K style.

A task hands out deterministic item lists per split and scores a model completion by
extracting its final answer (the number after the last ``####``, as in GSM8K's reference
solutions, Cobbe et al. 2021, arXiv:2110.14168) and comparing it exactly with the item's
answer.

Two tasks are registered:

- ``arithmetic``: generated one-step word problems (add or take away two numbers) that a
  tiny Qwen2 learns on a CPU in seconds. Deterministic per ``seed``; the train and test
  splits never share a problem; item ids are stable for a given seed.
- ``gsm8k``: GSM8K-format records (``question``, ``answer`` ending in ``#### N``) read from
  local JSONL, parquet or CSV files.

``get_task(name, **params)`` builds a task by name and validates its parameters.
"""

from __future__ import annotations

from robuststats.models.tasks._arithmetic import ArithmeticTask as ArithmeticTask
from robuststats.models.tasks._base import *  # noqa: F403 (the names of _base.__all__)
from robuststats.models.tasks._base import __all__ as _base_all
from robuststats.models.tasks._gsm8k import GSM8KTask as GSM8KTask

__all__ = sorted([*_base_all, "ArithmeticTask", "GSM8KTask"])
