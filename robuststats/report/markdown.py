"""``report.md``: the hypotheses first, then the tables behind them, each with its figure.

Numbers use the command line's formats (:mod:`robuststats._format`): accuracies and
differences in percent, p-values to 3 significant digits, intervals as ``[low, high]`` with
the level read from the table. The parquet and CSV files beside the report keep full
precision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from robuststats._format import (
    fmt_ci,
    fmt_level,
    fmt_noise,
    fmt_p,
    fmt_pct,
    fmt_value,
    is_missing,
)
from robuststats.glossary import table_names
from robuststats.report._injections import injection_section
from robuststats.report._views import (
    HYPOTHESIS_HEADERS,
    _not_estimable,
    condition_descriptions,
    condition_formats,
    hypothesis_rows,
    records,
)
from robuststats.report.figures import accuracy_figure, retention_figure
from robuststats.report.forest import forest_figure
from robuststats.results import confidence_level, is_analysis_only, normalize_table

__all__ = ["markdown_table", "write_report"]

#: at most this many dropped holes are listed in the report (all are in dropped.csv)
MAX_DROPPED_ROWS = 50

Row = Mapping[str, Any]


def markdown_table(df: pd.DataFrame, columns: Sequence[str] | None = None, *,
                   formats: Mapping[str, Callable[[Row], str]] | None = None) -> str:
    """A GitHub-flavoured markdown table of ``df``.

    ``formats`` maps a header to a function of the whole row (so that one cell can show
    ``ci_low``, ``ci_high`` and ``ci_level`` together); without it, ``columns`` (default:
    all) are shown as they are.
    """
    if formats is None:
        cols = [c for c in (columns or list(df.columns)) if c in df.columns]
        formats = {c: (lambda r, c=c: fmt_value(r.get(c))) for c in cols}
    if df.empty:
        return "_(no rows)_\n"
    heads = list(formats)
    lines = ["| " + " | ".join(heads) + " |", "|" + "|".join(" --- " for _ in heads) + "|"]
    for row in df.to_dict(orient="records"):
        cells = [formats[h](row).replace("|", "\\|").replace("\n", " ") for h in heads]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _pct(col: str, *, signed: bool = False) -> Callable[[Row], str]:
    return lambda r: fmt_pct(r.get(col), signed=signed)


def _raw(col: str) -> Callable[[Row], str]:
    return lambda r: fmt_value(r.get(col))


def _ci(r: Row) -> str:
    return fmt_ci(r.get("ci_low"), r.get("ci_high"), r.get("ci_level"))


def _noise(r: Row) -> str:
    return fmt_noise(r.get("eval_noise"))


def _stat(r: Row) -> str:
    return "-" if is_missing(r.get("statistic")) else f"{float(r['statistic']):.4g}"


def _range(r: Row) -> str:
    lo, hi = fmt_pct(r.get("seed_min")), fmt_pct(r.get("seed_max"))
    return "-" if lo == "-" else f"{lo}–{hi}"


#: table -> header -> cell of a row: the people's view of each table in report.md
VIEWS: Mapping[str, Mapping[str, Callable[[Row], str]]] = {
    "summary": {
        "condition": _raw("condition"), "noise": _noise, "seeds": _raw("n_seeds"),
        "noise seeds": _raw("n_noise_seeds"), "items": _raw("n_items"),
        "accuracy %": _pct("accuracy"), "interval": _ci, "interval method": _raw("ci_method"),
        "seed SD (pp)": _pct("seed_sd"), "seed range %": _range,
    },
    "retention": {
        "condition": _raw("condition"), "noise": _noise, "seeds": _raw("n_seeds"),
        "items": _raw("n_items"), "clean %": _pct("clean_accuracy"),
        "noisy %": _pct("noisy_accuracy"),
        "retention %": lambda r: ("not estimable" if _not_estimable(r)
                                  else _pct("retention")(r)), "interval": _ci,
        "interval method": _raw("ci_method"), "seed SD (pp)": _pct("seed_sd"),
    },
    "omnibus": {
        "noise": _noise, "conditions": _raw("n_conditions"), "seeds": _raw("n_seeds"),
        "items": _raw("n_items"), "question": _raw("question"), "test": _raw("test"),
        "statistic": _stat, "dof": _raw("dof"), "p": lambda r: fmt_p(r.get("pvalue")),
    },
    "tests": {
        "noise": _noise, "a": _raw("a"), "b": _raw("b"), "role": _raw("role"),
        "seeds": _raw("n_seeds"), "strata": _raw("n_strata"),
        "items": _raw("n_items"), "a only": _raw("n_a_only"), "b only": _raw("n_b_only"),
        "acc a %": _pct("accuracy_a"), "acc b %": _pct("accuracy_b"),
        "a − b (pp)": _pct("estimate", signed=True), "interval": _ci,
        "test": _raw("test"), "statistic": _stat, "p": lambda r: fmt_p(r.get("pvalue")),
        "p adj": lambda r: fmt_p(r.get("pvalue_adjusted")), "reject": _raw("reject"),
    },
}


#: (table, heading with its introduction, figure title) of the per-condition sections
_CONDITION_SECTIONS = (
    ("summary", "## Accuracy per condition and noise level\n\nMean over seeds, noise seeds "
                "and items, in percent; the interval resamples seeds and items; seed SD and "
                "range are those of the per-seed accuracies.\n",
     "Accuracy vs inference noise"),
    ("retention", "## Retention (noisy / clean accuracy on the same items)\n\nRead each "
                  "retention beside its clean accuracy: a condition with little clean "
                  "accuracy has little to lose. A retention whose clean accuracy cannot be "
                  "told from 0 has no bounded interval and is reported as not estimable, "
                  "with the reason (Fieller's g ≥ 1, docs/statistics.md §9).\n",
     "Clean accuracy and retention"),
)


def write_report(outdir: Path, tables: Mapping[str, pd.DataFrame], meta: Mapping[str, Any]
                 ) -> Path:
    """Write figures (``figures/*.png``) and ``report.md`` into ``outdir``.

    ``tables`` may use the glossary's column names or the names of versions written before
    it; ``meta`` is the version's manifest (``spec``, ``confidence_level``,
    ``analysis_only``, ``source``, ...) plus ``study`` and ``label``.
    """
    level = confidence_level(meta)
    t = {name: normalize_table(name, df, confidence_level=level)
         for name, df in tables.items() if df is not None}
    descriptions = condition_descriptions(meta)
    figs = _figures(outdir / "figures", t, descriptions, condition_formats(meta))

    parts = [f"# {meta.get('study', 'study')} — results {meta.get('label', '')}\n"]
    if is_analysis_only(meta):
        source = meta.get("source")
        parts.append("> **Analysis-only version.** These tables were recomputed by "
                     "`robuststats analyze` from stored outcomes"
                     f"{f' (`{source}`)' if source else ''}; no model was trained or "
                     "evaluated for this version.\n")
    if meta.get("description"):
        parts.append(f"{str(meta['description']).strip()}\n")
    parts.append(_facts(meta, t))
    if descriptions:
        parts.append("## Conditions\n")
        parts.append("\n".join(f"- **{c}**: {d}" for c, d in descriptions.items()) + "\n")
    parts += _gaps(t)
    parts += _hypotheses(t.get("hypotheses"), figs.get("hypotheses"))
    for table, heading, figure in _CONDITION_SECTIONS:
        if table in t:
            parts.append(heading)
            parts.append(markdown_table(t[table], formats=VIEWS[table]))
            parts += _figure(figure, figs.get(table))
    parts += _dose_section(t, figs.get("thresholds"))
    if "sequential_looks" in t:
        from robuststats.report.sequential import sequential_section

        parts += sequential_section(t, figs.get("sequential_looks"))
    omnibus = t.get("omnibus")
    if omnibus is not None and not omnibus.empty:
        question, view = _one_question(omnibus, VIEWS["omnibus"])
        parts.append("## Omnibus test per noise level\n\nDo the conditions differ at all, "
                     f"before any pairwise comparison?{question}\n")
        parts.append(markdown_table(omnibus, formats=view))
    if "tests" in t:
        parts += _tests(t["tests"])
    parts += injection_section(outdir)
    path = outdir / "report.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def _figures(figdir: Path, t: Mapping[str, pd.DataFrame],
             descriptions: Mapping[str, str],
             formats: Mapping[str, str] | None = None) -> dict[str, str]:
    """Draw every figure the tables allow; name -> path relative to the report."""
    figdir.mkdir(exist_ok=True)
    out = {}
    summary, retention, seeds = t.get("summary"), t.get("retention"), t.get("seeds")
    seeds = seeds if seeds is not None and not seeds.empty else None
    if summary is not None and not summary.empty:
        accuracy_figure(summary, figdir / "accuracy_vs_noise.png", seeds=seeds,
                        descriptions=descriptions, formats=formats)
        out["summary"] = "figures/accuracy_vs_noise.png"
    if retention is not None and not retention.empty:
        retention_figure(retention, figdir / "retention.png", summary=summary, seeds=seeds,
                         descriptions=descriptions, formats=formats)
        out["retention"] = "figures/retention.png"
    hyp = t.get("hypotheses")
    if hyp is not None and not hyp.empty:
        forest_figure(hyp, figdir / "hypotheses.png")
        out["hypotheses"] = "figures/hypotheses.png"
    thresholds = t.get("thresholds")
    if thresholds is not None and not thresholds.empty and summary is not None:
        from robuststats.report.dose_figure import dose_response_figure

        dose_response_figure(summary, t.get("dose_curves", pd.DataFrame()), thresholds,
                             figdir / "dose_response.png", descriptions=descriptions)
        out["thresholds"] = "figures/dose_response.png"
    looks = t.get("sequential_looks")
    if looks is not None and not looks.empty:
        from robuststats.report.sequential import sequential_figure

        sequential_figure(looks, figdir / "sequential_looks.png")
        out["sequential_looks"] = "figures/sequential_looks.png"
    return out


def _dose_section(t: Mapping[str, pd.DataFrame], figure: str | None) -> list[str]:
    """A sweep's thresholds and model ranks (tables ``thresholds`` and ``dose_models``)."""
    thresholds = t.get("thresholds")
    if thresholds is None or thresholds.empty:
        return []
    drop = float(thresholds["drop"].iloc[0])
    parts = [f"## Dose-response: critical thresholds\n\nThe noise scale at which the fitted "
             f"accuracy falls by {drop:.0%} of its clean level (not drc's relative ED, which "
             "counts from the fitted floor); `inf`: the curve never falls that far.\n"]
    shown = [c for c in ("condition", "model", "n_levels", "n_seeds", "n_items",
                         "fitted_clean_accuracy", "estimate", "ci_low", "ci_high", "ci_method",
                         "n_not_reached", "note") if c in thresholds.columns]
    parts.append(markdown_table(thresholds[shown]))
    parts += _figure("Dose-response curves and thresholds", figure)
    models = t.get("dose_models")
    if models is not None and not models.empty:
        parts.append("Models ranked by AIC per condition (drc's `mselect`):\n")
        parts.append(markdown_table(models))
    return parts


def _figure(title: str, rel: str | None) -> list[str]:
    return [f"![{title}]({rel})\n"] if rel else []


def _levels(t: Mapping[str, pd.DataFrame]) -> str | None:
    """The interval levels found in the tables, e.g. ``95%`` or ``95% (hypotheses:
    98.05%–99.17%)``."""
    def span(names: Sequence[str]) -> str | None:
        values = sorted({round(float(v), 6) for n in names if n in t and "ci_level" in t[n]
                         for v in t[n]["ci_level"].dropna()})
        if not values:
            return None
        lo, hi = fmt_level(values[0]), fmt_level(values[-1])
        return lo if lo == hi else f"{lo}–{hi}"

    tables, hyp = span(table_names(levels="analysis")), span(table_names(levels="adjusted"))
    if hyp and hyp != tables:
        return f"{tables or '-'} (hypotheses, multiplicity-adjusted: {hyp})"
    return tables or hyp


def _facts(meta: Mapping[str, Any], t: Mapping[str, pd.DataFrame]) -> str:
    cells = (f"{meta.get('cells_finished')} of {meta.get('cells_planned')} finished"
             if meta.get("cells_planned") is not None else None)
    facts = [("spec hash", str(meta["spec_hash"])[:16] if meta.get("spec_hash") else None),
             ("source", meta.get("source") if is_analysis_only(meta) else None),
             ("seeds", meta.get("seeds")), ("noise seeds", meta.get("noise_seeds")),
             ("items per cell", meta.get("n_items")), ("cells", cells),
             ("alpha", meta.get("alpha")), ("interval levels", _levels(t)),
             ("multiplicity", meta.get("multiplicity")),
             ("package", meta.get("package_version")),
             ("git commit", str(meta["git_commit"])[:12] if meta.get("git_commit") else None)]
    return "\n".join(f"- **{k}**: {v}" for k, v in facts if v is not None) + "\n"


def _gaps(t: Mapping[str, pd.DataFrame]) -> list[str]:
    parts = []
    missing = t.get("missing")
    if missing is not None and not missing.empty:
        parts.append("## Missing cells\n\nThese cells have no outcomes (failed or not run); "
                     "estimates below use the cells that exist, and hypotheses that need "
                     "missing cells are INCONCLUSIVE.\n")
        parts.append(markdown_table(missing))
    dropped = t.get("dropped")
    if dropped is not None and not dropped.empty:
        parts.append(f"## Dropped outcomes\n\nThe analysis dropped {len(dropped)} hole(s) "
                     "so that every comparison uses the same items under every condition, "
                     "seed and noise seed. Counts by reason:\n")
        reasons = dropped.get("reason", pd.Series(["-"] * len(dropped))).fillna("-")
        parts.append("\n".join(f"- {n} × {r}" for r, n in reasons.value_counts().items())
                     + "\n")
        shown = dropped.head(MAX_DROPPED_ROWS)
        parts.append(markdown_table(shown))
        if len(dropped) > len(shown):
            parts.append(f"_… and {len(dropped) - len(shown)} more in `dropped.csv`._\n")
    return parts


def _hypotheses(hyp: pd.DataFrame | None, figure: str | None) -> list[str]:
    if hyp is None or hyp.empty:
        return []
    rows = hypothesis_rows(hyp)
    view = pd.DataFrame(rows)
    stmts = {str(h.get("id")): h.get("statement") for h in records(hyp)}
    view["statement"] = [stmts.get(r["id"]) or None for r in rows]  # "" shows as "-"
    formats = {"id": _raw("id"), "statement": _raw("statement"),
               **{head: _raw(key) for key, head in HYPOTHESIS_HEADERS.items()
                  if key not in ("id",)}}
    parts = ["## Pre-registered hypotheses\n\nEach claim is about a − b in percentage points. "
             "The verdict is VERIFIED when the whole interval lies on the claimed side of the "
             "margin, FALSIFIED when it lies wholly on the other side, INCONCLUSIVE "
             "otherwise; `p adj` is adjusted over the hypotheses.\n",
             markdown_table(view, formats=formats)]
    reasons = [f"- **{r['id']}**: {r['reason']}" for r in rows if r["reason"] != "-"]
    if reasons:
        parts.append("How each verdict was reached:\n\n" + "\n".join(reasons) + "\n")
    parts += _figure("Hypotheses: a − b with interval, margin and verdict", figure)
    return parts


def _distinct(df: pd.DataFrame, column: str) -> list[str]:
    """The distinct known values of ``column``, in order of appearance."""
    values = df[column] if column in df.columns else pd.Series(dtype=object)
    return [str(v) for v in dict.fromkeys(values) if not is_missing(v)]


def _one_question(df: pd.DataFrame, view: Mapping[str, Callable[[Row], str]]
                  ) -> tuple[str, dict[str, Callable[[Row], str]]]:
    """A question shared by every row goes into the prose once; otherwise each row shows
    its own. Returns the sentence (or "") and the view to use."""
    questions = _distinct(df, "question")
    rest = {h: f for h, f in view.items() if h != "question"}
    if len(questions) == 1:
        return f" Each row answers: _{questions[0]}_", rest
    if questions:
        return "", {"question": _raw("question"), **rest}
    return "", rest


def _tests(tests: pd.DataFrame) -> list[str]:
    ask, view = _one_question(tests, VIEWS["tests"])
    # tables written before the seed-random test have neither column
    absent = {h for h, col in (("role", "role"), ("seeds", "n_seeds"))
              if col not in tests.columns or tests[col].isna().all()}
    view = {h: f for h, f in view.items() if h not in absent}
    methods = _distinct(tests, "multiplicity")
    procedure = f" ({', '.join(methods)})" if methods else ""
    intervals = _distinct(tests, "ci_method")
    if len(intervals) == 1:
        ask += f" Intervals of a − b: {intervals[0]}."
    elif intervals:
        at = list(view).index("interval") + 1
        items = list(view.items())
        view = dict([*items[:at], ("interval method", _raw("ci_method")), *items[at:]])
    return [
        "## Paired comparisons\n\n"
        f"`a only`: discordant pairs right under `a` and wrong under `b`; `b only`: the "
        f"reverse. `p adj` corrects for the family of deciding comparisons{procedure}.{ask}\n\n"
        "Scope: with several training seeds the `decision` row is the seed-random t test: "
        "seeds and items are both random, so it asks whether the training *procedures* "
        "differ, and it alone decides `reject`. The `diagnostic` row beside it is the "
        "McNemar test stratified over seeds and noise seeds, with items as clusters: it "
        "holds the trained models fixed and asks whether *these models* differ on these "
        "items. A tiny diagnostic p-value beside a deciding interval that covers 0 means the "
        "models differ but the seeds disagree on the direction or size. With one training "
        "seed the two questions coincide and McNemar decides.\n",
        markdown_table(tests, formats=view),
    ]
