"""No winner's curse: the chosen configuration evaluated again, away from the draws that
chose it, beside the uniform baseline (and the heuristic one), with intervals and a paired
test.

The search's own value of its best trial is optimistic: it is the maximum over many noisy
evaluations on the same noise draws and items. Re-evaluation uses fresh noise seeds
(``search.reevaluation.noise_seeds``), held-out items where the task has them
(``holdout_items``) and, for the training objective, fresh training seeds. Every
configuration is evaluated on the same items and seeds, so comparisons are paired.

Rows of the outcome matrices are the random replications: training seeds when there are
several (each row the mean over noise seeds), else noise seeds (0/1 rows of the one model).
Statistics are :mod:`robuststats.stats`' seed-random functions: the crossed t with
Satterthwaite degrees of freedom over rows and items, or Tango's score interval with one
row of 0/1 outcomes. ``gap`` = search value − re-evaluated estimate.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from robuststats.search._objective import SearchContext, evaluate_config
from robuststats.search._space import budget

if TYPE_CHECKING:
    import optuna

__all__ = ["REEVALUATION_COLUMNS", "choose", "reevaluate"]

#: declared column order of ``reevaluation.csv``
REEVALUATION_COLUMNS = ["config", "trial", "metric", "search_value", "estimate", "ci_low",
                        "ci_high", "ci_level", "ci_method", "pvalue", "gap", "verdict",
                        "n_rows", "row_unit", "n_items", "items", "question"]


def choose(study: optuna.Study, spec: Any) -> optuna.trial.FrozenTrial | None:
    """The configuration the search recommends (``None`` when no trial qualifies).

    Single objective: Optuna's best trial (for tolerance, the feasible one with the largest
    budget). Multi-objective: on the Pareto front, tolerance takes the largest budget whose
    drop is within the bound; training the best metric among front trials with at least
    the uniform budget (any front trial when none has).
    """
    import optuna

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not complete:
        return None
    s = spec.search
    if not s.multi_objective:
        try:
            return study.best_trial
        except ValueError:  # no feasible trial
            return None
    front = study.best_trials
    if s.objective == "tolerance":
        ok = [t for t in front if t.user_attrs.get("drop", math.inf) <= s.bound]
        return max(ok, key=lambda t: (t.values[1], t.values[0])) if ok else None
    base = spec.search.train_noise.scale
    wide = [t for t in front if t.values[1] >= base * (1 - 1e-9)] or front
    return max(wide, key=lambda t: (t.values[0], t.values[1]))


def _baseline(study: optuna.Study, name: str) -> optuna.trial.FrozenTrial | None:
    import optuna

    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        if t.user_attrs.get("baseline") == name:
            return t
    return None


def _rows(per_seed: dict[int, np.ndarray]) -> np.ndarray:
    """``(n_rows, n_items)``: seed rows (means over noise seeds) with several training
    seeds, else the noise-seed rows of the one seed."""
    if len(per_seed) > 1:
        return np.vstack([m.mean(axis=0) for m in per_seed.values()])
    return next(iter(per_seed.values())).astype(float)


def _clean_rows(per_seed: dict[int, np.ndarray], n_rows: int) -> np.ndarray:
    """Clean outcomes aligned with :func:`_rows` (the one clean row repeated per noise-seed
    row, for differences and ratios)."""
    if len(per_seed) > 1:
        return np.vstack(list(per_seed.values())).astype(float)
    return np.tile(next(iter(per_seed.values())).astype(float), (n_rows, 1))


def reevaluate(ctx: SearchContext, study: optuna.Study,
               chosen: optuna.trial.FrozenTrial | None, *,
               log: Callable[[str], None] | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The re-evaluation table (columns :data:`REEVALUATION_COLUMNS`) and facts for the
    manifest (seeds, items, configurations)."""
    spec = ctx.spec
    configs: list[tuple[str, Any]] = []
    if chosen is not None:
        configs.append(("chosen", chosen))
    for name in ("uniform", "heuristic"):
        t = _baseline(study, name)
        if t is not None:
            configs.append((name, t))
    held_out = bool(ctx.holdout_items)
    items = ctx.holdout_items if held_out else ctx.search_items
    noise_seeds = spec.fresh_noise_seeds()
    seeds = spec.fresh_seeds() if ctx.objective == "training" else spec.seed_list()
    level = spec.search.reevaluation.confidence_level
    meta = {"reevaluation": {"noise_seeds": noise_seeds, "seeds": seeds,
                             "items": "held-out" if held_out else "search",
                             "n_items": len(items),
                             "configs": {n: t.number for n, t in configs}}}
    if not configs:
        return pd.DataFrame(columns=REEVALUATION_COLUMNS), meta
    results: dict[str, dict[str, Any]] = {}
    shared_clean = None
    for name, trial in configs:
        if log is not None:
            log(f"re-evaluating {name} (trial {trial.number}) on {len(items)} "
                f"{'held-out' if held_out else 'search'} items, noise seeds {noise_seeds}")
        res = evaluate_config(ctx, dict(trial.params), items=items, noise_seeds=noise_seeds,
                              seeds=seeds, with_clean=shared_clean is None
                              or ctx.objective == "training")
        if ctx.objective == "tolerance":
            # one model: its clean outcomes are shared by every configuration
            shared_clean = shared_clean or res["clean"]
            res["clean"] = shared_clean
        results[name] = res
    several = len(seeds) > 1
    common = {"row_unit": "training seed" if several else "noise seed",
              "items": "held-out" if held_out else "search", "n_items": len(items),
              "question": ("procedure: training seeds and items random" if several and
                           ctx.objective == "training" else
                           "these models: seeds and items random" if several else
                           "this model: noise draws and items random")}
    records: list[dict[str, Any]] = []
    for name, trial in configs:
        records += _config_rows(ctx, name, trial, results[name], level, common)
    if chosen is not None:
        for other in ("uniform", "heuristic"):
            if other in results and dict(chosen.params) != dict(results_trial(configs, other)
                                                                  .params):
                records.append(_comparison(ctx, "chosen", other, results, chosen,
                                           results_trial(configs, other), level, common))
    table = pd.DataFrame.from_records(records)
    for c in REEVALUATION_COLUMNS:
        if c not in table:
            table[c] = None
    return table[REEVALUATION_COLUMNS], meta


