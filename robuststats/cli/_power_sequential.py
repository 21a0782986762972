"""``robuststats power --sequential 3,5,8``: power and expected seeds of a sequential study;
``robuststats power --looks 4 --power 0.9``: the sequential design of that many looks with
the fewest maximum seeds reaching the power.

Calls :func:`robuststats.stats.sequential.power_sequential` or
:func:`~robuststats.stats.sequential.size_sequential` (formulas: their module doc and
``docs/power.md``) and prints the looks beside the fixed design of equal power (sized to
the same target with ``--looks``).
"""

from __future__ import annotations

import argparse
from typing import Any

from robuststats.cli._output import fmt_number
from robuststats.cli._power_common import names
from robuststats.errors import InputError

__all__ = ["parse_looks", "parse_spending", "sequential_mode"]

#: the library's parameters that only this mode has, as the flags that set them
_FLAGS = {"looks": "--sequential", "beta": "--futility-beta",
          "cost_per_seed": "--cost-per-seed", "n_looks": "--looks",
          "first_look": "--first-look", "power": "--power"}


def parse_looks(text: str) -> list[int]:
    """``"3,5,8"`` -> ``[3, 5, 8]`` (argparse type of ``--sequential``)."""
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of seed counts: {text!r}") from None


def parse_spending(text: str) -> str:
    """``obf``, ``pocock`` or ``hsd(γ)`` (argparse type of ``--spending``; argparse runs it
    on the default too, so the plain names do not import the statistics)."""
    if text in ("obf", "pocock"):
        return text
    from robuststats.stats.sequential import check_spending

    try:
        return check_spending(text, "--spending")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("`--spending`: ", "")
                                         .replace("`--spending` ", "")) from None


def _beta(args: argparse.Namespace, sizing: bool) -> float:
    """The β the futility bound spends: --futility-beta, else the type II error the design
    is sized to (1 − --power) with --looks, else 0.2. Sized to a power above 1 − β, the
    bounds would meet before the last look (the design stops there whatever it sees)."""
    target = None if not sizing or args.power is None else round(1.0 - float(args.power), 10)
    if args.futility_beta is None:
        return 0.2 if target is None else target
    beta = float(args.futility_beta)
    if args.futility != "none" and target is not None and beta > target + 1e-12:
        raise InputError(f"`--futility-beta` {beta:g} spends more type II error than "
                         f"--power {args.power:g} leaves (at most {target:g}); leave it out "
                         "to spend 1 − power.")
    return beta


