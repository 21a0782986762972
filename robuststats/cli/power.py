"""``robuststats power``: items, seeds, power or minimum detectable effect of a comparison.

One seed: McNemar's test (exact by default, the test ``analyze`` runs). Several training
seeds (``--seeds``, ``--seed-sd`` or a pilot with seeds): the seed-random t test of
procedures, with a table of the (seeds, items) combinations that reach the target power.
Parses, calls :mod:`robuststats.stats` (public names only) and prints through the one
formatter. Imports nothing heavy at module level; the plain ``--effect`` table needs
neither pandas nor ``scipy.stats``, so ``robuststats power`` starts in a fraction of a
second.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from typing import Any

from robuststats.cli._output import add_format_option, emit, fmt_ci, fmt_pct, render_table
from robuststats.errors import InputError

__all__ = ["add_parser", "run"]

#: GSM8K test split; the item pool without a pilot (0 disables the check)
DEFAULT_POOL_SIZE = 1319
ONE_SEED_METHODS = ("exact", "midp", "asymptotic", "asymptotic-cc", "connor")
SEED_METHODS = ("seed-random", "noncentral-t")
#: seed counts of the (seeds, items) table; --seeds K is added
TABLE_SEEDS = (2, 3, 4, 5, 6, 8, 10, 15, 20)

EPILOG = """\
sign rule: the effect is acc(A) − acc(B), first minus second, as in `mcnemar(a, b)`;
B is the baseline (--baseline is its accuracy) and --alternative greater claims that A
is the more accurate.

examples:
  robuststats power --effect 0.03
      required n across discordance rates π_D (unknown π_D), plus the unpaired figure
  robuststats power --effect 0.03 --discordance 0.12
      required number of items (pairs) at 80% power, exact McNemar test, one seed
  robuststats power --effect 0.03 --discordance 0.2 --seeds 5 --seed-sd 0.01
      items needed with 5 training seeds per condition when seeds shift A and B
      differently by SD 0.01, and which (seeds, items) combinations reach 80% power
  robuststats power --effect 0.03 --pilot examples/pilot_outcomes.csv --conditions E8c E8b
      π_D and the seed SD estimated from pilot outcomes with 5 seeds (with intervals)
  robuststats power --effect 0.03 --baseline 0.64 --correlation 0.6
      π_D from the two accuracies and the correlation of the paired outcomes
  robuststats power --n 1319 --discordance 0.15
      minimum detectable effect with all 1,319 GSM8K test items
  robuststats power --effect 0.03 --n 500 --discordance 0.15 --method midp
      power of the mid-p McNemar test with 500 items
  robuststats power --effect 0.02 --discordance 0.15 --repeats 5 --icc 0.4 --format json
      5 noisy evaluations per item with intra-item correlation 0.4

