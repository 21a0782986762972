from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from robuststats.report import (
    VERDICT_STYLE,
    accuracy_figure,
    forest_figure,
    interval_label,
    retention_figure,
)
from robuststats.report.figures import _accuracy, _retention
from robuststats.report.forest import _forest

PACKAGE = Path(__file__).resolve().parents[2] / "robuststats"


def _png(path: Path) -> tuple[int, int]:
    import matplotlib.image as mpimg

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(path)
    return img.shape[1], img.shape[0]


def _texts(fig) -> str:
    parts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    return "\n".join(p for p in parts if p)


def _close(fig) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)


def _by_gid(fig, gid: str) -> list:
    return list(fig.findobj(lambda a: a.get_gid() == gid))


def _code_strings(path: Path) -> list[str]:
    """String constants of a module, f-string pieces included, docstrings excluded."""
    tree = ast.parse(path.read_text())
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
    return [str(n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, (str, float)) and id(n) not in docs]


def test_no_figure_or_report_code_hard_codes_a_level() -> None:
    paths = [*PACKAGE.joinpath("report").glob("*.py"), PACKAGE / "cli" / "results.py",
             PACKAGE / "cli" / "study.py"]
    for path in paths:
        for text in _code_strings(path):
            assert not re.search(r"\b95\s*%|^0?\.95$|\b0\.95\b", text), (path, text)


@pytest.mark.parametrize("levels, expected", [
    ([0.9, 0.9], "90% CI"), ([0.95, 0.9805, 0.9917], "CI, level per row: 95%–99.17%"),
    ([float("nan")], "CI (level not recorded)"), (None, "CI (level not recorded)"),
])
def test_interval_label_comes_from_the_data(levels, expected: str) -> None:
    table = pd.DataFrame({"ci_level": levels} if levels is not None else {"x": [1]})
    assert interval_label(table) == expected


def test_forest_plot_rows_margins_and_verdict_colours(tables) -> None:
    hyp = tables["hypotheses"]
    fig = _forest(hyp)
    try:
        text = _texts(fig)
        # one row per hypothesis, the claim in words, the level from the data
        assert "H1: fwd − base > 5.0 pp\n(accuracy at 5% noise)" in text
        assert "H4: |fwd − base| < 5.0 pp\n(clean accuracy)" in text
        assert "CI, level per row: 90%–97.5%" in text
        assert "+12.0 [7.0, 17.0] 97.5%" in text and "-10.0 [-20.0, 0.0] 90%" in text
        assert "no estimate: 2 needed cell(s) missing" in text
        assert "95%" not in text
        for row in hyp.itertuples():
            color, marker = VERDICT_STYLE[row.verdict]
            if np.isnan(row.estimate):
                assert not _by_gid(fig, f"{row.id}:estimate")
                continue
            (est,) = _by_gid(fig, f"{row.id}:estimate")
            assert to_hex(est.get_color()) == color.lower() and est.get_marker() == marker
            assert est.get_xdata()[0] == pytest.approx(100 * row.estimate)
            (interval,) = _by_gid(fig, f"{row.id}:interval")
            (seg,) = interval.get_segments()
            assert seg[:, 0] == pytest.approx([100 * row.ci_low, 100 * row.ci_high])
        # margins: +margin for one-sided claims, ±margin for equivalence
        margins = {gid: sorted({round(float(s[0, 0]), 6) for s in c.get_segments()})
                   for gid in ("H1:margin", "H3:margin", "H4:margin")
                   for c in _by_gid(fig, gid)}
        assert margins == {"H1:margin": [5.0], "H3:margin": [-10.0], "H4:margin": [-5.0, 5.0]}
    finally:
        _close(fig)


def test_accuracy_figure_has_seed_points_descriptions_and_data_levels(tables) -> None:
    fig = _accuracy(tables["summary"], tables["seeds"],
                    {"base": "no training noise", "fwd": "forward-only noise"})
    try:
        text = _texts(fig)
        assert "90% CI" in text and "95%" not in text
        assert "base: no training noise" in text and "fwd: forward-only noise" in text
        ax = fig.axes[0]
        n_points = sum(len(c.get_offsets()) for c in ax.collections
                       if hasattr(c, "get_offsets") and len(c.get_offsets()))
        assert n_points >= len(tables["seeds"])  # every seed drawn
    finally:
        _close(fig)


