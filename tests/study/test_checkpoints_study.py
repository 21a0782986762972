"""Studies over existing checkpoints and GSM8K-format files (issue 12, item 1): a tiny
Qwen2 trained on a GSM8K-format file and saved per seed, then evaluated by a study that
names the checkpoints, under noise, to a versioned result."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from robuststats.cli import main
from robuststats.errors import InputError
from robuststats.models.checkpoints import check_template, resolve_checkpoint
from robuststats.models.tasks import get_task
from robuststats.models.trainer import TrainingCondition, get_trainer
from robuststats.runs.spec import StudySpec


def _records(task, split):
    # GSM8K format: the question, and a worked answer ending in "#### N"
    return [{"question": item.prompt.rstrip("\n"), "answer": task.target(item)}
            for item in task.items(split)]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """test.parquet, train.jsonl and checkpoints ckpts/<condition>/seed00<s>/step_<n>."""
    root = tmp_path_factory.mktemp("ckpt")
    source = get_task("arithmetic", n_items=40, n_train=300, max_value=5, seed=2)
    pd.DataFrame(_records(source, "test")).to_parquet(root / "test.parquet")
    with open(root / "train.jsonl", "w", encoding="utf-8") as fh:
        for record in _records(source, "train"):
            fh.write(json.dumps(record) + "\n")
    task = get_task("gsm8k", path=str(root / "test.parquet"),
                    train_path=str(root / "train.jsonl"), prompt_template="{question}\n")
    trainer = get_trainer("builtin", steps=150, lr=5e-3, batch_size=32, train_eval_items=0,
                          model={"hidden_size": 48, "num_layers": 1, "intermediate_size": 96})
    for seed in (0, 1):
        trained = trainer.train(task, TrainingCondition("base"), seed=seed)
        trained.save(root / "ckpts" / "base" / f"seed{seed:03d}")
        # the second condition's checkpoints sit one level deeper, found by a glob
        shutil.copytree(root / "ckpts" / "base" / f"seed{seed:03d}",
                        root / "ckpts" / "rl" / f"seed{seed:03d}" / f"step_{100 + seed}")
    return root


STUDY = """\
name: ckpt_eval
version: 1
task:
  name: gsm8k
  params:
    path: {root}/test.parquet
    prompt_template: "{{question}}\\n"
conditions:
  base:
    checkpoint: {root}/ckpts/base/seed{{seed:03d}}
  rl:
    checkpoint: {root}/ckpts/rl/seed{{seed:03d}}/step_*
evaluation:
  noise_levels: [0, 0.05]
  noise_seeds: 1
  batch_size: 16
seeds: [0, 1]
hypotheses:
  - id: H1
    statement: "rl keeps base accuracy at 5 % noise"
    metric: accuracy
    a: rl
    b: base
    eval_noise: 0.05
    relation: equivalent
    margin: 0.5
