"""Result versions for the gate's tests, built from simulated outcomes (no training).

the fixture ``make_version(root, outcomes, name=..., **spec_overrides)`` publishes a study version with a
resolved study spec in its manifest, as ``robuststats study`` does, so the gate reads its
protocol from it.
"""

from __future__ import annotations

import copy

import pandas as pd
import pytest

from robuststats.results import ResultStore, cell_digests
from robuststats.runs.spec import StudySpec
from robuststats.stats import simulate_outcomes

SPEC = {"name": "sim", "version": 1,
        "task": {"name": "arithmetic", "params": {"seed": 0, "n_items": 200}},
        "conditions": {"A": {}, "B": {}},
        "evaluation": {"noise_levels": [0, 0.05], "noise_seeds": 1},
        "seeds": 3}


def _make_version(root, outcomes: pd.DataFrame, *, name: str = "sim", **overrides):
    data = copy.deepcopy(SPEC)
    data["name"] = name
    for key, value in overrides.items():  # "evaluation.ops": "all_ops"
        node = data
        *path, last = key.split(".")
        for p in path:
            node = node[p]
        node[last] = value
    spec = StudySpec.from_dict(data)

    def writer(path, number):
        outcomes.to_parquet(path / "outcomes.parquet", index=False)

    manifest = {"spec": spec.resolved(), "seeds": spec.seed_list(),
                "cells": cell_digests(outcomes)}
    return ResultStore(root).publish(name, writer, manifest)


@pytest.fixture
def make_version():
    """``make_version(root, outcomes, name=..., **{"evaluation.ops": "all_ops"})``."""
    return _make_version


@pytest.fixture
def sim_outcomes():
    """A (better under noise: robustness +0.3) and B, 3 seeds × 200 items, small seed
    effects; fixed rng."""
    return simulate_outcomes(3, 200, seed_effects="small", robustness_effect=0.3,
                             eval_noise=(0.0, 0.05), rng=7)
