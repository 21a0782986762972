"""Tests of estimate_discordance and read_pilot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from robuststats.errors import InputError
from robuststats.stats import DegenerateDataWarning, estimate_discordance, estimate_icc, read_pilot


def _agresti_pairs() -> tuple[np.ndarray, np.ndarray]:
    # Agresti (2007), *An Introduction to Categorical Data Analysis*, Table 8.1 (also R's
    # ?mcnemar.test "Performance" example): presidential approval, 1st vs 2nd survey,
    # (approve, approve) 794, (approve, disapprove) 150, (disapprove, approve) 86,
    # (disapprove, disapprove) 570.
    x = np.repeat([1, 1, 0, 0], [794, 150, 86, 570])
    y = np.repeat([1, 0, 1, 0], [794, 150, 86, 570])
    return x, y


def test_discordance_on_agresti_table() -> None:
    x, y = _agresti_pairs()
    est = estimate_discordance(x, y)
    assert est.n == 1600
    assert (est.n_a_only, est.n_b_only, est.n_discordant) == (150, 86, 236)
    assert est.discordance == pytest.approx(236 / 1600)
    # first minus second: the 1st survey approves 4 points more than the 2nd
    assert est.effect == pytest.approx((150 - 86) / 1600)
    assert est.accuracy_a == pytest.approx(944 / 1600)
    assert est.accuracy_b == pytest.approx(880 / 1600)
    assert est.baseline == est.accuracy_b
    # Wilson (1927) score interval, closed form
    # (p + z²/2n ± z·√(p(1 − p)/n + z²/4n²)) / (1 + z²/n), p = 236/1600, z = 1.959964,
    # evaluated by hand: 0.1309693, 0.1657193 (the interval R's
    # prop.test(236, 1600, correct = FALSE)$conf.int reports, which is Wilson's)
    low, high = est.confidence_interval
    assert low == pytest.approx(0.1309693, abs=1e-7)
    assert high == pytest.approx(0.1657193, abs=1e-7)
    assert est.method == "wilson"


def test_confidence_level_widens_interval() -> None:
    x, y = _agresti_pairs()
    ci95 = estimate_discordance(x, y).confidence_interval
    ci99 = estimate_discordance(x, y, confidence_level=0.99).confidence_interval
    assert ci99.low < ci95.low and ci99.high > ci95.high


def test_two_dimensional_outcomes_are_pooled_over_seeds() -> None:
    x = np.array([[1, 0, 1, 1], [1, 1, 0, 1]])
    y = np.array([[1, 1, 1, 0], [1, 1, 1, 1]])
    est = estimate_discordance(x, y)
    assert est.n == 8
    assert est.n_discordant == 3


def test_no_discordant_pairs_warns_and_keeps_upper_bound() -> None:
    x = np.array([1, 0, 1, 1, 0] * 20)
    with pytest.warns(DegenerateDataWarning, match=r"no discordant pairs among 100"):
        est = estimate_discordance(x, x.copy())
    assert est.discordance == 0.0
    # Wilson upper bound at 0/100: z²/(n + z²) = 3.8415/103.8415 = 0.03699
    assert est.confidence_interval.high == pytest.approx(0.036994, abs=1e-5)


def test_to_frame_and_dict() -> None:
    x, y = _agresti_pairs()
    est = estimate_discordance(x, y)
    frame = est.to_frame()
    assert list(frame[["ci_low", "ci_high"]].iloc[0]) == list(est.confidence_interval)
    assert est.to_dict()["n_discordant"] == 236


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        ([1, 0, 1], [1, 0], r"`x` and `y` must be aligned outcomes of the same shape "
                            r"\(n_items,\) or \(n_seeds, n_items\), got \(3,\) and \(2,\)"),
        ([], [], r"`x` must not be empty, got shape \(0,\)"),
        ([1, 2, 0], [1, 0, 0], r"`x` must contain values in \[0, 1\], got 2.0"),
        ([1, 0.5, 0], [1, 0, 0], r"`x` must contain only 0/1 outcomes, got 0.5"),
        ([1, 0], ["a", "b"], r"`y` must be an array of outcomes in \[0, 1\], got \['a', 'b'\]"),
        ([1, float("nan")], [1, 0], r"`x` must not contain NaN or infinite values"),
        ([[[1]]], [[[1]]], r"`x` must be 1-D \(n_items,\) or 2-D \(n_seeds, n_items\)"),
    ],
)
def test_invalid_outcomes(x: list, y: list, message: str) -> None:
    with pytest.raises(InputError, match=message):
        estimate_discordance(x, y)


def test_invalid_confidence_level() -> None:
    with pytest.raises(InputError, match=r"`confidence_level` must be a number in \(0, 1\), got 95"):
        estimate_discordance([1, 0], [0, 1], confidence_level=95)


# ------------------------------------------------------------------------- read_pilot


def _outcomes(
    seeds: int = 2, items: int = 50, conditions: tuple[str, ...] = ("A", "B")
) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    rows = []
    for seed in range(seeds):
        base = rng.random(items) < 0.6
        for k, cond in enumerate(conditions):
            flip = rng.random(items) < 0.1 * k
            for i in range(items):
                rows.append(
                    {
                        "condition": cond,
                        "seed": seed,
                        "eval_noise": 0.05,
                        "noise_seed": 1,
                        "item_id": f"gsm-{i}",
                        "correct": int(base[i] ^ flip[i]),
                    }
                )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_read_pilot_pairs_on_all_keys(tmp_path: Path, suffix: str) -> None:
    table = _outcomes()
    path = tmp_path / f"pilot{suffix}"
    table.to_csv(path, index=False) if suffix == ".csv" else table.to_parquet(path)
    pairs = read_pilot(path)
    assert pairs.conditions == ("A", "B")
    assert pairs.strata == ((0, 1), (1, 1)) and pairs.eval_noise == 0.05
    assert pairs.x.shape == (2, 50) and pairs.n_pairs == 100 and pairs.dropped.empty
    assert len(pairs.item_ids) == 50
    a = table[table.condition == "A"]["correct"].to_numpy()
    b = table[table.condition == "B"]["correct"].to_numpy()
    assert int(np.sum(a != b)) == int(np.sum(pairs.x != pairs.y))


def test_read_pilot_choose_conditions_and_order(tmp_path: Path) -> None:
    path = tmp_path / "pilot.csv"
    _outcomes(conditions=("E8a", "E8b", "E8c")).to_csv(path, index=False)
    with pytest.raises(InputError, match=r"has 3 condition\(s\) \(E8a, E8b, E8c\); choose two"):
        read_pilot(path)
    pairs = read_pilot(path, conditions=["E8c", "E8a"])
    assert pairs.conditions == ("E8c", "E8a")
    with pytest.raises(InputError, match=r"condition 'E9' is not in pilot file"):
        read_pilot(path, conditions=["E8a", "E9"])
    with pytest.raises(InputError, match=r"`conditions` must name two different conditions"):
        read_pilot(path, conditions=["E8a", "E8a"])


def test_read_pilot_eval_noise_levels(tmp_path: Path) -> None:
    table = pd.concat([_outcomes(), _outcomes().assign(eval_noise=0.0)])
    path = tmp_path / "pilot.parquet"
    table.to_parquet(path)
    with pytest.raises(InputError, match=r"several eval_noise levels \(0, 0.05\)"):
        read_pilot(path)
    assert read_pilot(path, eval_noise=0.0).x.size == 100
    with pytest.raises(InputError, match=r"no rows at eval_noise = 0.1"):
        read_pilot(path, eval_noise=0.1)


def test_read_pilot_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"missing.csv' does not exist"):
        read_pilot(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"condition": ["A"], "correct": [1]}).to_csv(bad, index=False)
    with pytest.raises(InputError, match=r"missing required column\(s\) \['item_id'\]"):
        read_pilot(bad)
    other = tmp_path / "pilot.json"
    other.write_text("{}")
    with pytest.raises(InputError, match=r"unknown format '.json'; use .csv, .tsv, .jsonl"):
        read_pilot(other)
    disjoint = tmp_path / "disjoint.csv"
    pd.DataFrame({"condition": ["A", "B"], "item_id": ["i1", "i2"], "correct": [1, 0]}).to_csv(
        disjoint, index=False
    )
    with pytest.raises(InputError, match=r"no item is shared by the series"):
        read_pilot(disjoint)
    with pytest.raises(InputError, match=r"item 'i2' is missing for condition 'A', seed 0, "
                                         r"eval_noise 0, noise_seed 0"):
        read_pilot(disjoint, holes="raise")
    dup = tmp_path / "dup.csv"
    pd.DataFrame(
        {"condition": ["A", "A", "B"], "item_id": ["i1", "i1", "i1"], "correct": [1, 0, 1]}
    ).to_csv(dup, index=False)
    with pytest.raises(InputError, match=r"1 duplicate row\(s\) for the same \(condition, seed"):
        read_pilot(dup)
    with pytest.raises(InputError, match=r"`holes` must be one of 'raise', 'drop', got 'skip'"):
        read_pilot(disjoint, holes="skip")


# --------------------------------------------------------------- repeats: ICC and deff


def test_icc_matches_pingouin_icc1_balanced() -> None:
    # pingouin.intraclass_corr(...) row "ICC(1,1)" (Shrout & Fleiss 1979, one-way
    # random effects) on the same data
    import pingouin as pg

    rng = np.random.default_rng(0)
    k, m = 200, 4
    values = np.sqrt(0.3) * rng.normal(size=(k, 1)) + np.sqrt(0.7) * rng.normal(size=(k, m))
    frame = pd.DataFrame(
        {"item": np.repeat(np.arange(k), m), "rep": np.tile(np.arange(m), k), "v": values.ravel()}
    )
    table = pg.intraclass_corr(frame, targets="item", raters="rep", ratings="v")
    expected = float(table.set_index("Type").loc["ICC(1,1)", "ICC"])
    assert estimate_icc(frame["v"], frame["item"]) == pytest.approx(expected, abs=1e-10)


def test_icc_unbalanced_by_hand() -> None:
    # groups A = (1, 1, 1), B = (0, 0), C = (1, 0): N = 7, k = 3, grand mean 4/7;
    # MSB = [3(3/7)² + 2(4/7)² + 2(1/14)²]/2 = 0.607143, MSW = 0.5/4 = 0.125,
    # m0 = (7 − 17/7)/2 = 2.285714, ICC = (MSB − MSW)/(MSB + (m0 − 1)MSW) = 0.627907
    icc = estimate_icc([1, 1, 1, 0, 0, 1, 0], ["A", "A", "A", "B", "B", "C", "C"])
    assert icc == pytest.approx(0.627907, abs=1e-6)
    # less agreement within than between groups: the negative estimate is reported as 0
    assert estimate_icc([1, 0, 1, 0], ["A", "A", "B", "B"]) == 0.0
    with pytest.raises(InputError, match=r"at least two groups and one group with repeats"):
        estimate_icc([1, 0], ["A", "B"])


def test_repeats_that_copy_each_other_count_once() -> None:
    # every seed repeats the item's outcome exactly: ICC = 1, deff = m, and the interval
    # must equal the Wilson interval of the single-evaluation table (statsmodels)
    from statsmodels.stats.proportion import proportion_confint

    rng = np.random.default_rng(11)
    x1 = (rng.random(300) < 0.6).astype(int)
    y1 = np.where(rng.random(300) < 0.15, 1 - x1, x1)
    est = estimate_discordance(np.tile(x1, (4, 1)), np.tile(y1, (4, 1)))
    assert est.icc == pytest.approx(1.0)
    assert est.design_effect == pytest.approx(4.0)
    low, high = proportion_confint(int(np.sum(x1 != y1)), 300, alpha=0.05, method="wilson")
    assert est.confidence_interval.low == pytest.approx(low, abs=1e-12)
    assert est.confidence_interval.high == pytest.approx(high, abs=1e-12)


def test_independent_repeats_keep_the_plain_interval() -> None:
    rng = np.random.default_rng(12)
    x = (rng.random((5, 400)) < 0.6).astype(int)
    y = np.where(rng.random((5, 400)) < 0.15, 1 - x, x)
    est = estimate_discordance(x, y)
    assert est.design_effect == pytest.approx(1.0, abs=0.1)
    with pytest.raises(InputError, match=r"`groups` must give one item id per pair \(2000\)"):
        estimate_discordance(x, y, groups=np.arange(10))


def test_read_pilot_gives_item_ids_for_repeats(tmp_path: Path) -> None:
    path = tmp_path / "pilot.csv"
    _outcomes(seeds=3).to_csv(path, index=False)
    pairs = read_pilot(path)
    assert pairs.x.shape == (3, 50) and len(pairs.item_ids) == 50
    icc, per_item = pairs.difference_icc()
    assert per_item == 3.0 and 0.0 <= icc <= 1.0


# ------------------------------------------------------- read_pilot on the outcomes spine


@pytest.mark.parametrize("kind", ["tsv", "jsonl", "frame"])
def test_read_pilot_reads_every_outcomes_source(tmp_path: Path, kind: str) -> None:
    table = _outcomes()
    if kind == "frame":
        source: object = table
    else:
        source = tmp_path / f"pilot.{kind}"
        if kind == "tsv":
            table.to_csv(source, sep="\t", index=False)
        else:
            table.to_json(source, orient="records", lines=True)
    pairs = read_pilot(source)
    assert pairs.x.shape == (2, 50)
    est = estimate_discordance(pairs.x, pairs.y)
    a = table[table.condition == "A"]["correct"].to_numpy()
    b = table[table.condition == "B"]["correct"].to_numpy()
    assert est.n_discordant == int(np.sum(a != b))
    assert est.effect == pytest.approx(a.mean() - b.mean())  # first minus second


def test_read_pilot_order_of_conditions_sets_the_sign(tmp_path: Path) -> None:
    table = _outcomes()
    forward = estimate_discordance(*_xy(read_pilot(table, conditions=["A", "B"])))
    backward = estimate_discordance(*_xy(read_pilot(table, conditions=["B", "A"])))
    assert forward.effect == pytest.approx(-backward.effect)
    assert (forward.n_a_only, forward.n_b_only) == (backward.n_b_only, backward.n_a_only)
    assert forward.discordance == backward.discordance


def _xy(pairs):
    return pairs.x, pairs.y


def test_read_pilot_drops_holes_with_a_record_or_names_them() -> None:
    table = _outcomes()
    hole = (table.condition == "B") & (table.seed == 1) & (table.item_id == "gsm-7")
    pairs = read_pilot(table[~hole])
    assert pairs.x.shape == (2, 49) and "gsm-7" not in pairs.item_ids
    assert pairs.dropped[["condition", "seed", "item_id"]].values.tolist() == [["B", 1, "gsm-7"]]
    with pytest.raises(InputError, match=r"item 'gsm-7' is missing for condition 'B', seed 1, "
                                         r"eval_noise 0.05, noise_seed 1"):
        read_pilot(table[~hole], holes="raise")


def test_icc_and_pilot_validation() -> None:
    with pytest.raises(InputError, match=r"`values` must not contain NaN or infinite values"):
        estimate_icc([1.0, float("nan"), 0.0, 1.0], ["A", "A", "B", "B"])
    with pytest.raises(InputError, match=r"`values` must be an array of numbers, got \['a'"):
        estimate_icc(["a", "b"], ["A", "A"])
    with pytest.raises(InputError, match=r"`confidence_level` must be a number, got '0.9'"):
        estimate_discordance([1, 0], [0, 1], confidence_level="0.9")
    with pytest.raises(InputError, match=r"`eval_noise` must be a number ≥ 0, got -1"):
        read_pilot(_outcomes(), eval_noise=-1)
    with pytest.raises(InputError, match=r"`eval_noise` must be a finite number, got nan"):
        read_pilot(_outcomes(), eval_noise=float("nan"))


def test_read_pilot_reads_a_result_version_directory(tmp_path: Path) -> None:
    version = tmp_path / "v1"
    version.mkdir()
    _outcomes(conditions=("E8b", "E8c")).to_parquet(version / "outcomes.parquet")
    pairs = read_pilot(version, conditions=["E8c", "E8b"])
    assert pairs.conditions == ("E8c", "E8b") and pairs.x.shape == (2, 50)
    with pytest.raises(InputError, match=r"holds neither outcomes.parquet"):
        read_pilot(tmp_path)
