from __future__ import annotations

import errno
import json
import os
import re
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from robuststats.cli import main

HERE = Path(__file__).resolve().parents[1] / "study"
sys.path.insert(0, str(HERE))  # the test-only trainer doubles live with the study tests
from study_doubles import fake_study  # noqa: E402


def test_help(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["study", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--seeds", "--workers", "--out", "--runs", "--fresh", "--n-items",
                 "--format {table,json}"):
        assert flag in out


@pytest.mark.parametrize("body, message", [
    ("name: x\nversion: 1\nbogus: 2\n", r"bogus \(line 3\): unknown key"),
    ("name: x\nversion: 0\n", r"version \(line 2\): .*greater than or equal to 1"),
])
def test_bad_study_file_is_a_one_line_error_with_exit_2(tmp_path: Path, capsys, body: str,
                                                        message: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(body)
    assert main(["study", str(path)]) == 2
    first, *also = capsys.readouterr().err.strip().splitlines()
    assert first.startswith("robuststats study: error: ")
    assert re.search(message, first)
    # the keys the file also lacks (task, conditions, ...) are listed below, one line each
    assert f"({len(also)} more problem(s), listed below)" in first
    assert also and all(re.fullmatch(r"  also: \w+: required key is missing\.",
                                     line) for line in also), also


def test_a_file_with_several_problems_lists_every_one(tmp_path: Path, capsys) -> None:
    """The error line names the first problem (a misspelt key first) and counts the others;
    each other problem follows on its own line with its key and line."""
    path = tmp_path / "s.yaml"
    path.write_text("name: bad\nversion: 1\ntask: {name: arithmetic}\nseeds: 0\n"
                    "conditions:\n  A: {train_noise: null}\nevaluation:\n"
                    "  noise_levels: [0, 2.5]\n  batch_sise: 4\n")
    assert main(["study", str(path), "--check"]) == 2
    first, *rest = capsys.readouterr().err.splitlines()
    assert first == (f"robuststats study: error: {path}: evaluation.batch_sise (line 9): "
                     "unknown key; did you mean 'batch_size'? (2 more problem(s), listed "
                     "below)")
    assert sorted(rest) == [
        "  also: evaluation.noise_levels (line 8): each noise level must lie in [0, 1), "
        "got 2.5.",
        "  also: seeds (line 4): a count must be >= 1, got 0."]


def test_bad_flag_value_exits_2(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["study", "x.yaml", "--workers", "0"])
    assert exc.value.code == 2
    assert "must be a positive integer, got '0'" in capsys.readouterr().err


def test_study_runs_prints_verdicts_and_failure_exit_code(tmp_path: Path, monkeypatch,
                                                           capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))
    path = tmp_path / "fake.yaml"
    path.write_text(yaml.safe_dump(fake_study(n=12, noise_seeds=1)))
    assert main(["study", str(path), "--workers", "1", "--no-progress", "--seeds", "1"]) == 0
    out = capsys.readouterr().out
    assert "study fake: 6 cells (0 reused, 6 run now, 0 missing/failed)" in out
    assert "results: results/fake/v1" in out
    assert re.search(r"^H1 +A − B > 0\.0 pp \(clean accuracy\) +[+-]\d+\.\d +\[\S+, \S+\] "
                     r"\d+(\.\d+)?% +\S.* +(VERIFIED|FALSIFIED|INCONCLUSIVE)$", out, re.M)
    assert re.search(r"^H2 +A − B < 0\.0 pp \(retention at 10% noise\) ", out, re.M)
    assert (tmp_path / "results" / "fake" / "v1" / "manifest.json").is_file()
    assert (tmp_path / "runs" / "fake" / "spec.json").is_file()

    path.write_text(yaml.safe_dump(fake_study(n=12, noise_seeds=1, fail=["A__s0__n0__ns0"])))
    assert main(["study", str(path), "--workers", "1", "--no-progress", "--fresh"]) == 1
    captured = capsys.readouterr()
    assert "1 cell(s) failed or missing" in captured.err
    # the clean cell of A is missing: H1 needs it and says so in place of an interval
    assert re.search(r"^H1 .* - +\(1 needed cell\(s\) missing[^)]*\)\) .* INCONCLUSIVE$",
                     captured.out, re.M)

    assert main(["study", str(path), "--workers", "1", "--no-progress", "--format",
                 "json"]) == 1
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert (data["study"], data["version"], data["ok"]) == ("fake", "fake/v3", False)
    assert (data["cells_planned"], data["cells_failed"], data["cells_reused"]) == (12, 1, 11)
    assert data["settings"]["n_resamples"] == 200  # the JSON alone says how it was analysed
    h1 = data["hypotheses"][0]
    assert (h1["id"], h1["verdict"], h1["claim"]) == ("H1", "INCONCLUSIVE",
                                                      "A − B > 0.0 pp (clean accuracy)")
    assert h1["estimate"] is None and "ci_level" in h1


def test_n_items_override(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))
    path = tmp_path / "fake.yaml"
    path.write_text(textwrap.dedent(yaml.safe_dump(fake_study(n=12, noise_seeds=1, seeds=1))))
    assert main(["study", str(path), "--workers", "1", "--no-progress", "--n-items", "5"]) == 0
    import pandas as pd

    out = pd.read_parquet(tmp_path / "results" / "fake" / "v1" / "outcomes.parquet")
    assert out.groupby(["condition", "eval_noise"]).size().eq(5).all()


