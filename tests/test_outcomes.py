"""The outcomes spine: reading every format, validation, holes and alignment."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from robuststats.errors import InputError
from robuststats.outcomes import (
    align,
    align_series,
    complete,
    missing_cells,
    read_outcomes,
    validate_outcomes,
)


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


def _drop(df, **where):
    mask = np.ones(len(df), bool)
    for k, v in where.items():
        mask &= (df[k] == v).to_numpy()
    return df[~mask].reset_index(drop=True)


# ---------------------------------------------------------------------- reading
@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_every_format_reads_to_the_same_table(tmp_path: Path, suffix: str) -> None:
    df = _table()
    path = tmp_path / f"o{suffix}"
    if suffix == ".csv":
        df.to_csv(path, index=False)
    elif suffix == ".tsv":
        df.to_csv(path, sep="\t", index=False)
    elif suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_parquet(path)
    got = read_outcomes(path)
    pd.testing.assert_frame_equal(got, validate_outcomes(df), check_dtype=False)
    assert list(got.columns) == ["condition", "seed", "eval_noise", "noise_seed", "item_id",
                                 "correct"]


def test_run_directory_and_result_version(tmp_path: Path) -> None:
    df = _table()
    (tmp_path / "run" / "cells").mkdir(parents=True)
    for i, (_, part) in enumerate(df.groupby(["condition", "seed", "eval_noise",
                                              "noise_seed"])):
        part.to_parquet(tmp_path / "run" / "cells" / f"c{i}.parquet")
    (tmp_path / "v1").mkdir()
    df.to_parquet(tmp_path / "v1" / "outcomes.parquet")
    expected = validate_outcomes(df)
    for source in (tmp_path / "run", tmp_path / "v1"):
        pd.testing.assert_frame_equal(read_outcomes(source), expected, check_dtype=False)
    with pytest.raises(InputError, match=r"neither outcomes\.parquet"):
        read_outcomes(tmp_path)


def test_run_directory_cells_are_checked_against_their_records(tmp_path: Path) -> None:
    from robuststats.results import cell_digest

    cells = tmp_path / "run" / "cells"
    cells.mkdir(parents=True)
    parts = list(_table().groupby(["condition", "seed", "eval_noise", "noise_seed"]))
    for i, (_, part) in enumerate(parts):
        part.to_parquet(cells / f"c{i}.parquet")
        record = {"sha256": cell_digest(part), "rows": len(part)}
        (cells / f"c{i}.json").write_text(json.dumps(record))
    assert len(read_outcomes(tmp_path / "run")) == sum(len(p) for _, p in parts)
    altered = parts[3][1].assign(correct=1 - parts[3][1]["correct"])
    altered.to_parquet(cells / "c3.parquet")
    with pytest.raises(InputError, match=r"cell 'c3': its rows changed after it was written"):
        read_outcomes(tmp_path / "run")
    parts[3][1].iloc[:-1].to_parquet(cells / "c3.parquet")
    with pytest.raises(InputError, match=r"cell 'c3': it holds 2 rows, its record says 3"):
        read_outcomes(tmp_path / "run")


@pytest.mark.parametrize("name", ["B\x00", "B\n", "\x1b[31mB"])
def test_control_characters_in_a_condition_name_are_refused(name: str) -> None:
    df = pd.DataFrame(dict(condition=["A", name], item_id=["q1", "q1"], correct=[1, 0]))
    with pytest.raises(InputError, match=r"column 'condition' holds a control character in "
                                         r"row 2"):
        validate_outcomes(df)


def test_truncated_jsonl_line_is_named_by_its_real_line(tmp_path: Path) -> None:
    path = tmp_path / "o.jsonl"
    lines = [json.dumps({"condition": "A", "item_id": f"q{i}", "correct": 1})
             for i in range(5)]
    lines.insert(2, "")  # blank lines are skipped but still counted
    lines[4] = lines[4][:15]  # cut by a killed writer
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"o\.jsonl:5: not a JSON object"):
        read_outcomes(path)


def test_unknown_format_and_missing_path(tmp_path: Path) -> None:
    (tmp_path / "o.xlsx").write_text("x")
    with pytest.raises(InputError, match=r"unknown format '\.xlsx'"):
        read_outcomes(tmp_path / "o.xlsx")
    with pytest.raises(InputError, match="does not exist"):
        read_outcomes(tmp_path / "nope.csv")


# ---------------------------------------------------------------------- validation
def test_optional_columns_default_and_are_recorded() -> None:
    df = pd.DataFrame({"condition": ["A", "B"], "item_id": ["q", "q"], "correct": [1, 0]})
    out = validate_outcomes(df)
    assert out[["seed", "eval_noise", "noise_seed"]].to_numpy().tolist() == [[0, 0, 0]] * 2
    assert out.attrs["defaulted"] == ["seed", "eval_noise", "noise_seed"]


def test_duplicates_caused_by_a_defaulted_column_name_it() -> None:
    df = _table(noise=(0.05,)).drop(columns="noise_seed")
    with pytest.raises(InputError, match=r"duplicate row.*\['noise_seed'\] (is|are) absent "
                                         r"and were filled with 0"):
        validate_outcomes(df)


def test_validation_errors_name_column_row_and_value() -> None:
    df = _table()
    with pytest.raises(InputError, match=r"missing required column\(s\) \['item_id'\]"):
        validate_outcomes(df.drop(columns="item_id"))
    bad = df.copy()
    bad.loc[4, "correct"] = 2
    with pytest.raises(InputError, match=r"column 'correct' must hold 0/1, got 2 in row 5"):
        validate_outcomes(bad)
    bad = df.astype({"seed": object})
    bad.loc[2, "seed"] = "x"
    with pytest.raises(InputError, match=r"column 'seed' must hold integers, got 'x' in row 3"):
        validate_outcomes(bad)
    with pytest.raises(InputError, match="duplicate row"):
        validate_outcomes(pd.concat([df, df.iloc[:1]]))
    with pytest.raises(InputError, match="must be a pandas DataFrame"):
        validate_outcomes([1, 2])
    with pytest.raises(InputError, match="has no rows"):
        validate_outcomes(df.iloc[:0])


def test_true_false_words_are_outcomes() -> None:
    df = pd.DataFrame({"condition": ["A", "A"], "item_id": ["p", "q"],
                       "correct": ["True", "false"]})
    assert validate_outcomes(df)["correct"].tolist() == [1, 0]


# ---------------------------------------------------------------------- alignment
def test_by_seed_averages_noise_seeds() -> None:
    df = _table()
    aligned = align(df, ["A", "B"], 0.05)
    assert aligned.values["A"].shape == (2, 3)
    assert aligned.rows == (0, 1)
    assert aligned.item_ids == ("q1", "q2", "q3")
    sub = df[(df.condition == "A") & (df.eval_noise == 0.05) & (df.seed == 1)]
    expected = sub.groupby("item_id").correct.mean().sort_index().to_numpy()
    np.testing.assert_allclose(aligned.values["A"][1], expected)
    assert aligned.dropped.empty


def test_by_stratum_keeps_noise_seeds_binary() -> None:
    aligned = align(_table(), ["A", "B"], 0.05, by="stratum")
    assert aligned.values["B"].shape == (4, 3)
    assert aligned.rows == ((0, 0), (0, 1), (1, 0), (1, 1))
    assert set(np.unique(aligned.values["B"])) <= {0.0, 1.0}


def test_row_order_of_the_file_does_not_matter() -> None:
    df = _table()
    a = align(df, ["A", "B"], 0.0)
    b = align(df.sample(frac=1.0, random_state=3), ["A", "B"], 0.0)
    np.testing.assert_array_equal(a.values["A"], b.values["A"])


def test_missing_item_raise_names_condition_seed_level_noise_seed_and_item() -> None:
    df = _drop(_table(), condition="B", seed=1, eval_noise=0.05, noise_seed=1, item_id="q2")
    with pytest.raises(InputError, match=r"item 'q2' is missing for condition 'B', seed 1, "
                                         r"eval_noise 0.05, noise_seed 1"):
        align(df, ["A", "B"], 0.05)
    with pytest.raises(InputError, match=r"item 'q2' is missing for condition 'B', seed 1, "
                                         r"eval_noise 0.05, noise_seed 1"):
        align(df, ["A", "B"], 0.05, by="stratum")


def test_missing_item_drop_removes_it_everywhere_with_a_record() -> None:
    df = _drop(_table(), condition="B", seed=1, eval_noise=0.0, item_id="q2")
    aligned = align(df, ["A", "B"], 0.0, holes="drop")
    assert aligned.item_ids == ("q1", "q3")
    assert aligned.values["A"].shape == aligned.values["B"].shape == (2, 2)
    rec = aligned.dropped.iloc[0]
    assert (rec["condition"], rec["seed"], rec["item_id"]) == ("B", 1, "q2")
    assert "item dropped" in rec["reason"]


def test_missing_cell_drops_the_seed_for_every_condition() -> None:
    df = _drop(_table(), condition="B", seed=1, eval_noise=0.05)
    with pytest.raises(InputError, match=r"every item is missing for condition 'B', seed 1, "
                                         r"eval_noise 0.05 \(cell missing\)"):
        align(df, ["A", "B"], 0.05)
    aligned = align(df, ["A", "B"], 0.05, holes="drop")
    assert aligned.rows == (0,)
    assert aligned.dropped["reason"].str.contains("seed dropped").all()


def test_items_differing_between_conditions_are_holes() -> None:
    df = pd.concat([_table(conditions=("A",)), _table(conditions=("B",),
                                                       items=("q1", "q2", "q9"))])
    with pytest.raises(InputError, match=r"item 'q9' is missing for condition 'A'"):
        align(df, ["A", "B"], 0.0)
    assert align(df, ["A", "B"], 0.0, holes="drop").item_ids == ("q1", "q2")


def test_unknown_condition_and_noise_level() -> None:
    df = _table()
    with pytest.raises(InputError, match=r"condition 'C' is not in the outcomes"):
        align(df, ["A", "C"], 0.0)
    with pytest.raises(InputError, match=r"condition 'A' has no outcomes at eval_noise 0.1 "
                                         r"\(levels: \[0.0, 0.05\]\)"):
        align(df, ["A", "B"], 0.1)
    with pytest.raises(InputError, match=r"`holes` must be one of 'raise', 'drop'"):
        align(df, ["A", "B"], 0.0, holes="ignore")


def test_align_series_pairs_clean_and_noisy_levels() -> None:
    df = _table()
    aligned = align_series(df, [("A", 0.0), ("A", 0.05)])
    assert set(aligned.values) == {("A", 0.0), ("A", 0.05)}
    with pytest.raises(InputError, match="one noise level at a time"):
        align_series(df, [("A", 0.0), ("A", 0.05)], by="stratum")


# ---------------------------------------------------------------------- holes
def test_missing_cells_from_the_cross_product_or_a_plan() -> None:
    df = _drop(_table(), condition="B", seed=1, eval_noise=0.05, noise_seed=0)
    gone = missing_cells(df)
    assert gone.to_dict(orient="records") == [
        {"condition": "B", "seed": 1, "eval_noise": 0.05, "noise_seed": 0}]

    class Cell:
        def __init__(self, *key):
            self.condition, self.seed, self.eval_noise, self.noise_seed = key

    planned = [Cell("A", 2, 0.0, 0), Cell("A", 0, 0.0, 0)]
    assert missing_cells(df, planned)["seed"].tolist() == [2]


def test_complete_drops_an_item_from_the_whole_table_or_raises() -> None:
    df = _drop(validate_outcomes(_table()), condition="A", seed=0, eval_noise=0.0,
               item_id="q3")
    done = complete(df)
    assert set(done.outcomes["item_id"]) == {"q1", "q2"}
    assert done.dropped[["condition", "seed", "item_id"]].values.tolist() == [["A", 0, "q3"]]
    assert done.missing.empty
    with pytest.raises(InputError, match=r"item 'q3' is missing under condition 'A', seed 0, "
                                         r"eval_noise 0, noise_seed 0"):
        complete(df, holes="raise")


def test_reader_formats_and_defaults(tmp_path: Path) -> None:
    rows = [{"condition": "A", "item_id": 1, "correct": True},
            {"condition": "A", "item_id": 2, "correct": False},
            {"condition": "B", "item_id": 1, "correct": 1},
            {"condition": "B", "item_id": 2, "correct": 1}]
    (tmp_path / "o.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    pd.DataFrame(rows).to_csv(tmp_path / "o.csv", index=False)
    pd.DataFrame(rows).astype({"item_id": str, "correct": int}).to_parquet(
        tmp_path / "o.parquet")
    for name in ("o.jsonl", "o.csv", "o.parquet"):
        df = read_outcomes(tmp_path / name)
        assert df["seed"].tolist() == [0] * 4 and df["noise_seed"].tolist() == [0] * 4
        assert df["eval_noise"].tolist() == [0.0] * 4
        assert df["item_id"].tolist() == ["1", "2", "1", "2"]
        assert df["correct"].tolist() == [1, 0, 1, 1]


def test_reader_errors_are_clear(tmp_path: Path) -> None:
    pd.DataFrame({"cond": ["A"], "item_id": ["x"], "correct": [1]}).to_csv(tmp_path / "a.csv")
    with pytest.raises(InputError, match=r"missing required column\(s\) \['condition'\]"):
        read_outcomes(tmp_path / "a.csv")
    pd.DataFrame({"condition": ["A", "A"], "item_id": ["x", "y"], "correct": [1, 2]}).to_csv(
        tmp_path / "b.csv", index=False)
    with pytest.raises(InputError, match=r"column 'correct' must hold 0/1, got 2 in row 2"):
        read_outcomes(tmp_path / "b.csv")
    pd.DataFrame({"condition": ["A", "A"], "item_id": ["x", "x"], "correct": [1, 0]}).to_csv(
        tmp_path / "c.csv", index=False)
    with pytest.raises(InputError, match=r"1 duplicate row\(s\)"):
        read_outcomes(tmp_path / "c.csv")
    pd.DataFrame({"condition": ["A"], "item_id": ["x"], "correct": [1],
                  "seed": ["one"]}).to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(InputError, match=r"column 'seed' must hold integers, got 'one' in row 1"):
        read_outcomes(tmp_path / "d.csv")
    (tmp_path / "e.txt").write_text("x")
    with pytest.raises(InputError, match=r"unknown format '.txt'"):
        read_outcomes(tmp_path / "e.txt")
    with pytest.raises(InputError, match="does not exist"):
        read_outcomes(tmp_path / "nope.csv")