def test_retention_figure_puts_clean_accuracy_beside_retention(tables) -> None:
    fig = _retention(tables["retention"], tables["summary"], tables["seeds"], None)
    try:
        left, right = fig.axes[:2]
        assert "Clean accuracy" in left.get_title() and "90% CI" in left.get_title()
        assert "Retention" in right.get_title() and "90% CI" in right.get_title()
        heights = sorted(round(p.get_height(), 6) for p in left.patches)
        assert heights == [30.0, 70.0, 80.0]  # the clean accuracies of bwd, fwd, base
        assert "95%" not in _texts(fig)
    finally:
        _close(fig)


def test_figures_render_without_intervals_levels_or_seeds(tmp_path: Path) -> None:
    summary = pd.DataFrame({"condition": ["A", "A", "B", "B"], "eval_noise": [0, 0.1] * 2,
                            "accuracy": [0.8, 0.5, 0.6, 0.5]})
    retention = pd.DataFrame({"condition": ["A", "B"], "eval_noise": [0.1, 0.1],
                              "clean_accuracy": [0.8, 0.6], "retention": [0.625, 0.833]})
    assert _png(accuracy_figure(summary, tmp_path / "a.png"))[0] > 300
    assert _png(retention_figure(retention, tmp_path / "r.png"))[0] > 300


def test_figures_from_nullable_columns(tables, tmp_path: Path) -> None:
    """Tables read back from parquet may hold pandas' nullable dtypes with <NA>."""
    summary = tables["summary"].astype({"ci_low": "Float64", "ci_high": "Float64"})
    summary.loc[0, ["ci_low", "ci_high"]] = pd.NA
    hyp = tables["hypotheses"].astype({"estimate": "Float64", "ci_low": "Float64",
                                       "ci_high": "Float64", "ci_level": "Float64"})
    accuracy_figure(summary, tmp_path / "a.png", seeds=tables["seeds"])
    retention_figure(tables["retention"], tmp_path / "r.png", summary=summary)
    forest_figure(hyp, tmp_path / "h.png")
    for name in ("a", "r", "h"):
        assert _png(tmp_path / f"{name}.png")[0] > 300


def test_forest_plot_with_unbounded_or_unknown_bounds(tmp_path: Path) -> None:
    """A one-sided interval (-inf) runs to the axis edge; an unknown bound draws no line;
    neither breaks the axis limits."""
    base = {"a": "A", "b": "B", "metric": "accuracy", "eval_noise": 0.05,
            "relation": "greater", "margin": 0.01, "estimate": 0.1, "ci_level": 0.9,
            "verdict": "INCONCLUSIVE"}
    hyp = pd.DataFrame([{**base, "id": "H1", "ci_low": -np.inf, "ci_high": 0.2},
                        {**base, "id": "H2", "ci_low": np.nan, "ci_high": 0.2}])
    fig = _forest(hyp)
    try:
        lo, hi = fig.axes[0].get_xlim()
        assert np.isfinite([lo, hi]).all() and lo < 0 < 10 < hi
        (interval,) = _by_gid(fig, "H1:interval")
        assert interval.get_segments()[0][0, 0] == pytest.approx(lo)
        assert not _by_gid(fig, "H2:interval") and _by_gid(fig, "H2:estimate")
    finally:
        _close(fig)
    assert _png(forest_figure(hyp, tmp_path / "h.png"))[0] > 300


def test_intervals_that_exclude_their_estimate_are_drawn_from_their_bounds() -> None:
    """BCa intervals can exclude the point estimate; error bars relative to the estimate
    would refuse them (negative lengths), so the figures draw bounds directly."""
    from matplotlib.collections import LineCollection

    summary = pd.DataFrame({"condition": ["A", "A"], "eval_noise": [0.0, 0.1],
                            "accuracy": [0.8, 0.5], "ci_low": [0.82, 0.4],
                            "ci_high": [0.9, 0.6], "ci_level": [0.9, 0.9]})
    retention = pd.DataFrame({"condition": ["A"], "eval_noise": [0.1], "retention": [0.6],
                              "ci_low": [0.62], "ci_high": [0.7], "ci_level": [0.9],
                              "clean_accuracy": [0.8]})
    for fig in (_accuracy(summary, None, None), _retention(retention, summary, None, None)):
        try:
            spans = sorted(tuple(np.round(seg[:, 1], 6)) for ax in fig.axes
                           for c in ax.collections if isinstance(c, LineCollection)
                           for seg in c.get_segments() if seg[0, 0] == seg[1, 0])
            assert (82.0, 90.0) in spans
        finally:
            _close(fig)


