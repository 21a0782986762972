from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from robuststats.report import write_report
from robuststats.results import ResultStore, read_tables, verify

ROOT = Path(__file__).resolve().parents[2]
V1 = ROOT / "results" / "e8_matrix" / "v1"


@pytest.fixture()
def no_figures(monkeypatch) -> None:
    """Text-only tests: figures are empty files (drawing them takes seconds)."""
    import robuststats.report.markdown as md

    def touch(table, path, **kwargs):
        path.write_bytes(b"")
        return path

    for name in ("accuracy_figure", "retention_figure", "forest_figure"):
        monkeypatch.setattr(md, name, touch)


def _links(report: str) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report)


def test_report_from_synthetic_tables(tables, meta, tmp_path: Path) -> None:
    text = write_report(tmp_path, tables, meta).read_text()
    assert text.startswith("# synthetic — results v1\n")
    assert "Analysis-only" not in text
    # every figure is written and linked, the forest plot among them
    assert _links(text) == ["figures/hypotheses.png", "figures/accuracy_vs_noise.png",
                            "figures/retention.png"]
    for rel in _links(text):
        assert (tmp_path / rel).stat().st_size > 10_000
    # levels come from the data: the synthetic set has no 95% anywhere
    assert "95%" not in text
    assert "- **interval levels**: 90% (hypotheses, multiplicity-adjusted: 90%–97.5%)" in text
    assert ("| H1 | claim H1 | fwd − base > 5.0 pp (accuracy at 5% noise) | +12.0 | "
            "[7.0, 17.0] 97.5% | seeds x items bootstrap (bca) | 0.0300 | VERIFIED |") in text
    assert "| H4 | claim H4 | \\|fwd − base\\| < 5.0 pp (clean accuracy) |" in text
    assert "| H5 | claim H5 | bwd − base > 0.0 pp (accuracy at 10% noise) | - | " \
           "(2 needed cell(s) missing) |" in text
    assert "| base | 5% | 3 | 2 | 40 | 48.0 | [43.0, 52.0] 90% |" in text
    assert "| bwd | 5% | 3 | 40 | 30.0 | 28.5 | 95.0 | [89.0, 100.0] 90% | bca | 4.0 |" in text
    # conditions with their descriptions
    assert "- **fwd**: forward-only noise, 5 %" in text
    # missing cells, dropped holes and the omnibus test have their sections
    assert "## Missing cells" in text and "| bwd | 2 | 0.1 | 1 |" in text
    assert "## Dropped outcomes" in text and "dropped 3 hole(s)" in text
    assert "- 3 × absent under base" in text
    assert "| fwd | 1 | 0.05 | 0 | item2 | absent under base |" in text
    assert "## Omnibus test per noise level" in text
    assert "| 5% | 3 | 3 | 40 | Cochran's Q | 9.5 | 2 | 0.00865 |" in text
    assert "pairwise comparison? Each row answers: _do the conditions differ at all?_" in text
    assert "| 0% | base | fwd | 3 | 40 | 12 | 5 | 70.0 | 60.0 | +10.0 | [2.0, 18.0] 90% |" \
           in text
    assert ("_do a and b differ in accuracy on the same items?_ Intervals of a − b: seeds x "
            "items bootstrap (bca).") in text


def test_analysis_only_version_is_marked_in_the_header(tables, meta, tmp_path: Path,
        no_figures: None) -> None:
    meta.update(analysis_only=True, source="results/e8_matrix/v1")
    text = write_report(tmp_path, tables, meta).read_text()
    header = text.split("\n## ")[0]
    assert "**Analysis-only version.**" in header
    assert "`robuststats analyze` from stored outcomes (`results/e8_matrix/v1`)" in header
    assert "- **source**: results/e8_matrix/v1" in header


def test_empty_sections_are_left_out(tables, meta, tmp_path: Path,
        no_figures: None) -> None:
    tables = {**tables, "hypotheses": tables["hypotheses"].iloc[0:0],
              "dropped": tables["dropped"].iloc[0:0], "missing": tables["missing"].iloc[0:0]}
    del tables["omnibus"]
    text = write_report(tmp_path, tables, meta).read_text()
    for section in ("Pre-registered hypotheses", "Dropped outcomes", "Missing cells",
                    "Omnibus"):
        assert section not in text
    assert not (tmp_path / "figures" / "hypotheses.png").exists()


def test_many_dropped_holes_are_summarised(tables, meta, tmp_path: Path,
        no_figures: None) -> None:
    from robuststats.report.markdown import MAX_DROPPED_ROWS

    n = MAX_DROPPED_ROWS + 7
    dropped = pd.DataFrame({"condition": ["fwd"] * n, "seed": 0, "eval_noise": 0.0,
                            "noise_seed": 0, "item_id": [f"i{k}" for k in range(n)],
                            "reason": ["absent under base"] * (n - 2) + ["duplicate"] * 2})
    text = write_report(tmp_path, {**tables, "dropped": dropped}, meta).read_text()
    assert f"dropped {n} hole(s)" in text
    assert f"- {n - 2} × absent under base\n- 2 × duplicate" in text
    assert "_… and 7 more in `dropped.csv`._" in text
    assert f"| i{MAX_DROPPED_ROWS - 1} |" in text and f"| i{MAX_DROPPED_ROWS} |" not in text


