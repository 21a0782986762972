"""The gate on the embedded tiny model, twice (slow: trains 3 models, about 3 minutes on a
loaded 2-core machine).

The baseline is a study of 3 training seeds of the tiny Qwen2 on the arithmetic task,
evaluated clean and under 5 % matmul noise. Both candidates are checkpoint templates
``ckpts/<name>/s{seed}`` built from the baseline's own trained models, so they pair with
the baseline seed by seed:

* ``reexport``: every weight multiplied by ``1 + 0.001·N(0, 1)`` (a re-export through
  another dtype or toolchain); it must pass a 20 % relative margin;
* ``offset``: the output layer untied and one shared direction added to every token's row,
  so every logit gains the same offset. Greedy answers are unchanged (the clean outcomes are
  identical), but relative noise on the logits now scales with the offset and flips close
  calls: a robustness regression on purpose, which must fail.

A retrained candidate of the same recipe (another seed) is not used: the tiny models'
retention varies so much between seeds (0.46 to 0.77 at 5 % noise over the 3 baseline
seeds) that one such model cannot pass any useful margin against 3 seeds, which is what
``robuststats power --gate`` says for this baseline.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from robuststats.cli import main
from robuststats.results import ResultVersion, verify

pytestmark = pytest.mark.slow

SPEC = {"name": "gate_tiny", "version": 1,
        "task": {"name": "arithmetic", "params": {"seed": 0, "n_items": 60, "n_train": 2000}},
        "trainer": {"name": "builtin", "params": {"steps": 500, "train_eval_items": 0}},
        "conditions": {"base": {}},
        "evaluation": {"noise_levels": [0, 0.05], "noise_seeds": 2, "batch_size": 60},
        "seeds": 3}


def _derive(src, dst, *, jitter=0.0, offset=0.0):
    import torch
    from transformers import AutoModelForCausalLM

    shutil.copytree(src, dst)
    model = AutoModelForCausalLM.from_pretrained(src)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        if offset:
            w = model.get_output_embeddings().weight.detach().clone()
            model.config.tie_word_embeddings = False
            head = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
            shift = offset * w.norm(dim=1).mean() * torch.randn(1, w.shape[1], generator=gen)
            head.weight.copy_(w + shift)
            model.lm_head = head
        if jitter:
            for p in model.parameters():
                if p.dim() == 2:
                    p.mul_(1 + jitter * torch.randn(p.shape, generator=gen))
    model.save_pretrained(dst)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from robuststats.runs.spec import StudySpec
    from robuststats.study.runner import run_study

    root = tmp_path_factory.mktemp("gate_tiny")
    run = run_study(StudySpec.from_dict(SPEC), out=root / "results", runs=root / "runs",
                    workers=2, progress=False)
    for seed in range(3):
        model = root / "runs" / "gate_tiny" / "models" / f"base__s{seed}" / "model"
        _derive(model, root / "ckpts" / "reexport" / f"s{seed}", jitter=1e-3)
        _derive(model, root / "ckpts" / "offset" / f"s{seed}", offset=3.0)
    return root, run.version.path


def _gate(capsys, *argv):
    code = main(["gate", *map(str, argv), "--no-progress"])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_reexported_candidate_passes(tiny, capsys):
    root, baseline = tiny
    code, out, err = _gate(capsys, root / "ckpts" / "reexport" / "s{seed}", "--baseline",
                           baseline, "--max-degradation", "0.2", "--out", root / "gates",
                           "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["decision"] == "PASS", (data["levels"], err)
    level = data["levels"][0]
    assert level["design"] == "paired seeds" and level["n_items"] == 60
    assert level["lower_bound"] > -0.2
    assert data["evaluation"]["cells"] == 3 * (1 + 2)  # 3 seeds × (clean + 2 noise seeds)
    version = ResultVersion.load(data["path"])
    assert verify(version).ok and version.manifest["kind"] == "gate"
    injections = pd.read_parquet(version.path / "injections.parquet")
    assert (injections.groupby(["seed", "noise_seed"])["count"].sum() > 0).all()


def test_a_candidate_degraded_on_purpose_fails(tiny, capsys):
    root, baseline = tiny
    code, out, err = _gate(capsys, root / "ckpts" / "offset" / "s{seed}", "--baseline",
                           baseline, "--max-degradation", "0.2", "--out", root / "gates")
    assert code == 1 and "robustness gate: FAIL" in out and "FAIL (exit 1)" in err
    version = ResultVersion.load(out.strip().splitlines()[-1].split("result: ")[1])
    outcomes = pd.read_parquet(version.path / "outcomes.parquet")
    clean = outcomes[outcomes["eval_noise"] == 0].pivot_table(
        index=["seed", "item_id"], columns="condition", values="correct")
    # the offset leaves every greedy answer as it was: only robustness degraded
    assert (clean["candidate"] == clean["baseline"]).all()
    table = pd.read_parquet(version.path / "gate.parquet")
    assert table["estimate"].iloc[0] < -0.2 and not table["passed"].iloc[0]
