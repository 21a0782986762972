"""The paired table of each evaluation behind a pooled test: one row per stratum.

The pairwise McNemar test of :mod:`._tests` pools every ``(seed, noise_seed)`` evaluation of
a pair of conditions at one noise level (an Inspect log's epochs, a study's noise seeds and
training seeds) into one stratified test. This table shows what it pooled: for each stratum
the paired counts (``n_a_only`` = b₀₁: a right, b wrong; ``n_b_only`` = b₁₀), the two
accuracies, their difference and the exact McNemar test of that stratum alone (the binomial
test of b₀₁ against b₀₁ + b₁₀ at 1/2; McNemar 1947, exact form as in R's
``binom.test(b01, b01 + b10)``).

The per-stratum p-values are descriptive: they are not adjusted for multiplicity and decide
nothing; the pooled row of ``tests`` decides. A pair with a single stratum has no row here
(its ``tests`` row is that stratum's test), nor has a pair whose seeds are independent runs
(no stratum pairs a model of a with one of b).
"""

from __future__ import annotations

import itertools

import pandas as pd

from robuststats.analysis._common import quiet_degenerate
from robuststats.analysis._options import AnalysisOptions
from robuststats.outcomes import align, seed_pairing

__all__ = ["strata_table"]

#: the test of one stratum
STRATUM_TEST = "McNemar exact (one stratum, unadjusted, descriptive)"


def strata_table(out: pd.DataFrame, opts: AnalysisOptions,
                 drops: list[pd.DataFrame]) -> pd.DataFrame:
    """One row per pair of conditions, noise level and ``(seed, noise_seed)`` stratum of
    the pairs ``tests`` compares (every pair, or each vs ``opts.reference``), for the pairs
    with two or more strata. Rows in the order of ``tests``, then seed and noise seed."""
    from robuststats import stats

    conditions = list(dict.fromkeys(out["condition"]))
    pairs = (list(itertools.combinations(conditions, 2)) if opts.reference is None else
             [(c, opts.reference) for c in conditions if c != opts.reference])
    rows = []
    for level in sorted(float(v) for v in out["eval_noise"].unique()):
        present = set(out.loc[out["eval_noise"] == level, "condition"])
        for a, b in pairs:
            if a not in present or b not in present:
                continue
            paired_out, _, independent = seed_pairing(out, a, b, [level])
            if independent:
                continue
            strata = align(paired_out, [a, b], level, by="stratum", holes="drop")
            drops.append(strata.dropped)
            if len(strata.rows) < 2:
                continue
            xa, xb = strata.values[a].astype(int), strata.values[b].astype(int)
            for (seed, noise_seed), ya, yb in zip(strata.rows, xa, xb):
                with quiet_degenerate():
                    res = stats.mcnemar(ya, yb, method="exact")
                rows.append({"eval_noise": level, "a": a, "b": b, "seed": int(seed),
                             "noise_seed": int(noise_seed), "n_items": int(ya.size),
                             "n_a_only": int(((ya == 1) & (yb == 0)).sum()),
                             "n_b_only": int(((ya == 0) & (yb == 1)).sum()),
                             "accuracy_a": float(ya.mean()), "accuracy_b": float(yb.mean()),
                             "estimate": float(ya.mean() - yb.mean()), "test": STRATUM_TEST,
                             "statistic": float(res.statistic), "pvalue": float(res.pvalue)})
    return pd.DataFrame(rows)
