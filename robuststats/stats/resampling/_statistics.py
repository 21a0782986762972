"""The bootstrap's statistics as functions of resampled totals, with exact ties.

The last axis holds one total per input (:mod:`._resample` draws them); ``denom`` turns
totals into means (k n, times the lattice scale L). Each statistic is one correctly
rounded quotient of exact integer totals (0/1 or i/L outcomes), so statistics that are
equal as fractions are equal as floats: ties with the observed value, and with lattice
values such as 0, are counted exactly (see :func:`snap_ties` for the rest). Ties matter
for BCa, whose bias correction ``z0`` counts the resamples below the estimate and half of
those equal to it (:mod:`._bootstrap_ci`; docs/statistics.md, "Exact ties").
"""

from __future__ import annotations

import numpy as np

__all__ = ["QUANTITIES", "log_retention", "ratio_sign", "snap_ties"]


def _accuracy(t: np.ndarray, denom: float) -> np.ndarray:
    return t[..., 0] / denom


def _difference(t: np.ndarray, denom: float) -> np.ndarray:
    return (t[..., 0] - t[..., 1]) / denom


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / den


def _retention(t: np.ndarray, denom: float) -> np.ndarray:  # inputs (clean, noisy)
    return _ratio(t[..., 1], t[..., 0])


def log_retention(t: np.ndarray, denom: float) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(_retention(t, denom))


def _retention_difference(t: np.ndarray, denom: float) -> np.ndarray:
    # (clean_a, noisy_a, clean_b, noisy_b): z_a/c_a − z_b/c_b = (z_a c_b − z_b c_a)/(c_a c_b)
    return _ratio(t[..., 1] * t[..., 2] - t[..., 3] * t[..., 0], t[..., 0] * t[..., 2])


QUANTITIES = {
    "accuracy": _accuracy,
    "difference": _difference,
    "retention": _retention,
    "retention_difference": _retention_difference,
}


def ratio_sign(stat: str, t: np.ndarray, t_hat: np.ndarray) -> np.ndarray:
    """Exact sign of θ(t) − θ(t̂) for the ratio statistics, in Python integers.

    ``t``: ``(c, m)`` integer totals of resamples whose θ equals θ̂ as a float; distinct
    fractions with large denominators can round to the same float.
    """
    t = np.rint(t).astype(np.int64).astype(object)
    h = [int(v) for v in np.rint(t_hat)]
    if stat in ("retention", "log_retention"):  # z/c vs ẑ/ĉ, c, ĉ > 0
        diff = t[:, 1] * h[0] - h[1] * t[:, 0]
    else:  # N/D vs N̂/D̂ with N = z_a c_b − z_b c_a, D = c_a c_b > 0
        num = t[:, 1] * t[:, 2] - t[:, 3] * t[:, 0]
        den = t[:, 0] * t[:, 2]
        diff = num * (h[0] * h[2]) - (h[1] * h[2] - h[3] * h[0]) * den
    return np.array([(d > 0) - (d < 0) for d in diff], dtype=float)


def snap_ties(raw: np.ndarray, estimate: float, ratio: float,
               exact_sign=None) -> np.ndarray:
    """Resampled statistics, rescaled by ``ratio`` about the estimate, with exact ties.

    A resample equal to θ̂ as a fraction stays exactly θ̂; one that differs stays on its
    side of θ̂ (rounding may not merge it into θ̂, after the rescaling either).
    ``exact_sign(indices)`` resolves float-equal resamples of a ratio statistic.
    """
    tie = raw == estimate
    sign = np.sign(raw - estimate)
    if exact_sign is not None and tie.any():
        where = np.flatnonzero(tie)
        sign[where] = exact_sign(where)
        tie[where] = sign[where] == 0.0
    boot = raw if ratio == 1.0 else estimate + (raw - estimate) * ratio
    boot = np.where(tie, estimate, boot)
    merged = (boot == estimate) & ~tie & (sign != 0.0)
    if merged.any():
        boot[merged] = np.nextafter(estimate, sign[merged] * np.inf)
    return boot
