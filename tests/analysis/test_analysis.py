from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from robuststats.analysis import AnalysisOptions, analyze_outcomes
from robuststats.errors import InputError
from robuststats.outcomes import validate_outcomes
from robuststats.runs.plan import Cell


def paired(n11: int, n10: int, n01: int, n00: int) -> tuple[list[int], list[int]]:
    """0/1 outcomes of conditions a and b with the given 2×2 counts (a first)."""
    a = [1] * n11 + [1] * n10 + [0] * n01 + [0] * n00
    b = [1] * n11 + [0] * n10 + [1] * n01 + [0] * n00
    return a, b


def frame(cond: str, correct: list[int], *, seed: int = 0, eval_noise: float = 0.0,
          noise_seed: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"condition": cond, "seed": seed, "eval_noise": eval_noise,
                         "noise_seed": noise_seed,
                         "item_id": [f"i{k:03d}" for k in range(len(correct))],
                         "correct": correct})


OPTS = AnalysisOptions(n_resamples=300, multiplicity="holm")


def test_known_mcnemar_counts_and_accuracies() -> None:
    # 50 items: 30 both right, 8 only A right (b), 2 only B right (c), 10 both wrong
    a, b = paired(30, 8, 2, 10)
    out = validate_outcomes(pd.concat([frame("A", a), frame("B", b)]))
    res = analyze_outcomes(out, options=OPTS)
    t = res.tests.iloc[0]
    assert (t["a"], t["b"], t["n_a_only"], t["n_b_only"], t["n_items"]) == ("A", "B", 8, 2, 50)
    assert t["accuracy_a"] == pytest.approx(38 / 50) and t["accuracy_b"] == pytest.approx(32 / 50)
    assert t["estimate"] == pytest.approx(0.12)
    # R: binom.test(8, 10, 0.5)$p.value  ->  0.109375  (exact McNemar, two-sided)
    assert t["pvalue"] == pytest.approx(0.109375, rel=1e-9)
    s = res.summary.set_index("condition")
    assert s.loc["A", "accuracy"] == pytest.approx(0.76)
    assert s.loc["B", "accuracy"] == pytest.approx(0.64)
    assert s.loc["A", "ci_low"] < 0.76 < s.loc["A", "ci_high"]


def test_counts_combine_over_seeds_and_noise_seeds() -> None:
    parts = []
    counts = {(0, 0): (20, 5, 1, 4), (0, 1): (19, 6, 2, 3), (1, 0): (21, 3, 3, 3),
              (1, 1): (18, 7, 0, 5)}
    for (seed, ns), c in counts.items():
        a, b = paired(*c)
        parts += [frame("A", a, seed=seed, eval_noise=0.1, noise_seed=ns),
                  frame("B", b, seed=seed, eval_noise=0.1, noise_seed=ns)]
    out = validate_outcomes(pd.concat(parts))
    tests = analyze_outcomes(out, options=OPTS).tests.set_index("role")
    # two seeds: the seed-random t decides, the models-fixed McNemar is a diagnostic
    decision, t = tests.loc["decision"], tests.loc["diagnostic"]
    assert decision["question"].startswith("does procedure a differ from procedure b")
    assert decision["test"].startswith("seed-random t")
    assert not pd.isna(decision["reject"]) and pd.isna(t["reject"])
    assert np.isnan(t["ci_low"]) and decision["ci_low"] < decision["estimate"]
    assert (t["n_strata"], t["n_a_only"], t["n_b_only"]) == (4, 5 + 6 + 3 + 7, 1 + 2 + 3 + 0)
    assert t["test"] == "stratified McNemar (clustered)"
    assert t["question"].startswith("do these trained models differ")
    mh = analyze_outcomes(out, options=AnalysisOptions(n_resamples=100, mcnemar="mantel-haenszel")
                          ).tests.set_index("role").loc["diagnostic"]
    # MH with pairs as strata = McNemar on pooled counts (b, c) = (21, 6):
    # R: mcnemar.test(matrix(c(0, 6, 21, 0), 2), correct = FALSE)  ->  X2 = 8.3333, p = 0.003892
    assert mh["pvalue"] == pytest.approx(0.003892, abs=1e-6)
    # the same items recur in all 4 strata: the clustered test is more cautious
    assert t["pvalue"] > mh["pvalue"]


