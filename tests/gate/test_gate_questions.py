"""The gate's superiority and equivalence (TOST) questions (issue 27, item 3).

With one model each and outcomes averaged over noise seeds, the gate's contrast is the
paired t over items (docs/gate.md), so each question is R's paired ``t.test`` with the
null at the margin, values pasted beside each assertion.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from robuststats.cli import main
from robuststats.errors import InputError
from robuststats.gate import gate_test

# per-item means over two noise seeds of one candidate and one baseline model
C = np.array([1, 0.5, 0, 0.5, 1, 1, 0, 0, 0.5, 1, 0.5, 0, 1, 1, 0.5, 0.5, 1, 0.5, 1, 0.5, 1,
              1, 0, 0.5, 1, 1, 0, 1, 1, 0])
B = np.array([0.5, 0.5, 1, 0, 1, 0, 0, 0.5, 0, 0.5, 0, 1, 0.5, 1, 0.5, 1, 1, 1, 1, 0, 0, 0,
              1, 1, 0, 0.5, 1, 1, 0, 0.5])


def _gate(question, d, **kw):
    return gate_test(None, C[None], None, B[None], max_degradation=d, metric="accuracy",
                     margin_type="absolute", question=question, **kw)


def test_superiority_is_the_one_sided_t_at_plus_the_margin():
    r = _gate("superiority", 0.02)
    assert r.design == "one model each" and r.question == "superiority"
    # R: s <- t.test(c, b, paired = TRUE, mu = 0.02, alternative = "greater")
    #    c(s$statistic, s$p.value, s$conf.int[1])
    #    0.538330110581303  0.297228690861402 -0.116565160605488
    assert r.statistic == pytest.approx(0.538330110581303, rel=1e-9)
    assert r.pvalue == pytest.approx(0.297228690861402, rel=1e-9)
    assert r.lower_bound == pytest.approx(-0.116565160605488, rel=1e-9)
    assert not r.passed and math.isnan(r.upper_bound)
    assert "lower bound -0.1166 ≤ +0.02" in r.reason
    # d = 0 asks what non-inferiority with m = 0 asks: the same test
    zero, ni = _gate("superiority", 0.0), _gate("non-inferiority", 0.0)
    assert (zero.statistic, zero.pvalue, zero.passed) == (ni.statistic, ni.pvalue, ni.passed)
    assert math.isnan(zero.power_at_margin)  # an equal candidate should fail: no power note


def test_equivalence_is_two_one_sided_t_tests():
    r = _gate("equivalence", 0.3)
    # R: l <- t.test(c, b, paired = TRUE, mu = -0.3, alternative = "greater")
    #    u <- t.test(c, b, paired = TRUE, mu = 0.3, alternative = "less")
    #    l: t 3.25831382720262, p 0.00142893038363409, conf.int[1] -0.116565160605488
    #    u: t -1.84165564146235, p 0.0378874353988528, conf.int[2] 0.283231827272155
    assert r.passed and r.question == "equivalence"
    assert r.lower_bound == pytest.approx(-0.116565160605488, rel=1e-9)
    assert r.upper_bound == pytest.approx(0.283231827272155, rel=1e-9)
    # the TOST p-value is the larger one, with its statistic
    assert r.pvalue == pytest.approx(0.0378874353988528, rel=1e-9)
    assert r.statistic == pytest.approx(-1.84165564146235, rel=1e-9)
    assert r.method.startswith("two one-sided t tests (TOST)")
    # R: mu = ∓0.6: p 1.34919213605795e-06 (lower) and 6.84645360001372e-05 (upper)
    assert _gate("equivalence", 0.6).pvalue == pytest.approx(6.84645360001372e-05, rel=1e-8)
    # the upper bound 0.2832 reaches a margin of 0.25: not shown
    narrow = _gate("equivalence", 0.25)
    assert not narrow.passed and "not inside (−0.25, +0.25)" in narrow.reason
    # at alpha 0.05 the two one-sided 95 % bounds are the two-sided 90 % interval
    ci = _gate("equivalence", 0.3, alpha=0.05)
    two_sided = _gate("equivalence", 0.3, alpha=0.1)
    assert ci.upper_bound - ci.lower_bound > two_sided.upper_bound - two_sided.lower_bound


def test_relative_equivalence_is_symmetric_on_the_log_scale():
    rng = np.random.default_rng(3)
    c = (rng.random((3, 200)) < 0.6).astype(float)
    b = (rng.random((3, 200)) < 0.6).astype(float)
    clean_c = (rng.random((3, 200)) < 0.9).astype(float)
    clean_b = (rng.random((3, 200)) < 0.9).astype(float)
    r = gate_test(clean_c, c, clean_b, b, max_degradation=0.2, question="equivalence",
                  pairing="paired")
    # the log-scale interval inside (log 0.8, log 1.25): the ratio inside (0.8, 1.25)
    assert r.passed == (r.lower_bound > -0.2 and r.upper_bound < 0.25)
    assert "(−0.2, +0.25)" in r.reason


def test_margins_out_of_range_are_refused():
    with pytest.raises(InputError, match=r"`max_degradation` must be a number > 0"):
        _gate("equivalence", 0.0)
    with pytest.raises(InputError, match=r"`question` must be one of"):
        _gate("inferiority", 0.1)
    # a relative superiority margin may exceed 1 (more than twice as good)
    r = gate_test(None, C[None], None, B[None], max_degradation=1.5, metric="accuracy",
                  question="superiority")
    assert not r.passed


def test_the_command_line_asks_each_question(make_version, sim_outcomes, tmp_path, capsys):
    make_version(tmp_path / "store", sim_outcomes)
    a = sim_outcomes[sim_outcomes["condition"] == "A"]
    path = tmp_path / "a.parquet"
    a.to_parquet(path)
    base = ["gate", str(path), "--baseline", str(tmp_path / "store" / "sim" / "v1"),
            "--baseline-condition", "B", "--no-progress"]
    # A is more robust than B (+14.6 % retention), but 3 seeds do not show it above 0
    assert main([*base, "--min-improvement", "0"]) == 1
    out = capsys.readouterr().out
    assert "better than the baseline's by more than 0" in out
    assert "80%-power margin" not in out and "lower bound -18.5%" not in out
    assert "an improvement of more than 0 is not shown" in out
    assert main([*base, "--equivalence", "0.5", "--format", "json"]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    assert data["question"] == "equivalence"
    level = data["levels"][0]
    assert level["passed"] == (level["lower_bound"] > -0.5 and level["upper_bound"] < 1.0)
    assert main([*base, "--equivalence", "0.1", "--max-degradation", "0.1"]) == 2
    assert "--max-degradation and --equivalence: give one margin" in capsys.readouterr().err
    assert main([*base]) == 2
    assert "give one margin" in capsys.readouterr().err
    assert main([*base, "--equivalence", "0"]) == 2
    assert "`--equivalence` must be a number in (0, 1)" in capsys.readouterr().err
