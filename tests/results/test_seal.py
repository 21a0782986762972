"""The seal of a version: any changed byte of any file, the manifest included, is found.

The attacks are a hostile user's: copy a version, make it writable, edit ``manifest.json``
(a hypothesis, ``cells_planned``, the environment), with and without recomputing the
manifest's own seal, and see ``results verify``, ``analyze`` and ``gate`` refuse it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from robuststats.cli import main
from robuststats.results import INDEX, ResultStore, ResultVersion, verify
from robuststats.results._seal import manifest_root, spec_hash_of, with_seal

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sealed version with a study spec: the committed E8 v1 re-analysed."""
    out = tmp_path_factory.mktemp("store")
    assert main(["analyze", str(REPO / "results/e8_matrix/v1"), "--n-resamples", "50",
                 "--out", str(out), "--format", "json"]) == 0
    (version,) = (out / "e8_matrix").glob("v*")
    return version


def _writable_copy(src: Path, root: Path) -> Path:
    dst = root / src.parent.name / src.name
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    index = src.parent.parent / INDEX
    if index.exists():
        shutil.copy(index, root / INDEX)
    return dst


def _edit(version: Path, change, *, reseal: bool = False) -> None:
    path = version / "manifest.json"
    m = json.loads(path.read_text())
    change(m)
    if reseal:
        m = with_seal(m)
    path.write_text(json.dumps(m, indent=2))


def test_a_new_version_is_sealed_and_in_the_index(sealed: Path) -> None:
    m = json.loads((sealed / "manifest.json").read_text())
    assert m["seal"]["root"] == manifest_root(m) and m["seal"]["format"] == 1
    lines = [json.loads(x) for x in (sealed.parent.parent / INDEX).read_text().splitlines()]
    assert {"study": "e8_matrix", "version": 1, "root": m["seal"]["root"]}.items() \
        <= lines[-1].items()
    report = verify(ResultVersion.load(sealed))
    assert report.ok and report.manifest_changed is False and report.index == "match"
    assert report.spec_hash_changed is False


@pytest.mark.parametrize("change", [
    lambda m: m["spec"]["hypotheses"][0].update(relation="less", margin=0.5),
    lambda m: m.update(cells_planned=m.get("cells_planned", 0) + 1),
    lambda m: m["environment"].update(python="2.7"),
    lambda m: m["files"]["summary.csv"].update(bytes=1),
], ids=["hypothesis", "cells_planned", "environment", "a file's record"])
def test_an_edited_manifest_is_found(sealed: Path, tmp_path: Path, change, capsys) -> None:
    copy = _writable_copy(sealed, tmp_path)
    _edit(copy, change)
    report = verify(ResultVersion.load(copy))
    assert report.manifest_changed and not report.ok
    assert main(["results", "--root", str(tmp_path), "verify", "e8_matrix/v1"]) == 1
    assert "manifest.json (it no longer matches its seal)" in capsys.readouterr().out


def test_a_resealed_edit_disagrees_with_the_index(sealed: Path, tmp_path: Path,
                                                  capsys) -> None:
    copy = _writable_copy(sealed, tmp_path)
    _edit(copy, lambda m: m.update(cells_planned=1), reseal=True)
    report = verify(ResultVersion.load(copy))
    assert report.manifest_changed is False and report.index == "differs" and not report.ok
    assert main(["results", "--root", str(tmp_path), "verify", "e8_matrix/v1"]) == 1
    assert "index records another seal" in capsys.readouterr().out


def test_a_resealed_spec_edit_breaks_the_spec_hash(sealed: Path, tmp_path: Path) -> None:
    copy = _writable_copy(sealed, tmp_path)
    (tmp_path / INDEX).unlink()  # no index: the version's own records only
    _edit(copy, lambda m: m["spec"]["hypotheses"][0].update(relation="less"), reseal=True)
    report = verify(ResultVersion.load(copy))
    assert report.spec_hash_changed and report.index is None and not report.ok


def test_what_the_seal_cannot_find_is_a_consistent_rewrite(sealed: Path,
                                                          tmp_path: Path) -> None:
    """Documented limit: spec, spec_hash, seal and index all rewritten together."""
    copy = _writable_copy(sealed, tmp_path)

    def rewrite(m: dict) -> None:
        m["spec"]["hypotheses"][0]["relation"] = "less"
        m["spec_hash"] = spec_hash_of(m["spec"])

    _edit(copy, rewrite, reseal=True)
    root = json.loads((copy / "manifest.json").read_text())["seal"]["root"]
    (tmp_path / INDEX).write_text(json.dumps({"study": "e8_matrix", "version": 1,
                                              "root": root}) + "\n")
    assert verify(ResultVersion.load(copy)).ok


def test_analyze_and_gate_refuse_an_edited_version(sealed: Path, tmp_path: Path,
                                                   capsys) -> None:
    copy = _writable_copy(sealed, tmp_path)
    _edit(copy, lambda m: m["spec"]["hypotheses"][0].update(relation="less", margin=0.5))
    capsys.readouterr()
    assert main(["analyze", str(copy)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "changed after it was sealed" in err[0]
    assert main(["gate", str(copy), "--baseline", str(sealed), "--max-degradation", "0.2",
                 "--baseline-condition", "E8a", "--candidate-condition", "E8c",
                 "--no-progress"]) == 2
    assert "manifest.json" in capsys.readouterr().err


def test_committed_versions_still_verify(capsys) -> None:
    """Versions sealed before manifests carried a seal: files, cells and the spec hash are
    checked, and the output says the manifest itself is not."""
    store = ResultStore(REPO / "results")
    for study in store.studies():
        for version in store.versions(study):
            report = verify(version, trace_run=False)
            assert report.ok, version.label
            # None: sealed before manifests carried a seal; False: sealed and unchanged
            assert report.manifest_changed in (None, False)
            assert report.spec_hash_changed is False


def test_publishers_append_one_index_line_each(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    for i in range(5):
        store.write("s", lambda p: (p / "x.txt").write_text("x"), {"i": i})
    lines = (tmp_path / INDEX).read_text().splitlines()
    assert [json.loads(x)["version"] for x in lines] == [1, 2, 3, 4, 5]
    assert all(verify(v).index == "match" for v in store.versions("s"))
    assert os.access(tmp_path / INDEX, os.R_OK)
