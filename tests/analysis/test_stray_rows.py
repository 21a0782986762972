"""One stray outcomes row cannot silently empty an analysis (issue 23, item 4).

Before: a row whose ``seed`` was changed to 5 (or to -1) made a new one-item cell; the hole
policy then dropped every other item from every table, and ``robuststats analyze`` printed
"(no rows)" for the summary, retention, tests and hypotheses, exit 0, nothing on stderr.
Now negative seeds and noise seeds are refused; a cell with fewer than half of its
condition's items is set aside as a missing cell (recorded in ``missing`` and ``dropped``),
holes in the cross product are reported on stderr, and only the hypotheses the holes touch
are INCONCLUSIVE.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from robuststats.analysis import AnalysisOptions, analyze_outcomes
from robuststats.cli import main
from robuststats.errors import RobuststatsWarning
from robuststats.stats import simulate_outcomes

ROOT = Path(__file__).resolve().parents[2]
OPTS = AnalysisOptions(n_resamples=200, multiplicity="holm")
H = [{"id": "AB", "metric": "accuracy", "a": "A", "b": "B", "eval_noise": 0.0,
      "relation": "greater", "margin": 0.0},
     {"id": "BC", "metric": "retention", "a": "B", "b": "C", "eval_noise": 0.05,
      "relation": "greater", "margin": 0.0}]


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    """Conditions A, B, C; 3 seeds × 40 items; clean and 5 % noise."""
    df = simulate_outcomes(3, 40, seed_effects="small", robustness_effect=0.2,
                           eval_noise=(0.0, 0.05), rng=3)
    c = df[df["condition"] == "B"].assign(condition="C")
    c["correct"] = 1 - c["correct"]
    return pd.concat([df, c], ignore_index=True)


def _stray(table: pd.DataFrame, column: str, value: int) -> pd.DataFrame:
    out = table.copy()
    row = out.index[(out["condition"] == "A") & (out["eval_noise"] == 0)][10]
    out.loc[row, column] = value
    return out


@pytest.mark.parametrize("column", ["seed", "noise_seed"])
def test_negative_seeds_are_refused_in_one_line(table, tmp_path, capsys, column):
    path = tmp_path / "o.csv"
    _stray(table, column, -1).to_csv(path, index=False)
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"column {column!r} must be ≥ 0, got -1 in row" in err and str(path) in err


def test_a_stray_seed_touches_only_its_own_hypotheses(table):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = analyze_outcomes(_stray(table, "seed", 5), hypotheses=H, options=OPTS)
    messages = [str(w.message) for w in caught if issubclass(w.category, RobuststatsWarning)]
    assert any("set aside" in m and "seed 5" in m for m in messages), messages
    # the tables are there: 3 conditions × 2 levels, every item but the one moved away
    assert len(res.summary) == 6
    assert set(res.summary["n_items"]) == {39}
    assert set(res.summary["n_seeds"]) == {3}
    assert len(res.retention) == 3 and not res.tests.empty
    verdicts = res.hypotheses.set_index("id")
    assert verdicts.loc["AB", "verdict"] == "INCONCLUSIVE"
    assert "missing" in verdicts.loc["AB", "reason"]
    assert verdicts.loc["BC", "verdict"] != "INCONCLUSIVE" or \
        "missing" not in verdicts.loc["BC", "reason"]
    assert not pd.isna(verdicts.loc["BC", "estimate"])
    missing = set(res.missing.itertuples(index=False, name=None))
    assert missing == {("A", 5, 0.0, 0), ("A", 5, 0.05, 0)}
    partial = res.dropped[res.dropped["item_id"].isna()]
    assert partial[["condition", "seed", "eval_noise"]].values.tolist() == [["A", 5, 0.0]]


def test_analyze_reports_the_holes_on_stderr(table, tmp_path):
    path = tmp_path / "o.csv"
    _stray(table, "seed", 5).to_csv(path, index=False)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "robuststats", "analyze", str(path)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    # one line of the command's own, not Python's `path:line: Category:` with the source below
    assert done.stderr.startswith("robuststats analyze: warning: outcomes with holes: 1 "
                                  "cell(s) set aside"), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    summary = done.stdout.split("== summary ==")[1].split("==")[0]
    assert "(no rows)" not in summary


def test_a_complete_table_gives_no_warning(table):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RobuststatsWarning)
        res = analyze_outcomes(table, hypotheses=H, options=OPTS)
    assert res.missing.empty and res.dropped.empty


def test_a_few_missing_items_are_still_dropped_from_every_table(table):
    """A cell that lacks a few items keeps the other items: those few are dropped (as
    before), with a warning that says so."""
    short = table.drop(table.index[(table["condition"] == "A") & (table["seed"] == 1)
                                   & (table["item_id"].isin(["item03", "item07"]))])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = analyze_outcomes(short, hypotheses=H, options=OPTS)
    assert any("dropped from every table" in str(w.message) for w in caught)
    assert set(res.summary["n_items"]) == {38} and res.missing.empty
    assert set(res.hypotheses["verdict"]) - {"INCONCLUSIVE"}