def sequential_mode(args: argparse.Namespace, discordance: float | None, pilot: Any
                    ) -> tuple[dict[str, Any], list[str]]:
    from robuststats.stats.sequential import power_sequential, size_sequential

    sizing = args.looks is not None
    flag = "--looks" if sizing else "--sequential"
    if sizing and args.sequential is not None:
        raise InputError("pass either --sequential K1,K2,... (given looks) or --looks L "
                         "(sized to --power), not both.")
    if args.first_look is not None and not sizing:
        raise InputError("`--first-look` goes with --looks (the design sized to --power).")
    if args.effect is None or args.n is None:
        raise InputError(f"`{flag}` needs --effect and --n (items) to plan the looks.")
    if discordance is None and args.correlation is None:
        raise InputError(f"`{flag}` needs π_D: pass --discordance, --correlation with "
                         "--baseline, or --pilot.")
    if sizing and args.seeds is not None:
        raise InputError("`--seeds` cannot go with --looks: the design's seeds are what it "
                         "solves for.")
    if not sizing and args.seeds is not None and args.seeds != args.sequential[-1]:
        raise InputError(f"`--seeds` {args.seeds} must equal the last look of --sequential "
                         f"({args.sequential[-1]}), or be left out.")
    comps = None if pilot is None else pilot[2]
    from robuststats.cli._power_modes import pilot_seed_sd

    notes: list[str] = []
    seed_sd = args.seed_sd if args.seed_sd is not None else (
        0.0 if comps is None else pilot_seed_sd(args, comps, notes))
    icc = args.icc if args.icc is not None else (0.0 if comps is None else comps.icc)
    design = dict(discordance=discordance, seed_sd=seed_sd, icc=icc, baseline=args.baseline,
                  correlation=args.correlation, alpha=args.alpha,
                  alternative=args.alternative, spending=args.spending,
                  futility=args.futility, beta=_beta(args, sizing),
                  cost_per_seed=args.cost_per_seed)
    try:
        if sizing:
            r = size_sequential(args.effect, args.n, args.power, n_looks=args.looks,
                                first_look=args.first_look, **design)
        else:
            r = power_sequential(args.effect, args.sequential, args.n, **design)
    except InputError as exc:
        message = str(exc)
        for name, flag in _FLAGS.items():
            message = message.replace(f"`{name}`", f"`{flag}`")
        raise InputError(message) from None
    a, b = names(pilot)
    rows = [{"look": i + 1, "n_seeds": k, "efficacy_bound": float(r.efficacy_bound[i]),
             "futility_bound": None if r.futility == "none" else float(r.futility_bound[i]),
             "stop_null": float(r.stop_null[i]), "stop_effect": float(r.stop_effect[i])}
            for i, k in enumerate(r.looks)]
    summary = {
        "power": r.power, "target_power": r.target_power, "type1_error": r.type1_error,
        "expected_seeds_null": r.expected_seeds_null,
        "expected_seeds_effect": r.expected_seeds_effect, "max_seeds": r.looks[-1],
        "fixed_seeds": r.fixed_seeds, "fixed_power": r.fixed_power, "saving": r.saving,
        "cost_per_seed": r.cost_per_seed,
        "expected_cost_null": r.cost(r.expected_seeds_null),
        "expected_cost_effect": r.cost(r.expected_seeds_effect),
        "fixed_cost": r.cost(r.fixed_seeds),
        "drift": r.drift if args.alternative == "two-sided" else None}
    payload = {"design": "sequential", "spending": r.spending, "futility": r.futility,
               "looks": rows, "summary": summary}
    sized = "" if r.target_power is None else (
        f"; the fewest seeds for power {r.target_power:g} with {len(r.looks)} looks")
    lines = [f"Sequential seed-random design: {r.spending} spending over looks at "
             f"{', '.join(map(str, r.looks))} seeds, futility {r.futility}; "
             f"acc({a}) − acc({b}) = {args.effect:g}, {args.n} items, alpha = {args.alpha:g} "
             f"({args.alternative}){sized}",
             "", "look  seeds  efficacy z  futility z  P(stop | δ=0)  P(stop | effect)"]
    for row in rows:
        fut = "-" if row["futility_bound"] is None else f"{row['futility_bound']:.3f}"
        lines.append(f"{row['look']:>4}  {row['n_seeds']:>5}  {row['efficacy_bound']:>10.3f}  "
                     f"{fut:>10}  {row['stop_null']:>13.3f}  {row['stop_effect']:>16.3f}")
    cost = ""
    if r.cost_per_seed is not None:
        cost = (f"; expected cost {fmt_number(summary['expected_cost_effect'])} under the "
                f"effect, {fmt_number(summary['expected_cost_null'])} under δ = 0, fixed "
                f"{fmt_number(summary['fixed_cost'])}")
    lines += ["", f"power {r.power:.3f} (type I error {r.type1_error:.4f}); expected seeds "
                  f"{r.expected_seeds_effect:.2f} under the effect, {r.expected_seeds_null:.2f} "
                  f"under δ = 0, at most {r.looks[-1]}",
              f"fixed design of {'equal power' if r.target_power is None else 'the same target'}"
              f": {r.fixed_seeds} seeds (power {r.fixed_power:.3f}); the sequential design "
              f"saves {r.saving:.1%} of its seeds on average under the effect, "
              f"{1 - r.expected_seeds_null / r.fixed_seeds:.1%} under δ = 0{cost}",
              "few-df approximation: each look alone has the seed-random t's power and the looks "
              "the joint law of nested few-df t's (docs/power.md, sequential designs)."]
    if r.drift is not None and args.alternative == "two-sided":
        lines.append(f"futility bounds fixed before the data: put `drift: {r.drift:.4g}` in the "
                     "study's `sequential:` section (its β is spent under this z at the last "
                     "look; the hypothesis' margin is taken as 0 here: plan with effect − "
                     "margin; with m driving hypotheses and a multiplicity method, plan at "
                     "--alpha α/m)")
    elif r.drift is not None:
        lines.append("a study decides its hypotheses two-sided at its alpha: plan with "
                     "--alternative two-sided for the `drift:` of its `sequential:` section")
    if notes:
        payload["summary"]["seed_sd"] = seed_sd
        lines += notes
    return payload, lines
