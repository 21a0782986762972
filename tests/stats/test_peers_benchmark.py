"""benchmarks/peers.py's own pieces: the simulation, the seed-random t's side, the exchange
with the peers' environment, and a clean skip without it (docs/statistics.md §9, "Peers side
by side"). The peers (evalsig, evalstats) live in benchmarks/.venv-peers only; the test that
runs them is skipped where that environment is missing, as in CI."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robuststats.stats import seed_random_test

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from peers import (  # benchmarks/peers.py: the full comparison
    DESIGNS,
    EXIT_MISSING,
    OURS,
    PEER_METHODS,
    finish_peers,
    main,
    peers_python,
    run_cell,
    simulate_cell,
    start_peers,
    summarise,
)

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
PEERS_HERE = importlib.util.find_spec("evalsig") is not None or (
    importlib.util.find_spec("evalstats") is not None)


def test_simulated_studies_are_aligned_0_1_and_reproducible():
    design = DESIGNS["null-moderate"]
    x, y = simulate_cell(design, 3, 40, 5, np.random.default_rng(7))
    assert x.shape == y.shape == (5, 3, 40) and x.dtype == np.uint8
    assert set(np.unique(np.concatenate([x, y]))) <= {0, 1}
    x2, y2 = simulate_cell(design, 3, 40, 5, np.random.default_rng(7))
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    assert not np.array_equal(x, y)


def test_truths_of_the_designs():
    assert DESIGNS["null-moderate"].truth() == 0.0
    assert DESIGNS["null-none"].truth() == 0.0
    effect = DESIGNS["effect-moderate"].truth()
    assert 0.02 < effect < 0.08  # +0.2 logit in accuracy and robustness at the noisy level
    # the simulated mean difference agrees with the truth (400 studies × 3 × 200 outcomes)
    x, y = simulate_cell(DESIGNS["effect-moderate"], 3, 200, 400, np.random.default_rng(3))
    diff = (x.astype(float) - y).mean(axis=(1, 2))
    assert abs(diff.mean() - effect) < 4 * diff.std(ddof=1) / math.sqrt(diff.size)


def test_summarise_counts_only_the_replications_run():
    res = dict(pvalue=np.array([0.01, 0.2, 0.03, 0.5, np.nan]),
               ci_low=np.array([0.01, -0.1, 0.02, -0.2, np.nan]),
               ci_high=np.array([0.2, 0.1, 0.3, 0.2, np.nan]),
               label=np.array(["x"]))
    row = summarise(DESIGNS["null-moderate"], 2, 10, "m", res, truth=0.05)
    assert row["reps"] == 4
    assert row["reject"] == 0.5 and row["reject_se"] == pytest.approx(0.25)
    assert row["coverage"] == 1.0 and row["coverage_se"] == 0.0
    assert row["width"] == pytest.approx((0.19 + 0.2 + 0.28 + 0.4) / 4)


def test_our_side_matches_seed_random_test_on_the_same_studies():
    rows = run_cell(1, DESIGNS["null-moderate"], 3, 60, 12, 12, 100, None, PEER_METHODS)
    assert [r["method"] for r in rows] == [OURS]
    assert rows[0]["reps"] == 12
    # the cell's studies are reproducible from its index: recompute one p-value directly
    rng = np.random.default_rng(np.random.SeedSequence(20261130).spawn(2)[1])
    x, y = simulate_cell(DESIGNS["null-moderate"], 3, 60, 12, rng)
    rejects = np.mean([seed_random_test(x[r].astype(float), y[r].astype(float)).pvalue < 0.05
                       for r in range(12)])
    assert rows[0]["reject"] == rejects


def test_missing_peers_environment_says_how_to_create_it(tmp_path, capsys):
    assert peers_python(tmp_path / "absent") is None
    assert main(["--reps", "3", "--items", "30", "--seeds", "2", "--designs", "null-none",
                 "--venv", str(tmp_path / "absent")]) == 0
    out = capsys.readouterr()
    assert "benchmarks/peers.sh" in out.err and "Only the seed-random t runs" in out.err
    table = [line for line in out.out.splitlines() if line.startswith("| null")]
    assert len(table) == 1 and "| seed-random t |" in table[0]
    assert "peers: not installed" in out.out


@pytest.mark.skipif(PEERS_HERE, reason="evalsig or evalstats is importable here")
def test_runner_without_the_peers_exits_cleanly(tmp_path):
    done = subprocess.run([sys.executable, str(BENCH / "peers_runner.py"), "a.npz", "b.npz"],
                          capture_output=True, text=True)
    assert done.returncode == EXIT_MISSING
    assert "benchmarks/peers.sh" in done.stderr and "Traceback" not in done.stderr
    # peers.py reads that exit as "no peers" and goes on with its own side
    x = np.zeros((2, 2, 5), dtype=np.uint8)
    proc, dst = start_peers(Path(sys.executable), x, x, np.arange(2), ("evalsig-pooled",),
                            2, 10, tmp_path)
    assert finish_peers(proc, dst) is None


@pytest.mark.skipif(peers_python() is None, reason="no peers' environment (benchmarks/peers.sh)")
def test_peers_see_the_same_studies_and_the_same_sign(tmp_path):
    # every method reports the same point estimate A − B on the same studies as ours
    rows = run_cell(2, DESIGNS["effect-moderate"], 3, 50, 3, 2, 200, peers_python(),
                    PEER_METHODS)
    by = {r["method"]: r for r in rows}
    assert set(by) == {OURS, *PEER_METHODS}
    assert by["evalsig-cluster"]["reps"] == 2 and by["evalsig-pooled"]["reps"] == 3
    assert "Bonett_price" in by["evalstats-auto"]["label"]
    assert "cluster_bootstrap" in by["evalsig-cluster"]["label"]
    rng = np.random.default_rng(np.random.SeedSequence(20261130).spawn(3)[2])
    x, y = simulate_cell(DESIGNS["effect-moderate"], 3, 50, 3, rng)
    ours = (x.astype(float) - y).mean(axis=(1, 2))
    proc, dst = start_peers(peers_python(), x, y, np.arange(3), PEER_METHODS, 3, 200, tmp_path)
    peers = finish_peers(proc, dst)
    for method in PEER_METHODS:
        np.testing.assert_allclose(peers[method]["estimate"], ours, atol=1e-12, err_msg=method)
        lo, hi = peers[method]["ci_low"], peers[method]["ci_high"]
        assert np.all(lo <= hi) and np.all((0.0 <= peers[method]["pvalue"])
                                           & (peers[method]["pvalue"] <= 1.0))
