from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from robuststats.cli import main
from robuststats.results import ResultStore

ROOT = Path(__file__).resolve().parents[2]
V1 = ROOT / "results" / "e8_matrix" / "v1"


def _hypotheses(acc: float) -> pd.DataFrame:
    return pd.DataFrame({
        "id": ["H1"], "statement": ["A beats B by 5 pp at 5 % noise"], "metric": ["accuracy"],
        "a": ["A"], "b": ["B"], "eval_noise": [0.05], "relation": ["greater"],
        "margin": [0.05], "estimate": [acc - 0.7], "ci_low": [0.01], "ci_high": [0.2],
        "ci_level": [0.9], "ci_method": ["seeds x items bootstrap (bca)"], "pvalue": [0.004],
        "pvalue_adjusted": [0.0123456], "multiplicity": ["holm"], "verdict": ["VERIFIED"],
        "reason": ["interval above the margin"]})


def _version(root: Path, acc: float, **manifest: object) -> None:
    def writer(path: Path) -> None:
        _hypotheses(acc).to_parquet(path / "hypotheses.parquet")
        pd.DataFrame({"condition": ["A", "A"], "eval_noise": [0.0, 0.05],
                      "accuracy": [acc, acc - 0.2], "ci_low": [acc - 0.05, acc - 0.25],
                      "ci_high": [acc + 0.05, acc - 0.15], "ci_level": [0.9, 0.9]}
                     ).to_parquet(path / "summary.parquet")
        pd.DataFrame({"condition": ["A"], "eval_noise": [0.05], "retention": [0.75],
                      "ci_low": [0.7], "ci_high": [0.8], "ci_level": [0.9]}
                     ).to_parquet(path / "retention.parquet")
    ResultStore(root).write("demo", writer, {"spec_hash": "f" * 64, "cells_planned": 4,
                                              "cells_finished": 4, **manifest})


@pytest.mark.parametrize("argv", [["results", "--help"], ["results", "verify", "--help"],
                                  ["results", "diff", "--help"]])
