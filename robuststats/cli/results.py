"""``robuststats results list | show | verify | diff``: the versioned result store."""

from __future__ import annotations

import argparse
from typing import Any

from robuststats.cli import _options as opts
from robuststats.cli._output import emit, fmt_noise, fmt_p, is_missing, render_table
from robuststats.cli._types import non_negative_float, positive_int
from robuststats.glossary import table_names

__all__ = ["add_parser", "run"]

#: manifest facts that ``results show`` prints, in order
_FACTS = ("sealed", "source", "spec_hash", "run_hash", "seeds", "noise_seeds", "n_items",
          "n_items_requested", "cells_planned", "cells_finished", "cells_failed", "device",
          "seconds", "alpha", "confidence_level", "multiplicity", "analysis")

#: tables whose records ``results show`` gives, in the glossary's reading order
_SHOWN = table_names("analysis", order="reading", show=True)

_ROOT_HELP = "result store root (default results/)"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = opts.add_command(
        subparsers, "results", run,
        options=[opts.option("--root", default="results", metavar="DIR", help=_ROOT_HELP)],
        help="list, show, verify or diff stored result versions",
        description="Inspect the immutable result versions under --root (default results/). "
                    "A version is STUDY (latest), STUDY/vN or a path to a version directory.",
    )
    # --root and --format also after the action (`results list --root DIR`); SUPPRESS keeps
    # a --root given before the action when none is given after it
    common = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    opts.add_options(common, [
        opts.option("--root", default=argparse.SUPPRESS, metavar="DIR", help=_ROOT_HELP),
        opts.FORMAT])
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub.add_parser(
        "list", parents=[common], help="every study and its versions",
        description="One line per sealed version under --root: its kind (study, "
                    "analysis-only, search, diagnosis, ...), when it was sealed, the first "
                    "characters of its spec hash, its outcome rows and its finished/planned "
                    "cells. A version whose manifest cannot be read is listed with the "
                    "reason.")
    show = sub.add_parser(
        "show", parents=[common],
        help="hypothesis verdicts, accuracy and retention of a version",
        description="One line per pre-registered hypothesis (the claim in words, a − b, its "
                    "interval with level and method, adjusted p-value, verdict), then "
                    "accuracy and retention in percent per condition and noise level. "
                    "--format json gives the same records under glossary column names.")
    show.add_argument("version", metavar="VERSION",
                      help="STUDY (latest), STUDY/vN or a version directory")
    ver = sub.add_parser(
        "verify", parents=[common], help="recompute checksums; exit 1 on any change",
        description="Recompute the SHA-256 checksum of every file of each version and "
                    "compare it with the seal in its manifest: files changed, missing or "
                    "added, cells of outcomes.parquet changed, the manifest against its seal "
                    "and the store's index, the stored spec against its hash, and, when the "
                    "run directory is still there, each cell against it. Exit 0 when every "
                    "version is intact, 1 otherwise.")
    ver.add_argument("version", metavar="VERSION", nargs="+",
                     help="STUDY, STUDY/vN (also 'STUDY vN') or a version directory")
    diff = sub.add_parser(
        "diff", parents=[common], help="compare the tables of two versions; exit 1 if they differ",
        description="Compare the tables of two versions row by row (rows matched by their "
                    "keys, numbers equal within --rtol). The text output leads with what "
                    "changed for a reader: hypotheses whose verdict changed and decision "
                    "tests whose outcome changed, the largest estimate changes with both "
                    "intervals, evaluation cells one version has and the other lacks, and "
                    "the number of differences per table; --all adds every differing value. "
                    "--format json gives the summary and every difference. Exit 0 when the "
                    "tables are identical, 1 when they differ (as diff(1)).")
    diff.add_argument("a", metavar="VERSION_A")
    diff.add_argument("b", metavar="VERSION_B")
    diff.add_argument("--rtol", type=non_negative_float, default=1e-9,
                      help="relative tolerance")
    diff.add_argument("--top", type=positive_int, default=10, metavar="N",
                      help="estimate changes listed, largest first (default 10)")
    diff.add_argument("--all", action="store_true",
                      help="also list every differing value (table, key, column, a, b)")
    return p


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from robuststats.errors import InputError
    from robuststats.results import ResultStore

    root = Path(args.root)
    if root.exists() and not root.is_dir():
        raise InputError(f"--root {str(root)!r} is a file, not a result store directory")
    if not root.exists() and args.root != "results":
        raise InputError(f"--root {str(root)!r}: no such directory")
    store = ResultStore(args.root)
    return {"list": _list, "show": _show, "verify": _verify, "diff": _diff}[args.action](
        store, args)


