"""``robuststats power``: items, seeds, power or minimum detectable effect of a comparison.

One seed: McNemar's test (exact by default, the test ``analyze`` runs). Several training
seeds (``--seeds``, ``--seed-sd`` or a pilot with seeds): the seed-random t test of
procedures, with a table of the (seeds, items) combinations that reach the target power.
Parses, checks and dispatches: the plans are :mod:`robuststats.cli._power_modes` (one
seed, several seeds) and :mod:`robuststats.cli._power_gate`, which share
:mod:`robuststats.cli._power_common` with this module and import nothing from it. They
call :mod:`robuststats.stats` (public names only) and print through the one formatter.
Imports nothing heavy at module level; the plain ``--effect`` table needs neither pandas
nor ``scipy.stats``, so ``robuststats power`` starts in a fraction of a second.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from robuststats.cli._output import add_format_option, emit
from robuststats.cli._power_common import settings, spelled
from robuststats.errors import InputError

__all__ = ["add_parser", "run"]

#: GSM8K test split; the item pool without a pilot (0 disables the check)
DEFAULT_POOL_SIZE = 1319
ONE_SEED_METHODS = ("exact", "midp", "asymptotic", "asymptotic-cc", "connor")
SEED_METHODS = ("seed-random", "noncentral-t")

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
  robuststats power --effect 0.03 --n 500 --discordance 0.2 --seed-sd 0.01 \
      --sequential 3,5,8 --spending obf --cost-per-seed 40
      a sequential study with looks after 3, 5 and 8 seeds: power and expected seeds
      (and GPU-hours) beside the fixed design of equal power
  robuststats power --effect 0.057 --n 300 --discordance 0.37 --seed-sd 0.035 \
      --icc 0.016 --power 0.9 --looks 4 --spending "hsd(-1)"
      the fewest seeds a 4-look design needs for 90% power, against the fixed design
  robuststats power --gate --max-degradation 0.15 --pilot results/e8_matrix/v2 \
      --gate-condition E8a --seeds 5
      plan `robuststats gate`: items a one-checkpoint candidate needs against a baseline of
      5 seeds for an equally robust candidate to pass with 80% power, with the variance
      components of retention estimated from E8a's outcomes

π_D (discordance) is the share of items on which the two conditions disagree; McNemar's
power depends on it as much as on the effect. With several seeds, the seed SD of the
difference bounds the power: more items cannot make up for too few seeds. Formulas and
references: docs/power.md.
"""

def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    return value


def _n_looks(text: str) -> int | str:
    """``--looks``: a number of looks, or ``every`` (a look after every seed)."""
    if text == "every":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a number of looks or 'every': {text!r}") from None


def _looks(text: str) -> list[int]:
    from robuststats.cli._power_sequential import parse_looks

    return parse_looks(text)


def _spending(text: str) -> str:
    from robuststats.cli._power_sequential import parse_spending

    return parse_spending(text)


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
    disc.add_argument("--pilot-bound", type=_number, default=None, metavar="Q",
                      help="plan with the pilot's one-sided Q upper confidence bound of the "
                           "seed SD (e.g. 0.8) instead of its estimate: a few pilot seeds "
                           "estimate the seed variance far too low half the time"),
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
    gate = parser.add_argument_group(
        "robustness gate (plans `robuststats gate`: a one-sided non-inferiority test)")
    gate.add_argument("--gate", action="store_true",
                      help="plan a gate: items (--n), baseline seeds (--seeds) or margin "
                           "(--max-degradation) for an equally good candidate to pass with "
                           "--power; components from --pilot or --seed-sd/--resid-sd")
    gate.add_argument("--max-degradation", type=_number, metavar="M",
                      help="the gate's margin (relative by default, as `robuststats gate`)")
    gate.add_argument("--margin-type", choices=("relative", "absolute"), default="relative",
                      help="relative: SDs are relative (log scale); absolute: in points")
    gate.add_argument("--metric", choices=("retention", "accuracy"), default="retention",
                      help="the metric the gate compares (with --pilot; default retention)")
    gate.add_argument("--gate-condition", metavar="NAME",
                      help="the pilot's condition (the baseline; needed when it has several)")
    gate.add_argument("--candidate-seeds", type=int, default=1, metavar="K",
                      help="candidate training seeds (default 1: one checkpoint)")
    gate.add_argument("--resid-sd", type=_number, metavar="S",
                      help="SD of one seed × item value of the linearized metric")
    gate.add_argument("--item-sd", type=_number, default=None, metavar="S",
                      help="SD of the item × candidate interaction (default 0: the candidate "
                           "is another run of the baseline's recipe)")
    seq = parser.add_argument_group(
        "sequential study (looks over training seeds; docs/power.md, sequential designs)")
    seq.add_argument("--sequential", type=_looks, metavar="K1,K2,...",
                     help="seeds per condition at each look, e.g. 3,5,8: power and expected "
                          "seeds beside the fixed design of equal power (needs --effect, --n)")
    seq.add_argument("--looks", type=_n_looks, default=None, metavar="L",
                     help="size a sequential design instead: L looks in equal steps (or "
                          "'every': a look after every seed) and the fewest maximum seeds "
                          "reaching --power, beside the fixed design sized to it (needs "
                          "--effect, --n)")
    seq.add_argument("--first-look", type=int, default=None, metavar="K",
                     help="with --looks: seeds at the first look (default: the first of L "
                          "equal steps; 2 with --looks every)")
    seq.add_argument("--spending", type=_spending, default="obf", metavar="F",
                     help="Lan–DeMets alpha spending: obf, pocock or hsd(γ), the "
                          "Hwang–Shih–DeCani family with γ in [-10, 5] (default: obf)")
    seq.add_argument("--futility", choices=("none", "binding", "non_binding"),
                     default="none", help="futility bound by beta spending (default: none)")
    seq.add_argument("--futility-beta", type=_number, default=None, metavar="B",
                     help="type II error the futility bound spends (default: 1 − --power "
                          "with --looks, else 0.2)")
    seq.add_argument("--cost-per-seed", type=_number, default=None, metavar="C",
                     help="cost of one seed of both conditions (e.g. GPU-hours)")
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
                            ("--confidence-level", args.confidence_level),
                            ("--pilot-bound", args.pilot_bound)):
            if value is not None:
                raise InputError(f"`{flag}` applies to pilot outcomes; pass --pilot PATH.")
    if args.seeds is not None and args.seeds < 1:
        raise InputError(f"`--seeds` must be a positive integer, got {args.seeds}.")
    if args.pilot_bound is not None and not 0.5 <= args.pilot_bound < 1.0:
        raise InputError(f"`--pilot-bound` must be in [0.5, 1), got {args.pilot_bound:g}.")
    if args.pilot_bound is not None and args.seed_sd is not None:
        raise InputError("`--pilot-bound` bounds the pilot's seed SD; --seed-sd sets it: pass "
                         "one of them.")
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


