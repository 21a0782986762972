"""``robuststats power``: sample size, power or minimum detectable effect for McNemar.

Parses, calls :mod:`robuststats.stats` (public names only) and prints through the one
formatter. Imports nothing heavy at module level; the plain ``--effect`` table needs
neither pandas nor ``scipy.stats``, so ``robuststats power`` starts in a fraction of a
second.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from robuststats.cli._output import add_format_option, emit, fmt_ci, fmt_pct, render_table
from robuststats.errors import InputError

__all__ = ["add_parser", "run"]

#: GSM8K test split; the item pool without a pilot (0 disables the check)
DEFAULT_POOL_SIZE = 1319
#: figure formats ``--plot`` writes (by the file's suffix)
PLOT_FORMATS = ("png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp")

EPILOG = """\
sign rule: the effect is acc(A) − acc(B), first minus second, as in `mcnemar(a, b)`;
B is the baseline (--baseline is its accuracy) and --alternative greater claims that A
is the more accurate.

examples:
  robuststats power --effect 0.03
      required n across discordance rates π_D (unknown π_D), plus the unpaired figure
  robuststats power --effect 0.03 --discordance 0.12
      required number of items (pairs) at 80% power
  robuststats power --effect 0.03 --pilot pilot_outcomes.parquet --conditions E8c E8b
      π_D estimated from pilot outcomes (with its confidence interval); E8c − E8b
  robuststats power --effect 0.03 --baseline 0.64 --correlation 0.6
      π_D from the two accuracies and the correlation of the paired outcomes
  robuststats power --n 1319 --discordance 0.15
      minimum detectable effect with all 1,319 GSM8K test items
  robuststats power --effect 0.03 --n 500 --discordance 0.15 --method exact
      power of the exact McNemar test with 500 items
  robuststats power --effect 0.02 --discordance 0.15 --repeats 5 --icc 0.4 --format json
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
    what.add_argument("--effect", type=_number, metavar="D",
                      help="size of the accuracy difference acc(A) − acc(B) to detect, e.g. "
                           "0.03 for 3 points")
    what.add_argument("--n", type=int, metavar="N",
                      help="number of items (pairs); with --effect: report power, "
                           "without: the minimum detectable effect")
    what.add_argument("--power", type=_number, default=0.8, metavar="P",
                      help="target power (default: 0.8)")
    disc = parser.add_argument_group("discordance π_D (one of; none: a table across π_D)")
    disc.add_argument("--discordance", type=_number, metavar="PD",
                      help="share of items on which the two conditions disagree")
    disc.add_argument("--correlation", type=_number, metavar="PHI",
                      help="correlation of the paired 0/1 outcomes (needs --baseline)")
    disc.add_argument("--pilot", metavar="PATH",
                      help="pilot outcomes (.parquet/.csv/.tsv/.jsonl, a run directory or a "
                           "result version: condition, item_id, correct [, seed, eval_noise, "
                           "noise_seed]) to estimate π_D")
    disc.add_argument("--conditions", nargs=2, metavar=("A", "B"),
                      help="the two pilot conditions, compared as A − B (B = the baseline; "
                           "default: the pilot's two conditions in sorted order)")
    disc.add_argument("--eval-noise", type=_number, metavar="S",
                      help="pilot rows at this eval_noise level only")
    disc.add_argument("--holes", choices=("drop", "raise"), default="drop",
                      help="a pilot seed or item one condition lacks: drop it from both and "
                           "say so (default), or stop with an error naming it")
    disc.add_argument("--confidence-level", type=_number, default=0.95, metavar="CL",
                      help="of the pilot's π_D interval (default: 0.95)")
    test = parser.add_argument_group("test and design")
    test.add_argument("--baseline", type=_number, metavar="P",
                      help="accuracy of the baseline B (checks the design; used by "
                           "--correlation and the unpaired figure; default with --pilot: "
                           "B's pilot accuracy)")
    test.add_argument("--alpha", type=_number, default=0.05,
                      help="significance level (default: 0.05)")
    test.add_argument("--alternative", choices=("two-sided", "greater", "less"),
                      default="two-sided",
                      help="two-sided (default), or one-sided: greater = A is more accurate "
                           "than B by --effect, less = A is less accurate (e.g. A noisy, B "
                           "clean)")
    test.add_argument("--method", choices=("connor", "exact", "midp", "asymptotic",
                                           "asymptotic-cc"), default="connor",
                      help="connor: normal approximation (Connor 1987; default); the others "
                           "name the McNemar test you will run (as in `mcnemar(method=...)`) "
                           "and compute its exact unconditional power")
    test.add_argument("--repeats", type=int, default=1, metavar="M",
                      help="evaluations per item (noise seeds / training seeds; default 1)")
    test.add_argument("--icc", type=_number, default=0.0, metavar="R",
                      help="intra-item correlation of repeated evaluations (default 0)")
    test.add_argument("--pool-size", type=int, default=None, metavar="N",
                      help="items available (default: the pilot's items with --pilot, else "
                           f"{DEFAULT_POOL_SIZE}, the GSM8K test split; 0 disables the check)")
    out = parser.add_argument_group("output")
    add_format_option(out)  # type: ignore[arg-type]
    out.add_argument("--plot", metavar="PATH",
                     help="write a power-vs-n curve (format by suffix: .png, .pdf, .svg, ...)")
    parser.set_defaults(run=run)
    return parser


