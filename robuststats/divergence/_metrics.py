"""Divergence of one module's activation between two runs, per item, and running statistics.

``a`` is the reference run's activation, ``b`` the candidate's, both ``(n_items, n_positions,
...)`` with a ``(n_items, n_positions)`` mask of real (not padding) positions. Per item,
over its real positions and every feature (``d = b − a``, sums over those elements, ``n``
elements):

- ``mape`` = mean |d| / (|a| + ε), ε = ``eps`` · RMS(a) of that item (the guard: an element
  of ``a`` near 0 is measured against ε rather than against itself; ``eps = 0.01`` by
  default);
- ``mdape`` = the median of the same ratios (robust: a few near-zero elements of ``a`` move
  the mean, not the median); the lower median when ``n`` is even;
- ``wape`` = Σ|d| / Σ|a| (weighted APE: robust, needs no guard);
- ``rel_rms`` = ‖d‖ / ‖a‖ (Frobenius norms; the engine's ``rms_noise_ratio``);
- ``cosine`` = the mean over real positions of cos(a_t, b_t), the feature vectors at one
  position (1 when both are zero, 0 when one of them is);
- ``err_norm`` = ‖d‖ and ``ref_norm`` = ‖a‖, which the accumulation analysis adds up.

Computed in float64. Identical activations give 0 (``cosine`` 1) exactly. A reference item
that is entirely 0 has ε = 0: its ratios are 0 where ``d`` = 0 and ``inf`` elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_EPS", "METRICS", "RunningStats", "item_metrics"]

#: divergence metrics reported per item and module, in table order
METRICS = ("mape", "mdape", "wape", "rel_rms", "cosine")
#: the MAPE guard: ε = eps · RMS(reference) of the item
DEFAULT_EPS = 0.01


def _ratio(num: Any, den: Any) -> Any:
    """num / den with 0/0 = 0 and x/0 = inf (x > 0)."""
    import torch

    out = num / torch.where(den > 0, den, torch.ones_like(den))
    return torch.where(den > 0, out, torch.where(num > 0, torch.full_like(num, math.inf),
                                                  torch.zeros_like(num)))


def item_metrics(a: Any, b: Any, mask: Any | None = None, *, eps: float = DEFAULT_EPS,
                 only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Per-item divergence of ``b`` from ``a`` (module docstring); float64 tensors
    ``(n_items,)`` keyed by :data:`METRICS`, ``err_norm``, ``ref_norm`` and ``n``.

    ``a`` and ``b`` have the same shape ``(n_items, n_positions, *features)`` (``b`` is moved
    to ``a``'s device); ``mask`` is ``(n_items, n_positions)`` (None: every position).
    ``only``: ``("rel_rms",)`` or ``("rel_rms", "wape")`` computes just those (with
    ``err_norm`` and ``ref_norm``), by the same operations, so the values are identical:
    the noise fit's simulations need no more, and the median of MAPE is a sort per item.
    """
    import torch

    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"activations differ in shape: {tuple(a.shape)} and {tuple(b.shape)}")
    if a.ndim < 2:
        raise ValueError(f"activations must be (n_items, n_positions, ...), got {tuple(a.shape)}")
    n_items, n_pos = a.shape[0], a.shape[1]
    a64 = a.detach().to(torch.float64).reshape(n_items, n_pos, -1)
    b64 = b.detach().to(device=a.device, dtype=torch.float64).reshape(n_items, n_pos, -1)
    if mask is None:
        keep = torch.ones(n_items, n_pos, dtype=torch.bool, device=a.device)
    else:
        keep = mask.to(device=a.device, dtype=torch.bool)
    w = keep.to(torch.float64)[..., None]
    n_feat = a64.shape[-1]
    d = b64 - a64
    n = keep.sum(1).to(torch.float64) * n_feat
    ss_a = (a64 * a64 * w).sum((1, 2))
    ss_d = (d * d * w).sum((1, 2))
    rel_rms = torch.sqrt(_ratio(ss_d, ss_a))
    if only is not None:
        if not set(only) <= {"rel_rms", "wape"}:
            raise ValueError(f"`only` must name rel_rms and/or wape, got {only!r}")
        out = {"rel_rms": rel_rms, "err_norm": torch.sqrt(ss_d), "ref_norm": torch.sqrt(ss_a),
               "n": n}
        if "wape" in only:
            out["wape"] = _ratio((d.abs() * w).sum((1, 2)), (a64.abs() * w).sum((1, 2)))
        return out
    ss_b = (b64 * b64 * w).sum((1, 2))
    abs_d, abs_a = d.abs(), a64.abs()
    guard = eps * torch.sqrt(ss_a / n.clamp(min=1))
    den = abs_a + guard[:, None, None]
    ape = _ratio(abs_d, den)
    mape = (ape * w).sum((1, 2)) / n.clamp(min=1)
    mdape = torch.stack([ape[i][keep[i]].flatten().median() if bool(keep[i].any())
                         else torch.zeros((), dtype=torch.float64, device=a.device)
                         for i in range(n_items)]) if n_items else mape
    wape = _ratio((abs_d * w).sum((1, 2)), (abs_a * w).sum((1, 2)))
    dot = (a64 * b64).sum(-1)
    na, nb = (a64 * a64).sum(-1), (b64 * b64).sum(-1)
    both = na * nb
    cos_t = torch.where(both > 0, dot / torch.sqrt(torch.where(both > 0, both,
                                                                 torch.ones_like(both))),
                        torch.where((na == 0) & (nb == 0), torch.ones_like(na),
                                    torch.zeros_like(na)))
    # one rounding of the dot product can put |cos| a hair above 1
    cos_t = cos_t.clamp(-1.0, 1.0)
    positions = keep.sum(1).to(torch.float64)
    cosine = (cos_t * keep).sum(1) / positions.clamp(min=1)
    return {"mape": mape, "mdape": mdape, "wape": wape, "rel_rms": rel_rms, "cosine": cosine,
            "err_norm": torch.sqrt(ss_d), "ref_norm": torch.sqrt(ss_a),
            "cand_norm": torch.sqrt(ss_b), "n": n}


