"""The variance components a gate is planned with, from a baseline's outcomes.

:func:`power_gate` (:mod:`._gate`) plans with the SDs of the gate's linearized metric:
over training seeds (σ_s) and of one seed × item value (σ_e). They are estimated here
from the two-way ANOVA of the metric's delta-method influence values per seed and item
(:func:`gate_influence`, the values the gate's own variance is built from), with
:func:`robuststats.stats.crossed_variance`: σ_s² = max(MS_seed − MS_resid, 0)/n and
σ_e² = MS_resid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from robuststats.errors import InputError
from robuststats.stats._common import Record
from robuststats.stats._parameters import ParameterError, check_choice, check_number

__all__ = ["GateComponents", "estimate_gate_components", "gate_influence"]


def gate_influence(clean: Any, noisy: Any, metric: str, relative: bool) -> tuple[float, Any]:
    """The gate's metric θ and its delta-method influence values per seed and item.

    ``metric="accuracy"``: θ = Z̄ with values ``z`` (absolute) or ``z/Z̄`` (relative, log
    scale); ``"retention"``: θ = Z̄/C̄ with ``(z − θc)/C̄`` (ratio scale, as
    :func:`seed_random_retention_test`) or ``z/Z̄ − c/C̄`` (log scale, as
    :func:`seed_random_retention`). ``clean``, ``noisy``: ``(n_seeds, n_items)``.
    """
    z_bar = float(noisy.mean())
    if metric == "accuracy":
        return z_bar, (noisy / z_bar if relative else noisy)
    c_bar = float(clean.mean())
    theta = z_bar / c_bar
    if relative:
        return theta, noisy / z_bar - clean / c_bar
    return theta, (noisy - theta * clean) / c_bar


@dataclass(frozen=True)
class GateComponents(Record):
    """Variance components of a gate's linearized metric, from a baseline's outcomes.

    ``seed_sd`` = √(max(MS_seed − MS_resid, 0)/n), ``resid_sd`` = √MS_resid of the two-way
    ANOVA of the influence values (:func:`crossed_variance`); ``value`` is the metric.
    """

    condition: str
    eval_noise: float
    metric: str
    margin_type: str
    value: float
    seed_sd: float
    resid_sd: float
    ms_seed: float
    ms_item: float
    ms_resid: float
    n_seeds: int
    n_items: int


def estimate_gate_components(source: Any, *, condition: str | None = None,
                             eval_noise: float | None = None, metric: str = "retention",
                             margin_type: str = "relative") -> GateComponents:
    """Seed and residual SDs of the gate's metric for ``condition`` of ``source``.

    ``source`` is anything :func:`robuststats.outcomes.read_outcomes` reads (a result
    version, a run directory, a file or a DataFrame); ``eval_noise`` defaults to the
    largest noisy level. Needs at least 2 training seeds.
    """
    from robuststats.errors import did_you_mean
    from robuststats.outcomes import align_series, read_outcomes
    from robuststats.stats._seed_random import crossed_variance

    metric = check_choice(metric, "metric", ("retention", "accuracy"))
    margin_type = check_choice(margin_type, "margin_type", ("relative", "absolute"))
    out = read_outcomes(source)
    conditions = sorted(set(out["condition"]))
    if condition is None:
        if len(conditions) != 1:
            raise ParameterError("the outcomes have {count} conditions ({listed}): pass "
                                 "{condition}.", ["condition"], count=len(conditions),
                                 listed=", ".join(conditions))
        condition = conditions[0]
    elif condition not in conditions:
        raise ParameterError("{condition} {given!r} is not in the outcomes{hint}; conditions: "
                             "{listed}.", ["condition"], given=condition,
                             hint=did_you_mean(condition, conditions),
                             listed=", ".join(conditions))
    rows = out[out["condition"] == condition]
    noisy = sorted({float(v) for v in rows["eval_noise"] if v > 0})
    if eval_noise is not None:
        level = check_number(eval_noise, "eval_noise", low=0.0, low_open=True)
        if not any(math.isclose(level, v, abs_tol=1e-12) for v in noisy):
            raise ParameterError("{eval_noise} {level:g} is not a noisy level of {name} "
                                 "(levels: {levels}).", ["eval_noise"], level=level,
                                 name=condition,
                                 levels=", ".join(f"{v:g}" for v in noisy) or "none")
    elif noisy:
        level = noisy[-1]
    else:
        raise InputError(f"condition {condition} has no noisy level.")
    wanted = ([0.0] if metric == "retention" else []) + [level]
    aligned = align_series(rows, [(condition, lv) for lv in wanted], by="seed", holes="drop")
    theta, values = gate_influence(aligned.values.get((condition, 0.0)),
                                   aligned.values[(condition, level)], metric,
                                   margin_type == "relative")
    k, n = values.shape
    if k < 2:
        raise ParameterError("condition {name} has one training seed: its seed SD "
                             "cannot be estimated; give {seed_sd}.", ["seed_sd"],
                             name=condition)
    cv = crossed_variance(values)
    return GateComponents(condition, level, metric, margin_type, float(theta),
                          math.sqrt(cv.var_seed), math.sqrt(cv.ms_resid), cv.ms_seed,
                          cv.ms_item, cv.ms_resid, k, n)