# ------------------------------------------------------------------------------ checks
def _check_options(args: argparse.Namespace) -> None:
    given = [o for o in ("discordance", "correlation", "pilot") if getattr(args, o) is not None]
    if len(given) > 1:
        raise InputError("pass only one of --discordance, --correlation, --pilot.")
    if args.effect is None and args.n is None:
        raise InputError(
            "pass --effect (to get n) or --n (to get power or the minimum "
            "detectable effect), e.g. `robuststats power --effect 0.03`."
        )
    if args.pool_size is not None and args.pool_size < 0:
        raise InputError(f"`--pool-size` must be ≥ 0 (0 disables the check), got {args.pool_size}.")
    if args.pilot is None and args.conditions is not None:
        raise InputError("--conditions selects conditions of --pilot; pass --pilot PATH.")
    if args.plot is not None:
        suffix = Path(args.plot).suffix.lower().lstrip(".")
        if suffix not in PLOT_FORMATS:
            raise InputError(
                f"`--plot` must name a figure file ending in "
                f"{', '.join('.' + s for s in PLOT_FORMATS[:3])}, ... (the suffix sets the "
                f"format: {', '.join(PLOT_FORMATS)}), got {args.plot!r}."
            )


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {"baseline": args.baseline, "alpha": args.alpha, "alternative": args.alternative,
            "method": args.method, "repeats": args.repeats, "icc": args.icc,
            "pool_size": args.pool_size or None}


def _inputs(args: argparse.Namespace, pilot: Any) -> dict[str, Any]:
    """Every input of the calculation, resolved: the JSON alone reproduces the output."""
    from robuststats import __version__

    # with both --effect and --n the power is computed, not an input
    power = None if args.effect is not None and args.n is not None else args.power
    record = {"effect": args.effect, "n": args.n, "power": power,
              "discordance": args.discordance, "correlation": args.correlation,
              **_settings(args), "robuststats_version": __version__}
    if pilot is not None:
        pairs = pilot[1]
        record["pilot"] = {"path": args.pilot, "conditions": list(pairs.conditions),
                           "eval_noise": pairs.eval_noise, "holes": args.holes,
                           "confidence_level": args.confidence_level}
    return record


# ------------------------------------------------------------------------------ wording
def _names(pilot: Any) -> tuple[str, str]:
    return ("A", "B") if pilot is None else pilot[1].conditions


def _describe(args: argparse.Namespace, pilot: Any) -> str:
    from robuststats.stats import POWER_METHODS

    a, b = _names(pilot)
    side = {
        "two-sided": f"two-sided test of acc({a}) − acc({b}) = 0",
        "greater": f"one-sided: {a} more accurate than {b}, acc({a}) − acc({b}) = +δ",
        "less": f"one-sided: {a} less accurate than {b}, acc({a}) − acc({b}) = −δ",
    }[args.alternative]
    return f"{POWER_METHODS[args.method]}; {side}, alpha = {args.alpha:g}"


