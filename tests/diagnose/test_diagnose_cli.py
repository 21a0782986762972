"""``robuststats diagnose``: one-line errors before any compute, the spec section, a full run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robuststats.cli import main
from robuststats.config.diagnose import MAX_ITEMS, MAX_NOISE_SEEDS, MAX_SEED_VALUE
from robuststats.errors import InputError
from robuststats.runs.spec import StudySpec

STUDY = """\
name: tiny_probe
version: 1
task:
  name: arithmetic
  params: {seed: 0, n_items: 12, n_train: 60}
model: {num_layers: 3}
trainer:
  name: builtin
  params: {steps: 3, batch_size: 8, train_eval_items: 0}
conditions:
  A:
    train_noise: null
  B:
    train_noise: {scale: 0.05, phases: forward}
evaluation:
  noise_levels: [0, 0.05]
  n_items: 12
  batch_size: 12
seeds: 2
"""


def _write(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(STUDY + extra)
    return path


def _err(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors exit from the parser
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    return err


def test_help_lists_diagnose(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "diagnose" in capsys.readouterr().out


def test_help_says_where_it_writes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["diagnose", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "written to OUT/<study>.diagnose/v<N>/ (default results/, relative to the " \
           "current directory)" in out


@pytest.mark.parametrize(("flags", "message"), [
    (["--levels", "layr"], "argument --levels: unknown level 'layr' (did you mean 'layer'?)"),
    (["--levels", "layer,layer"], "argument --levels: levels must be distinct"),
    (["--window", "1"], "argument --window: must be at least 2"),
    (["--stride", "0"], "argument --stride: must be a positive integer"),
    (["--scale", "1.5"], "argument --scale: must be a number in (0, 1)"),
    (["--seeds", "-1"], "argument --seeds: must be a positive integer"),
    (["--condition", "Q"], "`condition` must be a condition of study 'tiny_probe', got 'Q'"),
    (["--seeds", "3"], "`seeds` asks for 3 seeds but the study file lists only 2"),
])
def test_flag_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str],
                     message: str) -> None:
    path = _write(tmp_path)
    if flags == ["--seeds", "3"]:
        path.write_text(STUDY.replace("seeds: 2", "seeds: [4, 9]"))
    err = _err(capsys, ["diagnose", str(path), "--runs", str(tmp_path / "runs"), *flags])
    assert err.startswith("robuststats diagnose: error: ")
    assert message in err
    assert not (tmp_path / "runs").exists()  # nothing was built or trained


@pytest.mark.parametrize(("section", "message"), [
    ("diagnose:\n  windw: 2\n", "study.yaml: diagnose.windw (line 21): unknown key; did you "
                                "mean 'window'?"),
    ("diagnose:\n  levels: [operator, chanel]\n",
     "diagnose.levels (line 21): each level must be one of"),
    ("diagnose:\n  scale: 0\n", "diagnose.scale (line 21): Input should be greater than 0"),
    ("diagnose:\n  condition: C\n", "diagnose.condition (line 21): unknown condition 'C'"),
    ("diagnose:\n  kind: nvfp4_weights\n", "diagnose.kind (line 21): kind must be one of"),
    ("diagnose:\n  operators: [softmax, softmx]\n",
     "(did you mean 'softmax'?)"),
    ("diagnose:\n  modules: []\n", "diagnose.modules (line 21)"),
    ("diagnose:\n  channel_threshold: 1\n", "diagnose.channel_threshold (line 21)"),
    ("diagnose:\n  noise_seeds: [1, 1]\n", "seeds must be distinct"),
    # refused when the file is read, not after announcing a new version
    ("diagnose:\n  n_items: 1\n", "diagnose.n_items (line 21): Input should be greater than "
                                   "or equal to 2"),
])
def test_section_errors_name_key_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          section: str, message: str) -> None:
    err = _err(capsys, ["diagnose", str(_write(tmp_path, section)), "--runs",
                        str(tmp_path / "runs")])
    assert message in err


def test_one_evaluation_item_is_refused_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path)
    path.write_text(path.read_text().replace("  n_items: 12\n  batch_size", "  n_items: 1\n"
                                                                           "  batch_size"))
    err = _err(capsys, ["diagnose", str(path), "--runs", str(tmp_path / "runs"), "--out",
                        str(tmp_path / "o")])
    assert "`evaluation.n_items` is 1: a diagnosis needs at least 2 items" in err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "o").exists()


def test_window_beyond_the_model_fails_before_training(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _err(capsys, ["diagnose", str(_write(tmp_path)), "--levels", "window", "--window",
                        "4", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "o")])
    assert "`diagnose.window` (4) exceeds the model's 3 layers" in err
    assert not (tmp_path / "runs" / "tiny_probe").exists()


def test_out_in_the_way(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    err = _err(capsys, ["diagnose", str(_write(tmp_path)), "--out", str(blocker)])
    assert f"--out '{blocker}' is not a directory." in err


def test_section_is_outside_the_run_hash_and_absent_when_unused(tmp_path: Path) -> None:
    from robuststats.config.bounds import MAX_ITEMS as STUDY_ITEMS
    from robuststats.config.bounds import MAX_NOISE_SEEDS as STUDY_NOISE
    from robuststats.config.fields import MAX_SEED_VALUE as STUDY_SEED
    from robuststats.runs.ledger import run_hash

    plain = StudySpec.from_file(_write(tmp_path))
    assert "diagnose" not in plain.resolved()
    withd = StudySpec.from_file(_write(tmp_path, "diagnose:\n  window: 2\n  scale: 0.1\n"))
    assert withd.resolved()["diagnose"]["window"] == 2
    assert run_hash(plain) == run_hash(withd)  # the models and cells of the study are reused
    assert plain.spec_hash() != withd.spec_hash()
    assert (MAX_ITEMS, MAX_NOISE_SEEDS, MAX_SEED_VALUE) == (STUDY_ITEMS, STUDY_NOISE,
                                                            STUDY_SEED)


def test_flags_override_the_section(tmp_path: Path) -> None:
    from robuststats.diagnose import resolve_plan

    spec = StudySpec.from_file(_write(tmp_path, "diagnose:\n  window: 2\n  levels: [layer]\n"
                                                "  noise_seeds: 3\n  condition: B\n"))
    plan, ledger_spec = resolve_plan(spec)
    assert (plan.window, plan.levels, plan.noise_seeds, plan.condition) == \
        (2, ("layer",), (0, 1, 2), "B")
    assert plan.levels_requested and ledger_spec is spec
    plan, ledger_spec = resolve_plan(spec, window=3, levels=["window", "operator"],
                                     noise_seeds=1, seeds=1)
    assert (plan.window, plan.levels, plan.noise_seeds, plan.seeds) == \
        (3, ("operator", "window"), (0,), (0,))
    assert ledger_spec is spec  # seed 0 is one of the study's: its run directory as it is
    plan, ledger_spec = resolve_plan(spec, seeds=4)
    assert plan.seeds == (0, 1, 2, 3) and ledger_spec.seed_list() == [0, 1, 2, 3]
    with pytest.raises(InputError, match="`n_items` must be an integer >= 2"):
        resolve_plan(spec, n_items=1)


def test_operand_kinds_and_number_formats(tmp_path: Path) -> None:
    from robuststats.diagnose import resolve_plan

    path = tmp_path / "s.yaml"
    path.write_text(STUDY.replace("  noise_levels: [0, 0.05]",
                                  "  noise_levels: [0, 0.5]\n  kind: nvfp4_weights"))
    spec = StudySpec.from_file(path)
    with pytest.raises(InputError, match=r"`diagnose.kind` is needed: evaluation.kind "
                                         r"'nvfp4_weights' is an operand error model"):
        resolve_plan(spec)
    path.write_text(path.read_text() + "diagnose:\n  kind: fp8_e4m3\n  noise_seeds: 4\n")
    plan, _ = resolve_plan(StudySpec.from_file(path))
    # a number format's error is the same for every draw: one noise seed
    assert plan.kind == "fp8_e4m3" and plan.noise_seeds == (0,)


@pytest.mark.slow
def test_full_run_writes_a_version_and_reuses_models(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "diagnose:\n  window: 2\n  calibration_items: 8\n")
    argv = ["diagnose", str(path), "--runs", str(tmp_path / "runs"), "--out",
            str(tmp_path / "out"), "--seeds", "1", "--no-progress", "--format", "json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["version"] == "tiny_probe.diagnose/v1"
    # where it writes is said before any compute, with the absolute paths
    assert captured.err.splitlines()[0] == (
        f"robuststats diagnose: writing a new version under "
        f"{(tmp_path / 'out').resolve()}/tiny_probe.diagnose/ (--out) and models and "
        f"evaluations under {(tmp_path / 'runs').resolve()}/tiny_probe/ (--runs)")
    levels = {r["level"] for r in data["targets"]}
    assert levels == {"operator", "layer", "window"}
    assert [r["target"] for r in data["avalanche"]] and len(data["avalanche"]) == 2
    version = Path(data["path"])
    profile = json.loads((version / "sensitivity.json").read_text())
    assert set(profile["layers"]) == {"0", "1", "2"}
    assert set(profile["modules"]) == {f"model.layers.{i}.{m}" for i in range(3)
                                       for m in ("self_attn.o_proj", "mlp.down_proj")}
    manifest = json.loads((version / "manifest.json").read_text())
    assert manifest["models_trained"] == 1
    assert (tmp_path / "runs" / "tiny_probe" / "models" / "A__s0" / "COMPLETE").is_file()
    assert main(["results", "--root", str(tmp_path / "out"), "verify",
                 "tiny_probe.diagnose/v1"]) == 0
    capsys.readouterr()
    # again: the cached model is reused, a new version is written
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["version"] == "tiny_probe.diagnose/v2"
    manifest = json.loads((Path(data["path"]) / "manifest.json").read_text())
    assert manifest["models_trained"] == 0