def _inputs(args: argparse.Namespace, pilot: Any) -> dict[str, Any]:
    """Every input of the calculation, resolved: the JSON alone reproduces the output."""
    from robuststats import __version__

    # with both --effect and --n the power is computed, not an input
    power = None if args.effect is not None and args.n is not None else args.power
    record = {"effect": args.effect, "n": args.n, "power": power,
              "discordance": args.discordance, "correlation": args.correlation,
              **settings(args), "seeds": args.seeds, "seed_sd": args.seed_sd,
              "robuststats_version": __version__}
    if pilot is not None:
        pairs = pilot[1]
        record["pilot"] = {"path": args.pilot, "conditions": list(pairs.conditions),
                           "eval_noise": pairs.eval_noise, "holes": args.holes,
                           "confidence_level": args.confidence_level}
    return record


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


# ------------------------------------------------------------------------------ run
def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except InputError as exc:
        from robuststats.stats import ParameterError

        if not isinstance(exc, ParameterError):
            raise
        # the library names its parameter (`alpha`), the user typed a flag (`--alpha`)
        raise InputError(spelled(exc)) from None


def _run(args: argparse.Namespace) -> int:
    if args.gate:
        from robuststats.cli._power_gate import gate_mode

        payload, lines = gate_mode(args)
        emit(args.format, data=payload, text="\n".join(lines))
        return 0
    for flag in ("max_degradation", "resid_sd", "item_sd", "gate_condition"):
        if getattr(args, flag) is not None:
            raise InputError(f"`--{flag.replace('_', '-')}` plans a gate; pass --gate.")
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
    if args.sequential is not None or args.looks is not None:
        from robuststats.cli._power_sequential import sequential_mode

        payload, lines = sequential_mode(args, discordance, pilot)
        payload = {"inputs": _inputs(args, pilot), **payload}
        emit(args.format, data=payload, text="\n".join(lines))
        return 0
    if _seeds_design(args, pilot):
        from robuststats.cli._power_modes import plot_seeds, seeds_mode

        payload, lines, info = seeds_mode(args, discordance, pilot)
        if args.plot:
            effect = info["result"].effect if info["result"] is not None else args.effect
            plot_seeds(args, effect, info)
    else:
        from robuststats.cli._power_modes import (
            neighbours,
            plot_one_seed,
            single_mode,
            table_mode,
        )

        if discordance is None and args.correlation is None:
            payload, lines, pi_ds, n_max = table_mode(args)
            effect, in_use, method = args.effect, None, payload["table"][0]["method"]
        else:
            payload, lines, result = single_mode(args, discordance, pilot)
            effect, in_use, n_max = result.effect, result.discordance, result.n
            method = result.method
            pi_ds = sorted({round(result.discordance, 6),
                            *neighbours(result.discordance, effect)})
        if args.plot:
            plot_one_seed(args, effect, pi_ds, max(int(n_max * 1.5), 20), in_use, method)
    payload = {"inputs": _inputs(args, pilot), **payload}
    if args.plot:
        lines.append(f"power curve written to {args.plot}")
        payload["plot"] = args.plot
    emit(args.format, data=payload, text="\n".join(lines))
    return 0