@dataclass
class RunningStats:
    """Welford's running mean and variance (Welford 1962; merge: Chan, Golub & LeVeque 1983).

    ``update(x)`` adds one value; ``merge`` combines two accumulators as if their values had
    been added to one. ``variance`` is the sample variance (n − 1). Infinite values are
    counted apart (``n_infinite``) and leave mean and variance to the finite ones.
    """

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    n_infinite: int = 0

    def update(self, x: float) -> None:
        x = float(x)
        if not math.isfinite(x):
            self.n_infinite += 1
            return
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    def update_many(self, values: Iterable[float]) -> None:
        for x in values:
            self.update(x)

    def merge(self, other: RunningStats) -> RunningStats:
        n = self.n + other.n
        if n == 0:
            return RunningStats(n_infinite=self.n_infinite + other.n_infinite)
        delta = other.mean - self.mean
        mean = self.mean + delta * other.n / n
        m2 = self.m2 + other.m2 + delta * delta * self.n * other.n / n
        return RunningStats(n, mean, m2, self.n_infinite + other.n_infinite)

    @property
    def variance(self) -> float:
        return self.m2 / (self.n - 1) if self.n > 1 else math.nan

    @property
    def std(self) -> float:
        return math.sqrt(self.variance) if self.n > 1 else math.nan

    def t_interval(self, confidence_level: float = 0.95) -> tuple[float, float]:
        """Student's t interval for the mean over items; NaN bounds below 2 values."""
        if self.n < 2:
            return math.nan, math.nan
        from scipy.stats import t

        half = float(t.ppf(0.5 + confidence_level / 2, self.n - 1)) * \
            math.sqrt(max(self.m2, 0.0) / (self.n - 1) / self.n)
        return self.mean - half, self.mean + half