π_D (discordance) is the share of items on which the two conditions disagree; McNemar's
power depends on it as much as on the effect. With several seeds, the seed SD of the
difference bounds the power: more items cannot make up for too few seeds. Formulas and
references: docs/power.md.
"""

#: library parameter -> the flag that sets it (errors name the flag)
FLAGS = {
    "effect": "--effect", "n": "--n", "n_items": "--n", "power": "--power",
    "discordance": "--discordance", "correlation": "--correlation", "baseline": "--baseline",
    "alpha": "--alpha", "repeats": "--repeats", "icc": "--icc", "pool_size": "--pool-size",
    "n_seeds": "--seeds", "seed_sd": "--seed-sd", "confidence_level": "--confidence-level",
    "eval_noise": "--eval-noise", "conditions": "--conditions", "method": "--method",
}


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
    seeds = parser.add_argument_group(
        "training seeds (a comparison of procedures: the seed-random t test)")
    seeds.add_argument("--seeds", type=int, metavar="K",
                       help="training seeds per condition (≥ 2 plans the seed-random t test; "
                            "1: one trained model per condition, McNemar); with --n but no "
                            "--effect: the minimum detectable effect")
    seeds.add_argument("--seed-sd", type=_number, metavar="S",
                       help="SD over training seeds of the per-seed accuracy difference "
                            "acc(A) − acc(B) (seeds shifting A and B differently); default "
                            "with --pilot: estimated from its seeds, else 0")
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
    disc.add_argument("--holes", choices=("drop", "raise"), default=None,
                      help="a pilot seed or item one condition lacks: drop it from both and "
                           "say so (default), or stop with an error naming it")
    disc.add_argument("--confidence-level", type=_number, default=None, metavar="CL",
                      help="of the pilot's intervals for π_D and the seed SD (default: 0.95)")
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
    test.add_argument("--method", choices=ONE_SEED_METHODS + SEED_METHODS, default=None,
                      help="one seed: the McNemar test you will run (as in "
                           "`mcnemar(method=...)`), whose exact unconditional power is "
                           "computed (default: exact, the test `analyze` runs), or connor: "
                           "Connor's (1987) normal approximation, off by up to 15 points when "
                           "π_D ≈ δ; several seeds: seed-random (default: the test as it "
                           "runs) or noncentral-t (closed-form approximation)")
    test.add_argument("--repeats", type=int, default=1, metavar="M",
                      help="evaluations per item (noise seeds / training seeds; default 1)")
    test.add_argument("--icc", type=_number, default=None, metavar="R",
                      help="intra-item correlation of the paired difference over an item's "
                           "repeated evaluations (--repeats) or training seeds (--seeds); "
                           "default 0, or the pilot's estimate with seeds")
    test.add_argument("--pool-size", type=int, default=None, metavar="N",
                      help="items available (default: the pilot's items with --pilot, else "
                           f"{DEFAULT_POOL_SIZE}, the GSM8K test split; 0 disables the check)")
    out = parser.add_argument_group("output")
    add_format_option(out)  # type: ignore[arg-type]
    out.add_argument("--plot", metavar="PATH",
                     help="write a power-vs-items curve, one line per π_D (one seed) or per "
                          "number of seeds (format by suffix: .png, .pdf, .svg, ...)")
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
    if args.pilot is None:
        for flag, value in (("--conditions", args.conditions), ("--eval-noise", args.eval_noise),
                            ("--holes", args.holes),
                            ("--confidence-level", args.confidence_level)):
            if value is not None:
                raise InputError(f"`{flag}` applies to pilot outcomes; pass --pilot PATH.")
    if args.seeds is not None and args.seeds < 1:
        raise InputError(f"`--seeds` must be a positive integer, got {args.seeds}.")
    if args.seeds == 1 and args.seed_sd is not None:
        raise InputError("`--seed-sd` needs --seeds K ≥ 2: one seed cannot tell procedures "
                         "from trained models.")
    if args.plot is not None:
        from robuststats.report.power import check_plot_path

        check_plot_path(args.plot)


def _seeds_design(args: argparse.Namespace, pilot: Any) -> bool:
    """Plan for several training seeds? (--seeds K ≥ 2, --seed-sd, or a pilot with seeds)."""
    if args.seeds is not None:
        several = args.seeds >= 2
    else:
        several = args.seed_sd is not None or (pilot is not None and pilot[2] is not None)
    method = args.method
    if several and args.repeats != 1:
        raise InputError("`--repeats` applies to one-seed designs (repeated noisy "
                         "evaluations); with several seeds plan with --seeds K.")
    if method is not None and (method in SEED_METHODS) != several:
        allowed = SEED_METHODS if several else ONE_SEED_METHODS
        raise InputError(f"`--method` {method} does not apply to a design with "
                         f"{'several seeds' if several else 'one seed'}: use one of "
                         f"{', '.join(allowed)}.")
    return several


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {"baseline": args.baseline, "alpha": args.alpha, "alternative": args.alternative,
            "method": args.method, "repeats": args.repeats, "icc": args.icc or 0.0,
            "pool_size": args.pool_size or None}


def _inputs(args: argparse.Namespace, pilot: Any) -> dict[str, Any]:
    """Every input of the calculation, resolved: the JSON alone reproduces the output."""
    from robuststats import __version__

    # with both --effect and --n the power is computed, not an input
    power = None if args.effect is not None and args.n is not None else args.power
    record = {"effect": args.effect, "n": args.n, "power": power,
              "discordance": args.discordance, "correlation": args.correlation,
              **_settings(args), "seeds": args.seeds, "seed_sd": args.seed_sd,
              "robuststats_version": __version__}
    if pilot is not None:
        pairs = pilot[1]
        record["pilot"] = {"path": args.pilot, "conditions": list(pairs.conditions),
                           "eval_noise": pairs.eval_noise, "holes": args.holes,
                           "confidence_level": args.confidence_level}
    return record


# ------------------------------------------------------------------------------ wording
def _names(pilot: Any) -> tuple[str, str]:
    return ("A", "B") if pilot is None else pilot[1].conditions


def _describe(args: argparse.Namespace, pilot: Any, method: str) -> str:
    from robuststats.stats import POWER_METHODS

    a, b = _names(pilot)
    side = {
        "two-sided": f"two-sided test of acc({a}) − acc({b}) = 0",
        "greater": f"one-sided: {a} more accurate than {b}, acc({a}) − acc({b}) = +δ",
        "less": f"one-sided: {a} less accurate than {b}, acc({a}) − acc({b}) = −δ",
    }[args.alternative]
    return f"{POWER_METHODS[method]}; {side}, alpha = {args.alpha:g}"


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
    lines = [f"McNemar power analysis: {_describe(args, None, paired[0]['method'])}"]
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
        "with --pilot outcomes.parquet (both conditions on a few hundred items). With "
        "several training seeds per condition, plan with --seeds K --seed-sd S."
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
    lines = [f"McNemar power analysis: {_describe(args, pilot, r.method)}"]
    if pilot is not None:
        lines.append(_pilot_line(pilot[0], pilot[1]))
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
        est, pairs, _ = pilot
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


def _read_pilot(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """``(π_D estimate, aligned pairs, seed components or None)`` of the pilot."""
    from robuststats.stats import estimate_discordance, estimate_seed_components, read_pilot

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
    seeds = [row[0] for row in pairs.strata]
    components = None
    if len(set(seeds)) >= 2 and len(pairs.item_ids) >= 2:
        components = estimate_seed_components(pairs.x, pairs.y, seeds=seeds,
                                              confidence_level=args.confidence_level)
    return est, pairs, components


# ------------------------------------------------------------------------------ seeds
def _seeds_mode(args: argparse.Namespace, discordance: float | None,
                pilot: Any) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """Several training seeds: the seed-random t test (``power_seeds``)."""
    from robuststats.stats import POWER_METHODS, power_seeds, power_seeds_table

    comps = None if pilot is None else pilot[2]
    if discordance is None and args.correlation is None:
        raise InputError("planning seeds needs π_D: pass --discordance, --correlation with "
                         "--baseline, or --pilot.")
    if args.seeds is None and args.effect is None:
        raise InputError("`--n` without --effect gives the minimum detectable effect of a "
                         "design: pass --seeds K too.")
    notes: list[str] = []
    seed_sd = args.seed_sd
    if seed_sd is None:
        seed_sd = 0.0 if comps is None else comps.seed_sd
        if comps is None:
            notes.append("seed SD of the difference not given: assuming seeds shift A and B "
                         "alike (--seed-sd 0); pass --seed-sd S or --pilot with seeds.")
    icc = args.icc if args.icc is not None else (0.0 if comps is None else comps.icc)
    method = args.method or "seed-random"
    plan = {"discordance": discordance, "correlation": args.correlation,
            "baseline": args.baseline, "icc": icc, "alpha": args.alpha,
            "alternative": args.alternative, "method": method}
    pool = args.pool_size or None

    # without --seeds: the fewest seeds with --n items, or with the whole item pool
    n_items = args.n if args.seeds is not None or args.n is not None else pool
    both = args.effect is not None and n_items is not None and args.seeds is not None

    def solve(sd: float) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the pool is reported in the result
            return power_seeds(args.effect, n_items, args.seeds, None if both else args.power,
                               seed_sd=sd, pool_size=pool, **plan)

    a, b = _names(pilot)
    lines = [f"Seed-random power analysis: {_describe(args, pilot, method)}"]
    if pilot is not None:
        lines.append(_pilot_line(pilot[0], pilot[1]))
    payload: dict[str, Any] = {"design": "seeds", "method": method,
                               "method_description": POWER_METHODS[method]}
    if comps is not None:
        payload["pilot"] = comps.to_dict()
        ci = comps.confidence_interval
        lines.append(
            f"pilot seeds: {comps.n_seeds} per condition; seed SD of acc({a}) − acc({b}) = "
            f"{comps.seed_sd:.3g} {fmt_ci(ci.low, ci.high, comps.confidence_level, percent=False)}"
            f" (χ² on {comps.dof_seed} df), ICC of an item's differences {comps.icc:.3g}")
    result, unreachable = None, None
    if n_items is not None or args.seeds is not None:
        try:
            result = solve(seed_sd)
        except InputError as exc:
            if "however many items" not in str(exc) and "seeds with" not in str(exc):
                raise
            unreachable = _flags(str(exc))
    design = (f"π_D = {plan['discordance'] if discordance is not None else '?'}, seed SD "
              f"{seed_sd:.3g}, ICC {icc:.3g}")
    if result is not None:
        design = f"π_D = {result.discordance:.4g}, seed SD {seed_sd:.3g}, ICC {icc:.3g}"
        payload.update(result.to_dict())
        lines += _seeds_result_lines(result, design)
    else:
        lines.append(f"effect δ = {args.effect:g}, {design}, power {args.power:g}")
        if unreachable is not None:
            lines.append(f"{args.seeds or 'the'} seeds: {unreachable}")
        payload.update({"n_items": n_items, "n_seeds": args.seeds,
                        "solved_for": "n_items" if args.seeds else None,
                        "error": unreachable})
    if comps is not None and result is not None:
        payload["seed_sd_range"] = _seed_sd_range(solve, comps.confidence_interval, result)
        rng_ = payload["seed_sd_range"]
        key = {"n_items": "n_items", "n_seeds": "n_seeds", "power": "power",
               "effect": "effect"}[result.solved_for]
        lines.append(f"across the seed-SD interval: {key} from {_show(rng_['low'])} to "
                     f"{_show(rng_['high'])}")
    table_rows: list[dict[str, Any]] = []
    if args.effect is not None and args.n is None:
        counts = sorted({*TABLE_SEEDS, *([args.seeds] if args.seeds else [])})
        table_rows = power_seeds_table(args.effect, power=args.power, seeds=counts,
                                       seed_sd=seed_sd, pool_size=pool, as_frame=False, **plan)
        payload["table"] = table_rows
        lines += ["", f"(seeds, items) per condition reaching power {args.power:g}:"]
        table = render_table(
            table_rows, ["n_seeds", "n_items", "n_evaluations", "max_power", "note"],
            formats={"max_power": lambda v: f"{v:.3f}", "note": str},
            headers={"n_seeds": "seeds", "n_items": "items", "n_evaluations": "evaluations",
                     "max_power": "power with ∞ items"})
        lines += ["", *("  " + line for line in table.splitlines()), ""]
        short = [r["n_seeds"] for r in table_rows if r["n_items"] is None]
        if short and seed_sd > 0:
            lines.append(f"With seed SD {seed_sd:.3g}, {max(short)} seeds or fewer never reach "
                         f"power {args.power:g}: more items cannot make up for too few seeds.")
    lines += notes
    return payload, lines, {"seed_sd": seed_sd, "icc": icc, "plan": plan, "result": result,
                            "rows": table_rows}


def _show(value: Any) -> str:
    return "—" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def _seeds_result_lines(r: Any, design: str) -> list[str]:
    size = (f"{r.n_seeds} seeds × {r.n_items} items per condition ({r.n_evaluations} "
            f"evaluations)")
    ceiling = (f"; with {r.n_seeds} seeds the power cannot exceed {r.max_power:.3f} however "
               f"many items" if r.max_power < 0.9995 else "")
    if r.solved_for == "power":
        return [f"effect δ = {r.effect:g}, {design}, {size}",
                f"power = {r.power:.4f}{ceiling}"]
    if r.solved_for == "effect":
        return [f"{design}, {size}, power {r.power:g}",
                f"minimum detectable effect δ = {r.effect:.4g} ({r.effect * 100:.2f} "
                f"accuracy points){ceiling}"]
    head = f"effect δ = {r.effect:g}, {design}, power {r.power:g}"
    pool = (f"; exceeds the pool of {r.pool_size} items: add seeds" if r.exceeds_pool else "")
    if r.solved_for == "n_seeds":
        size = f"fewest seeds with {r.n_items} items: {size}"
    return [head, f"{size}; achieved power {r.achieved_power:.3f}{ceiling}{pool}"]


def _seed_sd_range(solve: Any, ci: Any, result: Any) -> dict[str, Any]:
    """The solved quantity at both ends of the pilot's seed-SD interval (None: unreachable)."""
    out: dict[str, Any] = {"seed_sd_low": ci.low, "seed_sd_high": ci.high}
    for key, sd in (("low", ci.low), ("high", ci.high)):
        try:
            out[key] = getattr(solve(sd), result.solved_for)
        except InputError:
            out[key] = None  # no design reaches the target at this seed SD
    return out