def test_unknown_task_stops_before_any_cell_runs(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))
    study = fake_study(n=5, noise_seeds=1)
    study["task"] = {"name": "study_doubles:no_such_factory", "params": {}}
    path = tmp_path / "fake.yaml"
    path.write_text(yaml.safe_dump(study))
    assert main(["study", str(path), "--workers", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "cannot load 'study_doubles:no_such_factory'" in err
    assert not list((tmp_path / "runs" / "fake" / "cells").glob("*.parquet"))


def _fake_file(tmp_path: Path) -> Path:
    path = tmp_path / "fake.yaml"
    path.write_text(yaml.safe_dump(fake_study(n=5, noise_seeds=1, seeds=1)))
    return path


@pytest.mark.parametrize("flag", ["--out", "--runs"])
def test_unusable_output_directory_stops_before_anything_runs(tmp_path: Path, monkeypatch,
                                                              capsys, flag: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))
    study = _fake_file(tmp_path)
    (tmp_path / "a_file").write_text("x")
    cases = [
        (str(tmp_path / "a_file"), rf"{flag} '.*a_file' is not a directory\.$"),
        (str(tmp_path / "a_file" / "sub"),
         rf"{flag} '.*a_file/sub' cannot be created: '.*a_file' is not a directory\.$"),
        ("d" * 5000, rf"{flag} 'd{{60}}…d{{60}} \(5000 characters\)' is not writable: File "
                     r"name too long\.$"),
    ]
    for value, message in cases:
        assert main(["study", str(study), "--workers", "1", "--no-progress", flag, value]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and err.startswith("robuststats study: error: ")
        assert re.search(message, err.strip()), err
    # nothing ran and nothing was created
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()


@pytest.mark.parametrize("error, words", [
    (errno.ENOSPC, "No space left on device"), (errno.EROFS, "Read-only file system"),
    (errno.EACCES, "Permission denied")])
def test_full_or_read_only_output_is_refused_first(tmp_path: Path, monkeypatch, capsys,
                                                   error: int, words: str) -> None:
    """A full disk fails the probe's fsync; a read-only one its creation (both simulated:
    the tests run as any user, and root may write anywhere)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))
    study = _fake_file(tmp_path)
    (tmp_path / "results").mkdir()

    def failing(*args, **kwargs):
        raise OSError(error, os.strerror(error))

    target = "os.fsync" if error == errno.ENOSPC else "tempfile.mkstemp"
    with monkeypatch.context() as mp:
        mp.setattr(target, failing)
        code = main(["study", str(study), "--workers", "1", "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == f"robuststats study: error: --out 'results' is not writable: {words}."
    assert not (tmp_path / "runs").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_directory_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))
    study = _fake_file(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert main(["study", str(study), "--runs", str(ro / "runs")]) == 2
    finally:
        ro.chmod(0o755)
    err = capsys.readouterr().err.strip()
    assert re.fullmatch(r"robuststats study: error: --runs '.*ro/runs' is not writable \(checked "
                        r"in '.*ro', where it would be created\): Permission denied\.", err), err
