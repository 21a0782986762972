"""Time-uniform coverage of the betting confidence sequences (docs/statistics.md §11,
anytime-valid monitoring), and the gate's false passes at its margin.

Items have a difficulty ``b ~ N(0, 1.5²)`` on the logit scale, shared by both streams,
plus a stream's own item effect ``N(0, 0.5²)`` (the two models, or clean and noisy, do not
find the same items hard); item ``i``'s two outcomes share one uniform draw ``U_i``, so
the streams are correlated as real paired evaluations are. The true means are those of the item population (5·10⁶ items), not of
the streams drawn. A sequence *misses* when its set excludes the truth at some item count.

    python benchmarks/anytime_coverage.py --streams 1000 --items 500
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from robuststats.gate import anytime_verdicts
from robuststats.stats.sequential._betting import bounds, ratio_bounds

#: scenario -> (logit of model/condition x, of y, what is estimated)
SCENARIOS = {
    "difference, models 1.3 vs 1.0": (1.3, 1.0, "difference"),
    "difference, equal models": (1.0, 1.0, "difference"),
    "retention, noisy 0.6 vs clean 1.2": (0.6, 1.2, "ratio"),
    "retention, hard task: noisy −3.9 vs clean −3.0": (-3.9, -3.0, "ratio"),
}


def _probabilities(rng, shape, lx, ly):
    b = rng.normal(0.0, 1.5, shape)
    return (expit(lx + b + rng.normal(0.0, 0.5, shape)),
            expit(ly + b + rng.normal(0.0, 0.5, shape)))


def _draw(rng, shape, lx, ly):
    px, py = _probabilities(rng, shape, lx, ly)
    u = rng.random(shape)
    return (u < px).astype(float), (u < py).astype(float)


def _truth(lx, ly, rng):
    px, py = _probabilities(rng, 5_000_000, lx, ly)
    return px.mean(), py.mean()


def _run(kind, x, y, alpha):
    if kind == "difference":
        return bounds(x - y, alpha)
    return ratio_bounds(x, y, alpha)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--items", type=int, default=500)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--chunk", type=int, default=200)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"| scenario (logits) | means x, y | truth | streams × items | missed at some n | "
          f"MC SE | median width at n = {args.items} |")
    print("|:--|--:|--:|--:|--:|--:|--:|")
    for name, (lx, ly, kind) in SCENARIOS.items():
        mx, my = _truth(lx, ly, rng)
        truth = mx - my if kind == "difference" else mx / my
        start, missed, widths = time.time(), 0, []
        for first in range(0, args.streams, args.chunk):
            s = min(args.chunk, args.streams - first)
            x, y = _draw(rng, (s, args.items), lx, ly)
            low, high = _run(kind, x, y, args.alpha)
            missed += int(np.any((low > truth) | (high < truth), axis=1).sum())
            widths += list(high[:, -1] - low[:, -1])
        rate = missed / args.streams
        se = np.sqrt(args.alpha * (1 - args.alpha) / args.streams)
        print(f"| {name} | {mx:.3f}, {my:.3f} | {truth:.4f} | {args.streams} × {args.items} | {rate:.4f} | "
              f"{se:.4f} | {np.median(widths):.3f} |  <!-- {time.time() - start:.0f} s -->",
              flush=True)
    # the gate at its margin: true difference exactly −d (an absolute non-inferiority margin
    # d = 0.05): any PASS is false; with nested sets a PASS at some n is a PASS at the end
    d = 0.05
    false_pass = 0
    for first in range(0, args.streams, args.chunk):
        s = min(args.chunk, args.streams - first)
        y = (rng.random((s, args.items)) < 0.60).astype(float)
        x = (rng.random((s, args.items)) < 0.55).astype(float)
        low, high = bounds(x - y, args.alpha)
        false_pass += int((anytime_verdicts(low[:, -1], high[:, -1], -d, None)
                           == "PASS").sum())
    print(f"\ngate at the margin (δ = −{d}, absolute non-inferiority, {args.streams} × "
          f"{args.items}): false PASS {false_pass / args.streams:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
