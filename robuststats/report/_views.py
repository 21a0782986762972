"""What people read: hypotheses as claims in words, conditions as rows in percent.

Shared by ``robuststats results show``, ``robuststats study`` and ``report.md``, so the three
say the same thing with the same number formats (:mod:`robuststats._format`). Inputs are
tables under the glossary's column names (:func:`robuststats.results.normalize_table`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from robuststats._format import fmt_ci, fmt_noise, fmt_p, fmt_pct, is_missing

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CONDITION_HEADERS",
    "HYPOTHESIS_HEADERS",
    "claim",
    "condition_descriptions",
    "condition_formats",
    "condition_rows",
    "hypothesis_rows",
    "records",
    "retention_notes",
]

#: display column -> header, in order, of one line per hypothesis
HYPOTHESIS_HEADERS: Mapping[str, str] = {
    "id": "id", "claim": "claim", "estimate": "a − b (pp)", "interval": "interval (pp)",
    "ci_method": "interval method", "pvalue_adjusted": "p adj", "verdict": "verdict",
}

#: display column -> header, in order, of one line per condition and noise level
CONDITION_HEADERS: Mapping[str, str] = {
    "condition": "condition", "eval_noise": "noise", "accuracy": "accuracy %",
    "accuracy_ci": "interval", "retention": "retention %", "retention_ci": "interval",
}


def records(df: pd.DataFrame | None) -> list[dict[str, Any]]:
    """A table's rows as plain dicts (empty for a missing table)."""
    return [] if df is None else df.to_dict(orient="records")


def _margin(value: Any) -> str:
    if is_missing(value):
        return "?"
    pp = 100 * float(value)
    return f"{pp:.1f} pp" if abs(pp - round(pp, 1)) < 1e-9 else f"{pp:g} pp"


def claim(h: Mapping[str, Any]) -> str:
    """A hypothesis in words: ``E8c − E8b > 5.0 pp (accuracy at 5% noise)``."""
    diff = f"{h.get('a')} − {h.get('b')}"
    margin = _margin(h.get("margin"))
    relation = h.get("relation")
    text = {"greater": f"{diff} > {margin}", "less": f"{diff} < {margin}",
            "equivalent": f"|{diff}| < {margin}"}.get(str(relation),
                                                      f"{diff} {relation} {margin}")
    noise = h.get("eval_noise")
    metric = h.get("metric", "accuracy")
    if not is_missing(noise) and float(noise) == 0:
        return f"{text} (clean {metric})"
    return f"{text} ({metric} at {fmt_noise(noise)} noise)"


def hypothesis_rows(hypotheses: pd.DataFrame | None) -> list[dict[str, str]]:
    """One display row per hypothesis (keys of :data:`HYPOTHESIS_HEADERS`, plus ``reason``).

    A hypothesis without an estimate (e.g. its cells are missing) shows its reason in place
    of the interval, so an INCONCLUSIVE verdict never stands unexplained.
    """
    rows = []
    for h in records(hypotheses):
        estimate_missing = is_missing(h.get("estimate"))
        interval = fmt_ci(h.get("ci_low"), h.get("ci_high"), h.get("ci_level"))
        if estimate_missing and not is_missing(h.get("reason")) and h.get("reason"):
            interval = f"({h['reason']})"
        rows.append({
            "id": str(h.get("id", "")), "claim": claim(h),
            "estimate": fmt_pct(h.get("estimate"), signed=True), "interval": interval,
            "ci_method": _text(h.get("ci_method")),
            "pvalue_adjusted": fmt_p(h.get("pvalue_adjusted")),
            "verdict": _text(h.get("verdict")), "reason": _text(h.get("reason")),
        })
    return rows


def condition_rows(summary: pd.DataFrame | None,
                   retention: pd.DataFrame | None) -> list[dict[str, str]]:
    """One display row per condition and noise level: accuracy and retention in percent,
    each with its interval and level (keys of :data:`CONDITION_HEADERS`)."""
    def key(row: Mapping[str, Any]) -> tuple[str, float]:
        # rounded: a level stored as 0.05 and one computed as 0.05000000000000001 match
        return str(row["condition"]), round(float(row["eval_noise"]), 9)

    kept = {key(r): r for r in records(retention)}
    rows = []
    for s in records(summary):
        r = kept.get(key(s), {})
        rows.append({
            "condition": str(s["condition"]), "eval_noise": fmt_noise(s["eval_noise"]),
            "accuracy": fmt_pct(s.get("accuracy")),
            "accuracy_ci": fmt_ci(s.get("ci_low"), s.get("ci_high"), s.get("ci_level")),
            "retention": ("not estimable" if _not_estimable(r)
                          else fmt_pct(r.get("retention"))),
            "retention_ci": fmt_ci(r.get("ci_low"), r.get("ci_high"), r.get("ci_level")),
        })
    return rows


#: how the retention table's ``ci_method`` begins on a row without an estimate
NOT_ESTIMABLE = "none, not estimable: "


def _not_estimable(row: Mapping[str, Any]) -> bool:
    return str(row.get("ci_method") or "").startswith(NOT_ESTIMABLE)


def retention_notes(retention: pd.DataFrame | None) -> list[str]:
    """One line per retention row reported as not estimable: where, and why (the rule of
    :func:`robuststats.stats.retention_estimability`)."""
    return [f"retention of {r['condition']} at {fmt_noise(r['eval_noise'])} noise not "
            f"estimable: {str(r['ci_method'])[len(NOT_ESTIMABLE):]}"
            for r in records(retention) if _not_estimable(r)]


def condition_descriptions(meta: Mapping[str, Any]) -> dict[str, str]:
    """condition -> its description from the manifest's spec (conditions without one are
    left out)."""
    spec = meta.get("spec") or {}
    conditions = spec.get("conditions") or {}
    out = {}
    for name, cond in conditions.items():
        text = (cond or {}).get("description") if isinstance(cond, Mapping) else None
        if text and str(text).strip():
            out[str(name)] = " ".join(str(text).split())
    return out


def condition_formats(meta: Mapping[str, Any]) -> dict[str, str]:
    """condition -> the number format its noisy cells are evaluated in (``NVFP4 weights
    (W4A16), lm_head kept``), for the conditions whose evaluation kind (its ``eval_kind``,
    else the study's ``evaluation.kind``) is a format rather than a noise scale."""
    from robuststats.engine.eval_kinds import EVALUATION_KINDS

    spec = meta.get("spec") or {}
    evaluation = spec.get("evaluation") or {}
    default = evaluation.get("kind") if isinstance(evaluation, Mapping) else None
    out = {}
    for name, cond in (spec.get("conditions") or {}).items():
        kind = (cond or {}).get("eval_kind") if isinstance(cond, Mapping) else None
        found = EVALUATION_KINDS.get(str(kind or default))
        if found is not None and not found.level_is_scale:
            out[str(name)] = found.description
    return out


def _text(value: Any) -> str:
    return "-" if is_missing(value) or value == "" else str(value)