def _n_phrase(r: Any) -> str:
    text = f"{r.n} items (pairs)"
    if r.repeats > 1:
        text += (
            f" × {r.repeats} repeats = {r.n_evaluations} evaluations per condition "
            f"(design effect {r.design_effect:.3g} at ICC {r.icc:g}: worth "
            f"{r.n_effective:.0f} independent items)"
        )
    return text


def _unpaired_line(u: dict[str, Any], baseline_given: bool) -> str:
    """One line on the unpaired design (a row of ``power_table`` or ``PowerResult.to_dict``)."""
    p_b = u["baseline"]
    p_a = p_b - u["effect"] if u["alternative"] == "less" else p_b + u["effect"]
    where = f"accuracies {fmt_pct(p_a)}% vs {fmt_pct(p_b)}%"
    if not baseline_given:
        where += ", the largest-variance case; pass --baseline"
    head = (f"unpaired design for comparison (different items per condition, pooled z-test, "
            f"{where}): ")
    if u["solved_for"] == "n":
        return head + f"{u['n']} items per condition"
    return head + f"power {u['power']:.3f} with {u['n']} items per condition"


# ------------------------------------------------------------------------------ modes
def _table_mode(args: argparse.Namespace) -> tuple[dict[str, Any], list[str], list[float], int]:
    from robuststats.stats import power_table

    if args.effect is None:
        raise InputError(
            "the minimum detectable effect (--n without --effect) needs π_D: pass "
            "--discordance, --correlation with --baseline, or --pilot."
        )
    solve_n = args.n is None
    rows = power_table(args.effect, args.n, args.power if solve_n else None,
                       **_settings(args), as_frame=False)
    paired = [r for r in rows if r["design"] == "paired"]
    unpaired = [r for r in rows if r["design"] == "unpaired"]
    lines = [f"McNemar power analysis: {_describe(args, None)}"]
    if solve_n:
        lines.append(f"effect δ = {args.effect:g}, power {args.power:g}; π_D unknown, so the "
                     "required number of items by discordance rate π_D:")
        columns = ["discordance", "n", "n_evaluations", "note"]
    else:
        lines.append(f"effect δ = {args.effect:g}, n = {args.n} items; π_D unknown, so the "
                     "power by discordance rate π_D:")
        columns = ["discordance", "power", "note"]
    table = render_table(paired, columns,
                         formats={"discordance": lambda v: f"{v:.3g}",
                                  "power": lambda v: f"{v:.3f}", "note": str},
                         headers={"discordance": "π_D", "n": "items n",
                                  "n_evaluations": "evaluations"})
    lines += ["", *("  " + line for line in table.splitlines()), ""]
    lines += [_unpaired_line(u, args.baseline is not None) for u in unpaired]
    lines += [""] if unpaired else []
    lines.append(
        "Pin π_D with --discordance PD, with --correlation PHI --baseline P, or estimate it "
        "with --pilot outcomes.parquet (both conditions on a few hundred items)."
    )
    payload = {
        "solved_for": "n" if solve_n else "power",
        "n": None if solve_n else args.n,
        "discordance": None,
        "effect": args.effect,
        "power": args.power if solve_n else None,
        "table": rows,
        "hint": "pass --discordance, --correlation with --baseline, or --pilot to pin π_D",
    }
    n_max = max(r["n"] for r in paired)
    return payload, lines, [r["discordance"] for r in paired], n_max


