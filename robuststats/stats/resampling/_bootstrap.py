"""Bootstrap confidence intervals for accuracy, accuracy differences and retention.

Inputs are item outcomes ``(n_items,)`` or ``(n_seeds, n_items)``: 0/1, or proportions in
[0, 1] (an item's mean over repeated noisy evaluations). Items are paired across every
input (the same ``item_id`` in the same column). With several seeds the scheme is the
two-way bootstrap of a crossed design (Owen 2007; see :mod:`._resample`): seeds and items
are resampled independently, and seed ``s`` is resampled together in every input (under
the same seed, conditions share initialisation and data order, and a model's clean and
noisy evaluations come from the same network).

Retention is ``acc_noisy / acc_clean`` on the same items. Its delta-method variance on the
log scale for one seed of 0/1 outcomes is ``Var(log R) ≈ (b + c) / ((a + b)(a + c))``
(a: correct clean and noisy, b: clean only, c: noisy only); Fagerland, Lydersen & Laake
(2017, Sec. 8.7) give the corresponding Wald interval for a ratio of paired proportions.

Degenerate data never give a silent NaN. When the bootstrap distribution has no spread
(every item identical, all correct, no discordant pairs), a
:class:`DegenerateDataWarning` is issued and the interval falls back to a score bound for
``n_items`` pairs with no discordance: half-width ``h0 = z²/(n + z²)`` (Tango 1998) for a
difference, ``h0 / acc_clean`` for a retention, ``h0 · sqrt(1/r_a² + 1/r_b²)`` for a
retention difference (r = clean accuracies), and the Wilson interval for an accuracy.
A clean accuracy of 0 makes retention undefined: warning, estimate NaN, interval (0, ∞).

Several seeds (``seeds``). With ``(n_seeds, n_items)`` input and ``n_seeds > 1`` the
question is about training procedures, and the seeds × items bootstrap answers it badly:
its quantiles treat a seed variance on ``n_seeds − 1`` df as known and it covered
89.9–91.8 % at a nominal 95 % with 5 seeds and seed effects (docs/statistics.md §9). So
``bootstrap_difference``, ``bootstrap_retention`` and ``bootstrap_retention_difference``
return by default (``seeds="random"``) the seed-random interval under their name
(:func:`~robuststats.stats.seed_random_test`, ``seed_random_retention``,
``seed_random_retention_test``: the crossed-ANOVA variance with its calibrated few-seed
reference, 94.3–96.7 % coverage over the 72 cells of §9), saying so in ``method`` and
``scheme`` (``"seeds x items, seed-random t"``), with no bootstrap distribution
(``n_resamples = 0``). ``seeds="bootstrap"`` asks for the two-way bootstrap anyway (with a
:class:`SeedBootstrapWarning`). One seed and ``bootstrap_accuracy`` are unchanged.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import special

from robuststats._validation import (
    as_aligned_outcomes,
    check_choice,
    check_confidence_level,
    check_n_resamples,
    check_rng,
)
from robuststats.errors import InputError
from robuststats.stats._common import (
    ConfidenceInterval,
    DegenerateDataWarning,
    SeedBootstrapWarning,
    tidy_row,
    undefined_retention,
)
from robuststats.stats.resampling._bootstrap_ci import BootstrapFit, acceleration
from robuststats.stats.resampling._resample import (
    crossed_variance_ratio,
    jackknife_influence,
    lattice_scale,
    resampled_totals,
)
from robuststats.stats.resampling._statistics import (
    QUANTITIES,
    log_retention,
    ratio_sign,
    snap_ties,
)

__all__ = [
    "BootstrapResult",
    "bootstrap_accuracy",
    "bootstrap_difference",
    "bootstrap_retention",
    "bootstrap_retention_difference",
    "fit_bootstrap",
]

_BASIC_METHODS = ("bca", "percentile")
#: largest lattice total L·k·n: products of two totals stay below 2**52, exact in float64
_MAX_EXACT_TOTAL = 2**26
_RETENTION_METHODS = ("bca", "percentile", "log-ratio", "studentized")
#: what the ``bootstrap_*`` functions do with several seeds (module doc)
SEED_CHOICES = ("random", "bootstrap")
SEED_RANDOM_SCHEME = "seeds x items, seed-random t"


@dataclass(frozen=True)
class BootstrapResult:
    """Result of the ``bootstrap_*`` functions. Differences are first minus second.

    Attributes
    ----------
    quantity : str
        What was bootstrapped: ``"accuracy"``, ``"difference"`` (``acc_x − acc_y``),
        ``"retention"`` (``acc_noisy / acc_clean``) or ``"retention_difference"``
        (``retention(a) − retention(b)``).
    estimate : float
        The quantity on the observed data.
    confidence_interval : ConfidenceInterval
    confidence_level : float
        Level of ``confidence_interval``.
    method : str
        The interval method (``ci_method`` in tables).
    standard_error : float
        Standard deviation of the bootstrap distribution (log scale for ``log-ratio`` and
        ``studentized``).
    n_resamples : int
    scheme : str
        ``"items"`` or ``"seeds x items"`` (two-way bootstrap).
    n_seeds, n_items : int
        Shape of the aligned inputs.
    bootstrap_distribution : numpy.ndarray
        The resampled quantity (log scale for ``log-ratio``/``studentized``).
    """

    quantity: str
    estimate: float
    confidence_interval: ConfidenceInterval
    confidence_level: float
    method: str
    standard_error: float
    n_resamples: int
    scheme: str
    n_seeds: int
    n_items: int
    bootstrap_distribution: np.ndarray = field(repr=False, compare=False)

    def to_frame(self) -> pd.DataFrame:
        """One-row tidy table in glossary names (without the bootstrap distribution):
        ``quantity, estimate, ci_low, ci_high, ci_level, ci_method, standard_error,
        n_resamples, scheme, n_seeds, n_items``."""
        return pd.DataFrame([tidy_row(self, rename={"method": "ci_method"},
                                      drop=("bootstrap_distribution",))])


def _aligned(arrays: dict[str, object]) -> list[np.ndarray]:
    return as_aligned_outcomes(arrays)


def _bootstrap_iv(arrays, confidence_level, n_resamples, method, rng, methods):
    check_choice(method, "method", methods)
    level = check_confidence_level(confidence_level)
    b = check_n_resamples(n_resamples)
    gen = check_rng(rng)
    matrices = _aligned(arrays)
    if method == "studentized" and matrices[0].shape[0] > 1:
        raise InputError(
            "`method` 'studentized' needs one seed, (n_items,) outcomes, got shape "
            f"{matrices[0].shape}; use 'bca' or 'log-ratio' for (n_seeds, n_items)."
        )
    return matrices, level, b, gen


def _studentized_se(totals: np.ndarray, scale: int, n: int) -> np.ndarray:
    """Delta-method SE of log(noisy/clean) in each resample (one seed).

    ``totals``: ``(..., 5)`` scaled totals of clean c, noisy z, c², z·c, z². With item
    weights w: ``Var = Σ_i w_i (z_i/Z − c_i/C)² / n²``, the plug-in variance of the influence
    function of log(Z/C); for 0/1 outcomes it equals (b + c)/((a + b)(a + c)).
    """
    c_bar, z_bar = totals[..., 0] / (scale * n), totals[..., 1] / (scale * n)
    cc, zc, zz = (totals[..., j] / scale**2 for j in (2, 3, 4))  # Σ_i w_i X_a[i] X_b[i]
    with np.errstate(divide="ignore", invalid="ignore"):
        var = (zz / z_bar**2 - 2.0 * zc / (z_bar * c_bar) + cc / c_bar**2) / n**2
    return np.sqrt(np.maximum(var, 0.0))


def _gradient(func, means: np.ndarray) -> np.ndarray:
    """Central finite-difference gradient of ``func`` at ``means``."""
    grad = np.empty_like(means)
    for j in range(means.size):
        h = 1e-6 * max(abs(means[j]), 1e-3)
        up, down = means.copy(), means.copy()
        up[j] += h
        down[j] -= h
        grad[j] = (func(up) - func(down)) / (2 * h)
    return np.nan_to_num(grad)


def fit_bootstrap(
    quantity: str, matrices: list[np.ndarray], *, method: str, n_resamples: int,
    rng: np.random.Generator,
) -> tuple[BootstrapFit, str]:
    """Run the bootstrap for ``quantity`` on aligned ``(k, n)`` matrices.

    Returns the fit and the scheme name. Resamples where the quantity is undefined (a
    clean accuracy of 0 in a ratio) are dropped with a :class:`DegenerateDataWarning`.
    """
    k, n = matrices[0].shape
    m = len(matrices)
    scheme = "items" if k == 1 else "seeds x items"
    studentized = method == "studentized"
    log_scale = method in ("log-ratio", "studentized")
    stat = "log_retention" if log_scale else quantity
    func = log_retention if log_scale else QUANTITIES[quantity]
    stacked = np.stack(matrices)  # (m, k, n)
    scale = lattice_scale(stacked)
    if scale is not None and scale * k * n > _MAX_EXACT_TOTAL:
        scale = None  # products of two totals would leave float64's exact integers
    values = np.rint(stacked * scale) if scale is not None else stacked
    if studentized:  # item products for the delta-method SE: c², z·c, z²
        c, z = values[0], values[1]
        values = np.concatenate([values, np.stack([c * c, z * c, z * z])])
    denom = float((scale or 1) * k * n)
    observed = values.sum(axis=(1, 2))
    estimate = float(func(observed[:m], denom))
    totals = resampled_totals(values, n_resamples, rng)
    raw = func(totals[:, :m], denom)
    ratio = 1.0
    if k > 1:
        # rescale deviations so the bootstrap variance of the linearized quantity matches
        # the crossed random-effects estimate (see crossed_variance_ratio)
        means = observed[:m] / denom
        grad = _gradient(lambda mu: func(mu, 1.0), means)
        linear = np.tensordot(grad, stacked, axes=1)
        ratio = crossed_variance_ratio(linear)
    exact_sign = None
    if scale is not None and stat != "accuracy" and stat != "difference":
        def exact_sign(where):
            return ratio_sign(stat, totals[where, :m], observed[:m])
    boot = snap_ties(raw, estimate, ratio, exact_sign)
    finite = np.isfinite(boot)
    t_boot, se_hat = None, 0.0
    if studentized:
        se_star = _studentized_se(totals, scale or 1, n)
        se_hat = float(_studentized_se(observed, scale or 1, n))
        with np.errstate(divide="ignore", invalid="ignore"):
            t_boot = (boot - estimate) / se_star
        # a resample with no spread (se* = 0) and θ* = θ̂ carries t* = 0
        t_boot = np.where((se_star == 0) & (boot == estimate), 0.0, t_boot)
        finite &= ~np.isnan(t_boot)
    dropped = int(boot.size - np.count_nonzero(finite))
    if dropped:
        warnings.warn(
            f"{dropped} of {boot.size} resamples had an undefined or infinite {quantity} "
            "(an accuracy of 0 in a ratio or its logarithm) and were dropped.",
            DegenerateDataWarning,
            stacklevel=3,
        )
        boot = boot[finite]
        t_boot = t_boot[finite] if t_boot is not None else None
    acc = 0.0
    if method == "bca":
        u_items, u_seeds = jackknife_influence(matrices, lambda mu: func(mu, 1.0))
        acc = acceleration(u_items[np.isfinite(u_items)], u_seeds[np.isfinite(u_seeds)])
    fit = BootstrapFit(estimate=estimate, boot=boot, method=method, acceleration=acc,
                       log_scale=log_scale, t_boot=t_boot, se_hat=se_hat)
    return fit, scheme


def degenerate_interval(quantity: str, matrices: list[np.ndarray], estimate: float,
                        confidence_level: float) -> ConfidenceInterval:
    """Score-type fallback interval when the bootstrap distribution has no spread."""
    n = matrices[0].shape[1]
    z = float(special.ndtri(0.5 + confidence_level / 2.0))
    h0 = z * z / (n + z * z)
    if quantity == "accuracy":
        p = estimate
        denom = 1.0 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
        return ConfidenceInterval(max(0.0, centre - half), min(1.0, centre + half))
    if quantity == "difference":
        return ConfidenceInterval(max(-1.0, estimate - h0), min(1.0, estimate + h0))
    if quantity == "retention":
        half = h0 / matrices[0].mean()
        return ConfidenceInterval(max(0.0, estimate - half), estimate + half)
    half = h0 * math.sqrt(1.0 / matrices[0].mean() ** 2 + 1.0 / matrices[2].mean() ** 2)
    return ConfidenceInterval(estimate - half, estimate + half)


def _seed_random(quantity: str, matrices: list[np.ndarray], level: float
                 ) -> BootstrapResult:
    """The seed-random interval of ``quantity`` as a :class:`BootstrapResult` (module doc)."""
    from robuststats.stats._seed_random import (
        seed_random_retention,
        seed_random_retention_test,
        seed_random_test,
    )

    func = {"difference": seed_random_test, "retention": seed_random_retention,
            "retention_difference": seed_random_retention_test}[quantity]
    res = func(*matrices, confidence_level=level)
    return BootstrapResult(
        quantity=quantity, estimate=float(res.estimate),
        confidence_interval=res.confidence_interval, confidence_level=level,
        method=f"{res.method}; in place of the seeds × items bootstrap, which under-covers "
               f"with {matrices[0].shape[0]} seeds",
        standard_error=float(res.standard_error), n_resamples=0,
        scheme=SEED_RANDOM_SCHEME, n_seeds=int(matrices[0].shape[0]),
        n_items=int(matrices[0].shape[1]), bootstrap_distribution=np.empty(0))


def _run(quantity: str, arrays: dict[str, object], *, confidence_level: float,
         n_resamples: int, method: str, rng: object, methods: tuple[str, ...],
         seeds: str = "bootstrap") -> BootstrapResult:
    seeds = check_choice(seeds, "seeds", SEED_CHOICES)
    matrices, level, b, gen = _bootstrap_iv(arrays, confidence_level, n_resamples, method,
                                            rng, methods)
    n_seeds, n_items = matrices[0].shape
    if n_seeds > 1 and quantity != "accuracy" and seeds == "random":
        return _seed_random(quantity, matrices, level)
    if n_seeds > 1 and quantity != "accuracy":
        use = {"difference": "seed_random_test", "retention": "seed_random_retention",
               "retention_difference": "seed_random_retention_test"}[quantity]
        warnings.warn(
            f"the seeds × items bootstrap of {n_seeds} seeds undercovers when seeds shift the "
            f"conditions differently (about 90 % at a nominal 95 % with 5 seeds); the default "
            f"seeds='random' returns robuststats.stats.{use}'s interval over seeds and items.",
            SeedBootstrapWarning, stacklevel=3)
    bad = (undefined_retention(list(arrays)[0::2], matrices[0::2])
           if quantity in ("retention", "retention_difference") else None)
    if bad is not None:
        warnings.warn(f"clean accuracy of `{bad}` is 0: retention is undefined; returning "
                      "estimate NaN and interval (0, inf).", DegenerateDataWarning, stacklevel=3)
        low = 0.0 if quantity == "retention" else -math.inf
        return BootstrapResult(
            quantity=quantity, estimate=math.nan,
            confidence_interval=ConfidenceInterval(low, math.inf),
            confidence_level=level, method=method, standard_error=math.nan,
            n_resamples=b, scheme="items" if n_seeds == 1 else "seeds x items",
            n_seeds=n_seeds, n_items=n_items, bootstrap_distribution=np.empty(0),
        )
    fit, scheme = fit_bootstrap(quantity, matrices, method=method, n_resamples=b, rng=gen)
    estimate = float(np.exp(fit.estimate)) if fit.log_scale else fit.estimate
    if fit.boot.size < 2 or np.ptp(fit.boot) == 0.0:
        warnings.warn(
            f"the bootstrap distribution of the {quantity} has no spread (identical or "
            "all-correct outcomes); returning a score-type interval for "
            f"{matrices[0].shape[1]} items instead.",
            DegenerateDataWarning,
            stacklevel=3,
        )
        ci = degenerate_interval(quantity, matrices, estimate, level)
    else:
        ci = fit.interval(level)
    return BootstrapResult(
        quantity=quantity, estimate=estimate, confidence_interval=ci, confidence_level=level,
        method=method, standard_error=fit.standard_error, n_resamples=b, scheme=scheme,
        n_seeds=n_seeds, n_items=n_items, bootstrap_distribution=fit.boot,
    )


def bootstrap_accuracy(
    x: object, *, confidence_level: float = 0.95, n_resamples: int = 10_000,
    method: str = "bca", rng: np.random.Generator | int | None = None,
) -> BootstrapResult:
    """Bootstrap interval for the accuracy (mean outcome) of ``x``.

    ``x``: ``(n_items,)`` or ``(n_seeds, n_items)`` outcomes in [0, 1]; 2-D input uses the
    seeds × items two-way bootstrap. ``method``: ``"bca"`` or ``"percentile"``.
    """
    return _run("accuracy", {"x": x}, confidence_level=confidence_level,
                n_resamples=n_resamples, method=method, rng=rng, methods=_BASIC_METHODS)


def bootstrap_difference(
    x: object, y: object, *, confidence_level: float = 0.95, n_resamples: int = 10_000,
    method: str = "bca", rng: np.random.Generator | int | None = None,
    seeds: str = "random",
) -> BootstrapResult:
    """Bootstrap interval for ``acc_x − acc_y``, paired over items (and seeds when 2-D).

    With several seeds, ``seeds="random"`` (default) returns the seed-random t's interval
    (:func:`~robuststats.stats.seed_random_test`; module doc), ``"bootstrap"`` the
    seeds × items bootstrap, which under-covers with few seeds.
    """
    return _run("difference", {"x": x, "y": y}, confidence_level=confidence_level,
                n_resamples=n_resamples, method=method, rng=rng, methods=_BASIC_METHODS,
                seeds=seeds)


def bootstrap_retention(
    clean: object, noisy: object, *, confidence_level: float = 0.95,
    n_resamples: int = 10_000, method: str = "bca",
    rng: np.random.Generator | int | None = None, seeds: str = "random",
) -> BootstrapResult:
    """Bootstrap interval for retention ``acc_noisy / acc_clean`` on the same items.

    ``method``: ``"bca"``, ``"percentile"``, ``"log-ratio"`` (normal on the log scale with
    the bootstrap SE) or ``"studentized"`` (bootstrap-t on the log scale with the
    delta-method SE in each resample). With several seeds, ``seeds="random"`` (default)
    returns :func:`~robuststats.stats.seed_random_retention`'s interval (module doc),
    ``"bootstrap"`` the seeds × items bootstrap.
    """
    return _run("retention", {"clean": clean, "noisy": noisy},
                confidence_level=confidence_level, n_resamples=n_resamples, method=method,
                rng=rng, methods=_RETENTION_METHODS, seeds=seeds)


def bootstrap_retention_difference(
    clean_a: object, noisy_a: object, clean_b: object, noisy_b: object, *,
    confidence_level: float = 0.95, n_resamples: int = 10_000, method: str = "bca",
    rng: np.random.Generator | int | None = None, seeds: str = "random",
) -> BootstrapResult:
    """Bootstrap interval for ``retention(a) − retention(b)`` on the same items.

    With several seeds, ``seeds="random"`` (default) returns
    :func:`~robuststats.stats.seed_random_retention_test`'s interval (module doc),
    ``"bootstrap"`` the seeds × items bootstrap.
    """
    return _run("retention_difference",
                {"clean_a": clean_a, "noisy_a": noisy_a, "clean_b": clean_b,
                 "noisy_b": noisy_b},
                confidence_level=confidence_level, n_resamples=n_resamples, method=method,
                rng=rng, methods=_BASIC_METHODS, seeds=seeds)
