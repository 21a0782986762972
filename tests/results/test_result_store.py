from __future__ import annotations

import errno
import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pandas as pd
import pytest

from robuststats.errors import InputError
from robuststats.results import ResultStore, diff_versions, verify
from robuststats.results._store import sweep_temporaries


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


def _publish(root: str, q, pause: float) -> None:
    def writer(path: Path, number: int) -> None:
        time.sleep(pause)  # widen the window in which the others claim the same number
        (path / "label.txt").write_text(f"v{number}\n")
    q.put(ResultStore(root).publish("s", writer, {}).number)


def test_concurrent_publishers_get_distinct_complete_versions(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_publish, args=(str(tmp_path), q, 0.05 * (i % 2)))
             for i in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    numbers = sorted(q.get(timeout=5) for _ in procs)
    assert numbers == [1, 2, 3, 4, 5, 6]
    store = ResultStore(tmp_path)
    for v in store.versions("s"):
        # the number inside every file is the number it was published under
        assert (v.path / "label.txt").read_text() == f"v{v.number}\n"
        assert v.manifest["version"] == v.number and verify(v).ok
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [f"v{n}" for n in range(1, 7)]


def test_empty_directory_of_an_old_reservation_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "s" / "v1").mkdir(parents=True)  # e.g. a crashed writer's reservation
    assert ResultStore(tmp_path).write("s", _write_table(0.8), {}).number == 2
    assert [v.number for v in ResultStore(tmp_path).versions("s")] == [2]
    (tmp_path / "s" / "v3").write_text("a file in the way")
    assert ResultStore(tmp_path).write("s", _write_table(0.8), {}).number == 4


def test_failed_write_publishes_nothing_and_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    store = ResultStore(tmp_path)
    store.write("s", _write_table(0.8), {})

    def disk_full(path: Path) -> None:
        _write_table(0.9)(path)
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        store.write("s", disk_full, {})
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["v1"]
    assert [v.number for v in store.versions("s")] == [1]
    assert store.get("s").number == 1 and verify(store.get("s")).ok
    # a failure while sealing (after the writer) is handled the same way
    monkeypatch.setattr("robuststats.results._store.sha256_file", _raise_enospc)
    with pytest.raises(OSError, match="No space left"):
        store.write("s", _write_table(0.9), {})
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["v1"]
    assert store.write("s", _write_table(0.9), {}).number == 2


def _raise_enospc(path: Path) -> str:
    raise OSError(errno.ENOSPC, "No space left on device")


def _killed_mid_write(root: str, started) -> None:
    def writer(path: Path) -> None:
        (path / "half.parquet").write_bytes(b"PAR1 half")
        started.set()
        time.sleep(60)
    ResultStore(root).write("s", writer, {})


def test_temporary_of_a_killed_publisher_is_ignored_then_removed(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.write("s", _write_table(0.8), {})
    ctx = multiprocessing.get_context("fork")
    started = ctx.Event()
    proc = ctx.Process(target=_killed_mid_write, args=(str(tmp_path), started))
    proc.start()
    assert started.wait(30)
    leftovers = [p.name for p in (tmp_path / "s").iterdir() if p.name != "v1"]
    assert len(leftovers) == 2 and all(n.startswith(".tmp-v2-") for n in leftovers)
    # a live publisher's temporary is never swept
    assert sweep_temporaries(tmp_path / "s") == []
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    # half a version is never listed, shown or verified
    assert [v.number for v in store.versions("s")] == [1]
    assert store.get("s").number == 1 and store.studies() == ["s"]
    v2 = store.write("s", _write_table(0.9), {})
    assert v2.number == 2
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["v1", "v2"]


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
