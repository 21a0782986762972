"""Sequential studies: the ``sequential:`` section, looks over nested seeds, stopping,
repeated intervals in the version, and a killed run resumed at the right look."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats
from study_doubles import fake_study

from robuststats.cli import main
from robuststats.errors import InputError
from robuststats.runs.spec import StudySpec

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _study(*, seeds: int = 5, looks=(3, 4, 5), margin: float = 0.0, delay: float = 0.0,
           **section) -> dict:
    d = fake_study(seeds=seeds, delay=delay, n=400, noise_seeds=1)
    d["evaluation"]["noise_levels"] = [0, 0.1]
    d["hypotheses"][0]["margin"] = margin
    d["sequential"] = {"looks": looks if isinstance(looks, str) else list(looks),
                       "spending": "obf", "drive": ["H1"], **section}
    return d


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "seq.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize(("change", "match"), [
    ({"looks": [3, 4]}, r"sequential\.looks \(line \d+\): the last look must be every seed"),
    ({"looks": [1, 5]}, r"sequential\.looks.*at least 2 seeds"),
    ({"looks": [4, 3, 5]}, r"sequential\.looks.*increase strictly"),
    ({"drive": ["H9"]}, r"sequential\.drive\.0 \(line \d+\): unknown hypothesis 'H9'"),
    ({"futility": "binding"}, r"sequential\.drift.*needs the planned drift"),
    ({"futility": "binding", "drift": 0}, r"sequential\.drift"),
    ({"futility": "binding", "drift": ".inf"}, r"sequential\.drift"),
    ({"futility": "binding", "drift": "x"}, r"sequential\.drift"),
    ({"futility": "non_binding", "effect": -0.1}, r"sequential\.effect.*verified side"),
    ({"spending": "haybittle"}, r"sequential\.spending"),
    ({"stop_early": True}, r"sequential\.stop_early"),
])
def test_bad_sequential_sections_are_one_line_errors(tmp_path: Path, change, match) -> None:
    data = _study()
    data["sequential"].update(change)
    with pytest.raises(InputError, match=match) as err:
        StudySpec.from_file(_write(tmp_path, data))
    assert "\n" not in str(err.value)


def test_looks_every_seed(tmp_path: Path) -> None:
    # `every` writes out a look after every seed (from 2, or from K), up to `seeds`
    for looks, want in (("every", [2, 3, 4, 5, 6, 7]), ("every from 3", [3, 4, 5, 6, 7])):
        data = _study(seeds=7, looks=looks)
        spec = StudySpec.from_file(_write(tmp_path, data))
        assert spec.sequential.looks == want
    with pytest.raises(InputError, match=r"sequential\.looks"):
        StudySpec.from_file(_write(tmp_path, _study(seeds=7, looks="every from 7")))
    with pytest.raises(InputError, match=r"sequential\.looks"):
        StudySpec.from_file(_write(tmp_path, _study(seeds=7, looks="sometimes")))


def test_futility_needs_directional_hypotheses(tmp_path: Path) -> None:
    data = _study(futility="non_binding", effect=0.1)
    data["hypotheses"][0].update(relation="equivalent", margin=0.05)
    with pytest.raises(InputError, match=r"sequential\.futility.*equivalent"):
        StudySpec.from_file(_write(tmp_path, data))


def test_a_planned_drift_fixes_the_futility_bounds_before_the_data(tmp_path: Path) -> None:
    from robuststats.stats.sequential import power_sequential
    from robuststats.study.sequential_run import options_of

    plan = power_sequential(0.05, (3, 4, 5), 400, discordance=0.3, seed_sd=0.02,
                            futility="non_binding")
    data = _study(futility="non_binding", drift=float(plan.drift))
    spec = StudySpec.from_file(_write(tmp_path, data))  # no `effect` needed with `drift`
    assert spec.resolved()["sequential"]["drift"] == pytest.approx(plan.drift)
    assert "drift" not in StudySpec.from_dict(_study()).resolved()["sequential"]
    options = options_of(spec)
    from robuststats.stats import Hypothesis
    from robuststats.stats._evidence import normal_evidence
    from robuststats.stats.sequential import decide_look

    h = Hypothesis("H1", "accuracy", "A", "B", 0.1, "greater", 0.0)
    for se in (0.01, 0.05, 0.2):  # whatever the look's standard error
        ev = normal_evidence(0.01, 1.96 * se, 0.95, "normal", "")
        for look in (1, 2):
            d = decide_look(h, ev, look, options)
            assert d.futility_bound == pytest.approx(plan.futility_bound[look - 1], abs=1e-6)


def test_the_section_leaves_older_studies_hashes_alone() -> None:
    plain = StudySpec.from_dict(fake_study(seeds=5))
    assert "sequential" not in plain.resolved()
    seq = StudySpec.from_dict(_study())
    assert seq.resolved()["sequential"]["looks"] == [3, 4, 5]


def _cli(study: Path, tmp_path: Path, runs: str = "runs") -> list[str]:
    return ["study", str(study), "--out", str(tmp_path / "results"), "--runs",
            str(tmp_path / runs), "--workers", "1", "--no-progress"]


@pytest.mark.slow
def test_a_clear_effect_stops_early(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    assert main(_cli(_write(tmp_path, _study()), tmp_path)) == 0
    v = tmp_path / "results" / "fake" / "v1"
    manifest = json.loads((v / "manifest.json").read_text())
    assert manifest["sequential"] == {"stopped_at_look": 2, "looks": 3, "seeds_used": 4,
                                      "seeds_planned": 5}
    assert manifest["seeds"] == [0, 1, 2, 3]
    outcomes = pd.read_parquet(v / "outcomes.parquet")
    assert sorted(outcomes["seed"].unique()) == [0, 1, 2, 3]  # seed 4 never trained
    looks = pd.read_csv(v / "sequential_looks.csv")
    assert looks[["id", "look", "decision"]].values.tolist() == [
        ["H1", 1, "CONTINUE"], ["H1", 2, "VERIFIED"]]
    row = looks.iloc[1]
    assert row["statistic_z"] >= row["efficacy_bound"]
    hyp = pd.read_csv(v / "hypotheses.csv").set_index("id")
    assert hyp.loc["H1", "ci_method"].startswith("repeated CI")
    assert (hyp.loc["H1", "ci_low"], hyp.loc["H1", "ci_high"]) == pytest.approx(
        (row["ci_low"], row["ci_high"]))
    assert not hyp.loc["H2", "ci_method"].startswith("repeated CI")  # not driving
    # the p-value of the look it stopped at, under the stage-wise ordering: at most the α
    # spent by look 2, at least the one-look p-value; none at a look it went on from
    assert np.isnan(looks.loc[0, "pvalue"]) and row["pvalue"] <= 0.05
    assert hyp.loc["H1", "pvalue"] == pytest.approx(row["pvalue"])
    assert hyp.loc["H1", "pvalue"] >= 2 * (1 - stats.norm.cdf(row["statistic_z"])) - 1e-9
    assert hyp.loc["H1", "multiplicity"].endswith("stage-wise p")
    assert (v / "figures" / "sequential_looks.png").stat().st_size > 0
    assert "## Sequential looks" in (v / "report.md").read_text()


@pytest.mark.slow
def test_an_undecided_hypothesis_runs_every_look(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    # the fake A − B clean difference is about 0.10: a margin there stays undecided
    assert main(_cli(_write(tmp_path, _study(margin=0.10)), tmp_path)) == 0
    v = tmp_path / "results" / "fake" / "v1"
    looks = pd.read_csv(v / "sequential_looks.csv")
    assert looks["look"].tolist() == [1, 2, 3]
    assert looks["decision"].tolist()[:2] == ["CONTINUE", "CONTINUE"]
    assert looks["n_seeds"].tolist() == [3, 4, 5]
    # the efficacy bound of obf spending falls look by look and ends near 1.99
    assert looks["efficacy_bound"].is_monotonic_decreasing
    assert sorted(pd.read_parquet(v / "outcomes.parquet")["seed"].unique()) == [0, 1, 2, 3, 4]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    return env


@pytest.mark.slow
def test_killed_sequential_study_resumes_at_its_look(tmp_path: Path, monkeypatch) -> None:
    study = _write(tmp_path, _study(margin=0.10, delay=0.1))
    root = tmp_path / "killed" / "fake"
    cmd = [sys.executable, "-m", "robuststats", *_cli(study, tmp_path, "killed")]
    proc = subprocess.Popen(cmd, env=_env(), cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    first_look = 2 * 3 * 2  # conditions × seeds × levels (one noise seed)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # kill inside the second look
        cells = root / "cells"
        if cells.is_dir() and len(list(cells.glob("*.parquet"))) >= first_look + 2:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    before = {p.stem for p in (root / "cells").glob("*.parquet")}
    assert first_look + 2 <= len(before) < 2 * 4 * 2, "the kill missed the second look"

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))
    pid = os.getpid()
    assert main(_cli(study, tmp_path, "killed")) == 0
    events = [json.loads(line) for line in (root / "events.jsonl").read_text().splitlines()]
    done_now = [e["cell"] for e in events if e["event"] == "cell_done" and e["pid"] == pid]
    assert not set(done_now) & before  # nothing evaluated twice
    assert len(done_now) == len(set(done_now)) == 2 * 5 * 2 - len(before)
    trained = [e for e in events if e.get("event") == "model_trained" and e["pid"] == pid]
    assert all(e["job"].split("__s")[1] not in ("0", "1", "2") for e in trained)
    every = [e["job"] for e in events if e.get("event") == "model_trained"]
    assert len(every) == len(set(every)) == 2 * 5  # each model trained once in all

    # an uninterrupted run makes the same looks
    assert main(_cli(study, tmp_path, "clean")) == 0
    a = pd.read_csv(tmp_path / "results" / "fake" / "v1" / "sequential_looks.csv")
    b = pd.read_csv(tmp_path / "results" / "fake" / "v2" / "sequential_looks.csv")
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.slow
def test_a_failed_cell_stops_the_study_at_its_look(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    data = _study(margin=0.10)
    data["trainer"]["params"]["fail"] = ["A__s3__n0__ns0"]  # a cell of look 2
    assert main(_cli(_write(tmp_path, data), tmp_path)) == 1  # a failed cell: exit 1
    v = tmp_path / "results" / "fake" / "v1"
    looks = pd.read_csv(v / "sequential_looks.csv")
    assert looks["decision"].tolist() == ["CONTINUE", "STOPPED"]
    assert "failed" in looks["reason"].iloc[-1]
    hyp = pd.read_csv(v / "hypotheses.csv").set_index("id")
    assert hyp.loc["H1", "verdict"] == "INCONCLUSIVE"
    assert "STOPPED" in hyp.loc["H1", "reason"]  # the plan's, not a fixed-design reason
    assert hyp.loc["H1", "ci_low"] == pytest.approx(looks["ci_low"].iloc[0])  # look 1's RCI
    manifest = json.loads((v / "manifest.json").read_text())
    assert manifest["sequential"]["stopped_at_look"] == 2
    assert sorted(pd.read_parquet(v / "outcomes.parquet")["seed"].unique()) == [0, 1, 2, 3]


def _cut(stored: pd.DataFrame) -> pd.DataFrame:
    """The committed looks with look 1's repeated interval cut to [-1, 1]: the version was
    sealed before an accuracy difference's repeated interval was cut to what it can take
    ([-126, 142] pp is now [-100, 100] and says so); all else is as stored."""
    wide = (stored["ci_low"] < -1) | (stored["ci_high"] > 1)
    assert wide.tolist() == [True, False, False]
    return stored.assign(ci_low=stored["ci_low"].clip(-1, 1),
                         ci_high=stored["ci_high"].clip(-1, 1),
                         ci_method=stored["ci_method"].where(
                             ~wide, stored["ci_method"] + ", cut to [-1, 1]"))


def _as_stored(stored: pd.DataFrame, looks: pd.DataFrame) -> None:
    """The committed v1 looks against a replay. The version was sealed before the seed mean
    square was floored at the residual's (docs/statistics.md §9, "Tied seed sums"): the
    looks, estimates, efficacy bounds and decisions are as stored; z, the repeated intervals
    and the futility bounds projected from each look's standard error move by under 5 %."""
    stored = _cut(stored)
    same = ["id", "look", "n_seeds", "fraction", "estimate", "efficacy_bound",
            "nominal_level", "ci_level", "ci_method", "decision"]
    pd.testing.assert_frame_equal(stored[same], looks[same], check_exact=True)
    moved = ["statistic_z", "futility_bound", "ci_low", "ci_high"]
    pd.testing.assert_frame_equal(stored[moved], looks[moved], check_exact=False, rtol=0.05)


