"""A study whose every cell fails still publishes a version, with ``missing.csv``, and exits
1 (issue 23, item 3; the promise of docs/scale.md and docs/studies.md).

Before, the analysis refused the empty outcomes table and the study ended with exit 2 and
``outcomes: the outcomes table has no rows.``, publishing nothing: the recorded failures
were visible only in the run directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import yaml
from study_doubles import fake_study

from robuststats.cli import main
from robuststats.results import ResultVersion, verify
from robuststats.runs.plan import plan
from robuststats.runs.spec import StudySpec

HERE = Path(__file__).resolve().parent


def _run(tmp_path: Path, capsys, data: dict) -> tuple[int, str, str]:
    study = tmp_path / "s.yaml"
    study.write_text(yaml.safe_dump(data))
    capsys.readouterr()
    code = main(["study", str(study), "--out", str(tmp_path / "results"), "--runs",
                 str(tmp_path / "runs"), "--workers", "1", "--no-progress"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _only_version(tmp_path: Path, name: str) -> ResultVersion:
    versions = sorted((tmp_path / "results" / name).glob("v*"))
    assert [v.name for v in versions] == ["v1"]
    return ResultVersion.load(versions[0])


def test_every_cell_failing_publishes_missing_csv_and_exits_1(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    data = fake_study(seeds=1, noise_seeds=1, n=6)
    spec = StudySpec.from_dict(data)
    data["trainer"]["params"]["fail"] = [c.key for c in plan(spec)]
    code, out, err = _run(tmp_path, capsys, data)
    assert code == 1, err
    assert "Traceback" not in err
    assert "6 cell(s) failed or missing" in err
    version = _only_version(tmp_path, "fake")
    missing = pd.read_csv(version.path / "missing.csv")
    assert sorted(missing["condition"] + "__s" + missing["seed"].astype(str)) == \
        sorted(f"{c.condition}__s{c.seed}" for c in plan(spec))
    assert missing["error"].str.contains("injected failure").all()
    hypotheses = pd.read_csv(version.path / "hypotheses.csv")
    assert set(hypotheses["verdict"]) == {"INCONCLUSIVE"}
    assert pd.read_parquet(version.path / "outcomes.parquet").empty
    assert version.manifest["cells_finished"] == 0
    assert verify(version).ok
    assert "6 missing/failed" in out
    # results show reads it back
    capsys.readouterr()
    assert main(["results", "show", str(version.path)]) == 0


def test_a_command_trainer_that_writes_nothing_fails_every_cell_with_exit_1(tmp_path, capsys):
    data = {"name": "silent", "version": 1,
            "task": {"name": "arithmetic", "params": {"seed": 0, "n_items": 8, "n_train": 40}},
            "trainer": {"name": "command",
                        "params": {"argv": [sys.executable, "-c", "pass"],
                                   "output": str(tmp_path / "ck" / "{condition}_{seed}")}},
            "conditions": {"A": {}, "B": {}},
            "evaluation": {"noise_levels": [0, 0.05], "noise_seeds": 1},
            "seeds": 1,
            "hypotheses": [{"id": "H1", "metric": "accuracy", "a": "A", "b": "B",
                            "eval_noise": 0, "relation": "greater", "margin": 0.0}]}
    code, _, err = _run(tmp_path, capsys, data)
    assert code == 1, err
    missing = pd.read_csv(_only_version(tmp_path, "silent").path / "missing.csv")
    assert len(missing) == 4