def test_tables_with_old_names_and_the_level_from_meta(tables, meta, tmp_path: Path,
        no_figures: None) -> None:
    """Old analyses: tests `difference`/`n10`/`n01`, hypotheses `test`, no `ci_level` in
    summary, retention and tests; the level is then the manifest's."""
    old = {
        "summary": tables["summary"].drop(columns=["ci_level", "ci_method"]),
        "retention": tables["retention"].drop(columns=["ci_level"]).rename(
            columns={"ci_method": "method"}),
        "tests": tables["tests"].drop(columns=["ci_level", "ci_method", "question"]).rename(
            columns={"estimate": "difference", "n_a_only": "n10", "n_b_only": "n01"}),
        "hypotheses": tables["hypotheses"].drop(columns=["multiplicity"]).rename(
            columns={"ci_method": "test"}),
    }
    meta = {**meta, "confidence_level": None,
            "spec": {**meta["spec"], "analysis": {"confidence_level": 0.8}}}
    text = write_report(tmp_path, old, meta).read_text()
    assert "| base | 0% | 3 | 1 | 40 | 80.0 | [75.0, 84.0] 80% | - |" in text
    assert "| base | 5% | 3 | 40 | 80.0 | 48.0 | 60.0 | [54.0, 65.0] 80% | bca |" in text
    assert "| 0% | base | fwd | 3 | 40 | 12 | 5 | 70.0 | 60.0 | +10.0 | [2.0, 18.0] 80% |" \
           in text
    assert "[7.0, 17.0] 97.5% | seeds x items bootstrap (bca) |" in text


@pytest.mark.skipif(not (V1 / "manifest.json").is_file(), reason="committed version absent")
def test_report_from_the_committed_version(tmp_path: Path) -> None:
    """results/e8_matrix/v1 is read, never written: the report goes to tmp_path."""
    version = ResultStore(ROOT / "results").get("e8_matrix/v1")
    before = {p: p.stat().st_mtime_ns for p in V1.rglob("*")}
    text = write_report(tmp_path, read_tables(version),
                        {**version.manifest, "label": "v1"}).read_text()
    assert "- **interval levels**: 95% (hypotheses, multiplicity-adjusted: 95.12%–99.17%)" \
           in text
    assert ("| H4 | §3.5 (2): backward-only E8d retains less than forward-only E8c at 5 % "
            "noise | E8d − E8c < 0.0 pp (retention at 5% noise) | -23.7 | "
            "[-30.1, -13.5] 99.17% | BCa bootstrap interval | 0.0218 | VERIFIED |") in text
    assert "| 0% | E8a | E8b | decision | 5 | 500 | 493 | 168 | 85.5 | 72.5 | +13.0 | [3.1, 23.5] 95% |" \
           in text
    assert "- **E8b**: forward and backward noise, 5 % (the current AQN-style setting)" in text
    for rel in _links(text):
        assert (tmp_path / rel).stat().st_size > 10_000
    assert {p: p.stat().st_mtime_ns for p in V1.rglob("*")} == before
    assert verify(version).ok


def test_per_row_questions_and_interval_methods_when_they_differ(tables, meta, tmp_path: Path,
                                                                  no_figures: None) -> None:
    tests = tables["tests"].copy()
    tests.loc[0, ["question", "ci_method"]] = ["another question", "percentile"]
    text = write_report(tmp_path, {**tables, "tests": tests}, meta).read_text()
    section = text.split("## Paired comparisons")[1]
    assert "Each row answers" not in section and "Intervals of a − b" not in section
    assert ("| question | noise | a | b | strata | items | a only | b only | acc a % | "
            "acc b % | a − b (pp) | interval | interval method | test |") in section
    assert "| another question | 0% | base | fwd |" in section
    assert "| [2.0, 18.0] 90% | percentile | stratified McNemar (clustered) |" in section


def test_injected_noise_is_reported_and_silent_cells_are_named(tables, meta, tmp_path: Path,
                                                               no_figures: None) -> None:
    cells = [(c, s, n, ns) for c in ("base", "fwd") for s in (0, 1)
             for n, ns in ((0.0, 0), (0.05, 0), (0.05, 1))]
    outcomes = pd.DataFrame([{"condition": c, "seed": s, "eval_noise": n, "noise_seed": ns,
                              "item_id": "i0", "correct": 1} for c, s, n, ns in cells])
    outcomes.to_parquet(tmp_path / "outcomes.parquet")
    injected = [cell for cell in cells if cell[2] > 0 and cell != ("fwd", 1, 0.05, 1)]
    pd.DataFrame([{"condition": c, "seed": s, "eval_noise": n, "noise_seed": ns, "layer": layer,
                   "op": "linear", "phase": "forward", "count": count,
                   "rms_noise_ratio": ratio, "target_scale": 0.05}
                  for c, s, n, ns in injected
                  for layer, count, ratio in ((0, 10, 0.04), (1, 30, 0.06))]
                 ).to_parquet(tmp_path / "injections.parquet")
    text = write_report(tmp_path, tables, meta).read_text()
    assert "## Inference noise as injected" in text
    # 8 noisy cells, 7 with injections of 40 each; ratio weighted by counts: 0.055
    assert "| error model not recorded | - | 5% | 8 | 7 | 280 | 0.055 | 0.05 |" in text
    assert ("**1 noisy cell(s) recorded no injection**: fwd seed 1 at 5% noise (noise seed 1)"
            in text)


def test_no_injection_section_without_injection_counts(tables, meta, tmp_path: Path,
                                                       no_figures: None) -> None:
    assert "Inference noise as injected" not in write_report(tmp_path, tables, meta).read_text()