# ------------------------------------------------------------------------------ plot
def _plot_one_seed(args: argparse.Namespace, effect: float, pi_ds: list[float], n_max: int,
                   in_use: float | None, method: str) -> None:
    from robuststats.report.power import power_figure
    from robuststats.stats import power_curve

    step = max(1.0, n_max / 120.0)
    n_values = sorted({max(1, round(i * step)) for i in range(int(n_max / step) + 1)})
    curve = power_curve(effect, discordances=pi_ds, n_values=n_values,
                        alpha=args.alpha, alternative=args.alternative, method=method,
                        repeats=args.repeats, icc=args.icc or 0.0, baseline=args.baseline)
    power_figure(curve, args.plot, x="n", hue="discordance", hue_title="π_D",
                 target=args.power, pool_size=args.pool_size or None, in_use=in_use,
                 xlabel="items (pairs)" + (f", each × {args.repeats}" if args.repeats > 1
                                           else ""),
                 title=f"McNemar ({method}), δ = {effect:g}, α = {args.alpha:g} "
                       f"{args.alternative}")


def _plot_seeds(args: argparse.Namespace, effect: float, info: dict[str, Any]) -> None:
    from robuststats.report.power import power_figure
    from robuststats.stats import power_seeds_curve

    r, rows = info["result"], info["rows"]
    needed = [row["n_items"] for row in rows if row["n_items"] is not None]
    top = max([*needed, r.n_items if r is not None else 0, args.pool_size or 0, 100])
    n_max = int(min(top * 1.2, 10 * (args.pool_size or top)))
    seeds = sorted({2, 3, 5, 10, 20, *([args.seeds] if args.seeds else [])})
    step = max(1.0, n_max / 80.0)
    n_values = sorted({max(2, round(i * step)) for i in range(int(n_max / step) + 1)})
    curve = power_seeds_curve(effect, seeds=seeds, n_values=n_values,
                              seed_sd=info["seed_sd"], **info["plan"])
    power_figure(curve, args.plot, x="n_items", hue="n_seeds", hue_title="seeds",
                 target=args.power, pool_size=args.pool_size or None, in_use=args.seeds,
                 xlabel="items per seed", title=f"seed-random t, δ = {effect:g}, seed SD "
                 f"{info['seed_sd']:.3g}, α = {args.alpha:g} {args.alternative}")