def test_condition_names_that_are_numbers() -> None:
    """Names read back from a CSV may be integers; every condition is still drawn."""
    summary = pd.DataFrame({"condition": [1, 1, 2, 2], "eval_noise": [0.0, 0.1] * 2,
                            "accuracy": [0.8, 0.5, 0.7, 0.6]})
    retention = pd.DataFrame({"condition": [1, 2], "eval_noise": [0.1, 0.1],
                              "retention": [0.625, 0.857], "clean_accuracy": [0.8, 0.7]})
    seeds = pd.DataFrame({"condition": [1, 2], "seed": [0, 0], "eval_noise": [0.0, 0.0],
                          "accuracy": [0.8, 0.7], "retention": [1.0, 1.0]})
    fig = _accuracy(summary, seeds, {"1": "first"})
    try:
        assert [len(line.get_xdata()) for line in fig.axes[0].lines] == [2, 2]
        assert "1: first" in _texts(fig)
    finally:
        _close(fig)
    fig = _retention(retention, summary, seeds, None)
    try:
        assert [round(p.get_height(), 6) for p in fig.axes[0].patches] == [80.0, 70.0]
        assert [round(p.get_height(), 3) for p in fig.axes[1].patches] == [62.5, 85.7]
    finally:
        _close(fig)


# ------------------------------------------------ the figures of the committed versions
ROOT = PACKAGE.parent


def _committed(label: str) -> tuple[dict, dict]:
    from robuststats.results import ResultStore, read_tables

    v = ResultStore(ROOT / "results").get(label)
    t = read_tables(v)
    for extra in ("thresholds", "dose_curves"):
        if (v.path / f"{extra}.parquet").is_file():
            t[extra] = pd.read_parquet(v.path / f"{extra}.parquet")
    return t, v.manifest


