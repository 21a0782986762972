from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

#: the smallest search that exercises everything: a tiny Qwen2 (2 layers, hidden 32),
#: a few training steps, 20 search and 20 held-out items
TINY: dict[str, Any] = {
    "name": "tiny_search",
    "version": 1,
    "task": {"name": "arithmetic", "params": {"seed": 0, "n_items": 40, "n_train": 200}},
    "model": {"hidden_size": 32, "num_heads": 4, "num_kv_heads": 2, "intermediate_size": 64},
    "trainer": {"name": "builtin",
                "params": {"steps": 12, "batch_size": 16, "train_eval_items": 0}},
    "evaluation": {"noise_levels": [0, 0.05], "noise_seeds": 1, "n_items": 20,
                   "batch_size": 20},
    "search": {"objective": "tolerance", "bound": 0.05, "trials": 4,
               "reevaluation": {"noise_seeds": 2, "holdout_items": 20}},
}


def tiny(**changes: Any) -> dict[str, Any]:
    """A copy of :data:`TINY` with dotted-key changes (``{"search.trials": 5}``)."""
    data = copy.deepcopy(TINY)
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        if value is _DELETE:
            node.pop(last, None)
        else:
            node[last] = value
    return data


_DELETE = object()
DELETE = _DELETE


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def trained_models(tmp_path_factory) -> Path:
    """The tiny spec's probed model, trained once per test session (copy it into a runs
    directory with :func:`seed_runs`)."""
    from robuststats.search._objective import build_context
    from robuststats.search._spec import SearchSpec

    root = tmp_path_factory.mktemp("trained")
    spec = SearchSpec.from_dict(tiny())
    build_context(spec, root / "run")
    return root / "run" / "models"


@pytest.fixture
def seed_runs(trained_models: Path, tmp_path: Path):
    """A runs directory holding the trained tiny model for search ``name``."""

    def make(name: str = "tiny_search") -> Path:
        runs = tmp_path / "runs"
        shutil.copytree(trained_models, runs / name / "models")
        return runs

    return make
