"""``robuststats power``: sample size, power or minimum detectable effect for McNemar.

Imports nothing heavy at module level (numpy/scipy/pandas/seaborn load inside ``run``),
so ``robuststats power --help`` starts instantly.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Any

from robuststats.errors import InputError

__all__ = ["add_parser", "run"]

#: GSM8K test split; the project's default item pool (0 disables the check)
DEFAULT_POOL_SIZE = 1319

EPILOG = """\
examples:
  robuststats power --effect 0.03
      required n across discordance rates π_D (unknown π_D), plus the unpaired figure
  robuststats power --effect 0.03 --discordance 0.12
      required number of items (pairs) at 80% power
  robuststats power --effect 0.03 --pilot pilot_outcomes.parquet --conditions E8b E8c
      π_D estimated from pilot outcomes (with its confidence interval)
  robuststats power --effect 0.03 --baseline 0.64 --correlation 0.6
      π_D from the two accuracies and the correlation of the paired outcomes
  robuststats power --n 1319 --discordance 0.15
      minimum detectable effect with all 1,319 GSM8K test items
  robuststats power --effect 0.03 --n 500 --discordance 0.15 --method exact
      power of the exact McNemar test with 500 items
  robuststats power --effect 0.02 --discordance 0.15 --repeats 5 --icc 0.4 --json
      5 noisy evaluations per item with intra-item correlation 0.4

