from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from robuststats.errors import InputError
from robuststats.glossary import TABLE_COLUMNS
from robuststats.results import (
    ResultStore,
    confidence_level,
    diff_versions,
    is_analysis_only,
    normalize_table,
    read_table,
    read_tables,
)

ROOT = Path(__file__).resolve().parents[2]
V1 = ROOT / "results" / "e8_matrix" / "v1"

OLD_TESTS = pd.DataFrame({"eval_noise": [0.0], "a": ["A"], "b": ["B"], "n10": [7], "n01": [3],
                          "difference": [0.04], "ci_low": [0.01], "ci_high": [0.07],
                          "test": ["stratified McNemar (clustered)"], "pvalue": [0.2]})


def test_normalize_renames_old_columns_and_adds_the_level() -> None:
    out = normalize_table("tests", OLD_TESTS, confidence_level=0.9)
    # every row of an old tests table decided `reject`: role "decision"
    assert list(out.columns) == ["eval_noise", "a", "b", "role", "n_a_only", "n_b_only",
                                 "estimate", "ci_low", "ci_high", "ci_level", "test", "pvalue"]
    assert out["role"].tolist() == ["decision"] * len(out)
    assert out[["n_a_only", "n_b_only", "estimate", "ci_level"]].iloc[0].tolist() == [
        7, 3, 0.04, 0.9]
    assert list(OLD_TESTS.columns)[3] == "n10"  # the input is not modified
    # without a known level the interval's level stays unknown, never assumed
    assert "ci_level" not in normalize_table("tests", OLD_TESTS).columns


def test_normalize_keeps_new_names_and_existing_levels() -> None:
    new = pd.DataFrame({"id": ["H1"], "ci_low": [0.0], "ci_high": [1.0], "ci_level": [0.99],
                        "ci_method": ["bca"], "test": ["something else"]})
    out = normalize_table("hypotheses", new, confidence_level=0.9)
    assert out["ci_level"].tolist() == [0.99]
    assert (out["ci_method"].iloc[0], out["test"].iloc[0]) == ("bca", "something else")
    old = pd.DataFrame({"id": ["H1"], "ci_low": [0.0], "ci_high": [1.0], "ci_level": [0.99],
                        "test": ["BCa bootstrap interval"]})
    assert normalize_table("hypotheses", old)["ci_method"].tolist() == ["BCa bootstrap interval"]
    # an unknown table passes through
    assert normalize_table("custom", OLD_TESTS).equals(OLD_TESTS)


def test_manifest_helpers() -> None:
    assert confidence_level({"confidence_level": 0.9}) == 0.9
    assert confidence_level({"spec": {"analysis": {"confidence_level": 0.8}}}) == 0.8
    assert confidence_level({"spec": None}) is None
    assert is_analysis_only({"analysis_only": True, "source": "x"})
    assert not is_analysis_only({})


@pytest.mark.skipif(not (V1 / "manifest.json").is_file(), reason="committed version absent")
def test_committed_version_reads_under_glossary_names() -> None:
    version = ResultStore(ROOT / "results").get("e8_matrix/v1")
    tables = read_tables(version)
    assert set(tables) == {"hypotheses", "summary", "retention", "seeds", "tests", "missing"}
    for name, df in tables.items():
        declared = [c for c in TABLE_COLUMNS[name] if c in df.columns]
        assert list(df.columns[:len(declared)]) == declared, name
    assert tables["summary"]["ci_level"].eq(0.95).all()
    assert tables["tests"][["n_a_only", "n_b_only"]].iloc[0].tolist() == [493, 168]
    assert tables["hypotheses"]["ci_method"].eq("BCa bootstrap interval").all()
    assert read_table(version, "omnibus") is None


def test_diff_compares_across_renamed_columns(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    new = normalize_table("tests", OLD_TESTS, confidence_level=0.9).assign(question="q")
    a = store.write("s", lambda p: OLD_TESTS.to_parquet(p / "tests.parquet"),
                    {"confidence_level": 0.9})
    b = store.write("s", lambda p: new.assign(estimate=0.05).to_parquet(p / "tests.parquet"),
                    {"confidence_level": 0.9})
    d = diff_versions(a, b)
    assert d[["table", "key", "column", "a", "b"]].values.tolist() == [
        ["tests", "", "question", "absent", "present"],
        ["tests", "0.0, A, B, decision", "estimate", 0.04, 0.05]]


def test_unknown_study_did_you_mean(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.write("e8_matrix", lambda p: None, {})
    with pytest.raises(InputError, match=r"^no results for study 'e8_matrx' under '.*'; "
                                         r"did you mean 'e8_matrix'\?$"):
        store.get("e8_matrx/v1")
    with pytest.raises(InputError, match=r"\(studies with results: e8_matrix\)\.$"):
        store.get("zzz")
    with pytest.raises(InputError, match="is not a result version"):
        store.get(str(tmp_path / "e8_matrx" / "v1"))
    assert store.get("e8_matrix/v1/").number == 1


def test_damaged_table_or_manifest_is_an_input_error(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    v = store.write("s", lambda p: OLD_TESTS.to_parquet(p / "tests.parquet"), {})
    target = v.path / "tests.parquet"
    target.chmod(0o644)
    target.write_bytes(b"not parquet")
    with pytest.raises(InputError, match=r"tests\.parquet: cannot be read .*results verify"):
        read_table(v, "tests")
    manifest = v.path / "manifest.json"
    manifest.chmod(0o644)
    manifest.write_text("[1, 2]")
    with pytest.raises(InputError, match="must hold a JSON object, got list"):
        store.get("s/v1")