def test_retention_seed_table_and_multiplicity() -> None:
    rng = np.random.default_rng(1)
    parts = []
    for cond, p_clean, p_noisy in (("A", 0.8, 0.6), ("B", 0.8, 0.75), ("C", 0.7, 0.7)):
        for seed in (0, 1, 2):
            clean = (rng.random(100) < p_clean).astype(int)
            noisy = clean * (rng.random(100) < p_noisy / p_clean)
            parts += [frame(cond, list(clean), seed=seed),
                      frame(cond, list(noisy), seed=seed, eval_noise=0.05)]
    out = validate_outcomes(pd.concat(parts))
    res = analyze_outcomes(out, options=OPTS)
    ret = res.retention.set_index("condition")
    acc = res.summary.set_index(["condition", "eval_noise"])["accuracy"]
    for c in "ABC":
        assert ret.loc[c, "retention"] == pytest.approx(acc[(c, 0.05)] / acc[(c, 0.0)])
        assert ret.loc[c, "ci_low"] < ret.loc[c, "retention"] < ret.loc[c, "ci_high"]
    seeds = res.seeds
    assert len(seeds) == 3 * 3 * 2
    one = seeds[(seeds["condition"] == "A") & (seeds["eval_noise"] == 0.05)]
    assert res.retention.set_index("condition").loc["A", "seed_sd"] == pytest.approx(
        one["retention"].std(ddof=1))
    # all pairs at two levels: 3 pairs × 2 = 6 decisions (seed-random t, 3 seeds), each with
    # its McNemar diagnostic; Holm adjusted >= raw within each family
    assert len(res.tests) == 12
    assert (res.tests["role"] == "decision").sum() == 6
    assert (res.tests["pvalue_adjusted"] >= res.tests["pvalue"] - 1e-15).all()
    decisions = res.tests[res.tests["role"] == "decision"]
    assert decisions["pvalue_adjusted"].max() <= 1.0
    assert (decisions["reject"] == (decisions["pvalue_adjusted"] < 0.05)).all()
    ref = analyze_outcomes(out, options=AnalysisOptions(n_resamples=100, reference="C"))
    ref_decisions = ref.tests[ref.tests["role"] == "decision"]
    assert sorted(zip(ref_decisions["a"], ref_decisions["b"])) == [("A", "C"), ("A", "C"),
                                                                  ("B", "C"), ("B", "C")]


def test_missing_cells_make_their_hypotheses_inconclusive() -> None:
    a, b = paired(30, 8, 2, 10)
    out = validate_outcomes(pd.concat([frame("A", a), frame("B", b),
                                       frame("A", a, eval_noise=0.1)]))
    expected = [Cell("A", 0, 0.0, 0), Cell("B", 0, 0.0, 0), Cell("A", 0, 0.1, 0),
                Cell("B", 0, 0.1, 0)]
    hyps = [{"id": "H1", "metric": "accuracy", "a": "A", "b": "B", "eval_noise": 0,
             "relation": "greater", "margin": 0},
            {"id": "H2", "metric": "retention", "a": "A", "b": "B", "eval_noise": 0.1,
             "relation": "greater", "margin": 0}]
    res = analyze_outcomes(out, hypotheses=hyps, options=OPTS, expected_cells=expected)
    assert res.missing[["condition", "eval_noise"]].values.tolist() == [["B", 0.1]]
    h = res.hypotheses.set_index("id")
    assert h.loc["H2", "verdict"] == "INCONCLUSIVE"
    assert "missing" in h.loc["H2", "reason"]
    assert h.loc["H1", "verdict"] in {"VERIFIED", "INCONCLUSIVE", "FALSIFIED"}
    assert h.loc["H1", "estimate"] == pytest.approx(0.12)