def _neighbours(pi_d: float, effect: float) -> list[float]:
    """A few π_D around the one in use, so the plot shows how much it matters."""
    return [round(v, 6) for v in (pi_d * 0.5, pi_d * 1.5, pi_d * 2) if effect <= v < 1]


# ------------------------------------------------------------------------------ run
def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except InputError as exc:  # name the flag, not the library's parameter
        raise InputError(_flags(str(exc))) from None


def _flags(message: str) -> str:
    return re.sub(r"`([a-z_]+)`", lambda m: f"`{FLAGS.get(m.group(1), m.group(1))}`", message)


def _run(args: argparse.Namespace) -> int:
    _check_options(args)
    discordance, pilot = args.discordance, None
    if args.pilot is not None:
        args.holes = args.holes or "drop"
        args.confidence_level = 0.95 if args.confidence_level is None else args.confidence_level
        pilot = _read_pilot(args)
        est, pairs, _ = pilot
        discordance = est.discordance
        if args.baseline is None:
            args.baseline = est.baseline
        if args.pool_size is None:  # the pilot's items, those dropped for holes included
            args.pool_size = len(pairs.item_ids) + int(pairs.dropped["item_id"].nunique())
    if args.pool_size is None:
        args.pool_size = DEFAULT_POOL_SIZE
    if _seeds_design(args, pilot):
        payload, lines, info = _seeds_mode(args, discordance, pilot)
        if args.plot:
            effect = info["result"].effect if info["result"] is not None else args.effect
            _plot_seeds(args, effect, info)
    else:
        if discordance is None and args.correlation is None:
            payload, lines, pi_ds, n_max = _table_mode(args)
            effect, in_use, method = args.effect, None, payload["table"][0]["method"]
        else:
            payload, lines, result = _single_mode(args, discordance, pilot)
            effect, in_use, n_max = result.effect, result.discordance, result.n
            method = result.method
            pi_ds = sorted({round(result.discordance, 6),
                            *_neighbours(result.discordance, effect)})
        if args.plot:
            _plot_one_seed(args, effect, pi_ds, max(int(n_max * 1.5), 20), in_use, method)
    payload = {"inputs": _inputs(args, pilot), **payload}
    if args.plot:
        lines.append(f"power curve written to {args.plot}")
        payload["plot"] = args.plot
    emit(args.format, data=payload, text="\n".join(lines))
    return 0