"""


def _write(tmp_path, text):
    path = tmp_path / "study.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_study_evaluates_named_checkpoints_to_a_version(workspace, tmp_path, capsys):
    study = _write(tmp_path, STUDY.format(root=workspace))
    assert main(["study", str(study), "--check", "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["models"] == 0 and len(plan["checkpoints"]) == 4
    assert plan["checkpoints"]["rl__s1"].endswith("ckpts/rl/seed001/step_101")
    code = main(["study", str(study), "--runs", str(tmp_path / "runs"), "--out",
                 str(tmp_path / "results"), "--workers", "1", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    version = tmp_path / "results" / "ckpt_eval" / "v1"
    outcomes = pd.read_parquet(version / "outcomes.parquet")
    # 2 conditions × 2 seeds × 2 levels × 40 items, the same item ids in every cell
    assert len(outcomes) == 2 * 2 * 2 * 40
    assert outcomes.groupby(["condition", "seed", "eval_noise"])["item_id"].nunique().eq(40).all()
    clean = outcomes[outcomes["eval_noise"] == 0]
    assert clean["correct"].mean() > 0.1  # the checkpoints learned something (0.2 seen)
    # both conditions hold the same weights: identical clean outcomes per seed
    pivot = clean.pivot_table(index=["seed", "item_id"], columns="condition", values="correct")
    assert (pivot["base"] == pivot["rl"]).all()
    # injection counts prove noise reached every noisy cell during generation
    injections = pd.read_parquet(version / "injections.parquet")
    per_cell = injections.groupby(["condition", "seed", "eval_noise", "noise_seed"])["count"].sum()
    assert len(per_cell) == 4 and (per_cell > 0).all()
    assert set(injections["eval_noise"]) == {0.05}
    # checkpoints are loaded in place, never copied into the run directory
    run = tmp_path / "runs" / "ckpt_eval"
    assert not any((run / "models").glob("*")) if (run / "models").exists() else True
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    loaded = [e for e in events if e["event"] == "checkpoint_loaded"]
    assert sorted(e["job"] for e in loaded) == ["base__s0", "base__s1", "rl__s0", "rl__s1"]
    assert all("model.safetensors" in e["files"] for e in loaded)
    manifest = json.loads((version / "manifest.json").read_text())
    assert manifest["spec"]["conditions"]["rl"]["checkpoint"].endswith("/step_*")


def test_checkpoint_errors_name_key_line_and_seed(workspace, tmp_path, capsys):
    base = f"checkpoint: {workspace}/ckpts/base/seed{{seed:03d}}"
    rl = f"checkpoint: {workspace}/ckpts/rl/seed{{seed:03d}}/step_*"
    cases = [
        (base, f"checkpoint: {workspace}/ckpts/base/run{{seed}}",
         r"conditions.base.checkpoint \(line 10\): `checkpoint` \(seed 0\): no such "
         r"directory '.*/ckpts/base/run0'"),
        (rl, f"checkpoint: {workspace}/ckpts/*/seed000",
         r"conditions.rl.checkpoint \(line 12\): `checkpoint` .* names one model for 2 seeds"),
        (rl, f"checkpoint: {workspace}/ckpts/*/seed{{seed:03d}}",
         r"conditions.rl.checkpoint \(line 12\): `checkpoint` \(seed 0\): "
         r"'.*ckpts/\*/seed000' matches 2 directories"),
        (rl, f"checkpoint: {workspace}/ckpts/rl/seed{{step}}",
         r"conditions.rl.checkpoint \(line 12\): `checkpoint` .* may only use the fields "
         r"\{seed\} and \{condition\}, got \{step\}"),
        (rl, f"checkpoint: {workspace}/ckpts/rl/seed{{seed:03s}}",
         r"conditions.rl.checkpoint \(line 12\): .*a seed is an integer"),
        (rl, rl + "\n    train_noise: {scale: 0.05}",
         r"conditions.rl.train_noise \(line 13\): a condition with a `checkpoint` is "
         r"loaded, not trained"),
        (base, base.replace("checkpoint:", "checkpoints:"),
         r"conditions.base.checkpoints \(line 10\): .*did you mean 'checkpoint'"),
    ]
    good = STUDY.format(root=workspace)
    for old, new, message in cases:
        assert old in good
        study = _write(tmp_path, good.replace(old, new, 1))
        assert main(["study", str(study), "--check"]) == 2, new
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("robuststats study: error: "), err
        assert re.search(message, err), err


def test_incomplete_checkpoint_directories_are_named(workspace, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(workspace / "ckpts" / "base" / "seed000", broken)
    (broken / "model.safetensors").unlink()
    (broken / "tokenizer.json").unlink()
    with pytest.raises(InputError, match=r"`checkpoint` \(seed 0\): '.*broken' is not a saved "
                                         r"checkpoint: it has no weights \(one of "
                                         r"model.safetensors.*\) and no a tokenizer"):
        resolve_checkpoint(str(broken), condition="c", seed=0)
    with pytest.raises(InputError, match=r"must be a directory, a glob or a template"):
        check_template("  ")
    with pytest.raises(InputError, match=r"is not a valid template"):
        check_template("ckpt/{seed")


def test_spec_hash_unchanged_without_checkpoints(tmp_path):
    """Studies without checkpoints keep the hash they had (the key is absent when unused)."""
    spec = StudySpec.from_file(Path(__file__).parents[2] / "studies" / "e8_matrix.yaml")
    assert all("checkpoint" not in c for c in spec.resolved()["conditions"].values())


def test_diagnose_probes_the_checkpoints_without_training(workspace, tmp_path, capsys):
    """The probe loads a checkpoint condition's models where they are, as the study does."""
    path = tmp_path / "study.yaml"
    path.write_text(STUDY.format(root=workspace))
    argv = ["diagnose", str(path), "--levels", "layer", "--seeds", "1", "--noise-seeds", "1",
            "--n-items", "8", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"),
            "--no-progress", "--format", "json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    manifest = json.loads((Path(data["path"]) / "manifest.json").read_text())
    assert manifest["models_trained"] == 0
    assert {r["target"] for r in data["targets"]} == {"layer:0"}
    events = [json.loads(line) for line in
              (tmp_path / "runs" / "ckpt_eval" / "events.jsonl").read_text().splitlines()]
    loaded = [e for e in events if e["event"] == "checkpoint_loaded"]
    assert loaded and loaded[0]["by"] == "diagnose"
    assert not list((tmp_path / "runs" / "ckpt_eval" / "models").iterdir())


ONE = """\
name: ckpt_identity
version: 1
task:
  name: gsm8k
  params:
    path: {root}/test.parquet
    prompt_template: "{{question}}\\n"
conditions:
  base:
    checkpoint: {ckpt}/seed{{seed:03d}}
evaluation:
  n_items: 8
  noise_levels: [0, 0.05]
  batch_size: 8
seeds: [0]
"""


def test_a_checkpoint_rewritten_in_place_is_refused_on_resume(workspace, tmp_path, capsys):
    """The run hash covers the path; the run directory records what the path held."""
    import torch

    from robuststats.models.model import load_pretrained

    ckpts = tmp_path / "ckpts"
    shutil.copytree(workspace / "ckpts" / "base" / "seed000", ckpts / "seed000")
    study = _write(tmp_path, ONE.format(root=workspace, ckpt=ckpts))
    argv = ["study", str(study), "--runs", str(tmp_path / "runs"), "--out",
            str(tmp_path / "results"), "--workers", "1", "--no-progress"]
    assert main(argv) == 0, capsys.readouterr().err
    run = tmp_path / "runs" / "ckpt_identity"
    record = json.loads((run / "identities" / "base__s0.json").read_text())
    assert record["identity"]["weights_dtype"] == "float32"
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    loaded = [e for e in events if e["event"] == "checkpoint_loaded"]
    assert loaded[0]["sha256"] == record["identity"]["sha256"]
    # moved elsewhere and back, untouched: the same checkpoint, resumed
    assert main(argv) == 0, capsys.readouterr().err
    # re-saved in bf16 at the same path: other weights
    model, tok = load_pretrained(ckpts / "seed000")
    shutil.rmtree(ckpts / "seed000")
    model.to(torch.bfloat16).save_pretrained(ckpts / "seed000")
    tok.save_pretrained(ckpts / "seed000")
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "`conditions.base.checkpoint` (seed 0)" in err and "saved in bfloat16" in err, err
    assert "--fresh" in err
    # another checkpoint of the same architecture and dtype: its weights file is named
    shutil.rmtree(ckpts / "seed000")
    shutil.copytree(workspace / "ckpts" / "base" / "seed001", ckpts / "seed000")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "its weights file 'model.safetensors' differs" in err, err
    # starting over records the new checkpoint
    assert main([*argv, "--fresh"]) == 0, capsys.readouterr().err
    assert json.loads((run / "identities" / "base__s0.json").read_text()) != record


def test_a_version_names_its_checkpoints_by_hash_and_the_gate_reads_it(workspace, tmp_path,
                                                                      capsys):
    """A study version records what each checkpoint path held; a gate whose candidate is
    that same checkpoint (a CI path never updated) says it compares a model with itself,
    and a gate result records its candidate's hash for the next gate."""
    from robuststats.models.identity import checkpoint_identity

    ckpts = tmp_path / "ckpts"
    shutil.copytree(workspace / "ckpts" / "base" / "seed000", ckpts / "seed000")
    shutil.copytree(workspace / "ckpts" / "base" / "seed001", ckpts / "other")
    study = _write(tmp_path, ONE.format(root=workspace, ckpt=ckpts))
    assert main(["study", str(study), "--runs", str(tmp_path / "runs"), "--out",
                 str(tmp_path / "results"), "--workers", "1", "--no-progress"]) == 0
    version = tmp_path / "results" / "ckpt_identity" / "v1"
    manifest = json.loads((version / "manifest.json").read_text())
    sha = checkpoint_identity(ckpts / "seed000")["sha256"]
    assert manifest["checkpoints"]["base__s0"]["sha256"] == sha
    capsys.readouterr()
    gate = ["gate", "--baseline", str(version), "--metric", "accuracy", "--max-degradation",
            "0.5", "--format", "json", "--no-progress", "--out", str(tmp_path / "gates")]
    code = main([gate[0], str(ckpts / "seed000"), *gate[1:]])
    assert code in (0, 1), capsys.readouterr().err
    data = json.loads(capsys.readouterr().out)
    assert data["evaluation"]["checkpoint_sha256"] == {"candidate__s0": sha}
    assert any("compares a model with itself" in n for n in data["notes"]), data["notes"]
    # the gate result as the next baseline: another checkpoint is not flagged, the same is
    previous = data["path"]
    gate[2] = previous
    assert main([gate[0], str(ckpts / "other"), *gate[1:]]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    assert not any("itself" in n for n in data["notes"]), data["notes"]
    assert main([gate[0], str(ckpts / "seed000"), *gate[1:]]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    assert any("compares a model with itself" in n for n in data["notes"]), data["notes"]