# ------------------------------------------------------------------ holes (regressions)
def _study_frame(seeds=(0, 1, 2), items=40, seed=7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for cond, p_clean, keep in (("A", 0.8, 0.9), ("B", 0.7, 0.6)):
        for s in seeds:
            clean = (rng.random(items) < p_clean).astype(int)
            parts.append(frame(cond, list(clean), seed=s))
            for ns in (0, 1):
                noisy = clean * (rng.random(items) < keep)
                parts.append(frame(cond, list(noisy), seed=s, eval_noise=0.05,
                                   noise_seed=ns))
    return validate_outcomes(pd.concat(parts))


HYPS = [{"id": "H1", "metric": "accuracy", "a": "A", "b": "B", "eval_noise": 0.05,
         "relation": "greater", "margin": 0},
        {"id": "H2", "metric": "retention", "a": "A", "b": "B", "eval_noise": 0.05,
         "relation": "greater", "margin": 0},
        {"id": "H3", "metric": "accuracy", "a": "A", "b": "B", "eval_noise": 0,
         "relation": "greater", "margin": 0}]


def test_partial_outcomes_without_a_plan_give_inconclusive_not_an_error() -> None:
    # a failed cell: B, seed 1, 5 % noise, noise seed 0 never reached the outcomes
    out = _study_frame()
    out = out[~((out.condition == "B") & (out.seed == 1) & (out.eval_noise == 0.05)
                & (out.noise_seed == 0))]
    res = analyze_outcomes(out, hypotheses=HYPS, options=OPTS)
    assert res.missing.to_dict(orient="records") == [
        {"condition": "B", "seed": 1, "eval_noise": 0.05, "noise_seed": 0}]
    h = res.hypotheses.set_index("id")
    assert h.loc["H1", "verdict"] == h.loc["H2", "verdict"] == "INCONCLUSIVE"
    assert "1 needed cell(s) missing" in h.loc["H1", "reason"]
    assert h.loc["H3", "verdict"] != "INCONCLUSIVE" or np.isfinite(h.loc["H3", "estimate"])
    # the same verdicts as a run that knows its plan
    planned = [Cell(c, s, lv, ns) for c in "AB" for s in (0, 1, 2)
               for lv, ns in ((0.0, 0), (0.05, 0), (0.05, 1))]
    with_plan = analyze_outcomes(out, hypotheses=HYPS, options=OPTS, expected_cells=planned)
    pd.testing.assert_frame_equal(with_plan.hypotheses, res.hypotheses)


def test_one_missing_item_row_is_dropped_from_every_table_and_recorded() -> None:
    full = _study_frame()
    out = full[~((full.condition == "A") & (full.seed == 2) & (full.eval_noise == 0.05)
                 & (full.noise_seed == 1) & (full.item_id == "i005"))]
    res = analyze_outcomes(out, hypotheses=HYPS, options=OPTS)
    assert res.dropped[["condition", "seed", "eval_noise", "noise_seed", "item_id"]] \
        .to_dict(orient="records") == [{"condition": "A", "seed": 2, "eval_noise": 0.05,
                                        "noise_seed": 1, "item_id": "i005"}]
    assert (res.summary["n_items"] == 39).all()
    assert (res.retention["n_items"] == 39).all()
    assert (res.tests["n_items"] == 39).all()
    assert res.missing.empty
    assert (res.hypotheses["verdict"] != "").all() and res.hypotheses["estimate"].notna().all()
    # the same numbers as analysing the full table without that item
    trimmed = analyze_outcomes(full[full.item_id != "i005"], hypotheses=HYPS, options=OPTS)
    pd.testing.assert_frame_equal(res.summary, trimmed.summary)
    pd.testing.assert_frame_equal(res.hypotheses, trimmed.hypotheses)
    assert "dropped" in res.tables()


def test_one_missing_item_row_raises_with_its_location_under_holes_raise() -> None:
    full = _study_frame()
    out = full[~((full.condition == "A") & (full.seed == 2) & (full.eval_noise == 0.05)
                 & (full.noise_seed == 1) & (full.item_id == "i005"))]
    with pytest.raises(InputError, match=r"item 'i005' is missing under condition 'A', "
                                         r"seed 2, eval_noise 0.05, noise_seed 1"):
        analyze_outcomes(out, hypotheses=HYPS, options=OPTS, holes="raise")


def test_tables_follow_the_glossary_order() -> None:
    from robuststats.glossary import GLOSSARY, TABLE_COLUMNS

    res = analyze_outcomes(_study_frame(), hypotheses=HYPS, options=OPTS)
    for name, table in res.tables().items():
        declared = list(TABLE_COLUMNS[name])
        assert list(table.columns[:len(declared)]) == declared, name
        assert all(c in GLOSSARY for c in table.columns), name
    decides = res.tests["role"] == "decision"
    assert (res.tests.loc[decides, "ci_level"] == 0.95).all()
    assert res.tests.loc[~decides, "ci_level"].isna().all()
    assert res.settings["holes"] == "drop" and res.settings["n_resamples"] == 300


# ------------------------------------------------- unequal and independently labelled seeds

def _simulated(n_seeds: int = 5):
    import warnings as _w

    from robuststats.stats import Hypothesis
    from robuststats.stats._simulate import simulate_outcomes

    out = simulate_outcomes(n_seeds, 300, seed_effects="moderate", accuracy_effect=0.5, rng=1)
    hyps = [Hypothesis.from_dict({"id": "H1", "metric": "accuracy", "a": "A", "b": "B",
                                  "eval_noise": 0.0, "relation": "greater", "margin": 0}),
            Hypothesis.from_dict({"id": "H2", "metric": "retention", "a": "A", "b": "B",
                                  "eval_noise": 0.05, "relation": "greater", "margin": 0})]
    return out, hyps, _w


def test_unequal_seeds_are_paired_on_the_shared_seeds() -> None:
    out, hyps, _w = _simulated()
    unequal = out[~((out.condition == "B") & out.seed.isin([3, 4]))]
    with _w.catch_warnings():
        _w.simplefilter("ignore")
        res = analyze_outcomes(unequal, hypotheses=hyps, options=OPTS)
        shared = analyze_outcomes(out[out.seed.isin([0, 1, 2])], hypotheses=hyps,
                                  options=OPTS)
    assert res.missing.empty  # B's seeds 3 and 4 were never planned
    h, ref = res.hypotheses.set_index("id"), shared.hypotheses.set_index("id")
    for hid in ("H1", "H2"):
        assert h.loc[hid, "estimate"] == pytest.approx(ref.loc[hid, "estimate"])
        assert h.loc[hid, "ci_low"] == pytest.approx(ref.loc[hid, "ci_low"])
        assert h.loc[hid, "verdict"] == ref.loc[hid, "verdict"]
    assert "paired on the 3 shared seeds" in h.loc["H1", "detail"]
    assert "only in 'A': [3, 4]" in h.loc["H1", "detail"]
    decided = res.tests[res.tests.role == "decision"]
    assert set(decided.n_seeds) == {3}


def test_independent_seeds_labelled_differently_are_compared_unpaired() -> None:
    from robuststats.stats import independent_seeds_test

    out, hyps, _w = _simulated()
    relabelled = out.copy()
    relabelled.loc[relabelled.condition == "B", "seed"] += 10
    with _w.catch_warnings():
        _w.simplefilter("ignore")
        res = analyze_outcomes(relabelled, hypotheses=hyps, options=OPTS)
    assert res.missing.empty
    h = res.hypotheses.set_index("id")
    assert "independent seeds" in h.loc["H1", "ci_method"]
    assert h.loc["H1", "verdict"] == "VERIFIED"  # a 10-point effect on 5 + 5 seeds
    tests = res.tests
    assert list(tests.role) == ["decision", "decision"]  # no models-fixed row: no pairing
    clean = out[out.eval_noise == 0.0]
    xa = clean[clean.condition == "A"].pivot(index="seed", columns="item_id",
                                            values="correct").to_numpy(float)
    xb = clean[clean.condition == "B"].pivot(index="seed", columns="item_id",
                                            values="correct").to_numpy(float)
    direct = independent_seeds_test(xa, xb)
    row = tests[tests.eval_noise == 0.0].iloc[0]
    assert row.pvalue == pytest.approx(direct.pvalue)
    assert row.ci_low == pytest.approx(direct.confidence_interval.low)


def test_a_deterministic_condition_with_one_noise_seed_is_not_missing_cells() -> None:
    out, hyps, _w = _simulated(3)
    # B is a deterministic error model: one noisy evaluation where A has three
    extra = [out[(out.condition == "A") & (out.eval_noise == 0.05)].assign(noise_seed=r)
             for r in (1, 2)]
    both = pd.concat([out, *extra], ignore_index=True)
    with _w.catch_warnings():
        _w.simplefilter("ignore")
        res = analyze_outcomes(both, hypotheses=hyps, options=OPTS)
    assert res.missing.empty
    assert "missing" not in " ".join(res.hypotheses.reason)


def test_a_seed_without_a_correct_clean_item_gives_no_numpy_warning() -> None:
    import warnings as _w

    # seed 1 of A has no correct clean item: its retention is infinite or undefined, and so
    # is the SD over seeds; it must be NaN without pandas' "invalid value" RuntimeWarning
    rows = []
    for seed, clean, noisy in ((0, [1, 1, 0, 1, 0, 1], [1, 0, 0, 1, 0, 1]),
                               (1, [0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]),
                               (2, [1, 0, 1, 1, 0, 1], [1, 0, 0, 1, 0, 0])):
        rows += [frame("A", clean, seed=seed), frame("A", noisy, seed=seed, eval_noise=0.05)]
    out = validate_outcomes(pd.concat(rows, ignore_index=True))
    with _w.catch_warnings():
        _w.simplefilter("error", RuntimeWarning)
        res = analyze_outcomes(out, options=OPTS)
    assert np.isnan(res.retention.loc[0, "seed_sd"])


def test_one_seed_row_names_its_test_and_its_interval_apart():
    """One seed of 0/1 outcomes: the row's p-value is the exact McNemar test's and its
    interval Tango's; `test` and `ci_method` say so separately (issue 27, item 4)."""
    from robuststats.stats import mcnemar

    a = np.array([1] * 10 + [0] * 2 + [1] * 20 + [0] * 8)  # 10 items only a, 2 only b
    b = np.array([0] * 10 + [1] * 2 + [1] * 20 + [0] * 8)
    df = pd.DataFrame({"condition": ["a"] * 40 + ["b"] * 40,
                       "item_id": [f"i{k}" for k in range(40)] * 2,
                       "correct": np.concatenate([a, b])})
    (row,) = analyze_outcomes(df).tests.to_dict(orient="records")
    # exact McNemar: 2 · P(Bin(12, 1/2) ≤ 2) = 2 · 79/4096; R: binom.test(2, 12)$p.value
    assert row["pvalue"] == pytest.approx(0.03857421875, rel=1e-12)
    assert "McNemar" in row["test"] and "Tango" not in row["test"]
    assert row["ci_method"] == "Tango score interval (one seed)"
    tango = mcnemar(a, b, ci_method="tango").confidence_interval
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((tango.low, tango.high), abs=1e-9)
