"""``robuststats results list | show | verify | diff``: the versioned result store."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "results", help="list, show, verify or diff stored result versions",
        description="Inspect the immutable result versions under --root (default results/). "
                    "A version is STUDY (latest), STUDY/vN or a path to a version directory.",
    )
    p.add_argument("--root", default="results", metavar="DIR",
                   help="result store root (default results/)")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub.add_parser("list", help="every study and its versions")
    show = sub.add_parser("show", help="manifest facts and hypothesis verdicts of a version")
    show.add_argument("version", metavar="VERSION")
    ver = sub.add_parser("verify", help="recompute checksums; exit 1 on any change")
    ver.add_argument("version", metavar="VERSION", nargs="+",
                     help="STUDY, STUDY/vN (also 'STUDY vN') or a version directory")
    diff = sub.add_parser("diff", help="compare the tables of two versions; exit 1 if "
                                          "they differ")
    diff.add_argument("a", metavar="VERSION_A")
    diff.add_argument("b", metavar="VERSION_B")
    diff.add_argument("--rtol", type=float, default=1e-9, help="relative tolerance")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from robuststats.results import ResultStore

    store = ResultStore(args.root)
    return {"list": _list, "show": _show, "verify": _verify, "diff": _diff}[args.action](
        store, args)


def _list(store: Any, args: argparse.Namespace) -> int:
    studies = store.studies()
    if not studies:
        print(f"no result versions under {args.root}")
        return 0
    for study in studies:
        for v in store.versions(study):
            m = v.manifest
            rows = m.get("row_counts", {}).get("outcomes", "?")
            print(f"{v.label:<28} {m.get('sealed', ''):<22} spec {str(m.get('spec_hash'))[:12]:<12}"
                  f" {rows:>8} outcomes  {m.get('cells_finished', '?')}/"
                  f"{m.get('cells_planned', '?')} cells")
    return 0


def _show(store: Any, args: argparse.Namespace) -> int:
    import pandas as pd

    v = store.get(args.version)
    m = v.manifest
    env = m.get("environment", {})
    print(f"{v.label}  ({v.path})")
    for key in ("sealed", "spec_hash", "seeds", "noise_seeds", "n_items", "cells_planned",
                "cells_finished", "cells_failed", "device", "seconds"):
        if key in m:
            print(f"  {key}: {m[key]}")
    print(f"  package: {env.get('package_version')}  git: {str(env.get('git_commit'))[:12]}"
          f"{' (dirty)' if env.get('git_dirty') else ''}")
    versions = env.get("versions", {})
    print("  " + ", ".join(f"{k} {val}" for k, val in versions.items()))
    hyp = v.path / "hypotheses.parquet"
    if hyp.is_file():
        df = pd.read_parquet(hyp)
        if not df.empty:
            print()
            cols = ["id", "verdict", "estimate", "ci_low", "ci_high", "test", "reason"]
            print(df[[c for c in cols if c in df.columns]].to_string(index=False,
                                                                     max_colwidth=60))
    return 0


def _verify(store: Any, args: argparse.Namespace) -> int:
    from robuststats.results import verify

    bad = 0
    for ref in _refs(args.version):
        report = verify(store.get(ref))
        if report.ok:
            print(f"{report.version}: OK ({len(store.get(ref).manifest['files'])} files)")
            continue
        bad += 1
        for kind, files in (("changed", report.changed), ("missing", report.missing),
                            ("unexpected", report.extra)):
            for f in files:
                print(f"{report.version}: {kind}: {f}")
    return 1 if bad else 0


def _diff(store: Any, args: argparse.Namespace) -> int:
    import pandas as pd

    from robuststats.results import diff_versions

    a, b = store.get(args.a), store.get(args.b)
    d = diff_versions(a, b, rtol=args.rtol)
    if d.empty:
        print(f"{a.label} and {b.label}: tables identical")
        return 0
    with pd.option_context("display.width", 160, "display.max_rows", 500):
        print(f"{a.label} vs {b.label}: {len(d)} difference(s)")
        print(d.to_string(index=False))
    return 1  # like diff(1): 1 means the versions differ


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