def _inside_saved_image(fig) -> bool:
    """Every text artist lies inside what ``bbox_inches="tight"`` saves."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    tight = fig.get_tightbbox(renderer)
    for text in fig.findobj(lambda a: hasattr(a, "get_text") and a.get_visible()):
        if not text.get_text() or not hasattr(text, "get_window_extent"):
            continue
        box = text.get_window_extent(renderer).transformed(fig.dpi_scale_trans.inverted())
        if box.width and not (tight.x0 - 1e-6 <= box.x0 and box.x1 <= tight.x1 + 1e-6):
            return False
    return True


def test_seed002_names_its_formats_and_its_conditions() -> None:
    """seed002: the legend says "condition" (nvfp4 and static are evaluation error models,
    not training conditions); nvfp4's noisy point is a square and the 5 % tick names the
    format; every label is inside the saved image."""
    from robuststats.report import condition_descriptions, condition_formats

    t, manifest = _committed("seed002_nvfp4/v1")
    formats = condition_formats(manifest)
    assert formats == {"nvfp4": "NVFP4 weights (W4A16), lm_head kept"}
    fig = _accuracy(t["summary"], t["seeds"], condition_descriptions(manifest), formats)
    try:
        (legend,) = fig.legends
        assert legend.get_title().get_text() == "condition"
        assert "training condition" not in _texts(fig)
        (square,) = _by_gid(fig, "nvfp4:format")
        assert square.get_marker() == "s" and len(square.get_xdata()) == 1
        ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
        assert ticks[0] == "0%" and ticks[1].startswith("5%\nnvfp4: NVFP4 weights")
        assert "squares: a number format, not a noise scale" in fig.axes[0].get_title()
        assert _inside_saved_image(fig)
    finally:
        _close(fig)
    fig = _retention(t["retention"], t["summary"], t["seeds"], None, formats)
    try:
        (tick,) = [t.get_text() for t in fig.axes[1].get_xticklabels()]
        assert tick.startswith("5% noise\nnvfp4: NVFP4 weights")
    finally:
        _close(fig)


def test_uneven_levels_are_drawn_evenly_spaced_and_say_so() -> None:
    t, _ = _committed("dose_response/v1")
    fig = _accuracy(t["summary"], t["seeds"], None)
    try:
        ax = fig.axes[0]
        ticks = ax.get_xticks()
        assert len(ticks) == 11 and np.allclose(np.diff(ticks), np.diff(ticks)[0])
        assert ax.get_xticklabels()[-1].get_text() == "30%"
        assert "evenly spaced, not to scale" in ax.get_xlabel()
        # 2 seeds: the title says why the intervals are wide
        assert "only 2 training seeds" in ax.get_title()
    finally:
        _close(fig)
    fig = _retention(t["retention"], t["summary"], t["seeds"], None)
    try:  # ten levels and long names: slanted, so that no tick runs into the next
        left, right = fig.axes[:2]
        assert [x.get_rotation() for x in right.get_xticklabels()] == [45.0] * 10
        assert [x.get_rotation() for x in left.get_xticklabels()] == [45.0] * 2
        assert right.get_xticklabels()[0].get_text() == "0.1%"
    finally:
        _close(fig)


def test_dose_response_dodges_conditions_and_keeps_intervals_light(tmp_path: Path) -> None:
    from robuststats.report.dose_figure import _dose, dose_response_figure

    t, _ = _committed("dose_response/v1")
    fig = _dose(t["summary"], t["dose_curves"], t["thresholds"], None)
    try:
        ax = fig.axes[0]
        points = [line for line in ax.get_lines() if line.get_marker() == "o"]
        assert len(points) == 2
        # the clean point of each condition: side by side, 1.8 % of the axis apart (log)
        x0 = sorted(float(p.get_xdata()[0]) for p in points)
        lo, hi = np.log10(ax.get_xlim())
        assert (np.log10(x0[1]) - np.log10(x0[0])) / (hi - lo) == pytest.approx(0.018)
        for cond in ("all_ops", "matmul"):
            (bars,) = _by_gid(fig, f"{cond}:intervals")
            assert bars.get_alpha() < 0.5 and bars.get_linewidth()[0] < 1.2
            assert len(bars.get_segments()) == 9  # one per level, none dropped
        assert ax.get_ylim() == (-2, 102)
        assert "only 2 training seeds" in ax.get_title()
    finally:
        _close(fig)
    w, h = _png(dose_response_figure(t["summary"], t["dose_curves"], t["thresholds"],
                                     tmp_path / "d.png"))
    assert w > 700 and h > 500


def test_forest_plot_gives_each_metric_its_own_axis(tmp_path: Path) -> None:
    """A retention difference of ±2000 pp (e8_smoke before the estimability rule) must not
    squeeze the accuracy hypotheses: each metric has its panel and x axis, and a
    hypothesis without an estimate shows its reason on its own panel."""
    base = {"b": "B", "eval_noise": 0.05, "relation": "greater", "margin": 0.0,
            "ci_level": 0.95, "verdict": "INCONCLUSIVE"}
    hyp = pd.DataFrame([
        {**base, "id": "H1", "a": "A", "metric": "accuracy", "estimate": 0.038,
         "ci_low": -0.28, "ci_high": 0.36},
        {**base, "id": "H2", "a": "A", "metric": "retention", "estimate": 0.45,
         "ci_low": -21.8, "ci_high": 20.6},
        {**base, "id": "H3", "a": "C", "metric": "retention", "estimate": np.nan,
         "ci_low": np.nan, "ci_high": np.nan,
         "reason": "retention of 'C' is not estimable: the clean accuracy, 5 %, cannot be "
                   "told from 0 at 95 % (Fieller's g = 161 ≥ 1), so retention has no "
                   "bounded interval"},
        {**base, "id": "H4", "a": "C", "metric": "accuracy", "estimate": 0.012,
         "ci_low": -0.17, "ci_high": 0.19},
    ])
    fig = _forest(hyp)
    try:
        acc, ret = fig.axes[:2]
        assert acc.get_xlabel() == "accuracy a − b (percentage points)"
        assert ret.get_xlabel() == "retention a − b (percentage points of retention)"
        # the accuracy axis spans the accuracy intervals (tens of pp), not ±2000 pp
        lo, hi = acc.get_xlim()
        assert -40 < lo < -28 and 36 < hi < 45
        assert ret.get_xlim()[0] < -2000 and ret.get_xlim()[1] > 2000
        labels = [t.get_text() for t in acc.get_yticklabels()]
        assert labels[0].startswith("H4") and labels[1].startswith("H1")
        assert [t.get_text()[:2] for t in ret.get_yticklabels()] == ["H3", "H2"]
        assert "no estimate: retention of 'C' is not estimable" in _texts(fig)
    finally:
        _close(fig)
    assert _png(forest_figure(hyp, tmp_path / "h.png"))[0] > 300