def _kind(manifest: dict[str, Any]) -> str:
    from robuststats.results import is_analysis_only

    if is_analysis_only(manifest):
        return "analysis-only"
    kind = manifest.get("kind")  # search and diagnose versions name their kind
    return kind if isinstance(kind, str) and kind.isprintable() and kind else "study"


def _list(store: Any, args: argparse.Namespace) -> int:
    from robuststats.errors import InputError
    from robuststats.results import MANIFEST, ResultVersion

    rows = []
    for study in store.studies():
        for number in store.numbers(study):
            path = store.root / study / f"v{number}"
            if not (path / MANIFEST).is_file():
                continue  # reserved but not sealed (in progress or crashed)
            try:
                v = ResultVersion.load(path)
            except InputError as exc:  # one damaged manifest must not hide the others
                rows.append({"version": f"{study}/v{number}", "study": study,
                             "number": number, "kind": "unreadable", "sealed": None,
                             "spec_hash": None, "outcomes": None, "cells_finished": None,
                             "cells_planned": None, "path": str(path), "error": str(exc)})
                continue
            m = v.manifest
            counts = m.get("row_counts")
            rows.append({"version": v.label, "study": v.study, "number": v.number,
                         "kind": _kind(m), "sealed": m.get("sealed"),
                         "spec_hash": m.get("spec_hash"),
                         "outcomes": counts.get("outcomes") if isinstance(counts, dict) else None,
                         "cells_finished": m.get("cells_finished"),
                         "cells_planned": m.get("cells_planned"), "path": str(v.path)})

    def text() -> str:
        if not rows:
            return f"no result versions under {args.root}"
        shown = [{**r, "spec": str(r["spec_hash"] or "-")[:12],
                  "cells": (f"{r['cells_finished']}/{r['cells_planned']}"
                            if r["cells_planned"] is not None else "-")} for r in rows]
        table = render_table(shown, ["version", "kind", "sealed", "spec", "outcomes", "cells"])
        errors = [f"{r['version']}: {r['error']}" for r in rows if r.get("error")]
        return "\n".join([table, *errors])

    emit(args.format, data={"root": str(args.root), "versions": rows}, text=text)
    return 0


def _show(store: Any, args: argparse.Namespace) -> int:
    from robuststats.report import (
        CONDITION_HEADERS,
        HYPOTHESIS_HEADERS,
        claim,
        condition_rows,
        hypothesis_rows,
        records,
        retention_notes,
    )
    from robuststats.results import is_analysis_only, read_tables

    v = store.get(args.version)
    m = v.manifest
    tables = read_tables(v)
    env = m.get("environment", {})
    hyp = [{**h, "claim": claim(h)} for h in records(tables.get("hypotheses"))]
    data = {
        "version": v.label, "path": str(v.path), "analysis_only": is_analysis_only(m),
        **{k: m[k] for k in _FACTS if k in m},
        "package_version": env.get("package_version"), "git_commit": env.get("git_commit"),
        **{name: hyp if name == "hypotheses" else records(tables.get(name))
           for name in _SHOWN},
    }

    def text() -> str:
        lines = [f"{v.label}  ({v.path})"]
        if is_analysis_only(m):
            lines.append("  analysis-only version: recomputed by `robuststats analyze` from "
                         "stored outcomes; no model was trained or evaluated for it")
        lines += [f"  {k}: {m[k]}" for k in _FACTS if k in m]
        if env:
            lines.append(f"  package: {env.get('package_version')}  git: "
                         f"{str(env.get('git_commit'))[:12]}"
                         f"{' (dirty)' if env.get('git_dirty') else ''}")
            versions = env.get("versions", {})
            if versions:
                lines.append("  " + ", ".join(f"{k} {val}" for k, val in versions.items()))
        rows = hypothesis_rows(tables.get("hypotheses"))
        if rows:
            lines += ["", "Hypotheses: a − b in percentage points, p adj over the hypotheses",
                      render_table(rows, list(HYPOTHESIS_HEADERS), headers=HYPOTHESIS_HEADERS)]
        cond = condition_rows(tables.get("summary"), tables.get("retention"))
        if cond:
            lines += ["", "Accuracy and retention (%) per condition and noise level",
                      render_table(cond, list(CONDITION_HEADERS), headers=CONDITION_HEADERS),
                      *retention_notes(tables.get("retention"))]
        omnibus = records(tables.get("omnibus"))
        if omnibus:
            lines += ["", "Omnibus test per noise level (do the conditions differ at all?)",
                      render_table(omnibus, ["eval_noise", "n_conditions", "test", "statistic",
                                             "dof", "pvalue"],
                                   formats={"eval_noise": fmt_noise, "pvalue": fmt_p},
                                   headers={"eval_noise": "noise", "n_conditions": "conditions",
                                            "pvalue": "p"})]
        for name, what in (("missing", "missing cell(s)"), ("dropped", "dropped outcome(s)")):
            n = len(tables.get(name, ()))
            if n:
                lines.append(f"\n{n} {what}: see {v.path / f'{name}.csv'}")
        return "\n".join(lines)

    emit(args.format, data=data, text=text)
    return 0


