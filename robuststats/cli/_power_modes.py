"""The plans ``robuststats power`` prints: one seed (McNemar) and several seeds.

Part of :mod:`robuststats.cli.power`, which parses, checks and dispatches here (the gate's
plan is :mod:`robuststats.cli._power_gate`). One seed: the π_D sweep (``table_mode``) or
one design (``single_mode``); several training seeds: the seed-random t test's plan with
its (seeds, items) table (``seeds_mode``); and the power plot of each. Every number comes
from :mod:`robuststats.stats`; the figure from :mod:`robuststats.report.power`.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from robuststats.cli._output import fmt_ci, fmt_pct, render_table
from robuststats.cli._power_common import describe, names, pilot_line, settings, spelled
from robuststats.errors import InputError

__all__ = ["neighbours", "plot_one_seed", "plot_seeds", "seeds_mode", "single_mode",
           "table_mode"]

#: seed counts of the (seeds, items) table; --seeds K is added
TABLE_SEEDS = (2, 3, 4, 5, 6, 8, 10, 15, 20)


# ------------------------------------------------------------------------------ one seed
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


def table_mode(args: argparse.Namespace) -> tuple[dict[str, Any], list[str], list[float], int]:
    from robuststats.stats import power_table

    if args.effect is None:
        raise InputError(
            "the minimum detectable effect (--n without --effect) needs π_D: pass "
            "--discordance, --correlation with --baseline, or --pilot."
        )
    solve_n = args.n is None
    rows = power_table(args.effect, args.n, args.power if solve_n else None,
                       **settings(args), as_frame=False)
    paired = [r for r in rows if r["design"] == "paired"]
    unpaired = [r for r in rows if r["design"] == "unpaired"]
    lines = [f"McNemar power analysis: {describe(args, None, paired[0]['method'])}"]
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


def single_mode(args: argparse.Namespace, discordance: float | None,
                 pilot: Any) -> tuple[dict[str, Any], list[str], Any]:
    from robuststats.stats import power_mcnemar

    both_given = args.effect is not None and args.n is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = power_mcnemar(args.effect, args.n, None if both_given else args.power,
                          discordance=discordance, correlation=args.correlation,
                          **settings(args))
    for w in caught:
        print(f"robuststats power: warning: {w.message}", file=sys.stderr)
    lines = [f"McNemar power analysis: {describe(args, pilot, r.method)}"]
    if pilot is not None:
        lines.append(pilot_line(pilot[0], pilot[1]))
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
                                         **settings(args)).n
        except InputError:
            out[key] = None  # π_D at this bound is below δ: impossible design
    return out


def plot_one_seed(args: argparse.Namespace, effect: float, pi_ds: list[float], n_max: int,
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


def neighbours(pi_d: float, effect: float) -> list[float]:
    """A few π_D around the one in use, so the plot shows how much it matters."""
    return [round(v, 6) for v in (pi_d * 0.5, pi_d * 1.5, pi_d * 2) if effect <= v < 1]


# ------------------------------------------------------------------------------ seeds
def pilot_seed_sd(args: argparse.Namespace, comps: Any, notes: list[str]) -> float:
    """The seed SD a plan from a pilot uses: its estimate, or with ``--pilot-bound Q`` its
    one-sided ``Q`` upper confidence bound (``SeedComponents.upper_seed_sd``), said in
    ``notes``."""
    if args.pilot_bound is None:
        return float(comps.seed_sd)
    bound = float(comps.upper_seed_sd(args.pilot_bound))
    notes.append(f"seed SD planned at the pilot's one-sided {args.pilot_bound:g} upper "
                 f"confidence bound {bound:.3g} (estimate {comps.seed_sd:.3g}, χ² on "
                 f"{comps.dof_seed} df), not at its estimate: --pilot-bound.")
    return bound


def seeds_mode(args: argparse.Namespace, discordance: float | None,
                pilot: Any) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """Several training seeds: the seed-random t test (``power_seeds``)."""
    from robuststats.stats import (
        POWER_METHODS,
        UnreachablePowerError,
        power_seeds,
        power_seeds_table,
    )

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
        seed_sd = 0.0 if comps is None else pilot_seed_sd(args, comps, notes)
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

    a, b = names(pilot)
    lines = [f"Seed-random power analysis: {describe(args, pilot, method)}"]
    if pilot is not None:
        lines.append(pilot_line(pilot[0], pilot[1]))
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
        except UnreachablePowerError as exc:  # the seeds or items asked for cap the power
            unreachable = spelled(exc)
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
    if comps is not None and result is not None and args.seed_sd is None:
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
    ceiling = (f"; with {r.n_seeds} seeds the power tends to {r.max_power:.3f} with unlimited "
               f"items" if r.max_power < 0.9995 else "")
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


def plot_seeds(args: argparse.Namespace, effect: float, info: dict[str, Any]) -> None:
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