def test_the_looks_replay_from_stored_outcomes() -> None:
    from robuststats.study.reanalysis import stored_study
    from robuststats.study.sequential_run import replay_looks

    v = ROOT / "results" / "e8_sequential" / "v1"
    spec = stored_study(v)
    looks = replay_looks(spec, pd.read_parquet(v / "outcomes.parquet"))
    _as_stored(pd.read_csv(v / "sequential_looks.csv"), looks)
    # with the last look's seeds gone, the replay stops there and says why; the driving
    # hypothesis stays INCONCLUSIVE with look 2's repeated interval, not a fixed-design verdict
    from robuststats.study.reanalysis import reanalyze

    outcomes = pd.read_parquet(v / "outcomes.parquet")
    short = replay_looks(spec, outcomes[outcomes["seed"] < 5])
    assert short["decision"].tolist() == ["CONTINUE", "CONTINUE", "STOPPED"]
    assert "no rows of seed(s) [5]" in short["reason"].iloc[-1]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analysis = reanalyze(outcomes[outcomes["seed"] < 5], spec, options=spec.analysis)
    h1 = analysis.hypotheses.set_index("id").loc["H1"]
    assert h1["verdict"] == "INCONCLUSIVE" and "STOPPED" in h1["reason"]
    assert (h1["ci_low"], h1["ci_high"]) == pytest.approx(
        (short["ci_low"].iloc[1], short["ci_high"].iloc[1]))
    assert np.isnan(h1["pvalue"])


