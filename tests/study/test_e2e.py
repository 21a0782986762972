"""End to end on the reduced E8 study with the real tiny Qwen2, trainer and evaluator."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from robuststats.cli import main
from robuststats.results import ResultStore, diff_versions, verify

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.slow  # a whole smoke study per module: the slow suite


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("e2e")
    code = main(["study", str(ROOT / "studies" / "e8_smoke.yaml"), "--out", str(tmp / "results"),
                 "--runs", str(tmp / "runs"), "--workers", "2", "--no-progress"])
    assert code == 0
    return tmp


def test_smoke_study_writes_a_complete_version(smoke_run: Path) -> None:
    v = ResultStore(smoke_run / "results").get("e8_smoke")
    assert v.number == 1
    for name in ("outcomes.parquet", "summary.csv", "summary.parquet", "tests.csv",
                 "hypotheses.csv", "hypotheses.parquet", "retention.parquet", "report.md",
                 "figures/retention.png", "figures/accuracy_vs_noise.png"):
        assert (v.path / name).is_file(), name
    m = v.manifest
    assert m["cells_planned"] == m["cells_finished"] == 4 * 2 * 3
    assert m["seeds"] == [0, 1] and len(m["spec_hash"]) == 64
    assert m["environment"]["versions"]["torch"] and m["environment"]["versions"]["transformers"]
    assert m["row_counts"]["outcomes"] == 24 * 40
    assert verify(v).ok

    out = pd.read_parquet(v.path / "outcomes.parquet")
    # the paired design: the same items under every condition, seed and noise level
    per_cell = out.groupby(["condition", "seed", "eval_noise", "noise_seed"])["item_id"].apply(
        lambda s: tuple(sorted(s)))
    assert per_cell.nunique() == 1
    hyp = pd.read_csv(v.path / "hypotheses.csv")
    assert hyp["id"].tolist() == ["H1", "H2", "H3", "H4", "H5", "H6"]
    assert set(hyp["verdict"]) <= {"VERIFIED", "FALSIFIED", "INCONCLUSIVE"}
    tests = pd.read_csv(v.path / "tests.csv")
    # all 6 pairs of 4 conditions at 3 noise levels, 2 seeds: a seed-random decision and a
    # models-fixed McNemar diagnostic for each
    assert len(tests) == 6 * 3 * 2
    assert tests.groupby("role").size().to_dict() == {"decision": 18, "diagnostic": 18}
    # every noisy outcome was noisy: injections in every requested op of every noisy cell
    inj = pd.read_parquet(v.path / "injections.parquet")
    assert m["row_counts"]["injections"] == len(inj)
    keys = ["condition", "seed", "eval_noise", "noise_seed"]
    noisy = out[out["eval_noise"] > 0][keys].drop_duplicates()
    assert len(inj[keys].drop_duplicates()) == len(noisy) == 4 * 2 * 2
    assert not (inj["eval_noise"] == 0).any()
    per_op = inj.groupby([*keys, "op"])["count"].sum().unstack("op")
    assert (per_op[["linear", "attention_scores", "attention_output"]] > 0).all().all()
    report = (v.path / "report.md").read_text()
    assert "## Pre-registered hypotheses" in report and "figures/retention.png" in report


def test_rerun_reuses_everything_and_makes_a_new_version(smoke_run: Path) -> None:
    code = main(["study", str(ROOT / "studies" / "e8_smoke.yaml"), "--out",
                 str(smoke_run / "results"), "--runs", str(smoke_run / "runs"), "--workers",
                 "2", "--no-progress"])
    assert code == 0
    store = ResultStore(smoke_run / "results")
    v1, v2 = store.get("e8_smoke/v1"), store.get("e8_smoke/v2")
    assert (v2.manifest["cells_reused"], v2.manifest["cells_run"]) == (24, 0)
    assert v2.manifest["models_trained"] == 0
    assert diff_versions(v1, v2).empty
    assert verify(v1).ok


def test_analyze_recomputes_the_same_tables_from_stored_outcomes(smoke_run: Path) -> None:
    v1 = ResultStore(smoke_run / "results").get("e8_smoke/v1")
    out = smoke_run / "reanalysis"
    assert main(["analyze", str(v1.path), "--out", str(out)]) == 0
    again = ResultStore(out).get("e8_smoke")
    assert diff_versions(v1, again).empty
    assert json.loads((again.path / "manifest.json").read_text())["spec_hash"] == \
        v1.manifest["spec_hash"]
