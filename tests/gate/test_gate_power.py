"""Planning the gate: ``power_gate`` against R's pwr and against a simulation of the gate's
own test, the solved sizes, ``robuststats power --gate`` and its errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robuststats.cli import main
from robuststats.errors import InputError
from robuststats.gate import unpaired_variance
from robuststats.stats import estimate_gate_components, power_gate
from robuststats.stats.power._gate import gate_power_at


@pytest.mark.parametrize(("kwargs", "expected"), [
    # R 4.2, pwr 1.3-0: ncp <- 0.1 / (0.05 * sqrt(1 + 1/5));
    # pwr.t.test(n = 5, d = ncp / sqrt(5), sig.level = 0.05, type = "one.sample",
    #            alternative = "greater")$power  -> 0.4481834655
    (dict(n_seeds_baseline=5), 0.4481834655),
    # pwr.t.test(n = 8, d = 0.1 / (0.05 * sqrt(1 + 1/8)) / sqrt(8), sig.level = 0.05,
    #            type = "one.sample", alternative = "greater")$power  -> 0.5221662035
    (dict(n_seeds_baseline=8), 0.5221662035),
    # four candidate seeds against four: the pooled two-sample t,
    # pwr.t.test(n = 4, d = 0.1 / 0.05, sig.level = 0.05, type = "two.sample",
    #            alternative = "greater")$power  -> 0.8015343251
    (dict(n_seeds_baseline=4, n_seeds_candidate=4), 0.8015343251),
])
def test_seed_only_designs_reproduce_pwr(kwargs, expected):
    r = power_gate(0.1, 1000, power=None, seed_sd=0.05, margin_type="absolute", **kwargs)
    assert r.solved_for == "power"
    assert r.power == pytest.approx(expected, abs=1e-5)


def _simulated_pass_rate(n, kb, effect, sa, sd, se, reps, rng):
    """Pass rate of the gate's own t (unpaired_variance) in the normal crossed design,
    one candidate model, true contrast = −margin + effect (the margin is 0.1 here)."""

    margin, passes = 0.1, 0
    for _ in range(reps):
        b = rng.normal(0, 1.0, n)
        lc = (effect - margin) + rng.normal(0, sa) + b + rng.normal(0, sd, n) \
            + rng.normal(0, se, (1, n))
        lb = rng.normal(0, sa, (kb, 1)) + b + rng.normal(0, se, (kb, n))
        cv = unpaired_variance(lc, lb)
        # the gate as shipped: the one-sided bound of the reference calibrated for few seeds
        low = lc.mean() - lb.mean() - cv.reference.critical_one_sided(0.95) * np.sqrt(
            cv.variance)
        passes += low > -margin
    return passes / reps


@pytest.mark.parametrize(("n", "kb", "effect", "sa", "sd", "se"), [
    (60, 5, 0.25, 0.05, 0.3, 1.0),   # item and residual parts dominate
    (200, 3, 0.15, 0.04, 0.0, 0.8),  # seed part large, 2 df
])
def test_predicted_power_matches_a_simulation_of_the_gate(n, kb, effect, sa, sd, se):
    rng = np.random.default_rng(1)
    reps = 3000
    simulated = _simulated_pass_rate(n, kb, effect, sa, sd, se, reps, rng)
    predicted = gate_power_at(n, kb, 1, effect, sa, sd, se, 0.05)
    mc_se = np.sqrt(predicted * (1 - predicted) / reps)
    assert abs(simulated - predicted) < 3.5 * mc_se + 0.01, (simulated, predicted)


def test_solving_for_items_seeds_and_margin_is_consistent():
    common = dict(seed_sd=0.02, resid_sd=0.5, item_sd=0.1, margin_type="absolute")
    r = power_gate(0.1, None, 5, 0.8, **common)
    assert r.solved_for == "n_items" and r.achieved_power >= 0.8
    assert power_gate(0.1, r.n_items - 1, 5, None, **common).power < 0.8
    k = power_gate(0.1, r.n_items, None, 0.8, **common)
    assert k.n_seeds_baseline <= 5 and k.achieved_power >= 0.8
    m = power_gate(None, r.n_items, 5, 0.8, **common)
    assert m.margin <= 0.1 + 1e-9
    assert power_gate(m.margin, r.n_items, 5, None, **common).power == pytest.approx(0.8,
                                                                                   abs=1e-6)
    rel = power_gate(0.1, 300, 5, None, seed_sd=0.02, resid_sd=0.5)
    # relative margin 0.1 is −log(0.9) = 0.1054 on the log scale: a little more power
    assert rel.power > power_gate(0.1, 300, 5, None, seed_sd=0.02, resid_sd=0.5,
                                  margin_type="absolute").power


def test_one_candidate_model_caps_the_power():
    with pytest.raises(InputError, match=r"a candidate of 1 model\(s\) varies by its own seed "
                                         r"SD, which limits the power"):
        power_gate(0.15, None, 5, 0.8, seed_sd=0.12, resid_sd=0.7)
    r = power_gate(0.15, None, 5, 0.8, seed_sd=0.05, resid_sd=0.7, n_seeds_candidate=5)
    assert r.achieved_power >= 0.8


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(margin=0.1, n_items=100), r"Exactly one of"),
    (dict(margin=0.1, n_items=100, n_seeds_baseline=1, seed_sd=0.1),
     r"`n_seeds_baseline` 1 with one candidate model"),
    (dict(margin=1.2, n_items=100, n_seeds_baseline=3, seed_sd=0.1),
     r"`margin` must be a number in \(0, 1\)"),
    (dict(margin=0.1, n_items=100, n_seeds_baseline=3),
     r"`seed_sd`, `item_sd` and `resid_sd` are all 0"),
    (dict(margin=0.1, n_items=100, n_seeds_baseline=3, seed_sd=0.1, true_difference=-0.2),
     r"`true_difference` -0.2 lies at or below −margin"),
])
def test_power_gate_errors_name_the_parameter(kwargs, match):
    with pytest.raises(InputError, match=match):
        power_gate(**kwargs)


def test_components_from_a_baseline_version(tmp_path, sim_outcomes, make_version):
    v = make_version(tmp_path / "results", sim_outcomes)
    c = estimate_gate_components(v.path, condition="B")
    assert c.n_seeds == 3 and c.n_items == 200 and c.eval_noise == 0.05
    assert c.seed_sd >= 0 and c.resid_sd > 0
    with pytest.raises(InputError, match="pass `condition`"):
        estimate_gate_components(v.path)


def test_power_cli_plans_a_gate(tmp_path, sim_outcomes, make_version, capsys):
    v = make_version(tmp_path / "results", sim_outcomes)
    code = main(["power", "--gate", "--max-degradation", "0.3", "--pilot", str(v.path),
                 "--gate-condition", "B", "--seeds", "3", "--candidate-seeds", "3",
                 "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["design"] == "gate" and out["solved_for"] == "n_items"
    assert out["pilot"]["condition"] == "B" and out["achieved_power"] >= 0.8
    assert [r["n_seeds_baseline"] for r in out["table"]] == [2, 3, 5, 8, 10, 20]
    # one candidate model: the seeds cap the power, and the error names the fewest that do
    code = main(["power", "--gate", "--max-degradation", "0.3", "--pilot", str(v.path),
                 "--gate-condition", "B", "--seeds", "3"])
    assert code == 2 and "17 baseline seeds reach 0.8" in capsys.readouterr().err
    code = main(["power", "--gate", "--max-degradation", "0.2", "--seed-sd", "0.02",
                 "--resid-sd", "0.5", "--n", "300", "--seeds", "5"])
    text = capsys.readouterr().out
    assert code == 0 and "an equally good candidate passes with probability" in text


@pytest.mark.parametrize(("argv", "match"), [
    (["--max-degradation", "0.1"], r"`--max-degradation` plans a gate; pass --gate"),
    (["--gate", "--max-degradation", "0.1", "--seeds", "3"],
     r"needs the seed SD of the metric: pass --pilot"),
    (["--gate", "--seed-sd", "0.1", "--seeds", "3"],
     r"without --max-degradation the gate's smallest margin is solved for: pass --n"),
])
def test_power_cli_gate_errors_exit_2(argv, match, capsys):
    assert main(["power", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and __import__("re").search(match, err), err