def test_help(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    assert "usage:" in capsys.readouterr().out


@pytest.mark.parametrize("action", ["list", "show", "verify", "diff"])
def test_every_action_has_format(action: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["results", action, "--help"])
    out = capsys.readouterr().out
    assert "--format {table,json}" in out and "--root DIR" in out


def test_list_show_verify_diff(tmp_path: Path, capsys) -> None:
    root = ["results", "--root", str(tmp_path)]
    assert main([*root, "list"]) == 0
    assert "no result versions" in capsys.readouterr().out
    _version(tmp_path, 0.8)
    _version(tmp_path, 0.9)
    assert main([*root, "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["version", "kind", "sealed", "spec", "outcomes", "cells"]
    assert re.fullmatch(r"demo/v1 +study +\S+ +f{12} +- +4/4", out[1])
    assert out[2].startswith("demo/v2 ")
    assert main([*root, "show", "demo"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("demo/v2  (")
    line = next(x for x in out.splitlines() if x.startswith("H1 "))
    assert line.split("  ")[0:1] == ["H1"]
    for piece in ("A − B > 5.0 pp (accuracy at 5% noise)", "+20.0", "[1.0, 20.0] 90%",
                  "seeds x items bootstrap (bca)", "0.0123", "VERIFIED"):
        assert piece in line
    assert "95%" not in out  # every level comes from the data
    assert re.search(r"^A +5% +70\.0 +\[65\.0, 75\.0\] 90% +75\.0 +\[70\.0, 80\.0\] 90%$", out,
                     re.M)
    assert re.search(r"^A +0% +90\.0 +\[85\.0, 95\.0\] 90% +- +-$", out, re.M)
    assert main([*root, "verify", "demo/v1", "demo/v2"]) == 0
    assert capsys.readouterr().out.count(": OK") == 2
    assert main([*root, "verify", "demo", "v1"]) == 0  # the spelling in results/README.md
    assert capsys.readouterr().out.startswith("demo/v1: OK")
    assert main([*root, "diff", "demo/v1", "demo/v1"]) == 0
    assert "tables identical" in capsys.readouterr().out
    assert main([*root, "diff", "demo/v1", "demo/v2"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("demo/v1 vs demo/v2: 7 difference(s)")  # 6 summary, 1 estimate
    assert "summary" in out and "accuracy" in out and "hypotheses" in out


def test_root_after_the_action(tmp_path: Path, capsys) -> None:
    _version(tmp_path, 0.8)
    assert main(["results", "list", "--root", str(tmp_path)]) == 0
    assert "demo/v1" in capsys.readouterr().out
    assert main(["results", "show", "demo", "--root", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("demo/v1  (")
    # given before and after the action, the one after wins
    assert main(["results", "--root", str(tmp_path / "nowhere"), "verify", "demo",
                 "--root", str(tmp_path)]) == 0


def test_json_output(tmp_path: Path, capsys) -> None:
    assert main(["results", "list", "--root", str(tmp_path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"root": str(tmp_path), "versions": []}
    _version(tmp_path, 0.8)
    _version(tmp_path, 0.9, analysis_only=True, source="runs/demo")
    root = ["--root", str(tmp_path), "--format", "json"]
    assert main(["results", "list", *root]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["root"] == str(tmp_path)
    assert [(v["version"], v["kind"]) for v in listed["versions"]] == [
        ("demo/v1", "study"), ("demo/v2", "analysis-only")]
    assert listed["versions"][0]["cells_planned"] == 4
    assert main(["results", "show", "demo/v1", *root]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["version"] == "demo/v1" and shown["analysis_only"] is False
    h = shown["hypotheses"][0]
    assert h["claim"] == "A − B > 5.0 pp (accuracy at 5% noise)"
    assert (h["ci_level"], h["pvalue_adjusted"], h["verdict"]) == (0.9, 0.0123456, "VERIFIED")
    assert [r["eval_noise"] for r in shown["summary"]] == [0.0, 0.05]
    assert shown["retention"][0]["retention"] == 0.75
    assert main(["results", "verify", "demo/v1", *root]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"version": "demo/v1", "ok": True, "files": 3, "changed": [], "missing": [],
         "unexpected": [], "cells": 0, "cells_changed": [], "cells_missing": [],
         "cells_unexpected": [], "run_dir": None, "run_cells_differ": [],
         "run_cells_gone": [], "run_note": "", "manifest_changed": False,
         "spec_hash_changed": None, "index": "match"}]
    assert main(["results", "diff", "demo/v1", "demo/v2", *root]) == 1
    d = json.loads(capsys.readouterr().out)
    assert (d["a"], d["b"], d["identical"]) == ("demo/v1", "demo/v2", False)
    assert {"table": "summary", "key": "A, 0.0", "column": "accuracy", "a": 0.8,
            "b": 0.9} in d["differences"]


def test_analysis_only_is_marked(tmp_path: Path, capsys) -> None:
    _version(tmp_path, 0.8, analysis_only=True, source="runs/demo")
    assert main(["results", "--root", str(tmp_path), "list"]) == 0
    assert re.search(r"^demo/v1 +analysis-only ", capsys.readouterr().out, re.M)
    assert main(["results", "--root", str(tmp_path), "show", "demo"]) == 0
    out = capsys.readouterr().out
    assert "analysis-only version" in out and "source: runs/demo" in out


def test_verify_detects_modified_file(tmp_path: Path, capsys) -> None:
    _version(tmp_path, 0.8)
    target = tmp_path / "demo" / "v1" / "summary.parquet"
    target.chmod(0o644)
    pd.DataFrame({"condition": ["A"], "eval_noise": [0.0], "accuracy": [0.99]}).to_parquet(target)
    assert main(["results", "--root", str(tmp_path), "verify", "demo"]) == 1
    assert "demo/v1: changed: summary.parquet" in capsys.readouterr().out
    assert main(["results", "--root", str(tmp_path), "verify", "demo", "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)[0]["changed"] == ["summary.parquet"]


def test_unknown_version_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    _version(tmp_path, 0.8)
    assert main(["results", "--root", str(tmp_path), "show", "demo/v9"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "robuststats results: error: demo/v9 does not exist; versions: v1."


def test_unknown_study_suggests_the_closest(tmp_path: Path, capsys) -> None:
    _version(tmp_path, 0.8)
    assert main(["results", "--root", str(tmp_path), "show", "dmeo"]) == 2
    err = capsys.readouterr().err
    assert err == (f"robuststats results: error: no results for study 'dmeo' under "
                   f"{str(tmp_path)!r}; did you mean 'demo'?\n")
    assert main(["results", "--root", str(tmp_path), "show", "zzz/v1", "--format",
                 "json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().endswith("(studies with results: demo).")


@pytest.mark.skipif(not (V1 / "manifest.json").is_file(), reason="committed version absent")
def test_show_reads_the_committed_version_written_before_the_glossary(capsys) -> None:
    """results/e8_matrix/v1 has the old column names (tests `difference`, hypotheses
    `test`, no summary `ci_level`); it is read, never written."""
    before = {p: p.stat().st_mtime_ns for p in V1.rglob("*")}
    assert main(["results", "show", str(V1)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^H4 +E8d − E8c < 0\.0 pp \(retention at 5% noise\) +-23\.7 +"
                     r"\[-30\.1, -13\.5\] 99\.17% +BCa bootstrap interval +0\.0218 +VERIFIED$",
                     out, re.M)
    assert re.search(r"^E8a +0% +85\.5 +\[81\.6, 88\.7\] 95% +- +-$", out, re.M)
    assert main(["results", "show", str(V1), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out,  # strict JSON: NaN must have become null
                      parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert [h["ci_method"] for h in data["hypotheses"]] == ["BCa bootstrap interval"] * 6
    assert {r["ci_level"] for r in data["summary"]} == {0.95}
    assert {p: p.stat().st_mtime_ns for p in V1.rglob("*")} == before


def test_analysis_only_version_end_to_end(tmp_path: Path, capsys) -> None:
    """`analyze --out` writes an analysis-only version; list, show and report.md mark it, and
    an item missing from one cell is dropped and listed in the report."""
    import numpy as np

    rng = np.random.default_rng(3)
    rows = [{"condition": c, "seed": s, "eval_noise": n, "noise_seed": 0,
             "item_id": f"i{k}", "correct": int(rng.random() < p - n)}
            for c, p in (("A", 0.8), ("B", 0.6), ("C", 0.5)) for s in (0, 1)
            for n in (0.0, 0.1)
            for k in range(30)]
    outcomes = pd.DataFrame(rows)
    outcomes = outcomes.drop(outcomes.index[(outcomes["condition"] == "B")
                                            & (outcomes["seed"] == 1)
                                            & (outcomes["item_id"] == "i7")][:1])
    src = tmp_path / "outcomes.csv"
    outcomes.to_csv(src, index=False)
    out = tmp_path / "store"
    assert main(["analyze", str(src), "--out", str(out), "--n-resamples", "50",
                 "--confidence-level", "0.9", "--format", "json"]) == 0
    capsys.readouterr()
    assert main(["results", "list", "--root", str(out)]) == 0
    assert re.search(r"^analysis/v1 +analysis-only ", capsys.readouterr().out, re.M)
    assert main(["results", "show", "analysis", "--root", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "analysis-only version" in shown and f"source: {src}" in shown
    assert re.search(r"^A +10% +\S+ +\[\S+, \S+\] 90% +\S+ +\[\S+, \S+\] 90%$", shown, re.M)
    assert re.search(r"^\d+ dropped outcome\(s\): see .*dropped\.csv$", shown, re.M)
    # three conditions: the omnibus test has 2 degrees of freedom
    assert re.search(r"^ +10% +3 +\S.* +\d+(\.\d+)? +2 +\S+$", shown.split(
        "Omnibus test per noise level")[1], re.M)
    report = (out / "analysis" / "v1" / "report.md").read_text()
    assert "**Analysis-only version.**" in report.split("\n## ")[0]
    assert "## Dropped outcomes" in report and "| i7 |" in report
    assert "95%" not in report


def test_list_survives_a_damaged_manifest(tmp_path: Path, capsys) -> None:
    _version(tmp_path, 0.8)
    _version(tmp_path, 0.9)
    manifest = tmp_path / "demo" / "v1" / "manifest.json"
    manifest.chmod(0o644)
    manifest.write_text("{not json")
    assert main(["results", "list", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^demo/v1 +unreadable ", out, re.M)
    assert re.search(r"^demo/v1: '.*manifest\.json' is not valid JSON: ", out, re.M)
    assert re.search(r"^demo/v2 +study ", out, re.M)
    assert main(["results", "verify", "demo/v1", "--root", str(tmp_path)]) == 2
    assert "is not valid JSON" in capsys.readouterr().err
    # the undamaged version stays reachable, as the latest and by number
    assert main(["results", "show", "demo", "--root", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("demo/v2  (")
    assert main(["results", "verify", "demo/v2", "--root", str(tmp_path)]) == 0


def test_half_written_version_is_invisible(tmp_path: Path, capsys) -> None:
    """What a publisher killed mid-write leaves (a temporary beside the versions) is never
    listed, shown or verified, and the next publish removes it."""
    _version(tmp_path, 0.8)
    half = tmp_path / "demo" / ".tmp-v2-abc123"
    half.mkdir()
    (half / "outcomes.parquet").write_bytes(b"PAR1")
    (tmp_path / "demo" / ".tmp-v2-abc123.lock").write_text("")
    root = ["results", "--root", str(tmp_path)]
    assert main([*root, "list", "--format", "json"]) == 0
    assert [v["version"] for v in json.loads(capsys.readouterr().out)["versions"]] == ["demo/v1"]
    assert main([*root, "show", "demo"]) == 0
    assert capsys.readouterr().out.startswith("demo/v1  (")
    assert main([*root, "verify", "demo"]) == 0
    assert capsys.readouterr().out.strip() == "demo/v1: OK (3 files)"
    _version(tmp_path, 0.9)
    assert sorted(p.name for p in (tmp_path / "demo").iterdir()) == ["v1", "v2"]


def test_verify_names_cells_that_changed(tmp_path: Path, capsys) -> None:
    from robuststats.results import cell_digests, sha256_file

    outcomes = pd.DataFrame({"condition": ["A", "A", "B"], "seed": [0, 0, 0],
                             "eval_noise": [0.0, 0.0, 0.0], "noise_seed": [0, 0, 0],
                             "item_id": ["q1", "q2", "q1"], "correct": [1, 0, 1]})

    def writer(path: Path) -> None:
        outcomes.to_parquet(path / "outcomes.parquet", index=False)

    v = ResultStore(tmp_path).write("demo", writer, {"cells": cell_digests(outcomes)})
    root = ["results", "--root", str(tmp_path)]
    assert main([*root, "verify", "demo"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["demo/v1: OK (1 files, 2 cells)",
                   "demo/v1: cells not traced to a run directory: the manifest names no run "
                   "directory"]
    # rewrite one value and the file's checksum: the cell digest still tells
    path = v.path / "outcomes.parquet"
    path.chmod(0o644)
    outcomes.assign(correct=[1, 1, 1]).to_parquet(path, index=False)
    manifest = json.loads((v.path / "manifest.json").read_text())
    manifest["files"]["outcomes.parquet"]["sha256"] = sha256_file(path)
    (v.path / "manifest.json").chmod(0o644)
    (v.path / "manifest.json").write_text(json.dumps(manifest))
    assert main([*root, "verify", "demo"]) == 1
    assert "demo/v1: cell changed in outcomes.parquet: A__s0__n0__ns0" in capsys.readouterr().out


@pytest.mark.parametrize("action", ["list", "show", "verify", "diff"])
def test_every_action_has_a_description(action: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["results", action, "--help"])
    _, _, rest = capsys.readouterr().out.partition("\n\n")
    description = rest.split("\n\n")[0]
    assert not description.startswith(("positional arguments", "options")), description
    assert len(description.split()) >= 15, description


def test_diff_of_the_committed_e8_versions_leads_with_a_summary(capsys) -> None:
    """v1 (BCa bootstrap) against v2 (seed-random t): the same cells, the same hypothesis
    verdicts, decision tests that no longer reject; the largest change is listed first
    with both intervals, and the 508 raw rows only behind --all."""
    root = ["results", "--root", str(ROOT / "results")]
    assert main([*root, "diff", "e8_matrix/v1", "e8_matrix/v2"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("e8_matrix/v1 vs e8_matrix/v2: 508 difference(s) (summary 73,")
    assert "hypothesis verdicts: all 6 the same" in out
    assert re.search(r"^decision test +E8a − E8b at 0% noise +differ +no difference shown$",
                     out, re.M)
    # H4's change, with the interval of each version (pp, level from the data)
    assert re.search(r"^hypothesis a − b +H4 +-23\.7 \[-30\.1, -13\.5\] 99\.17% +"
                     r"-21\.6 \[-41\.6, -1\.6\] 99\.17% +\+2\.1$", out, re.M)
    changes = [float(m) for m in re.findall(r" ([+-]\d+\.\d)$", out, re.M)]
    assert len(changes) == 10 and changes[0] == 3.5
    assert [abs(c) for c in changes] == sorted((abs(c) for c in changes), reverse=True)
    assert "the same cells in both versions" in out
    assert len(lines) < 50 and "seed_sd" not in out  # the raw rows are not printed
    assert main([*root, "diff", "e8_matrix/v1", "e8_matrix/v2", "--all", "--top", "3"]) == 1
    full = capsys.readouterr().out
    assert "seed_sd" in full and len(full.splitlines()) > 508
    assert main([*root, "diff", "e8_matrix/v1", "e8_matrix/v2", "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert len(data["differences"]) == 508 and data["cells_added"] == []
    assert data["differences_per_table"]["tests"] == 231
    top = data["largest_estimate_changes"][0]
    assert top["change"] == pytest.approx(0.0352) and top["b_ci_level"] == 0.95


def test_diff_names_cells_added_and_missing(tmp_path: Path, capsys) -> None:
    def version(cells: list[str], acc: float) -> None:
        def writer(path: Path) -> None:
            _hypotheses(acc).to_parquet(path / "hypotheses.parquet")
        ResultStore(tmp_path).write("demo", writer, {
            "cells": {c: {"sha256": "0" * 64, "rows": 1} for c in cells}})
    version(["A__s0__n0__ns0", "A__s1__n0__ns0"], 0.8)
    version(["A__s0__n0__ns0", "B__s0__n0__ns0"], 0.85)
    version(["A__s0__n0__ns0"], 0.85)
    # identical tables, one cell fewer: still said
    assert main(["results", "--root", str(tmp_path), "diff", "demo/v2", "demo/v3"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "demo/v2 and demo/v3: tables identical",
        "  1 missing (only in demo/v2): B__s0__n0__ns0"]
    assert main(["results", "--root", str(tmp_path), "diff", "demo/v1", "demo/v2"]) == 1
    out = capsys.readouterr().out
    assert "1 added (only in demo/v2): B__s0__n0__ns0" in out
    assert "1 missing (only in demo/v1): A__s1__n0__ns0" in out