def _verify(store: Any, args: argparse.Namespace) -> int:
    from robuststats.results import verify

    rows = []
    for ref in _refs(args.version):
        version = store.get(ref)
        report = verify(version)
        rows.append({"version": report.version, "ok": report.ok,
                     "files": len(version.manifest.get("files", {})),
                     "changed": report.changed, "missing": report.missing,
                     "unexpected": report.extra, "cells": report.cells,
                     "cells_changed": report.cells_changed,
                     "cells_missing": report.cells_missing,
                     "cells_unexpected": report.cells_extra, "run_dir": report.run_dir,
                     "run_cells_differ": report.run_cells_differ,
                     "run_cells_gone": report.run_cells_gone, "run_note": report.run_note,
                     "manifest_changed": report.manifest_changed,
                     "spec_hash_changed": report.spec_hash_changed, "index": report.index})

    def text() -> str:
        lines = []
        for r in rows:
            name = r["version"]
            if r["ok"]:
                cells = f", {r['cells']} cells" if r["cells"] else ""
                lines.append(f"{name}: OK ({r['files']} files{cells})")
            if r["manifest_changed"]:
                lines.append(f"{name}: changed: manifest.json (it no longer matches its seal)")
            if r["spec_hash_changed"]:
                lines.append(f"{name}: changed: the stored spec (spec_hash is not its hash)")
            if r["index"] == "differs":
                lines.append(f"{name}: changed: manifest.json (the store's index records "
                             "another seal for this version)")
            elif r["manifest_changed"] is None:
                lines.append(f"{name}: sealed before manifests carried a seal: its files, "
                             "cells and spec hash are checked, manifest.json itself is not")
            elif r["index"] == "absent":
                lines.append(f"{name}: not in the store's index (copied from another "
                             "store?): checked against its own seal only")
            for kind in ("changed", "missing", "unexpected"):
                lines += [f"{name}: {kind}: {f}" for f in r[kind]]
            for kind in ("changed", "missing", "unexpected"):
                lines += [f"{name}: cell {kind} in outcomes.parquet: {c}"
                          for c in r[f"cells_{kind}"]]
            if r["run_dir"] is not None:
                lines += [f"{name}: cell differs from the run directory {r['run_dir']}: {c}"
                          for c in r["run_cells_differ"]]
                gone = r["run_cells_gone"]
                if gone:
                    lines.append(f"{name}: {len(gone)} cell(s) no longer in the run "
                                 f"directory {r['run_dir']} (first: {gone[0]})")
                if not (r["run_cells_differ"] or gone):
                    lines.append(f"{name}: every cell matches the run directory "
                                 f"{r['run_dir']}")
            elif r["cells"] and r["run_note"]:
                lines.append(f"{name}: cells not traced to a run directory: {r['run_note']}")
        return "\n".join(lines)

    emit(args.format, data=rows, text=text)
    return 0 if all(r["ok"] for r in rows) else 1


