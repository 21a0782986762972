"""``robuststats power --gate``: the plan of a robustness gate.

Part of :mod:`robuststats.cli.power`, which parses and dispatches here: the items, baseline
seeds or margin ``robuststats gate`` needs for an equally good candidate to pass with the
target power (``power_gate``), with the variance components of the gate's metric from a
baseline's outcomes (``estimate_gate_components``) and a table of items by baseline seeds.
Every number comes from :mod:`robuststats.stats`.
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any

from robuststats.cli._output import render_table
from robuststats.errors import InputError

__all__ = ["gate_mode"]

#: baseline seed counts of the gate's table (--seeds K is added)
GATE_TABLE_SEEDS = (2, 3, 5, 8, 10, 20)


def _gate_components(args: argparse.Namespace) -> dict[str, Any]:
    """Variance components of the gate's linearized metric from the baseline's outcomes."""
    from robuststats.stats import estimate_gate_components

    return estimate_gate_components(
        args.pilot, condition=args.gate_condition, eval_noise=args.eval_noise,
        metric=args.metric, margin_type=args.margin_type).to_dict()


def gate_mode(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """Plan ``robuststats gate`` (``power_gate``): items, baseline seeds, margin or power."""
    from robuststats.stats import UnreachablePowerError, power_gate

    comps = _gate_components(args) if args.pilot is not None else None
    seed_sd = args.seed_sd if args.seed_sd is not None else (
        comps["seed_sd"] if comps else None)
    resid_sd = args.resid_sd if args.resid_sd is not None else (
        comps["resid_sd"] if comps else 0.0)
    if seed_sd is None:
        raise InputError("planning a gate needs the seed SD of the metric: pass --pilot "
                         "(the baseline's outcomes) or --seed-sd S (and --resid-sd).")
    item_sd = args.item_sd or 0.0
    kb = args.seeds if args.seeds is not None else (comps["n_seeds"] if comps else None)
    n = args.n if args.n is not None else (
        None if args.max_degradation is not None else (comps["n_items"] if comps else None))
    margin = args.max_degradation
    if margin is None and (n is None or kb is None):
        raise InputError("without --max-degradation the gate's smallest margin is solved "
                         "for: pass --n and --seeds (or --pilot).")
    if margin is not None and n is None and kb is None:
        raise InputError("pass --seeds K (baseline seeds) to solve for items, or --n N to "
                         "solve for seeds.")
    both = margin is not None and n is not None and kb is not None
    common = dict(n_seeds_candidate=args.candidate_seeds, seed_sd=seed_sd, item_sd=item_sd,
                  resid_sd=resid_sd, margin_type=args.margin_type, alpha=args.alpha)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = power_gate(margin, n, kb, None if both else args.power, **common)
    scale = "relative (log scale)" if args.margin_type == "relative" else "absolute"
    lines = [f"Gate power analysis: one-sided non-inferiority t at alpha {args.alpha:g}, "
             f"{scale} margin, candidate {r.n_seeds_candidate} model(s) vs baseline seeds, "
             "seeds independent"]
    if comps is not None:
        lines.append(
            f"pilot {args.pilot} ({comps['condition']}, {comps['metric']} "
            f"{comps['value']:.3f} at eval_noise {comps['eval_noise']:g}, "
            f"{comps['n_seeds']} seeds × {comps['n_items']} items): seed SD "
            f"{comps['seed_sd']:.4g}, residual SD {comps['resid_sd']:.4g}")
    lines.append(f"components: seed SD {r.seed_sd:.4g}, item × candidate SD {r.item_sd:.4g}, "
                 f"residual SD {r.resid_sd:.4g}")
    ceiling = (f"; with {r.n_seeds_baseline} baseline seeds the power cannot exceed "
               f"{r.max_power:.3f}" if r.max_power < 0.9995 else "")
    size = f"{r.n_seeds_baseline} baseline seeds × {r.n_items} items"
    if r.solved_for == "power":
        lines.append(f"margin {r.margin:g}, {size}: an equally good candidate passes with "
                     f"probability {r.power:.4f}{ceiling}")
    elif r.solved_for == "margin":
        lines.append(f"{size}: smallest margin with power {r.power:g}: "
                     f"{r.margin:.4g}{ceiling}")
    else:
        lines.append(f"margin {r.margin:g}, power {r.power:g}: {size} (achieved power "
                     f"{r.achieved_power:.3f}){ceiling}")
    payload: dict[str, Any] = {"design": "gate", **r.to_dict(), "pilot": comps}
    if margin is not None and args.n is None and r.solved_for == "n_items":
        rows = []
        for k in sorted({*GATE_TABLE_SEEDS, r.n_seeds_baseline}):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    row = power_gate(margin, None, k, args.power, **common)
                rows.append({"n_seeds_baseline": k, "n_items": row.n_items,
                             "max_power": row.max_power, "note": ""})
            except UnreachablePowerError as exc:  # its reason is the row's note
                rows.append({"n_seeds_baseline": k, "n_items": None, "max_power": None,
                             "note": exc.reason})
        payload["table"] = rows
        table = render_table(rows, ["n_seeds_baseline", "n_items", "max_power", "note"],
                             formats={"max_power": lambda v: "-" if v is None else f"{v:.3f}",
                                      "note": str},
                             headers={"n_seeds_baseline": "baseline seeds",
                                      "n_items": "items", "max_power": "power with ∞ items"})
        lines += ["", f"items for power {args.power:g} by baseline seeds:", "",
                  *("  " + ln for ln in table.splitlines())]
    return payload, lines
