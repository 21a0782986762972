"""The ``command`` trainer: a user's training script run per condition × seed."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from robuststats.cli import main
from robuststats.engine import NoiseSpec
from robuststats.errors import InputError
from robuststats.models.external import (
    MARKER,
    ExternalTrainingError,
    check_injection_log,
)
from robuststats.models.trainer import TrainingCondition, get_trainer
from robuststats.results import ResultStore

SCRIPT = Path(__file__).parent / "scripts" / "train_tiny.py"
ROOT = Path(__file__).resolve().parents[2]
NOISE = NoiseSpec.from_dict({"scale": 0.05, "phases": "both", "ops": "matmul_only"})


def _study(tmp: Path, argv: list[str], output: str, **extra: str) -> Path:
    params = {"argv": argv, "output": output, "env": {"PYTHONPATH": str(ROOT)}, **extra}
    text = textwrap.dedent(f"""\
        name: ext
        version: 1
        task: {{name: arithmetic, params: {{seed: 0, n_items: 20, n_train: 64}}}}
        trainer:
          name: command
          params: {json.dumps(params)}
        conditions:
          clean: {{train_noise: null}}
          noisy:
            train_noise: {{scale: 0.05, phases: both, ops: matmul_only}}
            aqn: {{sigma_start: 0.05, sigma_end: 0.001, num_stages: 3}}
        evaluation: {{noise_levels: [0, 0.05], n_items: 20, batch_size: 20}}
        seeds: 1
        analysis: {{n_resamples: 50}}
        """)
    path = tmp / "ext.yaml"
    path.write_text(text)
    return path


def _run(study: Path, tmp: Path, *extra: str) -> int:
    return main(["study", str(study), "--out", str(tmp / "results"), "--runs",
                 str(tmp / "runs"), "--workers", "1", "--no-progress", *extra])


# ------------------------------------------------------------------ validation

@pytest.mark.parametrize(("params", "message"), [
    ({"argv": "python train.py"}, r"trainer.params.argv \(line 6\): `argv` must be a "
                                  r"non-empty list of strings"),
    ({"argv": []}, r"trainer.params.argv .*non-empty list"),
    ({"argv": ["python", 3]}, r"trainer.params.argv .*non-empty list"),
    ({"argv": ["python", "--out={outdir}"]}, r"trainer.params.argv \(line 6\): .*unknown "
                                             r"placeholder \{outdir\}; known: \{condition\}"),
    ({"argv": ["python", "{seed!r}"]}, r"unknown placeholder \{seed\}"),
    ({"argv": ["python", "{seed"]}, r"`argv` '\{seed' is not a valid template"),
    ({"argv": ["python"], "output": "ckpt/{condition}"},
     r"trainer.params.output \(line 6\): `output` 'ckpt/\{condition\}' must contain "
     r"\{condition\} and \{seed\}"),
    ({"argv": ["python"], "output": "ckpt/{condition}/{seed}/{output}"},
     r"unknown placeholder \{output\}"),
    ({"argv": ["python"], "env": {"ROBUSTSTATS_NOISE": "{}"}},
     r"trainer.params.env .*may not set ROBUSTSTATS_NOISE"),
    ({"argv": ["python"], "timeout": -1}, r"trainer.params.timeout .*positive number"),
    ({"argv": ["python"], "cwd": "/"}, r"unknown parameter 'cwd' for trainer 'command'"),
    ({}, r"trainer 'command' needs `argv`"),
])
def test_bad_params_stop_before_compute(tmp_path, capsys, params, message) -> None:
    study = tmp_path / "bad.yaml"
    study.write_text(textwrap.dedent(f"""\
        name: bad
        version: 1
        task: {{name: arithmetic}}
        trainer:
          name: command
          params: {json.dumps(params)}
        conditions: {{a: {{}}}}
        evaluation: {{noise_levels: [0]}}
        """))
    assert _run(study, tmp_path, "--check") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.yaml" in err
    import re

    assert re.search(message, err), err
    assert not (tmp_path / "runs").exists()


def test_placeholders_are_substituted_per_argument(tmp_path) -> None:
    trainer = get_trainer("command", argv=["prog", "--out={output}", "{condition} {seed:03d}"],
                          output="{run_dir}/c/{condition}/s{seed}", env={"TAG": "{condition}"})
    trainer.bind_run(tmp_path)
    argv, env = trainer.command(TrainingCondition("E8b", NOISE), 7)
    out = tmp_path.resolve() / "c" / "E8b" / "s7"
    assert argv == ["prog", f"--out={out}", "E8b 007"]  # a space stays inside one argument
    assert env["TAG"] == "E8b" and env["ROBUSTSTATS_OUTPUT"] == str(out)
    assert NoiseSpec.from_dict(json.loads(env["ROBUSTSTATS_NOISE"])) == NOISE
    assert "ROBUSTSTATS_AQN" not in env
    _, clean_env = trainer.command(TrainingCondition("E8a"), 7)
    assert "ROBUSTSTATS_NOISE" not in clean_env


# ------------------------------------------------------------------ the injection proof

def _record(pid: int, *, ops=("linear",), counts=None, fwd=1, bwd=True, scales=None):
    counts = counts if counts is not None else {("linear", "forward"): 3,
                                                ("linear", "backward"): 6}
    return {"pid": pid, "host": "h", "required_ops": list(ops),
            "phase_scales": scales or {"forward": 0.05, "backward": 0.05},
            "forward_calls": fwd, "backward_ran": bwd,
            "counts": [{"layer": 0, "op": o, "phase": p, "count": c}
                       for (o, p), c in counts.items()]}


def _log(tmp: Path, *records: dict) -> Path:
    path = tmp / "inj.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_injection_check_accepts_every_process_injecting(tmp_path) -> None:
    summary = check_injection_log(_log(tmp_path, _record(1), _record(2)), NOISE)
    assert summary["processes"] == 2 and summary["counts"] == {"linear/backward": 12,
                                                               "linear/forward": 6}


@pytest.mark.parametrize(("records", "message"), [
    ((), "no process reported injection counts"),
    ((_record(1), _record(2, counts={("linear", "forward"): 3})),
     "process 2 on h: op 'linear' got no injections in backward"),
    ((_record(1), _record(2, fwd=0, bwd=False)), "process 2 on h opened a noise session but "
                                                 "never ran the model"),
    ((_record(1, bwd=False, counts={("linear", "forward"): 3}),),
     "no process ran the backward phase"),
    ((_record(1, scales={"forward": 0.1, "backward": 0.0}),), "ran with phase scales"),
    ((_record(1, ops=("linear", "silu")),), "op 'silu' got no injections in forward"),
])
def test_injection_check_refuses(tmp_path, records, message) -> None:
    with pytest.raises(ExternalTrainingError, match=message):
        check_injection_log(_log(tmp_path, *records), NOISE)


# ------------------------------------------------------------------ commands that fail

def _trainer(tmp: Path, argv: list[str]) -> object:
    trainer = get_trainer("command", argv=argv, output=str(tmp / "ck" / "{condition}-{seed}"))
    trainer.bind_run(tmp / "run")
    return trainer


def test_failing_command_fails_with_its_last_lines(tmp_path) -> None:
    trainer = _trainer(tmp_path, [sys.executable, str(SCRIPT), "--output", "{output}",
                                  "--seed", "{seed}", "--mode", "fail"])
    with pytest.raises(ExternalTrainingError, match=r"(?s)exited with code 3.*loss is nan at "
                                                    r"step 2\nRuntimeError: training diverged"):
        trainer.train(None, TrainingCondition("a", NOISE), 0)
    log = tmp_path / "run" / "logs" / "a__s0.log"
    assert "training seed 0" in log.read_text()
    assert not (tmp_path / "ck" / "a-0" / MARKER).exists()


def test_command_without_checkpoint_or_injections_is_refused(tmp_path) -> None:
    trainer = _trainer(tmp_path, [sys.executable, "-c", "pass"])
    with pytest.raises(ExternalTrainingError, match="exited with code 0 but wrote no "
                                                    "checkpoint"):
        trainer.train(None, TrainingCondition("a", NOISE), 0)
    # writes something, never opens the engine: a checkpoint without proof of noise
    writes = "import os, sys; os.makedirs(sys.argv[1]); open(sys.argv[1] + '/w', 'w')"
    trainer = _trainer(tmp_path, [sys.executable, "-c", writes, "{output}"])
    with pytest.raises(ExternalTrainingError, match=r"checkpoint .*a-0' of a seed 0 refused: no "
                                                    r"process reported injection counts"):
        trainer.train(None, TrainingCondition("a", NOISE), 0)
    assert not (tmp_path / "ck" / "a-0" / MARKER).exists()


def test_missing_program_is_one_clear_failure(tmp_path) -> None:
    trainer = _trainer(tmp_path, ["no-such-program-xyz"])
    with pytest.raises(ExternalTrainingError, match="cannot start 'no-such-program-xyz'"):
        trainer.train(None, TrainingCondition("a"), 0)


def test_timeout_ends_the_command(tmp_path) -> None:
    trainer = get_trainer("command", argv=[sys.executable, "-c", "import time; time.sleep(60)"],
                          timeout=0.5)
    trainer.bind_run(tmp_path)
    with pytest.raises(ExternalTrainingError, match="command timed out"):
        trainer.train(None, TrainingCondition("a"), 0)


# ------------------------------------------------------------------ end to end

@pytest.fixture(scope="module")
def ext_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("ext")
    argv = [sys.executable, str(SCRIPT), "--output", "{output}", "--seed", "{seed}",
            "--mode", "child"]
    study = _study(tmp, argv, str(tmp / "ckpt" / "{condition}" / "seed{seed}"))
    assert _run(study, tmp) == 0
    return tmp


@pytest.mark.slow
def test_study_trains_through_the_command_in_two_processes(ext_run: Path) -> None:
    v = ResultStore(ext_run / "results").get("ext")
    assert v.manifest["cells_finished"] == 4 and v.manifest["models_trained"] == 2
    out = pd.read_parquet(v.path / "outcomes.parquet")
    assert len(out) == 4 * 20
    run = ext_run / "runs" / "ext"
    lines = [json.loads(x) for x in (run / "logs" / "noisy__s0.injections.jsonl")
             .read_text().splitlines()]
    assert len({r["pid"] for r in lines}) == 2  # the script and its spawned child
    for r in lines:
        assert {c["phase"] for c in r["counts"]} == {"forward", "backward"}
    assert not (run / "logs" / "clean__s0.injections.jsonl").exists()
    marker = json.loads((ext_run / "ckpt" / "noisy" / "seed0" / MARKER).read_text())
    assert marker["injections"]["processes"] == 2 and "model.safetensors" in marker["files"]
    # the AQN schedule reached the command: warm-up 0, then sigma_start ... sigma_end
    sigmas = json.loads((ext_run / "ckpt" / "noisy" / "seed0" / "aqn_sigmas.json").read_text())
    assert sigmas == [0.0, 0.05, 0.001]
    clean = json.loads((ext_run / "ckpt" / "clean" / "seed0" / "aqn_sigmas.json").read_text())
    assert clean == [0.0, 0.0, 0.0]
    # the model cache points at the checkpoint instead of copying it
    cached = run / "models" / "noisy__s0" / "model"
    assert not (cached / "model.safetensors").exists()


@pytest.mark.slow
def test_resume_after_the_marker_does_not_rerun_the_command(ext_run: Path) -> None:
    # the run directory is lost (another machine, a cleaned scratch disk): the checkpoints
    # outside it carry their completion markers
    import shutil

    run = ext_run / "runs" / "ext"
    shutil.rmtree(run)
    assert _run(_study_path(ext_run), ext_run) == 0
    assert not (run / "logs").exists()  # no command ran: both checkpoints were complete
    v1, v2 = ResultStore(ext_run / "results").versions("ext")[:2]
    a = pd.read_parquet(v1.path / "outcomes.parquet")
    b = pd.read_parquet(v2.path / "outcomes.parquet")
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.slow
def test_changed_checkpoint_is_not_complete(ext_run: Path) -> None:
    ckpt = ext_run / "ckpt" / "clean" / "seed0"
    with open(ckpt / "aqn_sigmas.json", "a") as fh:
        fh.write(" ")
    trainer = get_trainer("command", argv=["x"], output=str(ext_run / "ckpt" / "{condition}"
                                                            / "seed{seed}"))
    with pytest.raises(ExternalTrainingError, match="other settings"):
        trainer.train(None, TrainingCondition("clean"), 0)


def _study_path(tmp: Path) -> Path:
    return tmp / "ext.yaml"


def test_a_misspelt_trainer_name_is_answered(tmp_path) -> None:
    with pytest.raises(InputError, match=r"unknown trainer 'comand'.*did you mean 'command'"):
        get_trainer("comand")


@pytest.mark.slow
def test_a_checkpoint_rewritten_at_the_same_size_or_swapped_is_named(ext_run: Path,
                                                                     tmp_path: Path) -> None:
    """Identity, not sizes: the marker and the run directory's pointer hold the SHA-256."""
    import shutil

    from robuststats.models.external import load_external, marker_problem

    output = tmp_path / "seed0"
    shutil.copytree(ext_run / "ckpt" / "noisy" / "seed0", output)
    pointer = tmp_path / "cached"
    shutil.copytree(ext_run / "runs" / "ext" / "models" / "noisy__s0" / "model", pointer)
    name = "external_checkpoint.json"  # the pointer the run directory caches
    record = json.loads((pointer / name).read_text())
    assert len(record["sha256"]) == 64
    record["checkpoint"] = str(output)
    (pointer / name).write_text(json.dumps(record))
    assert marker_problem(output) is None
    assert load_external(pointer).model is not None
    weights = output / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # the same size, another weight
    weights.write_bytes(bytes(data))
    assert "its weights file 'model.safetensors' differs" in marker_problem(output)
    # another checkpoint completed at the pointer's path (its marker written for it)
    from robuststats.models.identity import checkpoint_identity

    marker = json.loads((output / MARKER).read_text())
    marker["identity"] = checkpoint_identity(output)
    (output / MARKER).write_text(json.dumps(marker))
    assert marker_problem(output) is None
    with pytest.raises(ExternalTrainingError, match=r"holds another checkpoint than the one "
                                                    r"this model was trained as"):
        load_external(pointer)