def _single_mode(args: argparse.Namespace, discordance: float | None,
                 pilot: Any) -> tuple[dict[str, Any], list[str], Any]:
    from robuststats.stats import power_mcnemar

    both_given = args.effect is not None and args.n is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = power_mcnemar(args.effect, args.n, None if both_given else args.power,
                          discordance=discordance, correlation=args.correlation,
                          **_settings(args))
    for w in caught:
        print(f"robuststats power: warning: {w.message}", file=sys.stderr)
    lines = [f"McNemar power analysis: {_describe(args, pilot)}"]
    if pilot is not None:
        lines.append(_pilot_line(*pilot))
    design = f"π_D = {r.discordance:.4g}"
    if r.correlation is not None:
        design += f" (from correlation {r.correlation:g} at baseline {r.baseline:g})"
    payload = r.to_dict()
    if r.solved_for == "n":
        lines.append(f"effect δ = {r.effect:g}, {design}, power {r.power:g}")
        lines.append(f"n = {_n_phrase(r)}; achieved power {r.achieved_power:.3f}")
        unpaired = _unpaired(args, r.effect)
        payload["unpaired"] = unpaired
        lines.append(_unpaired_line(unpaired, args.baseline is not None))
    elif r.solved_for == "power":
        lines.append(f"effect δ = {r.effect:g}, {design}, n = {_n_phrase(r)}")
        lines.append(f"power = {r.power:.4f}")
    else:
        lines.append(f"{design}, n = {_n_phrase(r)}, power {r.power:g}")
        lines.append(f"minimum detectable effect δ = {r.effect:.4g} "
                     f"({r.effect * 100:.2f} accuracy points)")
    if pilot is not None:
        est, pairs = pilot
        payload["pilot"] = est.to_dict()
        if r.solved_for == "n":
            payload["n_range"] = _n_range(args, est)
            low, high = payload["n_range"]["low"], payload["n_range"]["high"]
            lines.append(f"across the π_D interval: n from {low if low is not None else '—'} "
                         f"to {high if high is not None else '—'}")
        lines += _pilot_icc_lines(pairs, payload["pilot"])
    return payload, lines, r


def _unpaired(args: argparse.Namespace, effect: float) -> dict[str, Any]:
    """The unpaired design at the same effect and power (π_D does not enter it)."""
    from robuststats.stats import power_two_proportions

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the paired n is the one the pool is checked for
        return power_two_proportions(
            effect, None, args.power, baseline=args.baseline, alpha=args.alpha,
            alternative=args.alternative, method="pooled", pool_size=args.pool_size or None,
        ).to_dict()


