"""Time-uniform coverage of the anytime-valid confidence sequences, measured by simulation.

One fixed pair of trained models is evaluated on a stream of items. An item has a
difficulty ``b ~ N(0, σ_item²)`` on the logit scale, shared by both models, and each model
an item × model effect ``u ~ N(0, σ_int²)`` of its own; model ``A`` answers correctly with
probability ``expit(θ_A − b + u_A)``. The models' abilities are fixed (they are *these*
models, the statement the sequence makes), so the target is
``δ = E expit(θ_A + e) − E expit(θ_B + e)``, ``e ~ N(0, σ_item² + σ_int²)``, computed by
Gauss–Hermite quadrature (80 nodes). A stream *misses* when its sequence excludes ``δ`` at
any item count up to its length; the time-uniform guarantee is a miss rate of at most α.
(The sequence is a running intersection, so a miss at some count is a miss at the end.) Beside
it, the same streams read the usual way: the fixed-n normal interval
``d̄_n ± z_{1−α/2} s_n/√n`` recomputed after every item from the 30th on (missed at any count,
and at the last count only).

Item orders:

* ``iid``: items drawn independently from the item distribution (target: the
  distribution's mean difference);
* ``pool``: a fixed pool of items (1,319, the size of the GSM8K test split) evaluated in a
  random order, all of it; the target is then the pool's own mean difference of the
  correct-answer probabilities (the benchmark's accuracy difference in expectation);
* ``sorted``: the same pool in order of difficulty, the way some datasets are stored; the
  guarantee assumes a random order, and this row shows what happens without one.

    python benchmarks/cs_coverage.py --reps 2000 --out benchmarks/cs_coverage.md
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import expit

from robuststats.stats.sequential._betting import bounds

ROOT = 20261127
SIGMA_ITEM, SIGMA_INT = 1.5, 0.5
POOL = 1319
NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(80)


@dataclass(frozen=True)
class Scenario:
    name: str
    theta_a: float
    theta_b: float
    order: str = "iid"
    n: int = 1000
    alpha: float = 0.05


SCENARIOS = (
    Scenario("no difference, accuracy ~50 %", 0.0, 0.0),
    Scenario("difference ~5 pp, accuracy ~50 %", 0.25, 0.0),
    Scenario("ceiling, accuracy ~93-95 %", 3.6, 3.2),
    Scenario("floor, accuracy ~3-5 %", -3.6, -4.1),
    Scenario("difference ~5 pp, alpha 0.10", 0.25, 0.0, alpha=0.10),
    Scenario("difference ~5 pp, alpha 0.01", 0.25, 0.0, alpha=0.01),
    Scenario("pool of 1,319 items, random order", 0.25, 0.0, order="pool", n=POOL),
    Scenario("pool of 1,319 items, sorted by difficulty", 0.25, 0.0, order="sorted", n=POOL),
)


def mean_accuracy(theta: float) -> float:
    """E expit(θ + e), e ~ N(0, σ_item² + σ_int²), by Gauss–Hermite quadrature."""
    scale = np.hypot(SIGMA_ITEM, SIGMA_INT)
    return float(np.sum(WEIGHTS * expit(theta + scale * NODES)) / np.sqrt(2 * np.pi))


def streams(s: Scenario, reps: int, rng: np.random.Generator):
    """Differences ``(reps, n)`` in stream order and each stream's target."""
    if s.order == "iid":
        b = rng.normal(0, SIGMA_ITEM, (reps, s.n))
        pa = expit(s.theta_a - b + rng.normal(0, SIGMA_INT, (reps, s.n)))
        pb = expit(s.theta_b - b + rng.normal(0, SIGMA_INT, (reps, s.n)))
        target = np.full(reps, mean_accuracy(s.theta_a) - mean_accuracy(s.theta_b))
    else:
        # one pool per replication (a benchmark is one draw of items), evaluated in full
        b = rng.normal(0, SIGMA_ITEM, (reps, s.n))
        pa = expit(s.theta_a - b + rng.normal(0, SIGMA_INT, (reps, s.n)))
        pb = expit(s.theta_b - b + rng.normal(0, SIGMA_INT, (reps, s.n)))
        order = np.argsort(b, axis=1) if s.order == "sorted" else \
            np.argsort(rng.random((reps, s.n)), axis=1)
        pa, pb = np.take_along_axis(pa, order, 1), np.take_along_axis(pb, order, 1)
        target = (pa - pb).mean(axis=1)
    d = (rng.random(pa.shape) < pa).astype(float) - (rng.random(pb.shape) < pb)
    return d, target


def run(s: Scenario, reps: int, seed: int) -> dict:
    rng = np.random.default_rng([ROOT, seed])
    d, target = streams(s, reps, rng)
    low, high = bounds(d, s.alpha)
    outside = (low > target[:, None]) | (high < target[:, None])
    missed = outside.any(axis=1).mean()
    # the same stream read the usual way: a fixed-n normal interval recomputed after every
    # item from the 30th on, stopping the first time it misses
    n = np.arange(1, s.n + 1)
    mean = np.cumsum(d, axis=1) / n
    var = (np.cumsum(d**2, axis=1) - n * mean**2) / np.maximum(n - 1, 1)
    half = stats.norm.ppf(1 - s.alpha / 2) * np.sqrt(np.maximum(var, 0) / n)
    naive = (np.abs(mean - target[:, None]) > half)[:, 29:]
    excl0 = (low > 0) | (high < 0)
    decided = excl0.any(axis=1)
    first = np.where(decided, excl0.argmax(axis=1) + 1, np.nan)
    return {
        "scenario": s.name,
        "items": s.n,
        "alpha": s.alpha,
        "accuracy A": mean_accuracy(s.theta_a),
        "target difference": float(target.mean()),
        "reps": reps,
        "missed at some n": float(missed),
        "MC SE": float(np.sqrt(missed * (1 - missed) / reps)),
        "fixed-n interval after every item: missed": float(naive.any(axis=1).mean()),
        "fixed-n interval at the end: missed": float(naive[:, -1].mean()),
        "final width": float(np.nanmedian(high[:, -1] - low[:, -1])),
        "excludes 0 by the end": float(decided.mean()),
        "median items to exclude 0": float(np.nanmedian(first)) if decided.any() else np.nan,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = [run(s, args.reps, i) for i, s in enumerate(SCENARIOS)]
    table = pd.DataFrame(rows)
    text = table.to_markdown(index=False, floatfmt=".4g")
    took = time.perf_counter() - start
    text += f"\n\n{args.reps} streams per scenario; {took:.0f} s in one process\n"
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