def _diff(store: Any, args: argparse.Namespace) -> int:
    from robuststats.results import diff_versions, summarize_diff

    a, b = store.get(args.a), store.get(args.b)
    d = diff_versions(a, b, rtol=args.rtol)
    s = summarize_diff(a, b, d, top=args.top)
    data = {"a": a.label, "b": b.label, "rtol": args.rtol, "identical": d.empty,
            "verdicts_changed": s.verdicts, "largest_estimate_changes": s.estimates,
            "cells_added": s.cells_added, "cells_missing": s.cells_missing,
            "differences_per_table": s.counts, "differences": d}

    def text() -> str:
        if d.empty:
            # the cells may still differ (a cell lost with every table unchanged)
            return "\n".join([f"{a.label} and {b.label}: tables identical",
                              *_cell_lines(s, a.label, b.label)])
        per_table = ", ".join(f"{t} {n}" for t, n in s.counts.items())
        lines = [f"{a.label} vs {b.label}: {len(d)} difference(s) ({per_table})"]
        lines += _diff_summary_lines(s, a.label, b.label)
        if args.all:
            lines += ["", "Every difference",
                      render_table(d.to_dict(orient="records"), list(d.columns),
                                   formats={"a": _diff_value, "b": _diff_value})]
        else:
            lines += ["", f"(--all lists all {len(d)} differing values; --format json gives "
                          "them too)"]
        return "\n".join(lines)

    emit(args.format, data=data, text=text)
    return 0 if d.empty else 1  # like diff(1): 1 means the versions differ


def _diff_summary_lines(s: Any, label_a: str, label_b: str) -> list[str]:
    """The reader's part of ``results diff``: verdicts, estimates, cells."""
    from robuststats._format import fmt_ci, fmt_pct

    lines = ["", "Verdicts that changed"]
    for table, what in (("hypotheses", "hypothesis"), ("tests", "decision test")):
        n = s.compared.get(table)
        changed = int((s.verdicts["what"] == what).sum())
        if n and not changed:
            lines.append(f"  {what} verdicts: all {n} the same")
    if len(s.verdicts):
        lines.append(render_table(s.verdicts.to_dict(orient="records"),
                                  ["what", "key", "a", "b"],
                                  headers={"key": "row", "a": label_a, "b": label_b}))
    lines += ["", "Largest estimate changes (percent / percentage points)"]
    if len(s.estimates):
        rows = [{"what": r["what"], "key": r["key"],
                 "a": f"{fmt_pct(r['a'])} {fmt_ci(r['a_ci_low'], r['a_ci_high'], r['a_ci_level'])}",
                 "b": f"{fmt_pct(r['b'])} {fmt_ci(r['b_ci_low'], r['b_ci_high'], r['b_ci_level'])}",
                 "change": fmt_pct(r["change"], signed=True)}
                for r in s.estimates.to_dict(orient="records")]
        lines.append(render_table(rows, ["what", "key", "a", "b", "change"],
                                  headers={"key": "row", "a": label_a, "b": label_b}))
    else:
        lines.append("  none: no estimate of a row both versions hold changed")
    lines += ["", "Cells (condition, seed, noise, noise seed)"]
    if not (s.cells_added or s.cells_missing):
        lines.append("  the same cells in both versions")
    return lines + _cell_lines(s, label_a, label_b)


def _cell_lines(s: Any, label_a: str, label_b: str) -> list[str]:
    """``  1 added (only in b): E8a__s5__n0__ns0`` and the like, at most 8 cells named."""
    lines = []
    for what, cells, where in (("added", s.cells_added, label_b),
                               ("missing", s.cells_missing, label_a)):
        if cells:
            shown = ", ".join(cells[:8]) + (f", ... ({len(cells) - 8} more)"
                                            if len(cells) > 8 else "")
            lines.append(f"  {len(cells)} {what} (only in {where}): {shown}")
    return lines


def _diff_value(value: Any) -> str:
    """Enough digits to see a difference beyond ``--rtol``; long text shortened."""
    if isinstance(value, float) and not is_missing(value):
        return f"{value:.10g}"
    text = "-" if is_missing(value) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _refs(tokens: list[str]) -> list[str]:
    """``STUDY vN`` (two words) means ``STUDY/vN``; everything else passes through."""
    import re

    out: list[str] = []
    for tok in tokens:
        if re.fullmatch(r"v\d+|latest", tok) and out and "/" not in out[-1]:
            out[-1] = f"{out[-1]}/{tok}"
        else:
            out.append(tok)
    return out