def _pilot_line(est: Any, pairs: Any) -> str:
    a, b = pairs.conditions
    widened = ("" if est.design_effect == 1.0
               else f" on n/{est.design_effect:.3g} for repeated items")
    interval = fmt_ci(est.confidence_interval.low, est.confidence_interval.high,
                      est.confidence_level, percent=False)
    return (f"pilot {a} vs {b}: {est.n} pairs, π_D = {est.discordance:.4g} {interval} "
            f"(Wilson{widened}); observed acc({a}) − acc({b}) = "
            f"{fmt_pct(est.effect, signed=True)} points (accuracy {a} "
            f"{fmt_pct(est.accuracy_a)}%, baseline {b} {fmt_pct(est.accuracy_b)}%)")


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
    from robuststats.stats import power_mcnemar

    out: dict[str, int | None] = {}
    for key, pi_d in (("low", est.confidence_interval.low), ("high", est.confidence_interval.high)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out[key] = power_mcnemar(args.effect, None, args.power, discordance=pi_d,
                                         **_settings(args)).n
        except InputError:
            out[key] = None  # π_D at this bound is below δ: impossible design
    return out


def _read_pilot(args: argparse.Namespace) -> tuple[Any, Any]:
    from robuststats.stats import estimate_discordance, read_pilot

    pairs = read_pilot(args.pilot, conditions=args.conditions, eval_noise=args.eval_noise,
                       holes=args.holes)
    with warnings.catch_warnings():
        # no discordant pair: reported below as an error with the bound to plan with
        warnings.simplefilter("ignore")
        est = estimate_discordance(pairs.x, pairs.y, confidence_level=args.confidence_level)
    a, b = pairs.conditions
    if est.n_discordant == 0:
        raise InputError(
            f"pilot {a} vs {b} has no discordant pair among {est.n}: π_D cannot be "
            f"estimated; plan with its Wilson upper bound "
            f"(--discordance {est.confidence_interval.high:.3g}) or run a larger pilot."
        )
    if len(pairs.dropped):
        items = int(pairs.dropped["item_id"].notna().sum())
        print(f"robuststats power: warning: {len(pairs.dropped)} pilot hole(s) ({items} "
              f"missing item(s), {len(pairs.dropped) - items} missing evaluation(s)) were "
              f"dropped from both {a} and {b}; --holes raise names them.", file=sys.stderr)
    return est, pairs


# ------------------------------------------------------------------------------ plot
def _plot(path: str, args: argparse.Namespace, effect: float, pi_ds: list[float],
          n_max: int, in_use: float | None) -> None:
    """Power against n, one line per π_D (seaborn); the π_D in use is marked in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns

    from robuststats.stats import power_curve

    n_values = sorted({max(1, round(float(v))) for v in np.linspace(1.0, float(n_max), 120)})
    curve = power_curve(effect, discordances=pi_ds, n_values=n_values,
                        alpha=args.alpha, alternative=args.alternative, method=args.method,
                        repeats=args.repeats, icc=args.icc, baseline=args.baseline)

    def label(v: float) -> str:
        return f"{v:.3g}" + (" (in use)" if in_use is not None and abs(v - in_use) < 1e-6 else "")

    if curve.empty:
        raise InputError(f"nothing to plot: no n up to {n_max} gives a computable power.")
    curve = curve.assign(**{"π_D": curve["discordance"].map(label)})
    fig, ax = plt.subplots(figsize=(8, 4.5))
    sns.lineplot(data=curve, x="n", y="power", hue="π_D", ax=ax, palette="viridis")
    ax.axhline(args.power, color="grey", linestyle="--", linewidth=1)
    if args.pool_size and args.pool_size <= n_max:
        ax.axvline(args.pool_size, color="firebrick", linestyle=":", linewidth=1)
        ax.text(args.pool_size, 0.03, f"item pool {args.pool_size} ", color="firebrick",
                rotation=90, ha="right", va="bottom")
    ax.legend(title="π_D", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_xlabel("items (pairs)" + (f", each × {args.repeats}" if args.repeats > 1 else ""))
    ax.set_ylabel("power")
    ax.set_ylim(0, 1)
    ax.set_title(f"McNemar ({args.method}), δ = {effect:g}, α = {args.alpha:g} {args.alternative}")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot write plot {path!r}: {exc}") from exc
    finally:
        plt.close(fig)


def _neighbours(pi_d: float, effect: float) -> list[float]:
    """A few π_D around the one in use, so the plot shows how much it matters."""
    return [round(v, 6) for v in (pi_d * 0.5, pi_d * 1.5, pi_d * 2) if effect <= v < 1]


# ------------------------------------------------------------------------------ run
def run(args: argparse.Namespace) -> int:
    _check_options(args)
    discordance, pilot = args.discordance, None
    if args.pilot is not None:
        pilot = _read_pilot(args)
        est, pairs = pilot
        discordance = est.discordance
        if args.baseline is None:
            args.baseline = est.baseline
        if args.pool_size is None:  # the pilot's items, those dropped for holes included
            args.pool_size = len(pairs.item_ids) + int(pairs.dropped["item_id"].nunique())
    if args.pool_size is None:
        args.pool_size = DEFAULT_POOL_SIZE

    if discordance is None and args.correlation is None:
        payload, lines, pi_ds, n_max = _table_mode(args)
        effect, in_use = args.effect, None
    else:
        payload, lines, result = _single_mode(args, discordance, pilot)
        effect, in_use, n_max = result.effect, result.discordance, result.n
        pi_ds = sorted({round(result.discordance, 6), *_neighbours(result.discordance, effect)})
    payload = {"inputs": _inputs(args, pilot), **payload}
    if args.plot:
        _plot(args.plot, args, effect, pi_ds, max(int(n_max * 1.5), 20), in_use)
        lines.append(f"power curve written to {args.plot}")
        payload["plot"] = args.plot
    emit(args.format, data=payload, text="\n".join(lines))
    return 0
