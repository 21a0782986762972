"""From the item-outcomes table to summary, retention, test and hypothesis tables.

Pure pandas/numpy plus :mod:`robuststats.stats`: never imports torch, so
``robuststats analyze`` works on any machine and on outcome files made elsewhere.

Layout of the data handed to the statistics (``docs/studies.md``, "Analysis"):

- per condition and noise level, a matrix ``(n_seeds, n_items)`` of each item's outcome
  averaged over the noise seeds (clean cells have a single noise seed, so it is 0/1);
  bootstrap CIs resample seeds, then items within seeds (hierarchical);
- paired McNemar between two conditions at one noise level uses one stratum per
  ``(seed, noise_seed)`` with the items shared by both conditions; the seeds pair up by
  their number (the same training seed under each condition).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from robuststats.errors import InputError

__all__ = ["Analysis", "AnalysisOptions", "analyze_outcomes", "missing_cells"]


@dataclass(frozen=True)
class AnalysisOptions:
    """Options of the analysis (the ``analysis`` section of a study file)."""

    alpha: float = 0.05
    confidence_level: float = 0.95
    n_resamples: int = 2000
    multiplicity: str = "holm"
    reference: str | None = None
    rng_seed: int = 0
    mcnemar: str = "clustered"

    @classmethod
    def from_spec(cls, spec: Any) -> AnalysisOptions:
        a = spec.analysis
        return cls(a.alpha, a.confidence_level, a.n_resamples, a.multiplicity, a.reference,
                   a.rng_seed, a.mcnemar)


@dataclass(frozen=True)
class Analysis:
    """All tables of one analysis; ``tables()`` maps file stem -> DataFrame."""

    summary: pd.DataFrame
    retention: pd.DataFrame
    seeds: pd.DataFrame
    tests: pd.DataFrame
    hypotheses: pd.DataFrame
    missing: pd.DataFrame
    options: AnalysisOptions = field(default_factory=AnalysisOptions)

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"summary": self.summary, "retention": self.retention, "seeds": self.seeds,
                "tests": self.tests, "hypotheses": self.hypotheses, "missing": self.missing}


# ---------------------------------------------------------------------- matrices
def _matrix(df: pd.DataFrame, items: Sequence[str] | None = None) -> tuple[np.ndarray, list[int],
                                                                          list[str]]:
    """``(n_seeds, n_items)`` mean outcome over noise seeds, and the seeds and items used."""
    table = df.pivot_table(index="seed", columns="item_id", values="correct", aggfunc="mean")
    if items is not None:
        table = table.reindex(columns=list(items))
    table = table.dropna(axis=1, how="any")  # items not seen under every seed
    return table.to_numpy(dtype=float), [int(s) for s in table.index], list(table.columns)


def _strata(df: pd.DataFrame, items: Sequence[str]) -> pd.DataFrame:
    """Rows = (seed, noise_seed), columns = items, values 0/1."""
    t = df.pivot_table(index=["seed", "noise_seed"], columns="item_id", values="correct",
                       aggfunc="first")
    return t.reindex(columns=list(items))


def _rng(opts: AnalysisOptions, *salt: object) -> np.random.Generator:
    # one independent, reproducible stream per quantity (order of computation irrelevant)
    return np.random.default_rng([opts.rng_seed, _stable_hash(salt)])


def _stable_hash(parts: Iterable[object]) -> int:
    import hashlib

    text = "|".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little")


# ---------------------------------------------------------------------- tables
def _summary_and_seeds(out: pd.DataFrame, opts: AnalysisOptions
                       ) -> tuple[pd.DataFrame, pd.DataFrame]:
    from robuststats import stats

    rows, seed_rows = [], []
    for (cond, level), d in out.groupby(["condition", "eval_noise"], sort=False):
        x, seeds, items = _matrix(d)
        per_seed = x.mean(axis=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            res = stats.bootstrap_accuracy(
                x if len(seeds) > 1 else x[0], confidence_level=opts.confidence_level,
                n_resamples=opts.n_resamples, rng=_rng(opts, "acc", cond, level))
        ci = res.confidence_interval
        rows.append({
            "condition": cond, "eval_noise": float(level), "n_seeds": len(seeds),
            "n_noise_seeds": int(d["noise_seed"].nunique()), "n_items": len(items),
            "accuracy": float(x.mean()), "ci_low": float(ci.low), "ci_high": float(ci.high),
            "seed_sd": float(per_seed.std(ddof=1)) if len(seeds) > 1 else float("nan"),
            "seed_min": float(per_seed.min()), "seed_max": float(per_seed.max()),
        })
        for s, acc in zip(seeds, per_seed):
            seed_rows.append({"condition": cond, "seed": s, "eval_noise": float(level),
                              "accuracy": float(acc)})
    summary = pd.DataFrame(rows)
    seeds_df = pd.DataFrame(seed_rows, columns=["condition", "seed", "eval_noise", "accuracy"])
    if not seeds_df.empty:
        clean = seeds_df[seeds_df["eval_noise"] == 0.0].set_index(["condition", "seed"])
        base = seeds_df.set_index(["condition", "seed"]).index.map(
            lambda k: clean["accuracy"].get(k, np.nan))
        with np.errstate(divide="ignore", invalid="ignore"):
            seeds_df["retention"] = seeds_df["accuracy"].to_numpy() / np.asarray(base, float)
        seeds_df = seeds_df.sort_values(["condition", "eval_noise", "seed"]).reset_index(
            drop=True)
    return summary, seeds_df


def _retention(out: pd.DataFrame, seeds_df: pd.DataFrame, opts: AnalysisOptions
               ) -> pd.DataFrame:
    from robuststats import stats

    rows = []
    for cond, d in out.groupby("condition", sort=False):
        clean_df = d[d["eval_noise"] == 0.0]
        if clean_df.empty:
            continue
        for level in sorted(x for x in d["eval_noise"].unique() if x > 0):
            noisy_df = d[d["eval_noise"] == level]
            clean, c_seeds, c_items = _matrix(clean_df)
            noisy, n_seeds, n_items = _matrix(noisy_df, c_items)
            seeds = sorted(set(c_seeds) & set(n_seeds))
            items = [i for i in c_items if i in set(n_items)]
            clean, _, _ = _matrix(clean_df[clean_df["seed"].isin(seeds)], items)
            noisy, _, _ = _matrix(noisy_df[noisy_df["seed"].isin(seeds)], items)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", stats.DegenerateDataWarning)
                res = stats.bootstrap_retention(
                    clean if len(seeds) > 1 else clean[0], noisy if len(seeds) > 1 else noisy[0],
                    confidence_level=opts.confidence_level, n_resamples=opts.n_resamples,
                    rng=_rng(opts, "ret", cond, level))
            per_seed = seeds_df[(seeds_df["condition"] == cond)
                                & (seeds_df["eval_noise"] == level)]["retention"]
            rows.append({
                "condition": cond, "eval_noise": float(level), "n_seeds": len(seeds),
                "n_items": len(items), "clean_accuracy": float(clean.mean()),
                "noisy_accuracy": float(noisy.mean()), "retention": float(res.estimate),
                "ci_low": float(res.confidence_interval.low),
                "ci_high": float(res.confidence_interval.high),
                "seed_sd": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else float("nan"),
                "method": res.method,
            })
    return pd.DataFrame(rows)


def _pairs(conditions: list[str], reference: str | None) -> list[tuple[str, str]]:
    if reference is None:
        return list(itertools.combinations(conditions, 2))
    return [(c, reference) for c in conditions if c != reference]


def _tests(out: pd.DataFrame, opts: AnalysisOptions) -> pd.DataFrame:
    from robuststats import stats

    conditions = list(dict.fromkeys(out["condition"]))
    if opts.reference is not None and opts.reference not in conditions:
        raise InputError(f"`reference` condition {opts.reference!r} is not in the outcomes "
                         f"(conditions: {conditions}).")
    rows = []
    for level in sorted(out["eval_noise"].unique()):
        at = out[out["eval_noise"] == level]
        for a, b in _pairs(conditions, opts.reference):
            da, db = at[at["condition"] == a], at[at["condition"] == b]
            if da.empty or db.empty:
                continue
            items = sorted(set(da["item_id"]) & set(db["item_id"]))
            sa, sb = _strata(da, items), _strata(db, items)
            keys = sa.index.intersection(sb.index)
            xa, xb = sa.loc[keys].to_numpy(), sb.loc[keys].to_numpy()
            ok = ~(np.isnan(xa).any(axis=0) | np.isnan(xb).any(axis=0))
            xa, xb = xa[:, ok].astype(int), xb[:, ok].astype(int)
            if xa.size == 0:
                continue
            n10 = int(((xa == 1) & (xb == 0)).sum())
            n01 = int(((xa == 0) & (xb == 1)).sum())
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", stats.DegenerateDataWarning)
                test, test_name = _mcnemar(stats, xa, xb, opts.mcnemar)
                ma, _, _ = _matrix(da[da["seed"].isin(keys.get_level_values(0))], items)
                mb, _, _ = _matrix(db[db["seed"].isin(keys.get_level_values(0))], items)
                diff = stats.bootstrap_difference(
                    ma if len(ma) > 1 else ma[0], mb if len(mb) > 1 else mb[0],
                    confidence_level=opts.confidence_level, n_resamples=opts.n_resamples,
                    rng=_rng(opts, "diff", a, b, level))
            rows.append({
                "eval_noise": float(level), "a": a, "b": b,
                "n_strata": len(keys), "n_items": int(ok.sum()), "n10": n10, "n01": n01,
                "accuracy_a": float(xa.mean()), "accuracy_b": float(xb.mean()),
                "difference": float(xa.mean() - xb.mean()),
                "ci_low": float(diff.confidence_interval.low),
                "ci_high": float(diff.confidence_interval.high),
                "statistic": float(test.statistic), "pvalue": float(test.pvalue),
                "test": test_name,
            })
    tests = pd.DataFrame(rows)
    if tests.empty:
        return tests
    if opts.multiplicity == "none":
        tests["pvalue_adjusted"] = tests["pvalue"]
    else:
        tests["pvalue_adjusted"] = np.asarray(
            _adjusted(stats.adjust_pvalues(tests["pvalue"].to_numpy(),
                                           method=opts.multiplicity)), float)
    tests["multiplicity"] = opts.multiplicity
    tests["reject"] = tests["pvalue_adjusted"] < opts.alpha
    return tests


def _mcnemar(stats: Any, xa: np.ndarray, xb: np.ndarray, method: str) -> tuple[Any, str]:
    """Exact McNemar for one stratum; otherwise the stratified test with ``method``.

    ``clustered`` (the default) treats each item as a cluster across strata, because the
    same items recur under every seed and noise seed (Durkalski et al. 2003);
    ``mantel-haenszel`` treats every pair as independent.
    """
    if xa.shape[0] == 1:
        return stats.mcnemar(xa[0], xb[0], method="exact"), "McNemar exact"
    return (stats.mcnemar_stratified(xa, xb, method=method),
            f"stratified McNemar ({method})")


def _adjusted(res: Any) -> Any:
    # adjust_pvalues may return an array or a result object carrying the adjusted values
    for name in ("pvalues_adjusted", "adjusted", "pvalues"):
        if hasattr(res, name):
            return getattr(res, name)
    return res


# ---------------------------------------------------------------------- hypotheses
def missing_cells(outcomes: pd.DataFrame, expected: Iterable[Any]) -> pd.DataFrame:
    """Expected cells (objects with condition/seed/eval_noise/noise_seed) absent from data."""
    have = set(map(tuple, outcomes[["condition", "seed", "eval_noise", "noise_seed"]]
                   .drop_duplicates().itertuples(index=False, name=None)))
    rows = [{"condition": c.condition, "seed": c.seed, "eval_noise": c.eval_noise,
             "noise_seed": c.noise_seed} for c in expected
            if (c.condition, c.seed, c.eval_noise, c.noise_seed) not in have]
    return pd.DataFrame(rows, columns=["condition", "seed", "eval_noise", "noise_seed"])


def _hypotheses(out: pd.DataFrame, hypotheses: list[dict[str, Any]], missing: pd.DataFrame,
                opts: AnalysisOptions, failures: dict[str, str] | None = None) -> pd.DataFrame:
    from robuststats import stats

    columns = ["id", "statement", "metric", "a", "b", "eval_noise", "relation", "margin",
               "estimate", "ci_low", "ci_high", "ci_level", "pvalue", "pvalue_adjusted",
               "verdict", "test", "reason"]
    if not hypotheses:
        return pd.DataFrame(columns=columns)
    rows: list[dict[str, Any]] = []
    ready = []
    for h in hypotheses:
        levels = {float(h["eval_noise"])} | ({0.0} if h["metric"] == "retention" else set())
        gone = missing[missing["condition"].isin([h["a"], h["b"]])
                       & missing["eval_noise"].isin(levels)] if not missing.empty else missing
        absent = [c for c in (h["a"], h["b"]) for lv in levels
                  if out[(out["condition"] == c) & (out["eval_noise"] == lv)].empty]
        if len(gone) or absent:
            n = len(gone) if len(gone) else len(absent)
            rows.append({**_base(h), "estimate": np.nan, "ci_low": np.nan, "ci_high": np.nan,
                         "verdict": "INCONCLUSIVE", "test": "",
                         "reason": f"{n} needed cell(s) missing (failed or not run)"})
        else:
            ready.append(h)
    if ready:
        # degenerate cases (e.g. a clean accuracy of 0) are explained in the `reason` column
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            table = stats.evaluate_hypotheses(
                [stats.Hypothesis.from_dict(h) for h in ready], out,
                confidence_level=opts.confidence_level, n_resamples=opts.n_resamples,
                rng=np.random.default_rng([opts.rng_seed, _stable_hash(["hypotheses"])]),
                multiplicity=None if opts.multiplicity == "none" else opts.multiplicity)
        by_id = {str(r["id"]): r for _, r in table.iterrows()}
        for h in ready:
            r = by_id[str(h["id"])]
            rows.append({**_base(h), "estimate": float(r["estimate"]),
                         "ci_low": float(r["ci_low"]), "ci_high": float(r["ci_high"]),
                         "ci_level": float(r["confidence_level"]), "pvalue": float(r["pvalue"]),
                         "pvalue_adjusted": float(r["adjusted_pvalue"]),
                         "verdict": r["verdict"], "test": r["method"], "reason": r["detail"]})
    order = {h["id"]: i for i, h in enumerate(hypotheses)}
    df = pd.DataFrame(rows, columns=columns)
    return df.sort_values("id", key=lambda s: s.map(order)).reset_index(drop=True)


def _base(h: dict[str, Any]) -> dict[str, Any]:
    return {"id": h["id"], "statement": h.get("statement", ""), "metric": h["metric"],
            "a": h["a"], "b": h["b"], "eval_noise": float(h["eval_noise"]),
            "relation": h["relation"], "margin": float(h["margin"])}


# ---------------------------------------------------------------------- entry point
def analyze_outcomes(outcomes: pd.DataFrame, *, hypotheses: list[dict[str, Any]] | None = None,
                     options: AnalysisOptions | None = None,
                     expected_cells: Iterable[Any] | None = None) -> Analysis:
    """Every table of a study from its (validated) outcomes table.

    ``expected_cells`` (the plan) lets the analysis name missing cells; hypotheses that
    need them are INCONCLUSIVE with that reason instead of being judged on partial data.
    """
    opts = options or AnalysisOptions()
    out = outcomes
    missing = (missing_cells(out, expected_cells) if expected_cells is not None
               else pd.DataFrame(columns=["condition", "seed", "eval_noise", "noise_seed"]))
    summary, seeds_df = _summary_and_seeds(out, opts)
    retention = _retention(out, seeds_df, opts)
    tests = _tests(out, opts)
    hyp = _hypotheses(out, list(hypotheses or []), missing, opts)
    return Analysis(summary, retention, seeds_df, tests, hyp, missing, opts)