π_D (discordance) is the share of items on which the two conditions disagree; McNemar's
power depends on it as much as on the effect. Formulas and references: docs/power.md.
"""


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    return value


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "power",
        help="sample size / power / minimum detectable effect for paired accuracy differences",
        description=(
            "Power analysis for comparing two conditions on the same items with McNemar's\n"
            "test: solves for the number of items (given --effect), the power (given --effect\n"
            "and --n) or the minimum detectable effect (given --n)."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = parser.add_argument_group("what to solve for")
    what.add_argument(
        "--effect",
        type=_number,
        metavar="D",
        help="accuracy difference δ to detect, e.g. 0.03 for 3 points",
    )
    what.add_argument(
        "--n",
        type=int,
        metavar="N",
        help="number of items (pairs); with --effect: report power, "
        "without: the minimum detectable effect",
    )
    what.add_argument(
        "--power", type=_number, default=0.8, metavar="P", help="target power (default: 0.8)"
    )
    disc = parser.add_argument_group("discordance π_D (one of; none: a table across π_D)")
    disc.add_argument(
        "--discordance",
        type=_number,
        metavar="PD",
        help="share of items on which the two conditions disagree",
    )
    disc.add_argument(
        "--correlation",
        type=_number,
        metavar="PHI",
        help="correlation of the paired 0/1 outcomes (needs --baseline)",
    )
    disc.add_argument(
        "--pilot",
        metavar="PATH",
        help="pilot outcomes table (.parquet/.csv: condition, item_id, "
        "correct [, seed, eval_noise, noise_seed]) to estimate π_D",
    )
    disc.add_argument(
        "--conditions",
        nargs=2,
        metavar=("A", "B"),
        help="the two pilot conditions to compare (A = baseline)",
    )
    disc.add_argument(
        "--eval-noise", type=float, metavar="S", help="pilot rows at this eval_noise level only"
    )
    disc.add_argument(
        "--confidence-level",
        type=_number,
        default=0.95,
        metavar="CL",
        help="of the pilot's π_D interval (default: 0.95)",
    )
    test = parser.add_argument_group("test and design")
    test.add_argument(
        "--baseline",
        type=_number,
        metavar="P1",
        help="accuracy of the baseline condition (checks the design; used by "
        "--correlation and the unpaired figure)",
    )
    test.add_argument(
        "--alpha", type=_number, default=0.05, help="significance level (default: 0.05)"
    )
    test.add_argument(
        "--alternative",
        choices=("two-sided", "greater", "less"),
        default="two-sided",
        help="two-sided (default), or one-sided: greater = the second condition is more "
        "accurate by --effect, less = less accurate (e.g. noisy vs clean)",
    )
    test.add_argument(
        "--method",
        choices=("connor", "exact", "midp", "asymptotic", "asymptotic-cc"),
        default="connor",
        help="connor: normal approximation (Connor 1987; default); the others name the "
        "McNemar test you will run (as in `mcnemar(method=...)`) and compute its exact "
        "unconditional power",
    )
    test.add_argument(
        "--repeats",
        type=int,
        default=1,
        metavar="M",
        help="evaluations per item (noise seeds / training seeds; default 1)",
    )
    test.add_argument(
        "--icc",
        type=_number,
        default=0.0,
        metavar="R",
        help="intra-item correlation of repeated evaluations (default 0)",
    )
    test.add_argument(
        "--pool-size",
        type=int,
        default=DEFAULT_POOL_SIZE,
        metavar="N",
        help=f"items available (default {DEFAULT_POOL_SIZE}, the GSM8K test "
        "split; 0 disables the check)",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON object")
    out.add_argument("--plot", metavar="PATH", help="write a power-vs-n curve (PNG)")
    parser.set_defaults(run=run)
    return parser


def _common(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "alpha": args.alpha,
        "alternative": args.alternative,
        "method": args.method,
        "repeats": args.repeats,
        "icc": args.icc,
        "pool_size": args.pool_size or None,
    }


def _solve(args: argparse.Namespace, discordance: float | None) -> Any:
    """power_mcnemar for whichever of n / power / effect the options leave open."""
    from robuststats.stats import power_mcnemar

    both_given = args.effect is not None and args.n is not None
    return power_mcnemar(
        args.effect,
        args.n,
        None if both_given else args.power,
        baseline=args.baseline,
        discordance=discordance,
        correlation=args.correlation,
        **_common(args),
    )


def _unpaired(args: argparse.Namespace, effect: float) -> Any:
    from robuststats.stats import power_two_proportions

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return power_two_proportions(
            effect,
            None,
            args.power,
            baseline=args.baseline,
            alpha=args.alpha,
            alternative=args.alternative,
            method="pooled",
            pool_size=args.pool_size or None,
        )


def _describe(args: argparse.Namespace) -> str:
    from robuststats.stats._power import METHOD_DESCRIPTIONS

    return f"{METHOD_DESCRIPTIONS[args.method]}; {args.alternative}, alpha = {args.alpha:g}"


def _n_phrase(r: Any) -> str:
    text = f"{r.n} items (pairs)"
    if r.repeats > 1:
        text += (
            f" × {r.repeats} repeats = {r.n_evaluations} evaluations per condition "
            f"(design effect {r.design_effect:.3g} at ICC {r.icc:g}: worth "
            f"{r.n_effective:.0f} independent items)"
        )
    return text


def _unpaired_line(u: Any, baseline_given: bool) -> str:
    p2 = u.baseline - u.effect if u.alternative == "less" else u.baseline + u.effect
    where = f"accuracies {u.baseline:.3g} vs {p2:.3g}"
    if not baseline_given:
        where += ", the largest-variance case; pass --baseline"
    return (
        f"unpaired design for comparison (different items per condition, pooled z-test, "
        f"{where}): {u.n} items per condition"
    )


def _table(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    from robuststats.stats import power_mcnemar
    from robuststats.stats._power_curve import discordance_grid

    if args.effect is None:
        raise InputError(
            "the minimum detectable effect (--n without --effect) needs π_D: pass "
            "--discordance, --correlation with --baseline, or --pilot."
        )
    solve_n = args.n is None
    rows, errors = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for pi_d in discordance_grid(args.effect):
            try:
                r = power_mcnemar(
                    args.effect,
                    args.n,
                    args.power if solve_n else None,
                    baseline=args.baseline,
                    discordance=pi_d,
                    **_common(args),
                )
            except InputError as exc:  # e.g. a (π_D, baseline) combination that cannot be
                errors.append(exc)
                continue
            rows.append(r)
    if not rows:
        # every row failed: the inputs themselves are bad; report the first reason
        raise errors[0]
    lines = [f"McNemar power analysis: {_describe(args)}"]
    if solve_n:
        lines.append(
            f"effect δ = {args.effect:g}, power {args.power:g}; π_D unknown, so the required "
            "number of items by discordance rate π_D:"
        )
        lines += ["", f"  {'π_D':>8}  {'items n':>9}  {'evaluations':>11}  note"]
    else:
        lines.append(
            f"effect δ = {args.effect:g}, n = {args.n} items; π_D unknown, so the power by "
            "discordance rate π_D:"
        )
        lines += ["", f"  {'π_D':>8}  {'power':>9}  note"]
    for r in rows:
        notes = []
        if abs(r.discordance - r.effect) < 1e-12:
            notes.append("π_D = δ: every discordant item favours the better condition")
        if r.exceeds_pool:
            notes.append(f"exceeds the pool of {r.pool_size} items")
        if solve_n:
            lines.append(
                f"  {r.discordance:>8.3g}  {r.n:>9d}  {r.n_evaluations:>11d}  {'; '.join(notes)}"
            )
        else:
            lines.append(f"  {r.discordance:>8.3g}  {r.power:>9.3f}  {'; '.join(notes)}")
    lines.append("")
    unpaired = _unpaired(args, args.effect) if solve_n else None
    if unpaired is not None:
        lines += [_unpaired_line(unpaired, args.baseline is not None), ""]
    lines.append(
        "Pin π_D with --discordance PD, with --correlation PHI --baseline P1, or estimate it "
        "with --pilot outcomes.parquet (both conditions on a few hundred items)."
    )
    payload = {
        "solved_for": "n" if solve_n else "power",
        "n": None if solve_n else args.n,
        "discordance": None,
        "effect": args.effect,
        "power": args.power if solve_n else None,
        "table": [r.to_dict() for r in rows],
        "hint": "pass --discordance, --correlation with --baseline, or --pilot to pin π_D",
    }
    if unpaired is not None:
        payload["unpaired"] = unpaired.to_dict()
    return payload, lines


def _single(
    args: argparse.Namespace, discordance: float | None, pilot: Any
) -> tuple[dict[str, Any], list[str], Any]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = _solve(args, discordance)
    for w in caught:
        print(f"robuststats power: warning: {w.message}", file=sys.stderr)
    lines = [f"McNemar power analysis: {_describe(args)}"]
    if pilot is not None:
        est, pairs = pilot
        ci = est.confidence_interval
        lines.append(
            f"pilot {pairs.conditions[0]} vs {pairs.conditions[1]}: {est.n} pairs, π_D = "
            f"{est.discordance:.4g} ({est.confidence_level:.0%} CI {ci.low:.4g}–{ci.high:.4g}, "
            f"Wilson{_widened(est)}), observed δ = {est.effect:+.4g}, baseline accuracy "
            f"{est.baseline:.4g}"
        )
    design = f"π_D = {r.discordance:.4g}"
    if r.correlation is not None:
        design += f" (from correlation {r.correlation:g} at baseline {r.baseline:g})"
    payload = r.to_dict()
    if r.solved_for == "n":
        lines.append(f"effect δ = {r.effect:g}, {design}, power {r.power:g}")
        lines.append(f"n = {_n_phrase(r)}; achieved power {r.achieved_power:.3f}")
        unpaired = _unpaired(args, r.effect)
        payload["unpaired"] = unpaired.to_dict()
        lines.append(_unpaired_line(unpaired, args.baseline is not None))
    elif r.solved_for == "power":
        lines.append(f"effect δ = {r.effect:g}, {design}, n = {_n_phrase(r)}")
        lines.append(f"power = {r.power:.4f}")
    else:
        lines.append(f"{design}, n = {_n_phrase(r)}, power {r.power:g}")
        lines.append(
            f"minimum detectable effect δ = {r.effect:.4g} ({r.effect * 100:.2f} accuracy points)"
        )
    if pilot is not None:
        payload["pilot"] = pilot[0].to_dict()
        if r.solved_for == "n":
            payload["n_range"] = _n_range(args, pilot[0])
            low, high = payload["n_range"]["low"], payload["n_range"]["high"]
            lines.append(
                f"across the π_D interval: n from {low if low is not None else '—'} to "
                f"{high if high is not None else '—'}"
            )
        lines += _pilot_icc_lines(pilot[1], payload["pilot"])
    return payload, lines, r


def _widened(est: Any) -> str:
    if est.design_effect == 1.0:
        return ""
    return f" on n/{est.design_effect:.3g} for repeated items"


def _pilot_icc_lines(pairs: Any, record: dict[str, Any]) -> list[str]:
    """Report the pilot's ICC of the paired difference when items were evaluated repeatedly."""
    found = pairs.difference_icc()
    if found is None:
        return []
    icc, per_item = found
    record["difference_icc"], record["evaluations_per_item"] = icc, per_item
    return [
        f"pilot repeats: {per_item:.3g} evaluations per item, ICC of the paired difference "
        f"{icc:.3g}; plan repeated evaluations with --repeats M --icc {icc:.2g}"
    ]


