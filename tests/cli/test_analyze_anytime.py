"""``robuststats analyze --anytime``: confidence sequences over the stream of items of an
outcomes file, once and watching it grow."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from robuststats.analysis import anytime_table
from robuststats.cli import main
from robuststats.stats.sequential import (
    betting_confidence_sequence,
    retention_confidence_sequence,
)

HEADER = "condition,seed,eval_noise,noise_seed,item_id,correct\n"


def _lines(rows) -> str:
    return "".join(f"{c},{s},{e},{k},{i},{v}\n" for c, s, e, k, i, v in rows)


def _two_models(n=300, seed=0, p_a=0.8, p_b=0.6, keep=0.85):
    """Rows of A:0 and B:0, clean and at eval_noise 0.1, item by item."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        for cond, p in (("A", p_a), ("B", p_b)):
            clean = int(rng.random() < p)
            rows.append((cond, 0, 0.0, 0, f"q{i}", clean))
            rows.append((cond, 0, 0.1, 0, f"q{i}", int(clean and rng.random() < keep)))
    return rows


def test_the_table_is_the_library_sequence_in_file_order(tmp_path: Path, capsys) -> None:
    rows = _two_models()
    # the file lists the items in a shuffled order: the stream is that order
    order = np.random.default_rng(1).permutation(len(rows) // 4)
    rows = [r for j in order for r in rows[4 * j:4 * j + 4]]
    src = tmp_path / "o.csv"
    src.write_text(HEADER + _lines(rows))
    assert main(["analyze", str(src), "--anytime", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "not about their training procedures" in out["statement"]
    got = {(r["comparison"], r["model_a"], r["eval_noise"]): r for r in out["anytime"]}
    assert len(got) == 4  # two differences (clean, noisy), two retentions
    frame = pd.DataFrame(rows, columns=HEADER.strip().split(","))
    a = frame[(frame.condition == "A") & (frame.eval_noise == 0.1)].correct.to_numpy(float)
    b = frame[(frame.condition == "B") & (frame.eval_noise == 0.1)].correct.to_numpy(float)
    cs = betting_confidence_sequence(a, b)
    r = got[("difference", "A:0", 0.1)]
    assert r["items"] == 300 and r["estimate"] == pytest.approx(cs.estimate[-1])
    assert (r["cs_low"], r["cs_high"]) == (pytest.approx(cs.low[-1]), pytest.approx(cs.high[-1]))
    assert r["decided_at"] == cs.first_excluding(0.0) and r["decided"] == (r["direction"] != "")
    clean = frame[(frame.condition == "A") & (frame.eval_noise == 0.0)].correct.to_numpy(float)
    rs = retention_confidence_sequence(a, clean)
    r = got[("retention", "A:0", 0.1)]
    assert r["model_b"] == "A:0 clean" and r["null"] == 1.0
    assert r["cs_high"] == pytest.approx(rs.high[-1]) and r["decided_at"] == rs.first_excluding(1)
    # the text table says what it is about
    assert main(["analyze", str(src), "--anytime"]) == 0
    text = capsys.readouterr().out
    assert "== anytime (95%) ==" in text and "these trained models" in text


def test_an_item_counts_once_both_cells_hold_it() -> None:
    # A evaluated items 0..99, B only 0..39 so far, B's rows first: 40 paired items, in
    # the order of B's rows (the later of the two positions)
    a = [("A", 0, 0.0, 0, f"q{i}", 1) for i in range(100)]
    b = [("B", 0, 0.0, 0, f"q{i}", 0) for i in reversed(range(40))]
    frame = pd.DataFrame(b + a, columns=HEADER.strip().split(","))
    frame["order"] = range(len(frame))
    table = anytime_table(frame, margin=0.5)
    (row,) = table.to_dict(orient="records")
    assert row["items"] == 40 and row["estimate"] == 1.0
    assert row["direction"] == "above" and row["decided_at"] < 40 and row["null"] == 0.5


def _append_slowly(path: Path, rows, chunk: int, pause: float) -> None:
    """Append ``rows`` to ``path`` a chunk at a time, each chunk's last line in two writes
    (a reader sees half a row now and then)."""
    for start in range(0, len(rows), chunk):
        text = _lines(rows[start:start + chunk])
        with open(path, "a") as fh:
            fh.write(text[:-7])
            fh.flush()
            time.sleep(pause / 2)
            fh.write(text[-7:])
        time.sleep(pause / 2)


def test_watch_a_file_another_thread_appends_to(tmp_path: Path, capsys) -> None:
    # A right on 90 % of items, B on 40 %: decided long before the 300 items are written
    rng = np.random.default_rng(3)
    rows = [(c, 0, 0.0, 0, f"q{i}", int(rng.random() < p))
            for i in range(300) for c, p in (("A", 0.9), ("B", 0.4))]
    src = tmp_path / "grow.csv"
    src.write_text(HEADER)
    writer = threading.Thread(target=_append_slowly, args=(src, rows, 20, 0.03))
    writer.start()
    try:
        code = main(["analyze", str(src), "--anytime", "--watch", "0.02", "--timeout", "20",
                     "--format", "json"])
    finally:
        writer.join()
    captured = capsys.readouterr()
    updates = [json.loads(line) for line in captured.out.splitlines()]
    assert code == 0 and "decided after" in captured.err
    assert len(updates) >= 2 and updates[-1]["decided"] and not updates[0]["decided"]
    last = updates[-1]["anytime"][0]
    assert last["direction"] == "above" and last["items"] < 300
    # the decision is the library's on the same first items, in file order
    a = np.array([v for c, *_, v in rows if c == "A"][:last["items"]], float)
    b = np.array([v for c, *_, v in rows if c == "B"][:last["items"]], float)
    assert last["decided_at"] == betting_confidence_sequence(a, b).first_excluding(0.0)


def test_watch_times_out_undecided_and_stops_on_interrupt(tmp_path: Path, capsys,
                                                          monkeypatch) -> None:
    src = tmp_path / "same.csv"  # two identical models: never decided
    src.write_text(HEADER + _lines((c, 0, 0.0, 0, f"q{i}", i % 2)
                                   for i in range(50) for c in "AB"))
    assert main(["analyze", str(src), "--anytime", "--watch", "0.05", "--timeout",
                 "0.2"]) == 3
    assert "--timeout 0.2 s passed: 1 of 1 comparison(s) undecided" in capsys.readouterr().err

    def interrupt(_seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", interrupt)
    assert main(["analyze", str(src), "--anytime", "--watch", "1"]) == 130
    assert "interrupted while watching" in capsys.readouterr().err


def test_watch_waits_for_a_file_not_yet_written(tmp_path: Path, capsys) -> None:
    src = tmp_path / "later.jsonl"
    rows = [{"condition": c, "item_id": f"q{i}", "correct": int(c == "A")}
            for i in range(60) for c in "AB"]

    def write() -> None:
        time.sleep(0.1)
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))

    writer = threading.Thread(target=write)
    writer.start()
    try:
        code = main(["analyze", str(src), "--anytime", "--watch", "0.02", "--timeout", "10"])
    finally:
        writer.join()
    assert code == 0 and "above" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "match"), [
    (["--anytime"], "--pair: the outcomes hold 4 models"),
    (["--anytime", "--pair", "A", "Z"], "--pair: no model 'Z'"),
    (["--anytime", "--pair", "C", "A"], "--pair: condition 'C' has seeds 0, 1: name one as C:0"),
    (["--watch", "1"], "--watch: only with --anytime"),
    (["--anytime", "--pair", "A", "B", "--timeout", "3"], "--timeout: only with --watch"),
    (["--anytime", "--pair", "A", "B", "--out", "x"], "--out: not used by --anytime"),
    (["--anytime", "--pair", "A", "B", "--margin", "2"], r"--margin: must lie in \[-1, 1\]"),
    (["--anytime", "--pair", "A", "B", "--alpha", "1.5"], r"--alpha: must lie in \(0, 1\)"),
    (["--anytime", "--pair", "A", "B", "--retention-null", "inf"],
     "--retention-null: must be a finite number >= 0"),
])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, capsys, argv, match) -> None:
    src = tmp_path / "three.csv"
    src.write_text(HEADER + _lines([("A", 0, 0, 0, "q1", 1), ("B", 0, 0, 0, "q1", 0),
                                    ("C", 0, 0, 0, "q1", 1), ("C", 1, 0, 0, "q1", 1)]))
    assert main(["analyze", str(src), *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert re.search(match, err), err


def test_read_outcomes_keeps_each_rows_position(tmp_path: Path) -> None:
    from robuststats.outcomes import read_outcomes

    src = tmp_path / "o.jsonl"
    rows = [{"condition": "A", "item_id": f"q{i}", "correct": 1} for i in (3, 1, 2)]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    frame = read_outcomes(src, order_column="order")  # validation sorts by item
    assert list(frame["item_id"]) == ["q1", "q2", "q3"] and list(frame["order"]) == [1, 2, 0]
    assert "order" not in read_outcomes(src).columns


def test_one_model_gets_its_retention_unbounded_while_clean_is_never_right(tmp_path: Path,
                                                                           capsys) -> None:
    src = tmp_path / "one.csv"
    src.write_text(HEADER + _lines([("A", 0, e, 0, f"q{i}", int(e > 0 and i % 3 == 0))
                                    for i in range(90) for e in (0.0, 0.2)]))
    assert main(["analyze", str(src), "--anytime", "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["anytime"]
    assert row["comparison"] == "retention" and row["items"] == 90
    # JSON has no infinity: unbounded is null there, as every non-finite number of the package
    assert row["cs_high"] is None and row["cs_low"] > 1 and row["direction"] == "above"
    assert row["cs_high_unbounded"] is True  # told apart from an empty set
    assert main(["analyze", str(src), "--anytime"]) == 0
    assert "inf]" in capsys.readouterr().out


def test_watch_waits_for_a_named_model_without_rows_yet(tmp_path: Path, capsys) -> None:
    src = tmp_path / "o.csv"
    src.write_text(HEADER + _lines(("A", 0, 0.0, 0, f"q{i}", 1) for i in range(60)))

    def later() -> None:
        time.sleep(0.1)
        with open(src, "a") as fh:
            fh.write(_lines(("B", 1, 0.0, 0, f"q{i}", 0) for i in range(60)))

    writer = threading.Thread(target=later)
    writer.start()
    try:
        code = main(["analyze", str(src), "--anytime", "--pair", "A:0", "B:1", "--watch",
                     "0.02", "--timeout", "10"])
    finally:
        writer.join()
    out = capsys.readouterr().out
    assert code == 0 and "B:1" in out and "above" in out


def test_a_last_line_without_its_line_break_is_left_out_and_said(tmp_path: Path,
                                                                 capsys) -> None:
    src = tmp_path / "o.csv"
    body = _lines((c, 0, 0.0, 0, f"q{i}", int(c == "A")) for i in range(30) for c in "AB")
    src.write_text(HEADER + body[:-1])  # a finished file without the final line break
    assert main(["analyze", str(src), "--anytime", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["anytime"][0]["items"] == 29 and "no line break yet" in err


def test_monitor_picks_the_comparisons_the_watch_waits_for(tmp_path: Path, capsys) -> None:
    # equal clean accuracy (the clean difference never decides), A keeps every right answer
    # under noise and B keeps a third (retention tested against 0.5): --monitor noisy ends
    # the watch, all times out
    rows = [(c, 0, e, 0, f"q{i}", int(i % 4 != 0 and (e == 0 or c == "A" or i % 3 == 0)))
            for i in range(200) for c in "AB" for e in (0.0, 0.1)]
    src = tmp_path / "o.csv"
    src.write_text(HEADER + _lines(rows))
    assert main(["analyze", str(src), "--anytime", "--retention-null", "0.5", "--watch",
                 "0.01", "--timeout", "0.05", "--format", "json"]) == 3
    assert "1 of 4 comparison(s) undecided" in capsys.readouterr().err
    assert main(["analyze", str(src), "--anytime", "--retention-null", "0.5", "--monitor",
                 "noisy", "--watch", "0.01", "--timeout", "5", "--format", "json"]) == 0
    kinds = [(r["comparison"], r["eval_noise"])
             for r in json.loads(capsys.readouterr().out.splitlines()[-1])["anytime"]]
    assert kinds == [("difference", 0.1), ("retention", 0.1), ("retention", 0.1)]
    for monitor, n in (("difference", 2), ("retention", 2)):
        assert main(["analyze", str(src), "--anytime", "--monitor", monitor,
                     "--format", "json"]) == 0
        got = json.loads(capsys.readouterr().out)["anytime"]
        assert len(got) == n and {r["comparison"] for r in got} == {monitor}


def test_watch_refuses_a_file_that_lost_items(tmp_path: Path, capsys, monkeypatch) -> None:
    # a file replaced by a shorter one mid-watch is a new stream, not the watched one
    src = tmp_path / "same.csv"  # two identical models: never decided
    long = HEADER + _lines((c, 0, 0.0, 0, f"q{i}", i % 2) for i in range(80) for c in "AB")
    short = HEADER + _lines((c, 0, 0.0, 0, f"q{i}", i % 2) for i in range(30) for c in "AB")
    src.write_text(long)
    sleeps = []

    def replace_after_first_read(_seconds):
        sleeps.append(_seconds)
        src.write_text(short)

    monkeypatch.setattr(time, "sleep", replace_after_first_read)
    assert main(["analyze", str(src), "--anytime", "--watch", "1", "--timeout", "30"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "lost items while watched (30 paired items, 80 before)" in err and sleeps


def _by_difficulty(shuffle: bool, n: int = 400) -> str:
    """Two models on items stored from easiest to hardest, or in a random order."""
    rng = np.random.default_rng(11)
    difficulty = np.sort(rng.normal(0.0, 1.5, n))
    order = rng.permutation(n) if shuffle else np.arange(n)
    rows = []
    for i in order:
        for cond, ability in (("A", 0.4), ("B", 0.0)):
            p = 1.0 / (1.0 + np.exp(difficulty[i] - ability))
            rows.append((cond, 0, 0.0, 0, f"q{i}", int(rng.random() < p)))
    return HEADER + _lines(rows)


def test_a_stream_in_order_of_difficulty_is_warned_about(tmp_path: Path, capsys) -> None:
    from robuststats.analysis import order_drift

    src = tmp_path / "sorted.csv"
    src.write_text(_by_difficulty(shuffle=False))
    assert main(["analyze", str(src), "--anytime"]) == 0
    err = capsys.readouterr().err
    assert "trend with the items' position (Spearman ρ = -" in err and "random order" in err
    src.write_text(_by_difficulty(shuffle=True))
    assert main(["analyze", str(src), "--anytime"]) == 0
    assert "trend" not in capsys.readouterr().err
    # under a random order the check flags about ORDER_P of streams: 2 of 400 at most here
    rng = np.random.default_rng(12)
    flagged = sum(order_drift(rng.integers(0, 2, 200), rng.integers(0, 2, 200)) is not None
                  for _ in range(400))
    assert flagged <= 2


def test_a_decided_sequence_that_empties_stays_decided(tmp_path: Path, capsys) -> None:
    # A equals B on the first 150 items, then loses the next 60: no random order. The
    # difference's sequence narrows around 0, falls below it, then empties (no δ fits both
    # parts); the decision it reached stands and the bounds shown are the last non-empty
    rows = []
    for i in range(210):
        b = 1
        a = 1 if i < 150 else 0
        for cond, v in (("A", a), ("B", b)):
            rows.append((cond, 0, 0.1, 0, f"q{i}", v))
    src = tmp_path / "o.csv"
    src.write_text(HEADER + _lines(rows))
    assert main(["analyze", str(src), "--anytime", "--format", "json"]) == 0
    (r,) = [r for r in json.loads(capsys.readouterr().out)["anytime"]
            if r["comparison"] == "difference"]
    cs = betting_confidence_sequence(np.r_[np.ones(150), np.zeros(60)], np.ones(210))
    empty = int(np.flatnonzero(np.isnan(cs.low))[0])
    first = cs.first_excluding(0.0)
    assert first is not None and first <= empty  # it decided before the set emptied
    assert r["decided"] and r["decided_at"] == first
    assert r["direction"] == ("above" if cs.low[first - 1] > 0 else "below")
    assert np.isfinite(r["cs_low"]) and r["cs_low"] == pytest.approx(cs.low[empty - 1])
