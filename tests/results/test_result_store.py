from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pandas as pd
import pytest

from robuststats.errors import InputError
from robuststats.results import ResultStore, diff_versions, verify


def _write_table(value: float):
    def writer(path: Path) -> None:
        pd.DataFrame({"condition": ["A", "B"], "eval_noise": [0.0, 0.0],
                      "accuracy": [value, 0.5]}).to_parquet(path / "summary.parquet")
        (path / "report.md").write_text(f"# accuracy {value}\n")
    return writer


def test_versions_are_numbered_and_never_overwritten(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    v1 = store.write("s", _write_table(0.8), {"spec_hash": "abc"})
    before = {p.name: p.read_bytes() for p in v1.path.iterdir()}
    v2 = store.write("s", _write_table(0.9), {"spec_hash": "abc"})
    assert (v1.number, v2.number) == (1, 2)
    assert {p.name: p.read_bytes() for p in v1.path.iterdir()} == before
    assert [v.number for v in store.versions("s")] == [1, 2]
    assert store.get("s").number == 2 and store.get("s/v1").number == 1
    assert store.get(str(v1.path)).number == 1
    # sealed files are read-only
    assert not os.access(v1.path / "summary.parquet", os.W_OK) or os.geteuid() == 0
    assert not (v1.path / "summary.parquet").stat().st_mode & 0o222


def test_manifest_records_checksums_and_verify_detects_changes(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    v = store.write("s", _write_table(0.8), {"spec_hash": "abc"})
    manifest = json.loads((v.path / "manifest.json").read_text())
    assert set(manifest["files"]) == {"summary.parquet", "report.md"}
    assert len(manifest["files"]["report.md"]["sha256"]) == 64
    assert verify(v).ok
    report = v.path / "report.md"
    report.chmod(0o644)
    report.write_text("# accuracy 0.99\n")
    (v.path / "summary.parquet").chmod(0o644)
    (v.path / "summary.parquet").unlink()
    (v.path / "extra.txt").write_text("x")
    r = verify(v)
    assert not r.ok
    assert (r.changed, r.missing, r.extra) == (["report.md"], ["summary.parquet"], ["extra.txt"])


def _reserve(root: str, q) -> None:
    q.put(ResultStore(root).reserve("s")[0])


def test_concurrent_reservations_get_distinct_versions(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_reserve, args=(str(tmp_path), q)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    numbers = sorted(q.get(timeout=5) for _ in procs)
    assert numbers == [1, 2, 3, 4, 5, 6]


def test_reserve_skips_existing_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "s" / "v1").mkdir(parents=True)  # e.g. a crashed writer's reservation
    assert ResultStore(tmp_path).reserve("s")[0] == 2


def test_diff_reports_changed_values(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    a = store.write("s", _write_table(0.8), {})
    b = store.write("s", _write_table(0.9), {})
    c = store.write("s", _write_table(0.8), {})
    d = diff_versions(a, b)
    assert d[["table", "key", "column"]].values.tolist() == [["summary", "A, 0.0", "accuracy"]]
    assert (d["a"].iloc[0], d["b"].iloc[0]) == (0.8, 0.9)
    assert diff_versions(a, c).empty


def test_get_errors_are_clear(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    with pytest.raises(InputError, match="no results for study 'nope'"):
        store.get("nope")
    store.write("s", _write_table(0.8), {})
    with pytest.raises(InputError, match=r"s/v7 does not exist; versions: v1"):
        store.get("s/v7")
    with pytest.raises(InputError, match="must look like v3 or latest"):
        store.get("s/seven")
