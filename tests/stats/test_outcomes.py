"""Aligning an outcomes table into (n_seeds, n_items) arrays."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from robuststats.errors import InputError
from robuststats.stats import align_conditions, validate_outcomes


def _table(conditions=("A", "B"), seeds=(0, 1), noise=(0.0, 0.05), noise_seeds=(0, 1),
           items=("q1", "q2", "q3"), seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for cond in conditions:
        for s in seeds:
            for level in noise:
                for ns in (noise_seeds if level > 0 else (0,)):
                    for item in items:
                        rows.append(dict(condition=cond, seed=s, eval_noise=level,
                                         noise_seed=ns, item_id=item,
                                         correct=int(rng.random() < 0.6)))
    return pd.DataFrame(rows)


def test_by_seed_averages_noise_seeds():
    df = _table()
    aligned = align_conditions(df, ["A", "B"], 0.05)
    assert aligned.values["A"].shape == (2, 3)
    assert aligned.rows == (0, 1)
    assert aligned.item_ids == ("q1", "q2", "q3")
    sub = df[(df.condition == "A") & (df.eval_noise == 0.05) & (df.seed == 1)]
    expected = sub.groupby("item_id").correct.mean().sort_index().to_numpy()
    np.testing.assert_allclose(aligned.values["A"][1], expected)


def test_by_stratum_keeps_noise_seeds_binary():
    aligned = align_conditions(_table(), ["A", "B"], 0.05, by="stratum")
    assert aligned.values["B"].shape == (4, 3)
    assert aligned.rows == ((0, 0), (0, 1), (1, 0), (1, 1))
    assert set(np.unique(aligned.values["B"])) <= {0.0, 1.0}


def test_item_order_is_shared_even_when_rows_are_shuffled():
    df = _table()
    shuffled = df.sample(frac=1.0, random_state=3)
    a = align_conditions(df, ["A", "B"], 0.0)
    b = align_conditions(shuffled, ["A", "B"], 0.0)
    np.testing.assert_array_equal(a.values["A"], b.values["A"])


def test_missing_item_names_condition_item_and_seed():
    df = _table()
    df = df.drop(df[(df.condition == "B") & (df.seed == 1) & (df.item_id == "q2")
                    & (df.eval_noise == 0.0)].index)
    with pytest.raises(InputError, match=r"condition 'B': item 'q2' is missing for \{'seed': 1\}"):
        align_conditions(df, ["A", "B"], 0.0)


def test_different_item_sets_between_conditions():
    df = pd.concat([_table(conditions=("A",)), _table(conditions=("B",), items=("q1", "q2", "q9"))])
    with pytest.raises(InputError, match=r"items differ between conditions 'A' and 'B'.*\['q3'\].*\['q9'\]"):
        align_conditions(df, ["A", "B"], 0.0)


def test_different_seeds_between_conditions():
    df = pd.concat([_table(conditions=("A",)), _table(conditions=("B",), seeds=(0, 2))])
    with pytest.raises(InputError, match="seeds differ between conditions 'A' and 'B'"):
        align_conditions(df, ["A", "B"], 0.0)


def test_unequal_noise_seeds_per_seed_are_rejected():
    df = _table()
    df = df.drop(df[(df.condition == "A") & (df.seed == 0) & (df.noise_seed == 1)
                    & (df.item_id == "q1")].index)
    with pytest.raises(InputError, match=r"item .q1. under seed 0 has 1 evaluation\(s\), others have 2"):
        align_conditions(df, ["A", "B"], 0.05)


def test_unknown_condition_and_noise_level():
    df = _table()
    with pytest.raises(InputError, match=r"condition 'C' is not in the outcomes; available: \['A', 'B'\]"):
        align_conditions(df, ["A", "C"], 0.0)
    with pytest.raises(InputError, match=r"`eval_noise` 0.1 is not in the outcomes; available: \[0.0, 0.05\]"):
        align_conditions(df, ["A", "B"], 0.1)


def test_validate_outcomes_errors():
    df = _table()
    with pytest.raises(InputError, match=r"lacks required column\(s\) \['item_id'\]"):
        validate_outcomes(df.drop(columns="item_id"))
    bad = df.copy()
    bad.loc[bad.index[0], "correct"] = 2
    with pytest.raises(InputError, match=r"`outcomes\.correct` must be 0/1, got 2 in row"):
        validate_outcomes(bad)
    with pytest.raises(InputError, match="duplicate rows"):
        validate_outcomes(pd.concat([df, df.iloc[:1]]))
    with pytest.raises(InputError, match="must be a pandas DataFrame"):
        validate_outcomes([1, 2])
