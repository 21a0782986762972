"""A compact sketch of one activation per item, and the divergence estimated from two sketches.

One run writes, per item and site (the item's real positions only, ``x`` flattened to ``n``
elements, ``T`` rows of ``F`` features):

- ``sq_norm`` = ‖x‖² and ``n``, exactly (float64);
- ``subset``: the values of ``K`` element positions drawn uniformly without replacement
  (Floyd's algorithm; Bentley & Floyd 1987) — all ``n`` when ``n ≤ K``;
- ``sketch`` = S x and ``unit_sketch`` = S u, a sign projection of dimension ``k`` in its
  sparsest form (CountSketch; Charikar, Chen & Farach-Colton 2002): element ``j`` is added
  with sign ``s_j = ±1`` (the lowest bit of the j-th draw) to bucket ``h_j`` (its upper 32
  bits times k, shifted right by 32). ``u`` is ``x`` with every row (position)
  scaled to unit norm (a zero row stays 0);
- ``zero_rows``: the number of rows of ``x`` that are exactly 0.

Positions, buckets and signs come from PCG64 streams (whose raw output NumPy keeps stable
across versions) seeded by SHA-256 of the sketch seed, the site, the item id and the item's
shape, so two runs of the same item store the same positions and use the same projection,
on any machine, while different items get independent draws (their sketch errors are
independent, so they average out over items and enter the interval over items).

From two runs ``a`` (reference) and ``b`` (candidate), ``d = b − a``:

- ‖d‖² ≈ ‖S b − S a‖² (the AMS estimator; Alon, Matias & Szegedy 1996), unbiased, with
  variance (2/k)(‖d‖⁴ − Σ d_j⁴) ≤ 2‖d‖⁴/k: relative SD at most √(2/k), the Gaussian
  projection's. ``rel_rms`` = √(that) / ‖a‖ has relative SD ≈ 1/√(2k) and a bias of about
  −1/(4k) (the square root of an unbiased estimate);
- the mean cosine over positions: ‖u_t − v_t‖² = 2 − 2 cos_t, so
  mean_t cos_t = 1 − ‖u − v‖²/(2T), estimated from ‖S v − S u‖² (same error);
- ``mape``, ``mdape``, ``wape`` from the subset: the sample mean, the sample (lower) median
  and the ratio Σ|d_j| / Σ|a_j| over the ``K`` positions. The guard ε = eps · RMS(a) is
  exact (from ``sq_norm`` and ``n``). The standard errors are the sample mean's
  SD/√K and the ratio estimator's (Cochran 1977, §6.3), each with the finite-population
  correction √((n − K)/(n − 1)); exact (SE 0) when ``K = n``.

Identical runs store identical sketches: every estimate is then exactly 0 (cosine 1).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SKETCH_METHOD", "SketchParams", "estimate", "item_sketch", "subset_positions"]

#: the algorithm's name and version, recorded in every capture and checked on comparison
SKETCH_METHOD = "countsketch+subset/v1"
_MAX_ELEMENTS = 1 << 40


@dataclass(frozen=True)
class SketchParams:
    """``subset_size`` K element positions, ``projection_dim`` k buckets, ``seed``."""

    subset_size: int = 1024
    projection_dim: int = 256
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"method": SKETCH_METHOD, "subset_size": self.subset_size,
                "projection_dim": self.projection_dim, "seed": self.seed}


def _stream(params: SketchParams, site: str, item_id: str, shape: tuple[int, int],
            purpose: str) -> np.random.PCG64:
    key = f"{SKETCH_METHOD}|{params.seed}|{site}|{item_id}|{shape[0]}x{shape[1]}|{purpose}"
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return np.random.PCG64(np.random.SeedSequence(int.from_bytes(digest[:16], "little")))


def subset_positions(params: SketchParams, site: str, item_id: str, shape: tuple[int, int]
                     ) -> np.ndarray:
    """Sorted flat positions (``int64``) of the item's subset: ``min(K, n)`` of ``n`` =
    rows × features, uniformly without replacement (Floyd's algorithm)."""
    n = shape[0] * shape[1]
    k = params.subset_size
    if n <= k:
        return np.arange(n, dtype=np.int64)
    raw = _stream(params, site, item_id, shape, "subset").random_raw(k)
    chosen: set[int] = set()
    # Floyd: for j = n-K .. n-1 draw t in [0, j]; take t, or j when t is taken already.
    # raw % (j + 1) has a bias below j / 2**64: none that a test could see.
    for step, j in enumerate(range(n - k, n)):
        t = int(raw[step]) % (j + 1)
        chosen.add(j if t in chosen else t)
    return np.fromiter(sorted(chosen), dtype=np.int64, count=k)


def _hash(params: SketchParams, site: str, item_id: str, shape: tuple[int, int]
          ) -> tuple[np.ndarray, np.ndarray]:
    n = shape[0] * shape[1]
    raw = _stream(params, site, item_id, shape, "projection").random_raw(n)
    # bucket from the upper 32 bits by multiply-shift (Lemire 2019; bias below k / 2**32),
    # sign from the lowest bit: 4x faster than a 64-bit modulo and a comparison
    bucket = (((raw >> np.uint64(32)) * np.uint64(params.projection_dim))
              >> np.uint64(32)).astype(np.intp)
    sign = 1.0 - 2.0 * (raw & np.uint64(1)).astype(np.float64)
    return bucket, sign


def item_sketch(x: np.ndarray, params: SketchParams, site: str, item_id: str
                ) -> dict[str, Any]:
    """The sketch of one item's activation ``x`` (``(T, F)``, real positions only; any float
    dtype). Returns ``sq_norm``, ``zero_rows``, ``subset`` (``min(K, n)`` values in
    ``x``'s precision, float32 unless ``x`` is float64), ``sketch`` and ``unit_sketch``
    (``(k,)`` float64)."""
    if x.ndim != 2:
        raise ValueError(f"an item's activation must be (rows, features), got {x.shape}")
    shape = (int(x.shape[0]), int(x.shape[1]))
    if shape[0] * shape[1] >= _MAX_ELEMENTS:
        raise ValueError(f"an item's activation has too many elements to sketch: {shape}")
    x64 = np.ascontiguousarray(x, dtype=np.float64)
    flat = x64.reshape(-1)
    row_sq = np.einsum("tf,tf->t", x64, x64)
    row_norm = np.sqrt(row_sq)
    unit = x64 / np.where(row_norm > 0, row_norm, 1.0)[:, None]
    bucket, sign = _hash(params, site, item_id, shape)
    k = params.projection_dim
    sub_dtype = np.float64 if x.dtype == np.float64 else np.float32
    return {"sq_norm": float(row_sq.sum()), "zero_rows": int((row_sq == 0).sum()),
            "subset": flat[subset_positions(params, site, item_id, shape)].astype(sub_dtype),
            "sketch": np.bincount(bucket, weights=sign * flat, minlength=k),
            "unit_sketch": np.bincount(bucket, weights=sign * unit.reshape(-1), minlength=k)}


def _fpc(n: int, k: int) -> float:
    return math.sqrt((n - k) / (n - 1)) if n > 1 else 0.0


def estimate(a: dict[str, Any], b: dict[str, Any], *, n_rows: int, n_features: int,
             projection_dim: int, eps: float) -> dict[str, float]:
    """Per-item metrics of ``b`` against ``a`` from their sketches (module docstring), with
    the standard errors of the sketch: ``{metric}`` and ``{metric}_se`` for ``mape``,
    ``wape``, ``rel_rms`` and ``cosine``; ``mdape``; ``err_norm``, ``ref_norm``."""
    n = n_rows * n_features
    sq_a = float(a["sq_norm"])
    ref_norm = math.sqrt(sq_a)
    kdim = projection_dim
    err_sq = float(np.sum((b["sketch"] - a["sketch"]) ** 2))
    err_norm = math.sqrt(err_sq)
    rel_rms = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else math.inf)
    unit_sq = float(np.sum((b["unit_sketch"] - a["unit_sketch"]) ** 2))
    cosine = min(1.0, max(-1.0, 1.0 - unit_sq / (2 * n_rows))) if n_rows else 1.0
    sa = np.asarray(a["subset"], dtype=np.float64)
    sb = np.asarray(b["subset"], dtype=np.float64)
    kk = sa.size
    guard = eps * math.sqrt(sq_a / n) if n else 0.0
    abs_d, abs_a = np.abs(sb - sa), np.abs(sa)
    den = abs_a + guard
    with np.errstate(divide="ignore", invalid="ignore"):
        ape = np.where(den > 0, abs_d / np.where(den > 0, den, 1.0),
                       np.where(abs_d > 0, math.inf, 0.0))
    fpc = _fpc(n, kk)
    mape = float(ape.mean()) if kk else 0.0
    finite = np.isfinite(ape).all()
    mape_se = float(ape.std(ddof=1) / math.sqrt(kk) * fpc) if kk > 1 and finite else \
        (0.0 if finite else math.nan)
    mdape = float(np.sort(ape)[(kk - 1) // 2]) if kk else 0.0
    sum_a, sum_d = float(abs_a.sum()), float(abs_d.sum())
    if sum_a > 0:
        wape = sum_d / sum_a
        resid = abs_d - wape * abs_a
        wape_se = float(math.sqrt(resid.var(ddof=1) / kk) / abs_a.mean() * fpc) \
            if kk > 1 else 0.0
    else:
        wape, wape_se = (0.0 if sum_d == 0 else math.inf), math.nan
    root = math.sqrt(2.0 / kdim)
    return {"mape": mape, "mdape": mdape, "wape": wape, "rel_rms": rel_rms, "cosine": cosine,
            "err_norm": err_norm, "ref_norm": ref_norm, "cand_norm": math.sqrt(b["sq_norm"]),
            "mape_se": mape_se, "wape_se": wape_se,
            "rel_rms_se": rel_rms * root / 2 if math.isfinite(rel_rms) else math.nan,
            "cosine_se": (1.0 - cosine) * root}
