"""What the modules of ``robuststats power`` share: flags, test settings, header lines.

:mod:`robuststats.cli.power` parses, checks and dispatches to the plans of
:mod:`robuststats.cli._power_modes` (one seed, several seeds) and
:mod:`robuststats.cli._power_gate`; all of them import from here and from nothing else of
each other. The library's errors name their parameters apart from their wording
(:class:`robuststats.stats.ParameterError`); :data:`FLAGS` spells each as the flag that
sets it.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from robuststats.cli._output import fmt_ci, fmt_pct

if TYPE_CHECKING:
    from robuststats.stats import ParameterError

__all__ = ["FLAGS", "describe", "names", "pilot_line", "settings", "spelled"]

#: library parameter -> the flag that sets it (errors name the flag)
FLAGS = {
    "effect": "--effect", "n": "--n", "n_items": "--n", "power": "--power",
    "discordance": "--discordance", "correlation": "--correlation", "baseline": "--baseline",
    "alpha": "--alpha", "repeats": "--repeats", "icc": "--icc", "pool_size": "--pool-size",
    "n_seeds": "--seeds", "seed_sd": "--seed-sd", "confidence_level": "--confidence-level",
    "eval_noise": "--eval-noise", "conditions": "--conditions", "method": "--method",
    "margin": "--max-degradation", "n_seeds_baseline": "--seeds",
    "n_seeds_candidate": "--candidate-seeds", "resid_sd": "--resid-sd", "item_sd": "--item-sd",
    "condition": "--gate-condition", "margin_type": "--margin-type", "metric": "--metric",
}


def spelled(error: ParameterError) -> str:
    """The message of a library :class:`~robuststats.stats.ParameterError`, naming flags."""
    return error.spelled(FLAGS)


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """The test settings of the one-seed planners, as the library takes them."""
    return {"baseline": args.baseline, "alpha": args.alpha, "alternative": args.alternative,
            "method": args.method, "repeats": args.repeats, "icc": args.icc or 0.0,
            "pool_size": args.pool_size or None}


def names(pilot: Any) -> tuple[str, str]:
    """The two conditions as the output names them: the pilot's, or A and B."""
    return ("A", "B") if pilot is None else pilot[1].conditions


def describe(args: argparse.Namespace, pilot: Any, method: str) -> str:
    """The test planned for, its sides and its level: the plan's first line."""
    from robuststats.stats import POWER_METHODS

    a, b = names(pilot)
    side = {
        "two-sided": f"two-sided test of acc({a}) − acc({b}) = 0",
        "greater": f"one-sided: {a} more accurate than {b}, acc({a}) − acc({b}) = +δ",
        "less": f"one-sided: {a} less accurate than {b}, acc({a}) − acc({b}) = −δ",
    }[args.alternative]
    return f"{POWER_METHODS[method]}; {side}, alpha = {args.alpha:g}"


def pilot_line(est: Any, pairs: Any) -> str:
    """π_D estimated from the pilot, with its Wilson interval and the observed effect."""
    a, b = pairs.conditions
    widened = ("" if est.design_effect == 1.0
               else f" on n/{est.design_effect:.3g} for repeated items")
    interval = fmt_ci(est.confidence_interval.low, est.confidence_interval.high,
                      est.confidence_level, percent=False)
    return (f"pilot {a} vs {b}: {est.n} pairs, π_D = {est.discordance:.4g} {interval} "
            f"(Wilson{widened}); observed acc({a}) − acc({b}) = "
            f"{fmt_pct(est.effect, signed=True)} points (accuracy {a} "
            f"{fmt_pct(est.accuracy_a)}%, baseline {b} {fmt_pct(est.accuracy_b)}%)")
