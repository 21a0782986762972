"""The gate's report (text and Markdown) and its versioned result.

``write_gate`` publishes ``<out>/<baseline study>.gate/v<N>/`` through
:class:`robuststats.results.ResultStore` (written in a temporary directory, sealed with a
manifest of SHA-256 checksums, renamed into place in one step, made read-only):
``gate.parquet``/``.csv`` (one row per level, :data:`._gate.GATE_COLUMNS`), ``gate.json``,
``outcomes.parquet`` (both sides, conditions ``candidate`` and ``baseline``),
``injections.parquet`` when a checkpoint was evaluated, and ``report.md``. The manifest has
``kind: gate`` and records the protocol, so a later gate can take this version as its
baseline (its candidate becomes the reference).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from robuststats._format import fmt_noise, fmt_p, render_table, to_jsonable

if TYPE_CHECKING:
    from robuststats.gate._gate import GateResult
    from robuststats.results import ResultVersion

__all__ = ["gate_markdown", "gate_text", "write_gate"]


def _pct(v: float, signed: bool = False) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{100 * v:+.1f}%" if signed else f"{100 * v:.1f}%"


def _margin(result: GateResult) -> str:
    """The margin as the table shows it: −d, +d or ±d (relative equivalence: −d/+d/(1 − d))."""
    d = result.max_degradation
    if result.question == "superiority":
        return f"+{_pct(d)}"
    if result.question == "equivalence":
        top = d / (1 - d) if result.margin_type == "relative" else d
        return f"-{_pct(d)}/+{_pct(top)}" if top != d else f"±{_pct(d)}"
    return f"-{_pct(d)}"


def _rows(result: GateResult) -> list[dict[str, str]]:
    level = f"{100 * (1 - result.alpha):g}%"
    out = []
    for t in result.tests:
        row = {
            "eval_noise": fmt_noise(t.eval_noise),
            "candidate": _pct(t.candidate) if math.isfinite(t.candidate) else "-",
            "baseline": _pct(t.baseline),
            "contrast": _pct(t.estimate, signed=True),
            f"{level} lower bound": _pct(t.lower_bound, signed=True),
        }
        if result.question == "equivalence":
            row[f"{level} upper bound"] = _pct(t.upper_bound, signed=True)
        row |= {"margin": _margin(result), "p": fmt_p(t.pvalue),
                "decision": "pass" if t.passed else "FAIL"}
        if result.question != "superiority":
            row["80%-power margin"] = _pct(t.detectable_degradation)
        out.append(row)
    return out


def _accuracy_label(result: GateResult) -> str:
    """``clean accuracy`` when every gated level is 0, ``noisy accuracy`` when none is."""
    clean = {t.eval_noise == 0 for t in result.tests}
    return "accuracy" if len(clean) > 1 else "clean accuracy" if clean == {True} \
        else "noisy accuracy"


def _head(result: GateResult) -> list[str]:
    what = "retention (noisy/clean accuracy)" if result.metric == "retention" \
        else _accuracy_label(result)
    d = result.max_degradation
    contrast = "candidate/baseline − 1" if result.margin_type == "relative" \
        else "candidate − baseline"
    if result.question == "superiority":
        rule, ask = f"{contrast} > +{d:g}", f"better than the baseline's by more than {d:g}"
    elif result.question == "equivalence":
        top = d / (1 - d) if result.margin_type == "relative" else d
        rule = f"−{d:g} < {contrast} < +{top:.4g}"
        ask = "equivalent to the baseline's"
    else:
        rule, ask = f"{contrast} > −{d:g}", "non-inferior to the baseline's"
    margin = f"{rule} ({result.margin_type})"
    p = result.protocol
    seeds_c, seeds_b = len(result.seeds_candidate), len(result.seeds_baseline)
    return [
        f"robustness gate: {result.decision}",
        f"  question:  is the candidate's {what} {ask}, {margin}, "
        f"{'two one-sided tests at' if result.question == 'equivalence' else 'one-sided'} "
        f"alpha {result.alpha:g}, at every level?",
        f"  baseline:  {result.baseline} ({seeds_b} seed{'s' if seeds_b != 1 else ''})",
        f"  candidate: {result.candidate} ({seeds_c} seed{'s' if seeds_c != 1 else ''})",
        f"  protocol:  task {p.task}, {p.error_model}, {result.n_items} items, noise seeds "
        f"{', '.join(map(str, p.noise_seeds))}",
    ]


def _closing(result: GateResult) -> str:
    level, d = f"{100 * (1 - result.alpha):g}%", result.max_degradation
    if result.passed:
        rule = {"non-inferiority": f"the one-sided {level} lower bound lies above −{d:g}",
                "superiority": f"the one-sided {level} lower bound lies above +{d:g}",
                "equivalence": f"both one-sided {level} bounds lie inside the margin "
                               f"{_margin(result)}"}[result.question]
        return f"decision: PASS: at every level {rule}."
    failed = ", ".join(fmt_noise(t.eval_noise) for t in result.tests if not t.passed)
    why = {"non-inferiority": f"non-inferiority within {d:g} is not shown (the lower bound "
                              "reaches the margin)",
           "superiority": f"an improvement of more than {d:g} is not shown (the lower bound "
                          "does not clear the margin)",
           "equivalence": f"equivalence within {_margin(result)} is not shown (a bound "
                          "reaches the margin)"}[result.question]
    return f"decision: FAIL at eval_noise {failed}: {why}."


def gate_text(result: GateResult) -> str:
    """The report for a terminal or a CI log."""
    rows = _rows(result)
    table = render_table(rows, list(rows[0]), formats={k: str for k in rows[0]})
    lines = [*_head(result), "", *("  " + ln for ln in table.splitlines()), ""]
    lines += [f"note: {n}" for n in result.notes]
    lines.append(_closing(result))
    return "\n".join(lines)


def gate_markdown(result: GateResult) -> str:
    """The report as Markdown (a CI job summary, a merge-request comment, ``report.md``)."""
    rows = _rows(result)
    head = _head(result)
    cols = list(rows[0])
    lines = [f"## Robustness gate: **{result.decision}**", ""]
    lines += [f"- {h.strip()}" for h in head[1:]]
    lines += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(r[c] for c in cols) + " |" for r in rows]
    lines.append("")
    lines += [f"> {n}" for n in result.notes]
    lines += ["", _closing(result), "",
              "Contrast: candidate/baseline − 1 (relative) or candidate − baseline "
              "(absolute). The 80%-power margin is the smallest margin at which a candidate "
              "exactly as good as the baseline passes with 80 % probability at this size.",
              ""]
    return "\n".join(lines)


def write_gate(result: GateResult, out: str | Path) -> ResultVersion:
    """Publish the gate as a new version ``<out>/<baseline study>.gate/v<N>/``."""
    from robuststats.results import Manifest, ResultStore, cell_digests
    from robuststats.runs import environment

    study = f"{(result.spec or {}).get('name') or 'baseline'}.gate"
    if study.endswith(".gate.gate"):  # a gate's result as the baseline: one series
        study = study[: -len(".gate")]
    table = result.to_frame()
    outcomes = result.outcomes
    record = result.to_dict()

    def writer(path: Path, number: int) -> None:
        table.to_parquet(path / "gate.parquet", index=False)
        table.to_csv(path / "gate.csv", index=False)
        (path / "gate.json").write_text(json.dumps(to_jsonable(record), indent=2,
                                                   allow_nan=False) + "\n")
        outcomes.to_parquet(path / "outcomes.parquet", index=False)
        if result.injections is not None:
            result.injections.to_parquet(path / "injections.parquet", index=False)
        (path / "report.md").write_text(f"# {study} v{number}\n\n" + gate_markdown(result))

    manifest = Manifest("gate", {
        "decision": result.decision,
        "gate": {**to_jsonable(record), "spec_condition": result.spec_condition},
        "spec": result.spec, "n_items": result.n_items, "alpha": result.alpha,
        "confidence_level": 1.0 - result.alpha},
        row_counts={"gate": len(table), "outcomes": len(outcomes)},
        environment=environment(), cells=cell_digests(outcomes))
    return ResultStore(out).publish(study, writer, manifest)