def test_replay_stops_on_a_seed_that_one_condition_lacks() -> None:
    # seed 3 (the 4th, in look 2) exists for one condition only: the run would have stopped
    # on its failed cells, so the replay stops there too instead of pairing the 3 shared
    # seeds under the label "4 seeds"
    from robuststats.study.reanalysis import stored_study
    from robuststats.study.sequential_run import replay_looks

    v = ROOT / "results" / "e8_sequential" / "v1"
    spec = stored_study(v)
    outcomes = pd.read_parquet(v / "outcomes.parquet")
    other = sorted(outcomes["condition"].unique())[0]
    lopsided = outcomes[~((outcomes["seed"] == 3) & (outcomes["condition"] == other))]
    looks = replay_looks(spec, lopsided)
    assert looks["decision"].tolist() == ["CONTINUE", "STOPPED"]
    assert looks["n_seeds"].tolist() == [3, 4]
    reason = looks["reason"].iloc[-1]
    assert "unequal seeds per condition" in reason and "seed 3" in reason
    assert f"condition {other}" in reason


def test_a_hypothesis_decided_at_a_look_stays_decided(monkeypatch) -> None:
    # two driving hypotheses: H1 crosses at look 1, H2 only at look 3. Analysed again at
    # look 2 on more seeds, H1's statistic could fall back inside the bounds; the crossing
    # at look 1 is the design's decision, and its stage-wise p-value that look's

    import robuststats.stats.sequential as seq
    from robuststats.stats.sequential import LookDecision
    from robuststats.study.reanalysis import stored_study
    from robuststats.study.sequential_run import replay_looks, with_repeated_intervals

    v = ROOT / "results" / "e8_sequential" / "v1"
    spec = stored_study(v)
    spec = spec.model_copy(update={"sequential": spec.sequential.model_copy(
        update={"drive": ["H1", "H2"]})})
    script = {("H1", 1): "VERIFIED", ("H1", 2): "CONTINUE", ("H1", 3): "INCONCLUSIVE",
              ("H2", 1): "CONTINUE", ("H2", 2): "CONTINUE", ("H2", 3): "VERIFIED"}
    analysed = []

    def scripted(hypotheses, outcomes, look, options, **_):
        out = []
        for h in hypotheses:
            analysed.append((h.id, look))
            d = script[(h.id, look)]
            out.append(LookDecision(h.id, look, options.looks[look - 1], 0.5, 0.1, 3.0, 2.9,
                                    math.nan, 0.002, 0.01, 0.2, 0.997, "repeated CI", d,
                                    f"scripted {d}", pvalue=0.001 * look if d != "CONTINUE"
                                    else math.nan))
        return out

    monkeypatch.setattr(seq, "analyse_look", scripted)
    looks = replay_looks(spec, pd.read_parquet(v / "outcomes.parquet"))
    assert ("H1", 2) not in analysed and ("H1", 3) not in analysed
    assert looks[["id", "look", "decision"]].values.tolist() == [
        ["H1", 1, "VERIFIED"], ["H2", 1, "CONTINUE"], ["H2", 2, "CONTINUE"],
        ["H2", 3, "VERIFIED"]]
    hyps = pd.DataFrame({"id": ["H1", "H2"], "ci_low": 0.0, "ci_high": 0.0, "ci_level": 0.95,
                         "ci_method": "", "verdict": "", "reason": "", "pvalue": 1.0,
                         "pvalue_adjusted": 1.0, "multiplicity": ""})
    out = with_repeated_intervals(hyps, looks, spec).set_index("id")
    assert out.loc["H1", "verdict"] == "VERIFIED" and out.loc["H1", "pvalue"] == 0.001
    assert out.loc["H1", "reason"].startswith("look 1 of 3")
    assert out.loc["H2", "verdict"] == "VERIFIED" and out.loc["H2", "pvalue"] == 0.003


