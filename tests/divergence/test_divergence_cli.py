"""``robuststats divergence``: a run on a saved tiny model and a study, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
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
    assert "--reference bf16+cuda --capture gpu.npz" in out
    assert "robuststats divergence gpu.npz --candidate npu.npz" in out


def test_capture_on_two_machines_then_compare(model_dir, tmp_path, capsys):
    """The two-machine workflow on one machine: capture each run, then compare the files."""
    gpu, npu = tmp_path / "gpu.npz", tmp_path / "npu.npz"
    code, stdout, err = _run(capsys, str(model_dir), "--reference", "fp32", "--capture",
                             str(gpu), "--items", "6", "--batch-size", "3", "--no-progress",
                             "--format", "json")
    assert code == 0, err
    data = json.loads(stdout)
    assert data["n_items"] == 6 and data["bytes"] == gpu.stat().st_size
    assert data["condition"]["dtype"] == "float32" and data["sketch"]["subset_size"] == 1024
    code, stdout, err = _run(capsys, str(model_dir), "--candidate", "nvfp4_weights",
                             "--capture", str(npu), "--items", "6", "--batch-size", "3",
                             "--subset-size", "1024", "--no-progress")
    assert code == 0, err
    assert "captured nvfp4_weights" in stdout and "kB per item" in stdout
    out = tmp_path / "results"
    code, stdout, err = _run(capsys, str(gpu), "--candidate", str(npu), "--max-mape", "0.3",
                             "--out", str(out), "--no-progress", "--format", "json")
    assert code == 0, err
    data = json.loads(stdout)
    assert data["version"] == "tiny-qwen2.divergence/v1"
    assert data["n_items"] == 6 and data["settings"]["local"] is False
    assert data["fit"]["verdict"] is None and data["exceeding"]
    assert any("no local pass" in n for n in data["notes"])
    version = ResultStore(out).get("tiny-qwen2.divergence")
    assert verify(version).ok
    assert version.manifest["source"]["kind"] == "captures"
    report = (version.path / "report.md").read_text()
    assert "compared from two captures" in report and "figures/depth.png" in report
    assert (version.path / "figures" / "depth.png").is_file()
    modules = pd.read_csv(version.path / "modules.csv")
    assert {"rel_rms_sketch_se", "mape_sketch_se"} <= set(modules.columns)
    items = pd.read_parquet(version.path / "items.parquet")
    assert {"rel_rms_se", "mape_se"} <= set(items.columns)


@pytest.mark.parametrize("argv, message", [
    (["--reference", "fp32", "--candidate", "bf16", "--capture", "{tmp}/c.npz"],
     r"`--capture`: a capture holds one run: give --reference or --candidate, not both"),
    (["--capture", "{tmp}/c.npz", "--sensitivity", "s.json"],
     r"`--sensitivity`: applies when comparing"),
    (["--capture", "{tmp}/c.npz", "--no-local"], r"`--no-local`: a capture holds one run"),
    (["--capture", "{tmp}/no/c.npz"], r"`--capture`: .* must be a file in an existing "
                                       r"directory"),
    (["--capture", "{tmp}", "--reference", "bf16"], r"`--capture`: .* must be a file"),
    (["--capture", "{tmp}/c.npz", "--candidate", "{{checkpoint: {tmp}}}"],
     r"`--candidate.checkpoint`: a capture runs SOURCE's model"),
    (["--capture", "{tmp}/c.npz", "--reference", "bf16+cuda:7"], r"`--reference`: device"),
    (["--candidate", "bf16", "--subset-size", "64"],
     r"`--subset-size`: sets a capture's sketch; give it with --capture FILE"),
    (["--reference", "bf16"], r"`--candidate`: required: the condition compared with "
                              r"--reference \(or --capture FILE"),
    (["--capture", "{tmp}/c.npz", "--projection-dim", "1"],
     r"argument --projection-dim: must be an integer in \[2, 1048576\]"),
])
def test_capture_flags_exit_2_before_compute(model_dir, tmp_path, capsys, argv, message):
    import re

    argv = [a.format(tmp=tmp_path) for a in argv]
    code, out, err = _run(capsys, str(model_dir), *argv, "--no-progress")
    assert code == 2, err
    assert out == "" and len(err.strip().splitlines()) == 1
    assert re.search(message, err), err
    assert not (tmp_path / "c.npz").exists()


@pytest.fixture(scope="module")
def capture_file(model_dir, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cap") / "ref.npz"
    assert main(["divergence", str(model_dir), "--capture", str(path), "--items", "3",
                 "--subset-size", "16", "--projection-dim", "8", "--no-progress"]) == 0
    return path


@pytest.mark.parametrize("argv, message", [
    (["--candidate", "{cap}", "--items", "3"], r"`--items`: SOURCE is a capture"),
    (["--candidate", "{cap}", "--batch-size", "2"], r"`--batch-size`: SOURCE is a capture"),
    (["--candidate", "{cap}", "--subset-size", "8"], r"`--subset-size`: SOURCE is a capture"),
    (["--candidate", "{cap}", "--reference", "fp32"], r"`--reference`: SOURCE is the "
                                                       r"reference's capture"),
    (["--candidate", "{cap}", "--capture", "x.npz"], r"`--capture`: SOURCE is a capture "
                                                      r"already"),
    (["--candidate", "bf16"], r"`--candidate`: SOURCE is a capture, so --candidate must be "
                              r"another capture file; 'bf16' is not a file"),
    ([], r"`--candidate`: required: the capture compared with SOURCE's"),
    (["--candidate", "{cap}", "--no-local"], r"`--no-local`: captures have no local pass"),
    (["--candidate", "{cap}", "--modules", "down_prj"], r"`modules`: 'down_prj' matches no"),
    (["--candidate", "{bad}"], r"`--candidate`: .*bad.npz' is not a complete capture file"),
])
def test_compare_flags_exit_2(capture_file, tmp_path, capsys, argv, message):
    import re

    (tmp_path / "bad.npz").write_bytes(capture_file.read_bytes()[:-200])
    argv = [a.format(cap=capture_file, bad=tmp_path / "bad.npz") for a in argv]
    code, out, err = _run(capsys, str(capture_file), *argv, "--no-progress",
                          "--out", str(tmp_path / "r"))
    assert code == 2, err
    assert out == "" and len(err.strip().splitlines()) == 1
    assert re.search(message, err), err


def test_compare_refuses_other_items_naming_the_flag(model_dir, capture_file, tmp_path, capsys):
    other = tmp_path / "other.npz"
    assert main(["divergence", str(model_dir), "--capture", str(other), "--items", "4",
                 "--subset-size", "16", "--projection-dim", "8", "--no-progress"]) == 0
    capsys.readouterr()
    code, out, err = _run(capsys, str(capture_file), "--candidate", str(other), "--out",
                          str(tmp_path / "r"))
    assert code == 2 and out == ""
    assert "`--candidate`: the captures differ in their items: 3 against 4" in err
    code, out, err = _run(capsys, str(tmp_path / "none.npz"), "--candidate", str(other))
    assert code == 2 and "`SOURCE`: capture file" in err and "does not exist" in err
