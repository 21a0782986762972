"""The faster paths of the demo give the outcomes of the paths they replaced, bit for bit.

The promise of ``make demo``: the same outcomes for the same seeds. Each test runs the new
path and the old one (written out here, or forced back) and compares weights or outcomes
exactly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from robuststats.engine import NoiseSpec
from robuststats.models.evaluate import evaluate
from robuststats.models.generation import default_max_new_tokens
from robuststats.models.model import build_tokenizer
from robuststats.models.tasks import get_task
from robuststats.models.trainer import TrainingCondition, get_trainer
from robuststats.models.training import _encode
from robuststats.runs.executor import longest_first, run_job
from robuststats.runs.plan import jobs
from robuststats.study import RunLedger, StudySpec, plan

ROOT = Path(__file__).resolve().parents[2]
TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 4, "num_kv_heads": 2,
        "intermediate_size": 64}


@pytest.fixture(scope="module")
def small_task():
    return get_task("arithmetic", n_items=24, n_train=200, n_steps=2, max_value=5, seed=0)


def _weights(trained):
    return {k: v.clone() for k, v in trained.model.state_dict().items()}


class _LoopAdamW(torch.optim.AdamW):
    """AdamW as the trainer built it before: the per-tensor loop (torch's CPU default)."""

    built = 0

    def __init__(self, *args, **kwargs):
        kwargs["foreach"] = False
        _LoopAdamW.built += 1
        super().__init__(*args, **kwargs)


@pytest.mark.parametrize("phases", [None, "both"])
def test_foreach_adamw_trains_the_weights_of_the_per_tensor_loop(small_task, monkeypatch, phases):
    trainer = get_trainer("builtin", steps=12, batch_size=8, model=TINY, train_eval_items=0)
    noise = None if phases is None else NoiseSpec(scale=0.05, phases=phases)
    cond = TrainingCondition("E8x", noise)
    fast = trainer.train(small_task, cond, seed=3)
    with monkeypatch.context() as m:
        m.setattr(torch.optim, "AdamW", _LoopAdamW)
        before = _LoopAdamW.built
        loop = trainer.train(small_task, cond, seed=3)
        assert _LoopAdamW.built == before + 1  # the old optimizer really ran
    a, b = _weights(fast), _weights(loop)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # and so the outcomes, clean and noisy
    items = small_task.items("test")
    for spec in (None, NoiseSpec(scale=0.1)):
        x = evaluate(fast, small_task, items, noise=spec, noise_seed=1, batch_size=8)
        y = evaluate(loop, small_task, items, noise=spec, noise_seed=1, batch_size=8)
        assert x[["item_id", "correct", "completion"]].equals(y[["item_id", "correct",
                                                                 "completion"]])


def _encode_one_by_one(tokenizer, task, items):
    """The trainer's encoding as it was: two tokenizer calls per item."""
    rows, label_rows = [], []
    for item in items:
        prompt = tokenizer(item.prompt, add_special_tokens=False)["input_ids"]
        target = tokenizer(task.target(item), add_special_tokens=False)["input_ids"]
        target = [*target, tokenizer.eos_token_id]
        rows.append(prompt + target)
        label_rows.append([-100] * len(prompt) + target)
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], dtype=torch.long)
    labels = torch.tensor([r + [-100] * (width - len(r)) for r in label_rows], dtype=torch.long)
    return input_ids, labels


@pytest.mark.parametrize("n_steps", [2, 3])
def test_batched_tokenization_gives_the_ids_of_one_call_per_item(n_steps):
    task = get_task("arithmetic", n_items=50, n_train=300, n_steps=n_steps, seed=1)
    items = task.items("train")
    tokenizer = build_tokenizer(task.vocabulary())
    ids, labels = _encode(tokenizer, task, items)
    ref_ids, ref_labels = _encode_one_by_one(tokenizer, task, items)
    assert torch.equal(ids, ref_ids) and torch.equal(labels, ref_labels)
    test = task.items("test")
    longest = max(len(tokenizer(task.target(i), add_special_tokens=False)["input_ids"])
                  for i in test)
    assert default_max_new_tokens(tokenizer, task, test) == min(512, int(longest * 1.5) + 4)
    assert default_max_new_tokens(tokenizer, task, []) == 5


def _smoke_spec(tmp_path: Path) -> StudySpec:
    data = yaml.safe_load((ROOT / "studies" / "e8_smoke.yaml").read_text(encoding="utf-8"))
    data["trainer"]["params"].update(steps=6, batch_size=8)
    data["model"] = TINY
    data["task"]["params"].update(n_items=16, n_train=120)
    data["evaluation"].update(n_items=16, batch_size=8)
    data["seeds"] = 2
    return StudySpec.from_dict(data)


def test_longest_first_puts_noisy_training_first_and_cached_models_last(tmp_path):
    spec = _smoke_spec(tmp_path)
    grouped = jobs(plan(spec))
    ledger = RunLedger.open(tmp_path / "run", spec)
    order = [j.key for j in longest_first(ledger, spec, grouped)]
    # both passes (E8b), one pass (E8c forward, E8d backward), none (E8a); plan order in ties
    assert order == ["E8b__s0", "E8b__s1", "E8c__s0", "E8c__s1", "E8d__s0", "E8d__s1",
                     "E8a__s0", "E8a__s1"]


@pytest.mark.slow
def test_jobs_give_the_same_outcomes_in_plan_and_longest_first_order(tmp_path):
    spec = _smoke_spec(tmp_path)
    cells = plan(spec)
    grouped = jobs(cells)
    longest = longest_first(RunLedger.open(tmp_path / "probe", spec), spec, grouped)
    assert [j.key for j in longest] != [j.key for j in grouped]
    tables = []
    for name, order in (("plan", list(grouped)), ("longest", longest)):
        ledger = RunLedger.open(tmp_path / name, spec)
        assert len(order) == len(grouped)
        for job in order:
            counts = run_job(str(ledger.root), spec, job, grouped[job])
            assert counts.failed == 0
        tables.append(ledger.outcomes(cells))
    assert len(tables[0]) == len(cells) * 16
    assert tables[0].equals(tables[1])
