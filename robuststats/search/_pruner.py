"""A paired pruner for a search: McNemar's exact test on the items a report already scored.

At each intermediate report of a training run the objective has the 0/1 outcomes of the
search items (the noisy accuracy it reports is their mean); with ``pruner: mcnemar`` it keeps
them in the trial (user attribute ``robuststats:items:<step>``). The pruner compares them,
item by item, with those of the best finished trial at the same step: with b the items only
the best trial answers and c those only this trial answers, the one-sided exact McNemar test
of "this trial is less accurate" has ``p = P(X ≥ b)``, X ~ Binomial(b + c, 1/2)
(:func:`robuststats.stats.mcnemar`), and the trial is pruned when ``p < p_threshold``, once
``n_startup_trials`` trials have finished. Paired over the same items, it prunes on
evidence, where the median pruner compares a mean with other trials' means.
Optuna's own ``WilcoxonPruner`` (Optuna ≥ 3.6) rests on the same pairing with a signed-rank
test on per-instance values reported as steps; the McNemar test is the exact one for 0/1
outcomes.
"""

from __future__ import annotations

import warnings

import numpy as np
import optuna

from robuststats.search._storage import ATTR

__all__ = ["ITEMS_ATTR", "McNemarPruner"]

#: the user attribute holding a report's item outcomes: f"{ITEMS_ATTR}:{step}"
ITEMS_ATTR = f"{ATTR}:items"


class McNemarPruner(optuna.pruners.BasePruner):
    """Prune a trial whose reported item outcomes are worse than the best finished trial's
    at the same step (module docstring)."""

    def __init__(self, *, p_threshold: float = 0.05, n_startup_trials: int = 3) -> None:
        self.p_threshold = float(p_threshold)
        self.n_startup_trials = int(n_startup_trials)

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        from robuststats.stats import DegenerateDataWarning, mcnemar

        step = trial.last_step
        key = f"{ITEMS_ATTR}:{step}"
        mine = trial.user_attrs.get(key)
        if step is None or mine is None:
            return False
        done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if len(done) < self.n_startup_trials:
            return False
        scored = [t for t in done if key in t.user_attrs and t.value is not None]
        if not scored:
            return False
        pick = max if study.direction == optuna.study.StudyDirection.MAXIMIZE else min
        best = pick(scored, key=lambda t: t.value)
        ours, theirs = np.asarray(mine, dtype=int), np.asarray(best.user_attrs[key], dtype=int)
        if ours.shape != theirs.shape:
            return False
        with warnings.catch_warnings():  # no discordant item: p = 1, nothing to prune on
            warnings.simplefilter("ignore", DegenerateDataWarning)
            p = mcnemar(ours, theirs, method="exact", alternative="less").pvalue
        return bool(p < self.p_threshold)