@pytest.mark.slow
def test_analyze_of_a_sequential_version_replays_its_looks(tmp_path: Path) -> None:
    # the committed worked example: re-analysed from its outcomes alone, the looks come out
    # as the run decided them, and the driving hypothesis keeps its repeated interval
    v = ROOT / "results" / "e8_sequential" / "v1"
    assert main(["analyze", str(v), "--out", str(tmp_path), "--format", "json"]) == 0
    new = tmp_path / "e8_sequential" / "v1"
    looks = pd.read_csv(new / "sequential_looks.csv")
    _as_stored(pd.read_csv(v / "sequential_looks.csv"), looks)
    hyp = pd.read_csv(new / "hypotheses.csv").set_index("id")
    assert hyp.loc["H1", "ci_method"].startswith("repeated CI")
    assert hyp.loc["H1", "verdict"] == "VERIFIED"
    assert hyp.loc["H1", "pvalue"] == pytest.approx(looks["pvalue"].iloc[-1])
    assert (new / "figures" / "sequential_looks.png").stat().st_size > 0


def test_analyze_refuses_another_sequential_plan_for_a_sequential_version(tmp_path: Path,
                                                                         capsys) -> None:
    v = ROOT / "results" / "e8_sequential" / "v3"
    data = yaml.safe_load((ROOT / "studies" / "e8_sequential.yaml").read_text())
    data["sequential"]["spending"] = "pocock"  # a plan swapped after the data
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["analyze", str(v), "--study", str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--study" in err and "sequential" in err and "\n" not in err
