"""The seed variance component of a paired difference, estimated from pilot outcomes.

A pilot with k training seeds per condition, evaluated on the same n items, gives the
``(k, n)`` matrix of per-item differences ``D = x − y`` (first minus second). Its two-way
ANOVA mean squares (:func:`robuststats.stats.crossed_variance`) estimate the variance
components that :func:`power_seeds` plans with:

    σ̂_seed² = max(MS_seed − MS_resid, 0)/n,   σ̂_item² = max(MS_item − MS_resid, 0)/k,
    ICC = σ̂_item² / (σ̂_item² + MS_resid)

(the ANOVA, or method-of-moments, estimators; Searle, Casella & McCulloch 1992, *Variance
Components*, §4.7). The seed component rests on k − 1 degrees of freedom, so its
uncertainty dominates: ``(k − 1)·MS_seed / E[MS_seed]`` is χ²_{k−1} under normal seed
effects, which gives the interval

    E[MS_seed] ∈ [(k − 1)·M/χ²_{k−1, 1−α/2},  (k − 1)·M/χ²_{k−1, α/2}],
    M = max(MS_seed, MS_resid)

and, with MS_resid (on (k − 1)(n − 1) df) taken as known, the interval
``σ_seed² ∈ [max(L − MS_resid, 0)/n, max(U − MS_resid, 0)/n]`` (the approach of Searle
et al. §4.7c for a component whose mean square dominates). It is reported as an interval
for ``seed_sd`` = σ_seed, the SD over seeds of the per-seed accuracy difference. ``M`` takes
``MS_seed`` at no less than ``MS_resid`` (``E MS_seed ≥ E MS_resid``), as the seed-random
t's variance does: seeds whose sums of ``x − y`` tie give ``MS_seed = 0`` by chance, and the
unfloored interval was then [0, 0], a claim that the seeds do not vary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from robuststats._validation import check_same_shape
from robuststats.errors import InputError
from robuststats.stats._common import ConfidenceInterval, PairEstimate
from robuststats.stats._parameters import (
    ParameterError,
    as_outcomes,
    check_confidence_level,
    check_probability,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = ["SeedComponents", "estimate_seed_components"]


@dataclass(frozen=True)
class SeedComponents(PairEstimate):
    """Variance components of the per-item difference a − b, from pilot outcomes.

    Attributes
    ----------
    seed_sd : float
        σ̂_seed: SD over training seeds of the per-seed accuracy difference (∞ items).
    confidence_interval : ConfidenceInterval
        Interval for ``seed_sd`` from the χ² distribution of MS_seed on k − 1 df.
    icc : float
        Correlation of an item's differences across seeds, σ̂_item²/(σ̂_item² + MS_resid).
    discordance : float
        π̂_D: share of (seed, item) pairs on which a and b disagree.
    effect : float
        Observed acc(a) − acc(b) over seeds and items (first minus second).
    accuracy_a, accuracy_b : float
        Observed accuracies; ``accuracy_b`` is the baseline.
    ms_seed, ms_item, ms_resid : float
        Two-way ANOVA mean squares of the differences.
    dof_seed : int
        k − 1, the degrees of freedom behind ``seed_sd``.
    n_seeds, n_items : int
    confidence_level : float
    """

    seed_sd: float
    confidence_interval: ConfidenceInterval
    icc: float
    discordance: float
    effect: float
    accuracy_a: float
    accuracy_b: float
    ms_seed: float
    ms_item: float
    ms_resid: float
    dof_seed: int
    n_seeds: int
    n_items: int
    confidence_level: float

    def upper_seed_sd(self, level: float) -> float:
        """The one-sided ``level`` upper confidence bound of σ_seed: the pilot is an
        estimate, and a plan on its point estimate inherits its error (with 3–5 pilot seeds
        σ̂²_seed is often half the truth). ``E[MS_seed] ≤ (k − 1)·MS_seed/χ²_{k−1, 1−level}``
        (χ² quantile at ``1 − level``), then ``σ²_seed = max(E[MS_seed] − MS_resid, 0)/n``
        as the interval (module doc).

        >>> from robuststats.stats import estimate_seed_components
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> x = (rng.random((5, 200)) < 0.7).astype(float)
        >>> y = (rng.random((5, 200)) < 0.6).astype(float)
        >>> c = estimate_seed_components(x, y)
        >>> c.upper_seed_sd(0.8) >= c.seed_sd
        True
        """
        from scipy import special

        q = check_probability(level, "level")
        if self.dof_seed < 1:
            return math.inf
        high_ms = self.dof_seed * self.ms_seed / float(special.chdtri(self.dof_seed, q))
        return math.sqrt(max(high_ms - self.ms_resid, 0.0) / self.n_items)



def estimate_seed_components(
    x: object, y: object, *, seeds: Sequence[object] | None = None,
    confidence_level: float = 0.95, discordance: float | None = None,
) -> SeedComponents:
    """Estimate σ_seed (with an interval), the ICC and π_D from a pilot with several seeds.

    Parameters
    ----------
    x, y : array_like, shape (n_rows, n_items)
        Outcomes of conditions a (``x``) and b (``y``) on the same items: one row per
        training seed, or per (seed, noise seed) stratum with ``seeds``; 0/1, or means.
    seeds : sequence, optional
        The training seed of each row; rows of one seed (its noise seeds) are averaged
        before the ANOVA. Default: every row is its own seed.
    confidence_level : float
        Of the interval for ``seed_sd``.
    discordance : float, optional
        π_D when ``x``, ``y`` are not 0/1; by default the share of discordant pairs among
        all rows.

    Returns
    -------
    SeedComponents

    Notes
    -----
    With several noise seeds per training seed the residual of the averaged rows is
    smaller than that of one evaluation, so the ICC is an upper bound for single
    evaluations (conservative when planning with it); σ_seed is unaffected.
    """
    import numpy as np
    from scipy import special

    from robuststats.stats._seed_random import crossed_variance

    level = check_confidence_level(confidence_level)
    xa, ya = as_outcomes(x, "x", ndim=(2,)), as_outcomes(y, "y", ndim=(2,))
    check_same_shape({"x": xa, "y": ya}, "(n_rows, n_items)")
    if discordance is None:
        if not bool(np.all((xa == 0) | (xa == 1)) and np.all((ya == 0) | (ya == 1))):
            raise ParameterError("{x} and {y} are not 0/1 outcomes: pass {discordance} "
                                 "estimated from them.", ["x", "y", "discordance"])
        pi_d = float(np.mean(xa != ya))
    else:
        pi_d = check_probability(discordance, "discordance")
    if seeds is not None:
        labels = list(seeds)
        if len(labels) != xa.shape[0]:
            raise ParameterError("{seeds} must give one seed per row ({rows}), got {count}.",
                                 ["seeds"], rows=xa.shape[0], count=len(labels))
        xa, ya = _seed_means(xa, labels), _seed_means(ya, labels)
    k, n = xa.shape
    if k < 2 or n < 2:
        raise InputError(
            f"the seed component needs at least 2 seeds and 2 items, got {k} seed(s) × {n} "
            "item(s): a pilot with one seed cannot tell seeds from items."
        )
    cv = crossed_variance(xa - ya)
    dof = k - 1
    tail = (1.0 - level) / 2.0
    # chdtri(df, p) is the upper-tail quantile: χ²_{df, 1 − p}
    upper_q, lower_q = special.chdtri(dof, tail), special.chdtri(dof, 1.0 - tail)
    # the χ² interval of E MS_seed from MS_seed at no less than MS_resid (E MS_seed ≥
    # E MS_resid), as the test's variance takes it: tied seed sums give MS_seed = 0 by
    # chance, and an interval [0, 0] for σ_seed would claim there is no seed variance
    seed_ms = max(cv.ms_seed, cv.ms_resid)
    low_ms, high_ms = dof * seed_ms / upper_q, dof * seed_ms / lower_q
    var_item = max(cv.ms_item - cv.ms_resid, 0.0) / k
    icc = var_item / (var_item + cv.ms_resid) if var_item + cv.ms_resid > 0 else 0.0
    return SeedComponents(
        seed_sd=math.sqrt(max(cv.ms_seed - cv.ms_resid, 0.0) / n),
        confidence_interval=ConfidenceInterval(
            math.sqrt(max(low_ms - cv.ms_resid, 0.0) / n),
            math.sqrt(max(high_ms - cv.ms_resid, 0.0) / n)),
        icc=float(icc), discordance=pi_d, effect=float(np.mean(xa - ya)),
        accuracy_a=float(np.mean(xa)), accuracy_b=float(np.mean(ya)),
        ms_seed=cv.ms_seed, ms_item=cv.ms_item, ms_resid=cv.ms_resid, dof_seed=dof,
        n_seeds=k, n_items=n, confidence_level=level,
    )


def _seed_means(values: np.ndarray, seeds: list) -> np.ndarray:
    """Rows of ``values`` averaged within each seed label (first-seen order)."""
    import numpy as np

    order = {label: i for i, label in enumerate(dict.fromkeys(seeds))}
    index = np.array([order[label] for label in seeds])
    sums = np.zeros((len(order), values.shape[1]))
    np.add.at(sums, index, values)
    return sums / np.bincount(index, minlength=len(order))[:, None]
