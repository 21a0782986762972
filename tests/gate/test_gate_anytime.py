"""``robuststats gate --anytime``: one candidate model against one baseline model, decided on
the candidate's stream of items by a confidence sequence; exit 0 pass, 1 fail, 3 undecided."""

from __future__ import annotations

import json
import re
import threading
import time

import numpy as np
import pytest

from robuststats.cli import main
from robuststats.gate import anytime_verdicts
from robuststats.stats.sequential import (
    betting_confidence_sequence,
    retention_confidence_sequence,
)


@pytest.fixture
def store(tmp_path, sim_outcomes, make_version):
    root = tmp_path / "results"
    make_version(root, sim_outcomes)
    return root


def _gate(capsys, store, candidate, *argv):
    code = main(["gate", str(candidate), "--baseline", str(store / "sim" / "v1"),
                 "--baseline-condition", "B", "--metric", "accuracy", "--anytime",
                 *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _candidate(sim_outcomes, tmp_path, name="cand.csv", flip=None, rng=1):
    """Baseline B's seed 0 as the candidate (or with the noisy outcomes set to ``flip``),
    its rows shuffled: the order in which it was evaluated."""
    rows = sim_outcomes[(sim_outcomes.condition == "B") & (sim_outcomes.seed == 0)].copy()
    if flip is not None:
        rows.loc[rows.eval_noise > 0, "correct"] = flip
    rows = rows.sample(frac=1, random_state=rng).reset_index(drop=True)
    path = tmp_path / name
    rows.to_csv(path, index=False)
    return path, rows


def test_pass_fail_and_undecided_exit_codes(store, sim_outcomes, tmp_path, capsys) -> None:
    same, _ = _candidate(sim_outcomes, tmp_path)
    code, out, _ = _gate(capsys, store, same, "--max-degradation", "0.1",
                         "--margin-type", "absolute")
    assert code == 0 and "PASS" in out.splitlines()[0]
    assert "not about their training recipes" in out
    bad, _ = _candidate(sim_outcomes, tmp_path, "bad.csv", flip=0)
    code, out, err = _gate(capsys, store, bad, "--max-degradation", "0.1",
                           "--margin-type", "absolute")
    assert code == 1 and "FAIL" in out.splitlines()[0] and "failing side" in err
    # superiority of a model over itself: never shown, never refuted by these items
    code, out, err = _gate(capsys, store, same, "--min-improvement", "0")
    assert code == 3 and "UNDECIDED: keep evaluating" in out and "UNDECIDED (exit 3)" in err


def test_the_decision_is_the_library_sequence_in_row_order(store, sim_outcomes, tmp_path,
                                                           capsys) -> None:
    path, rows = _candidate(sim_outcomes, tmp_path, rng=4)
    base = sim_outcomes[(sim_outcomes.condition == "B") & (sim_outcomes.seed == 0)
                        & (sim_outcomes.eval_noise > 0)].set_index("item_id")["correct"]
    noisy = rows[rows.eval_noise > 0]
    x = noisy["correct"].to_numpy(float)
    y = base.loc[noisy["item_id"]].to_numpy(float)
    for extra, cs, null in (
            (["--margin-type", "absolute", "--equivalence", "0.08"],
             betting_confidence_sequence(x, y), (-0.08, 0.08)),
            (["--max-degradation", "0.1"], retention_confidence_sequence(x, y), (0.9, None))):
        code, out, _ = _gate(capsys, store, path, *extra, "--format", "json")
        (level,) = json.loads(out)["levels"]
        verdicts = anytime_verdicts(cs.low, cs.high, *null)
        first = int(np.flatnonzero(verdicts != "UNDECIDED")[0]) + 1
        assert level["decision"] == verdicts[-1] == "PASS" and code == 0
        assert level["decided_at"] == first
        assert (level["cs_low"], level["cs_high"]) == (pytest.approx(cs.low[-1]),
                                                      pytest.approx(cs.high[-1]))


def test_a_growing_candidate_file_is_undecided_then_decided(store, sim_outcomes, tmp_path,
                                                            capsys) -> None:
    full, rows = _candidate(sim_outcomes, tmp_path, "full.csv")
    grow = tmp_path / "grow.csv"
    text = full.read_text().splitlines(keepends=True)
    grow.write_text("".join(text[:41]) + text[41][:5])  # 40 rows and half a row
    code, out, _ = _gate(capsys, store, grow, "--max-degradation", "0.1",
                         "--margin-type", "absolute", "--format", "json")
    first = json.loads(out)
    assert code == 3 and first["decision"] == "UNDECIDED"
    assert first["levels"][0]["items"] == int((rows.head(40).eval_noise > 0).sum())
    grow.write_text("".join(text))
    code, out, _ = _gate(capsys, store, grow, "--max-degradation", "0.1",
                         "--margin-type", "absolute", "--format", "json")
    assert code == 0 and json.loads(out)["levels"][0]["decided_at"] > first["levels"][0]["items"]


def test_a_decided_gate_stays_decided_when_its_sequence_empties(store, sim_outcomes,
                                                                tmp_path, capsys) -> None:
    # the candidate matches the baseline on its first items, then misses every item the
    # baseline got right: a stream in no random order. The sequence passes, then empties
    # (no contrast fits both halves); the PASS stands, the empty set is reported as a broken
    # assumption, and the exit is the PASS's, not UNDECIDED's
    rows = sim_outcomes[(sim_outcomes.condition == "B") & (sim_outcomes.seed == 0)].copy()
    noisy = rows[rows.eval_noise > 0]
    right = noisy.loc[noisy["correct"] == 1, "item_id"].tolist()
    bad = right[-40:]
    order = [i for i in noisy["item_id"] if i not in bad] + bad
    rows.loc[(rows.eval_noise > 0) & rows.item_id.isin(bad), "correct"] = 0
    rows = rows.set_index("item_id").loc[order].reset_index()
    path = tmp_path / "ordered.csv"
    rows.to_csv(path, index=False)
    code, out, err = _gate(capsys, store, path, "--max-degradation", "0.1",
                           "--margin-type", "absolute", "--format", "json")
    (level,) = json.loads(out)["levels"]
    assert level["empty_at"] is not None and level["decided_at"] < level["empty_at"]
    assert level["decision"] == "PASS" and code == 0
    assert np.isfinite(level["cs_low"]) and np.isfinite(level["cs_high"])
    assert any("became empty" in n and "PASS reached" in n for n in json.loads(out)["notes"])
    assert "became empty" in err and "stands" in err


def test_the_standing_decision_of_an_emptied_sequence() -> None:
    from robuststats.gate import standing_decision

    # 150 items of no difference, then 60 where the candidate loses every one
    cs = betting_confidence_sequence(np.r_[np.zeros(150), -np.ones(60)])
    empty = int(np.flatnonzero(np.isnan(cs.low))[0])
    assert anytime_verdicts(cs.low, cs.high, -0.1, None)[-1] == "UNDECIDED"  # NaN bounds
    decision, decided_at, empty_at, last = standing_decision(cs, -0.1, None)
    assert decision == "PASS" and decided_at < 150 and empty_at == empty + 1
    assert last == empty - 1 and np.isfinite(cs.low[last])
    # a null inside the last non-empty set: neither side was reached before it emptied,
    # so the level is BROKEN and the gate exits 4, not 3 (UNDECIDED: keep evaluating)
    inside = float(cs.low[last] + cs.high[last]) / 2.0
    decision, decided_at, empty_at, _ = standing_decision(cs, inside, None)
    assert (decision, decided_at, empty_at) == ("BROKEN", None, empty + 1)
    from robuststats.gate import AnytimeGate, AnytimeLevel

    level = AnytimeLevel(0.05, (0,), 210, 0.5, 0.6, -0.1, cs.low[last], cs.high[last], inside,
                         np.nan, decision, decided_at, empty_at)
    gate = AnytimeGate((level,), "non-inferiority", "absolute", 0.1, 0.05, "c", "b", 0, 0, ())
    assert gate.decision == "BROKEN" and gate.exit_code == 4


@pytest.mark.parametrize(("argv", "match"), [
    (["--max-degradation", "0.1", "--metric", "retention"], "`--metric`: --anytime decides"),
    (["--max-degradation", "0.1", "--seeds", "1"], "--seeds: not used by --anytime"),
    (["--max-degradation", "0.1", "--out", "x"], "--out: not used by --anytime"),
    (["--max-degradation", "0.1", "--metric", "accuracy", "--baseline-seed", "7"],
     r"`--baseline-seed` 7 is not among the baseline's seeds \[0, 1, 2\]"),
])
def test_bad_input_is_one_line_exit_2(store, sim_outcomes, tmp_path, capsys, argv,
                                      match) -> None:
    path, _ = _candidate(sim_outcomes, tmp_path)
    code = main(["gate", str(path), "--baseline", str(store / "sim" / "v1"),
                 "--baseline-condition", "B", "--anytime", *argv])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and re.search(match, err), err


def test_several_candidate_seeds_need_one_named(store, sim_outcomes, tmp_path, capsys) -> None:
    rows = sim_outcomes[sim_outcomes.condition == "B"]
    path = tmp_path / "three.csv"
    rows.to_csv(path, index=False)
    code, _, err = _gate(capsys, store, path, "--max-degradation", "0.1")
    assert code == 2 and "`--candidate-seed`" in err and "[0, 1, 2]" in err
    code, out, _ = _gate(capsys, store, path, "--max-degradation", "0.1",
                         "--candidate-seed", "2", "--format", "json")
    data = json.loads(out)
    assert (data["seed_candidate"], data["seed_baseline"]) == (2, 2)
    code = main(["gate", str(path), "--baseline", str(store / "sim" / "v1"),
                 "--max-degradation", "0.1", "--candidate-seed", "2"])
    assert code == 2 and "--candidate-seed: only with --anytime" in capsys.readouterr().err


def _append(path, text_lines, chunk, pause):
    for start in range(0, len(text_lines), chunk):
        part = "".join(text_lines[start:start + chunk])
        with open(path, "a") as fh:
            fh.write(part[:-4])
            fh.flush()
            time.sleep(pause / 2)
            fh.write(part[-4:])
        time.sleep(pause / 2)


@pytest.mark.parametrize(("flip", "code", "decision"), [(None, 0, "PASS"), (0, 1, "FAIL")])
def test_watch_a_candidate_file_another_thread_appends_to(store, sim_outcomes, tmp_path,
                                                          capsys, flip, code,
                                                          decision) -> None:
    full, _ = _candidate(sim_outcomes, tmp_path, "full.csv", flip=flip)
    header, *rows = full.read_text().splitlines(keepends=True)
    grow = tmp_path / "grow.csv"
    grow.write_text(header)
    writer = threading.Thread(target=_append, args=(grow, rows, 20, 0.03))
    writer.start()
    try:
        got, out, err = _gate(capsys, store, grow, "--max-degradation", "0.1",
                              "--margin-type", "absolute", "--watch", "0.02", "--timeout",
                              "20", "--format", "json")
    finally:
        writer.join()
    updates = [json.loads(line) for line in out.splitlines()]
    assert got == code and updates[-1]["decision"] == decision
    assert updates[0]["decision"] == "UNDECIDED" and len(updates) >= 2
    assert updates[-1]["levels"][0]["decided_at"] <= updates[-1]["levels"][0]["items"]
    assert "no line break" not in err  # the watch reads complete lines quietly


def test_watch_times_out_undecided(store, sim_outcomes, tmp_path, capsys) -> None:
    same, _ = _candidate(sim_outcomes, tmp_path)
    code, _, err = _gate(capsys, store, same, "--min-improvement", "0", "--watch", "0.02",
                         "--timeout", "0.1")
    assert code == 3 and "--timeout 0.1 s passed: UNDECIDED after 200 items" in err
    code = main(["gate", str(same), "--baseline", str(store / "sim" / "v1"),
                 "--baseline-condition", "B", "--metric", "accuracy", "--max-degradation",
                 "0.1", "--anytime", "--timeout", "3"])
    assert code == 2 and "--timeout: only with --watch" in capsys.readouterr().err


def test_markdown_names_both_sides(store, sim_outcomes, tmp_path, capsys) -> None:
    same, _ = _candidate(sim_outcomes, tmp_path)
    code, out, _ = _gate(capsys, store, same, "--equivalence", "0.2", "--format", "markdown")
    assert code == 0 and out.startswith("**gate (anytime, equivalence")
    assert "candidate: outcomes" in out and "(seed 0)" in out
    assert "| eval_noise | items |" in out and "| PASS |" in out


def test_a_candidate_in_order_of_difficulty_gets_a_note(store, sim_outcomes, tmp_path,
                                                        capsys) -> None:
    _, rows = _candidate(sim_outcomes, tmp_path)
    ease = sim_outcomes.groupby("item_id")["correct"].mean()
    rows = rows.assign(ease=rows["item_id"].map(ease)).sort_values(
        ["ease", "item_id"], ascending=[False, True], kind="stable").drop(columns="ease")
    path = tmp_path / "sorted.csv"
    rows.to_csv(path, index=False)
    _, out, _ = _gate(capsys, store, path, "--max-degradation", "0.1", "--margin-type",
                      "absolute")
    assert "trend with the items' position (Spearman ρ = -" in out
    shuffled, _ = _candidate(sim_outcomes, tmp_path, "shuffled.csv")
    _, out, _ = _gate(capsys, store, shuffled, "--max-degradation", "0.1", "--margin-type",
                      "absolute")
    assert "trend with" not in out