def _n_range(args: argparse.Namespace, est: Any) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for key, pi_d in (("low", est.confidence_interval.low), ("high", est.confidence_interval.high)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out[key] = _solve(args, pi_d).n
        except InputError:
            out[key] = None  # π_D at this bound is below δ: impossible design
    return out


def _plot(
    path: str,
    args: argparse.Namespace,
    effect: float,
    pi_ds: list[float],
    n_max: int,
    in_use: float | None,
) -> None:
    """Power against n, one line per π_D (seaborn); the π_D in use is marked in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns

    from robuststats.stats._power_curve import power_curve

    n_values = np.unique(np.linspace(1, n_max, 120).astype(int))
    curve = power_curve(
        effect,
        discordances=pi_ds,
        n_values=n_values.tolist(),
        alpha=args.alpha,
        alternative=args.alternative,
        method=args.method,
        repeats=args.repeats,
        icc=args.icc,
        baseline=args.baseline,
    )

    def label(v: float) -> str:
        return f"{v:.3g}" + (" (in use)" if in_use is not None and abs(v - in_use) < 1e-6 else "")

    curve = curve.assign(**{"π_D": curve["discordance"].map(label)})
    fig, ax = plt.subplots(figsize=(8, 4.5))
    sns.lineplot(data=curve, x="n", y="power", hue="π_D", ax=ax, palette="viridis")
    ax.axhline(args.power, color="grey", linestyle="--", linewidth=1)
    if args.pool_size and args.pool_size <= n_max:
        ax.axvline(args.pool_size, color="firebrick", linestyle=":", linewidth=1)
        ax.text(
            args.pool_size,
            0.03,
            f"item pool {args.pool_size} ",
            color="firebrick",
            rotation=90,
            ha="right",
            va="bottom",
        )
    ax.legend(title="π_D", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_xlabel("items (pairs)" + (f", each × {args.repeats}" if args.repeats > 1 else ""))
    ax.set_ylabel("power")
    ax.set_ylim(0, 1)
    ax.set_title(f"McNemar ({args.method}), δ = {effect:g}, α = {args.alpha:g} {args.alternative}")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise InputError(f"cannot write plot {path!r}: {exc}") from exc
    finally:
        plt.close(fig)


def run(args: argparse.Namespace) -> int:
    for name in ("discordance", "correlation", "pilot"):
        others = [o for o in ("discordance", "correlation", "pilot") if o != name]
        if getattr(args, name) is not None and any(getattr(args, o) is not None for o in others):
            raise InputError("pass only one of --discordance, --correlation, --pilot.")
    if args.effect is None and args.n is None:
        raise InputError(
            "pass --effect (to get n) or --n (to get power or the minimum "
            "detectable effect), e.g. `robuststats power --effect 0.03`."
        )
    if args.pool_size < 0:
        raise InputError(f"`--pool-size` must be ≥ 0 (0 disables the check), got {args.pool_size}.")
    discordance, pilot = args.discordance, None
    if args.pilot is not None:
        from robuststats.stats import estimate_discordance
        from robuststats.stats._pilot import read_pilot

        pairs = read_pilot(args.pilot, conditions=args.conditions, eval_noise=args.eval_noise)
        with warnings.catch_warnings():
            # no discordant pair: reported below as an error with the bound to plan with
            warnings.simplefilter("ignore")
            est = estimate_discordance(
                pairs.x, pairs.y, groups=pairs.item_ids, confidence_level=args.confidence_level
            )
        if est.n_discordant == 0:
            raise InputError(
                f"pilot {pairs.conditions[0]} vs {pairs.conditions[1]} has no discordant pair "
                f"among {est.n}: π_D cannot be estimated; plan with its Wilson upper bound "
                f"(--discordance {est.confidence_interval.high:.3g}) or run a larger pilot."
            )
        if pairs.n_unpaired:
            print(
                f"robuststats power: warning: {pairs.n_unpaired} pilot rows without a partner "
                f"in the other condition were left out.",
                file=sys.stderr,
            )
        pilot = (est, pairs)
        discordance = est.discordance
        if args.baseline is None:
            args.baseline = est.baseline
    elif args.conditions is not None:
        raise InputError("--conditions selects conditions of --pilot; pass --pilot PATH.")

    if discordance is None and args.correlation is None:
        payload, lines = _table(args)
        result = None
        pi_ds = [row["discordance"] for row in payload["table"]]
        effect = args.effect
        n_max = max(row["n"] for row in payload["table"])
    else:
        payload, lines, result = _single(args, discordance, pilot)
        effect = result.effect
        pi_ds = sorted({round(result.discordance, 6), *_neighbours(result.discordance, effect)})
        n_max = result.n
    if args.plot:
        in_use = None if result is None else result.discordance
        _plot(args.plot, args, effect, pi_ds, max(int(n_max * 1.5), 20), in_use)
        lines.append(f"power curve written to {args.plot}")
        payload["plot"] = args.plot
    if args.json:
        print(json.dumps(payload, indent=2, ensure_ascii=False))
    else:
        print("\n".join(lines))
    return 0


def _neighbours(pi_d: float, effect: float) -> list[float]:
    """A few π_D around the one in use, so the plot shows how much it matters."""
    return [round(v, 6) for v in (pi_d * 0.5, pi_d * 1.5, pi_d * 2) if effect <= v < 1]