def results_trial(configs: list[tuple[str, Any]], name: str) -> Any:
    return next(t for n, t in configs if n == name)


def _stat_row(result: Any, **fields: Any) -> dict[str, Any]:
    ci = result.confidence_interval
    return {"estimate": float(result.estimate), "ci_low": float(ci.low),
            "ci_high": float(ci.high), "ci_level": float(result.confidence_level),
            "ci_method": result.method, "pvalue": None, "n_rows": int(result.n_seeds),
            **fields}


def _config_rows(ctx: SearchContext, name: str, trial: Any, res: dict[str, Any],
                 level: float, common: dict[str, Any]) -> list[dict[str, Any]]:
    from robuststats.stats import seed_random_accuracy, seed_random_retention, seed_random_test

    noisy = _rows(res["noisy"])
    clean = _clean_rows(res["clean"], noisy.shape[0])
    one_clean = np.vstack(list(res["clean"].values())).astype(float)
    ua = trial.user_attrs
    base = {"config": name, "trial": trial.number, **common}
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate data is reported through the interval
        acc = seed_random_accuracy(noisy, confidence_level=level)
        rows.append({**base, **_stat_row(acc, metric="accuracy",
                                         search_value=ua.get("noisy_accuracy"))})
        cacc = seed_random_accuracy(one_clean, confidence_level=level)
        rows.append({**base, **_stat_row(cacc, metric="clean_accuracy",
                                         search_value=ua.get("clean_accuracy"))})
        drop = seed_random_test(clean, noisy, confidence_level=level)
        row = {**base, **_stat_row(drop, metric="drop", search_value=ua.get("drop"))}
        row["pvalue"] = float(drop.pvalue)
        if ctx.objective == "tolerance":
            bound = ctx.spec.search.bound
            row["verdict"] = ("within bound" if drop.confidence_interval.high <= bound else
                              "exceeds bound" if drop.confidence_interval.low > bound else
                              "undetermined")
        rows.append(row)
        if clean.mean() > 0:
            ret = seed_random_retention(clean, noisy, confidence_level=level)
            rows.append({**base, **_stat_row(ret, metric="retention",
                                             search_value=ua.get("retention"))})
    b = budget(dict(trial.params), ctx.base_scale)
    rows.append({**base, "metric": "budget", "search_value": b, "estimate": b,
                 "ci_method": "deterministic (geometric mean multiplier × base scale)"})
    for r in rows:
        if r.get("search_value") is not None and r.get("estimate") is not None:
            r["gap"] = float(r["search_value"]) - float(r["estimate"])
    return rows


def _comparison(ctx: SearchContext, a: str, b: str, results: dict[str, Any], ta: Any, tb: Any,
                level: float, common: dict[str, Any]) -> dict[str, Any]:
    """Paired test of ``a − b`` on the objective's metric (two-sided)."""
    from robuststats.stats import seed_random_retention_test, seed_random_test

    ra, rb = results[a], results[b]
    xa, xb = _rows(ra["noisy"]), _rows(rb["noisy"])
    metric = ctx.spec.search.metric if ctx.objective == "training" else "accuracy"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if metric == "retention":
            res = seed_random_retention_test(_clean_rows(ra["clean"], xa.shape[0]), xa,
                                             _clean_rows(rb["clean"], xb.shape[0]), xb,
                                             confidence_level=level)
        else:
            res = seed_random_test(xa, xb, confidence_level=level)
    key = "noisy_accuracy" if metric == "accuracy" else "retention"
    sa, sb = ta.user_attrs.get(key), tb.user_attrs.get(key)
    search_value = None if sa is None or sb is None else float(sa) - float(sb)
    row = {"config": f"{a} − {b}", "trial": ta.number, "metric": f"{metric} difference",
           "search_value": search_value, **common, **_stat_row(res)}
    row["pvalue"] = float(res.pvalue)
    row["verdict"] = ("a > b" if res.confidence_interval.low > 0 else
                      "a < b" if res.confidence_interval.high < 0 else "no difference shown")
    if search_value is not None:
        row["gap"] = search_value - row["estimate"]
    return row
