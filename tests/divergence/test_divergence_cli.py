"""``robuststats divergence``: a run on a saved tiny model and a study, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from divergence_models import tiny

from robuststats.cli import main
from robuststats.results import ResultStore, verify


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("model") / "tiny-qwen2"
    model, tok, _ = tiny("qwen2", n_layers=3)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["divergence", *argv])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _sensitivity_file(path: Path) -> Path:
    """A diagnose-format file: layer 1 significantly sensitive, layers 0 and 2 not."""
    layers = {str(i): {"module": f"model.layers.{i}", "estimate": e, "sensitivity": s,
                       "significant": sig, "rank": r}
              for i, e, s, sig, r in ((0, 0.01, 0.2, False, 3), (1, 0.2, 4.0, True, 1),
                                      (2, 0.05, 1.0, False, 2))}
    path.write_text(json.dumps({"format": "robuststats.sensitivity", "format_version": 1,
                                "layers": layers}))
    return path


def test_model_directory_run_writes_a_verified_version(model_dir, tmp_path, capsys):
    sens = _sensitivity_file(tmp_path / "sensitivity.json")
    out = tmp_path / "results"
    code, stdout, err = _run(capsys, str(model_dir), "--candidate", "nvfp4-weights",
                             "--items", "6", "--batch-size", "3", "--max-mape", "0.3",
                             "--sensitivity", str(sens), "--out", str(out), "--no-progress",
                             "--format", "json")
    assert code == 0, err
    data = json.loads(stdout)
    assert data["version"] == "tiny-qwen2.divergence/v1"
    assert data["n_items"] == 6 and data["n_layers"] == 3
    assert data["candidate"]["noise"]["kind"] == "nvfp4"
    assert data["fit"]["verdict"] in ("amplifying", "additive", "sub-additive", "independent",
                                      "damped")
    rows = data["exceeding"]
    assert rows, "NVFP4 weights exceed a MAPE of 0.3 somewhere"
    # sensitive layer first, whatever its MAPE
    layers = [r["layer"] for r in rows]
    assert layers[0] == 1 and rows[0]["sensitive"] is True
    assert all(not r["sensitive"] for r in rows if r["layer"] != 1)
    assert layers.index(1) == 0 and max(i for i, r in enumerate(rows) if r["layer"] == 1) < \
        min(i for i, r in enumerate(rows) if r["layer"] != 1)
    version = ResultStore(out).get("tiny-qwen2.divergence")
    assert verify(version).ok
    for name in ("items.parquet", "modules.csv", "depth.csv", "exceeding.csv", "report.md",
                 "report.json", "figures/depth.png", "injections.csv"):
        assert (version.path / name).is_file(), name
    manifest = version.manifest
    assert manifest["kind"] == "divergence" and manifest["max_mape"] == 0.3
    assert manifest["candidate"]["noise_label"] == "nvfp4_weights"
    assert "accumulation:" in (version.path / "report.md").read_text()


def test_text_output_and_study_source(model_dir, tmp_path, capsys):
    study = tmp_path / "ck.yaml"
    study.write_text(f"""name: ck_study
version: 1
task: {{name: arithmetic, params: {{n_items: 5, n_train: 10}}}}
conditions:
  ck: {{checkpoint: {model_dir}}}
evaluation: {{noise_levels: [0, 0.05]}}
""")
    code, stdout, err = _run(capsys, str(study), "--candidate", "bf16", "--out",
                             str(tmp_path / "r"), "--runs", str(tmp_path / "runs"),
                             "--no-progress")
    assert code == 0, err
    assert "divergence of bf16" in stdout and "5 items, 3 layers" in stdout
    assert "residual stream by layer" in stdout
    manifest = ResultStore(tmp_path / "r").get("ck_study.divergence").manifest
    assert manifest["source"]["condition"] == "ck" and manifest["source"]["seed"] == 0


@pytest.mark.parametrize("argv, message", [
    (["--candidate", "bf61"], r"`--candidate`: 'bf61' is not a dtype, a device or an error "
                              r"model \(did you mean 'bf16'\?\)"),
    (["--candidate", "relative_gaussian"], r"`--candidate`: error model 'relative_gaussian' "
                                           r"needs a level"),
    (["--candidate", "bf16", "--reference", "{dtyp: bf16}"],
     r"`--reference.dtyp`: unknown key \(did you mean 'dtype'\?\)"),
    (["--candidate", "bf16", "--sensitivity", "nope.json"],
     r"`--sensitivity`: sensitivity file 'nope.json' does not exist"),
    (["--candidate", "bf16", "--texts", "nope.txt"], r"`--texts`: 'nope.txt' does not exist"),
    (["--candidate", "bf16", "--seed", "1"], r"`--condition`: --condition and --seed choose"),
    (["--candidate", "bf16", "--max-mape", "-1"], r"argument --max-mape: must be a positive"),
    (["--candidate", "bf16", "--eps", "0"], r"argument --eps: must be a number in \(0, 1\)"),
    (["--candidate", "{checkpoint: /nonexistent/dir}"],
     r"`--candidate.checkpoint`: '/nonexistent/dir' does not exist"),
])
def test_bad_input_exits_2_with_one_line(model_dir, capsys, argv, message):
    code, out, err = _run(capsys, str(model_dir), *argv, "--no-progress")
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    import re

    assert re.search(message, err), err


def test_bad_source_and_out(tmp_path, model_dir, capsys):
    code, _, err = _run(capsys, str(tmp_path / "none"), "--candidate", "bf16")
    assert code == 2 and "`SOURCE`:" in err and "does not exist" in err
    (tmp_path / "file").write_text("x")
    code, _, err = _run(capsys, str(model_dir), "--candidate", "bf16", "--out",
                        str(tmp_path / "file"))
    assert code == 2 and "--out" in err and "is not a directory" in err
    code, _, err = _run(capsys, str(tmp_path), "--candidate", "bf16")
    assert code == 2 and "without config.json" in err


def test_cuda_is_refused_before_compute_without_a_gpu(model_dir, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, _, err = _run(capsys, str(model_dir), "--candidate", "bf16+cuda")
    assert code == 2
    assert "`--candidate`: device 'cuda' is not available here" in err


def test_help_has_an_example(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["divergence", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "robuststats divergence ckpts/qwen --reference fp32 --candidate bf16" in out
