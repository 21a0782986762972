"""One glossary of column names, and the registry of every table with its column order.

Every table the package writes or prints uses these names with these meanings (documented
in ``docs/glossary.md``). Sign rule: a difference is always *first minus second*, ``a − b``.

:data:`REGISTRY` declares each table once: its name, its kind, its columns, whether
``robuststats analyze`` and ``robuststats results show`` print it, and its place in the two
orders (:data:`ORDERS`). Every list of table names in the package is a view of it
(:func:`table_names`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GLOSSARY", "ORDERS", "REGISTRY", "TABLE_COLUMNS", "Table", "ordered", "table_names"]

#: column name -> meaning (one meaning per name, everywhere)
GLOSSARY: Mapping[str, str] = {
    # keys of the outcomes table
    "condition": "training condition (a name from the study file)",
    "seed": "training seed",
    "eval_noise": "inference-noise scale of the evaluation (0 = clean)",
    "noise_seed": "seed of the inference-noise generator (0 for clean evaluations)",
    "item_id": "stable item identifier, identical under every condition",
    "correct": "exact-match outcome of one item in one evaluation, 0 or 1",
    "score": "optional continuous score of one item",
    # sizes
    "n_seeds": "number of training seeds used",
    "n_noise_seeds": "number of inference-noise seeds (re-evaluations) per item",
    "n_items": "number of items used (after any dropped holes)",
    "n_strata": "number of (seed, noise_seed) strata of a paired comparison",
    "n_conditions": "number of conditions compared",
    # comparisons
    "a": "first condition of a comparison; every difference is a − b",
    "b": "second condition of a comparison",
    "n_a_only": "discordant pairs where a is correct and b wrong",
    "n_b_only": "discordant pairs where b is correct and a wrong",
    # estimates
    "accuracy": "share of items answered correctly (mean over seeds and noise seeds)",
    "accuracy_a": "accuracy of condition a on the paired items",
    "accuracy_b": "accuracy of condition b on the paired items",
    "clean_accuracy": "accuracy at eval_noise 0 on the items and seeds of the comparison",
    "noisy_accuracy": "accuracy at the row's eval_noise on the same items and seeds",
    "retention": "noisy_accuracy / clean_accuracy",
    "estimate": "point estimate of the row's quantity; for comparisons a − b",
    "seed_sd": "standard deviation of the per-seed values (ddof 1)",
    "seed_min": "smallest per-seed value",
    "seed_max": "largest per-seed value",
    # intervals
    "ci_low": "lower bound of the confidence interval",
    "ci_high": "upper bound of the confidence interval",
    "ci_level": "confidence level of the interval in the same row (e.g. 0.95)",
    "ci_method": "how the interval was computed",
    # tests
    "question": "the question the row's test answers",
    "role": "decision: the test that decides reject (seeds random with several training "
            "seeds); diagnostic: a test kept for the record that decides nothing (the "
            "models-fixed McNemar test beside a seed-random decision)",
    "test": "the test that produced statistic and pvalue",
    "statistic": "the test statistic (never an estimate)",
    "dof": "degrees of freedom of the test statistic",
    "pvalue": "unadjusted p-value",
    "pvalue_adjusted": "p-value adjusted for multiplicity within the table's family",
    "multiplicity": "multiplicity procedure applied to the family (holm, fdr_bh, ..., none)",
    "alpha": "significance level of reject",
    "reject": "pvalue_adjusted < alpha, on deciding rows (empty on diagnostic rows)",
    # hypotheses
    "id": "hypothesis identifier from the study file",
    "statement": "the hypothesis in words",
    "metric": "accuracy or retention",
    "relation": "greater, less or equivalent: the claimed relation of a − b to the margin",
    "margin": "the margin of the claim, in the metric's units",
    "verdict": "VERIFIED, FALSIFIED or INCONCLUSIVE",
    "reason": "why a row was decided, dropped or left undecided",
    "detail": "how the evidence was gathered: the data used, the resampling scheme and the "
              "multiplicity adjustment of the interval",
    # power plans
    "design": "what a power row plans: paired (McNemar), unpaired (two proportions) or "
              "seeds (training seeds × items, seed-random t test); in a gate row, how the "
              "candidate's and the baseline's seeds relate (paired seeds, independent "
              "seeds, one model each, a seed variance borrowed)",
    "method": "how the power was computed (robuststats.stats.POWER_METHODS); in a gate "
              "row, how the bound was computed",
    "effect": "size of the accuracy difference a − b the plan is to detect",
    "discordance": "π_D: share of item pairs on which a and b disagree",
    "baseline": "accuracy of the second condition b; in a gate row, the baseline's metric",
    "n": "items (pairs) of a one-seed design, each evaluated repeats times",
    "power": "probability that the test rejects: the target when a size or the effect was "
             "solved for, else the computed power",
    "achieved_power": "power at the integer design of the row (at least the target when a "
                      "size was solved for)",
    "max_power": "power with infinitely many items at the row's number of seeds (below 1 "
                 "when seeds shift a and b differently)",
    "n_evaluations": "evaluations per condition: items × repeats, or seeds × items",
    "n_effective": "independent items the evaluations are worth: n · repeats / design_effect",
    "repeats": "evaluations of each item per condition (noise seeds or training seeds)",
    "icc": "intra-item correlation of the paired difference a − b across an item's repeated "
           "evaluations (noise seeds or training seeds)",
    "design_effect": "Kish's design effect 1 + (repeats − 1) · icc",
    "seed_sd_difference": "SD over training seeds of the per-seed accuracy difference a − b "
                          "with infinitely many items (the seed component of a plan)",
    "standard_error": "standard deviation of the estimated difference a − b",
    "alternative": "two-sided, greater or less: the alternative of the test of a − b",
    "solved_for": "the quantity a power row solved for (n, n_items, n_seeds, power or "
                  "effect)",
    "pool_size": "items available (e.g. 1319 for the GSM8K test split); empty when not "
                 "checked",
    "exceeds_pool": "whether the items needed exceed pool_size",
    "min_repeats": "fewest repeats of all pool_size items that reach the effective n needed",
    "note": "remarks on the row in words",
    # dose-response sweeps
    "model": "dose-response model, in drc's names (LL.4, LL.3, W1.4, ...)",
    "drop": "relative accuracy loss that defines a critical threshold (0.10: 10 % of the "
            "clean accuracy)",
    "n_levels": "number of noise levels (doses) a dose-response curve was fitted to, the "
                "clean level included",
    "fitted_clean_accuracy": "accuracy of the fitted dose-response curve at noise scale 0",
    "n_not_reached": "bootstrap resamples whose refitted curve never fell to the threshold "
                     "level (counted as an infinite threshold)",
    "parameter": "name of a dose-response parameter (drc's b, c, d, e, f)",
    "se_parameter": "standard error of a fitted parameter, from the observed information (0 "
                    "when fixed)",
    "fixed": "whether the parameter was held at its value instead of fitted",
    "loglik": "maximised log-likelihood of a fit",
    "aic": "Akaike's information criterion, −2 loglik + 2 × parameters",
    "n_parameters": "free parameters of a fit",
    "converged": "whether the optimiser reported convergence",
    # robustness gate
    "margin_type": "how a gate's max_degradation is read: relative (ratio to the baseline) "
                   "or absolute (points)",
    "max_degradation": "the gate's margin d: the degradation tolerated (non-inferiority; "
                       "0.15: keep more than 85 % of the baseline's metric, relative), the "
                       "improvement required (superiority) or the equivalence half-width",
    "candidate": "the candidate's metric in a gate row (retention or accuracy)",
    "lower_bound": "one-sided (1 − alpha) lower confidence bound of the candidate-vs-baseline "
                   "contrast",
    "upper_bound": "one-sided (1 − alpha) upper confidence bound of the contrast "
                   "(equivalence gates; empty otherwise)",
    "passed": "whether the gate row passed its question's rule: lower_bound above "
              "−max_degradation (non-inferiority), above +max_degradation (superiority), or "
              "both bounds inside the margin (equivalence)",
    "detectable_degradation": "smallest margin the gate would pass with 80 % power for a "
                              "candidate as good as the baseline, at this size",
    "power_at_margin": "probability that a candidate exactly as good as the baseline passes "
                       "at max_degradation (empty for superiority)",
    "underpowered": "whether power_at_margin is below 0.8",
    "n_seeds_candidate": "training seeds (models) of the candidate",
    "n_seeds_baseline": "training seeds (models) of the baseline",
    "var_seed": "seed variance component of the contrast's variance",
    "var_item": "item variance component of the contrast's variance",
    "var_resid": "residual (seed × item) variance component of the contrast's variance",
    # sequential studies
    "look": "analysis number of a sequential study (1 = the first look)",
    "fraction": "information fraction of a look: its seeds over the last look's",
    "statistic_z": "z-equivalent Φ⁻¹(1 − p) of the calibrated one-sided p-value of the "
                   "verifying tail (the smaller TOST tail for equivalence)",
    "efficacy_bound": "z bound the statistic must reach to decide at this look",
    "futility_bound": "z bound at or below which the look is futile (empty without one)",
    "nominal_level": "one-sided nominal p-value level of the efficacy bound, Φ̄(bound)",
    "decision": "what a look decided: VERIFIED, FALSIFIED, FUTILE, CONTINUE, INCONCLUSIVE "
                "(last look) or STOPPED (failed cells)",
    "median_unbiased": "at the look a sequential study stopped: the estimate median-unbiased "
                       "under the stage-wise ordering (greater/less hypotheses)",
}


@dataclass(frozen=True)
class Table:
    """One table of the registry: its name (the file stem), what makes it, its declared
    column order (pingouin's ``col_order``) and where it is shown.

    ``kind``: ``analysis`` (:func:`robuststats.analysis.analyze_outcomes`), ``dose`` (a
    sweep's dose-response fits), ``sequential`` (a sequential study's looks), ``gate`` (``robuststats gate``) or ``power`` (``robuststats
    power``, printed). ``stored``: written as ``<name>.parquet`` and ``<name>.csv`` in a
    result version. ``analyze``: printed by ``robuststats analyze`` in table format;
    ``show``: listed by ``robuststats results show``; ``optional``: a printed view leaves it
    out when it has no rows. ``levels``: which interval levels the report's facts list for
    it: ``analysis`` (the analysis' one level), ``adjusted`` (multiplicity-adjusted, row by
    row) or empty (not listed). ``read_first``: the reading order puts it before the others
    (the verdicts before the tables behind them).
    """

    name: str
    kind: str
    columns: tuple[str, ...]
    stored: bool = True
    analyze: bool = False
    show: bool = False
    optional: bool = False
    levels: str = ""
    read_first: bool = False


#: every table a result version can hold or a command prints, in file order (see ORDERS)
REGISTRY: tuple[Table, ...] = (
    Table("summary", "analysis", analyze=True, show=True, levels="analysis", columns=(
        "condition", "eval_noise", "n_seeds", "n_noise_seeds", "n_items", "accuracy",
        "ci_low", "ci_high", "ci_level", "ci_method", "seed_sd", "seed_min", "seed_max")),
    Table("retention", "analysis", analyze=True, show=True, levels="analysis", columns=(
        "condition", "eval_noise", "n_seeds", "n_items", "clean_accuracy", "noisy_accuracy",
        "retention", "ci_low", "ci_high", "ci_level", "ci_method", "seed_sd")),
    Table("seeds", "analysis", columns=(
        "condition", "seed", "eval_noise", "accuracy", "retention")),
    Table("omnibus", "analysis", analyze=True, show=True, optional=True, columns=(
        "eval_noise", "n_conditions", "n_seeds", "n_items", "question", "test", "statistic",
        "dof", "pvalue")),
    Table("tests", "analysis", analyze=True, levels="analysis", columns=(
        "eval_noise", "a", "b", "role", "n_seeds", "n_strata", "n_items", "n_a_only",
        "n_b_only", "accuracy_a", "accuracy_b", "estimate", "ci_low", "ci_high", "ci_level",
        "ci_method", "question", "test", "statistic", "dof", "pvalue", "pvalue_adjusted",
        "multiplicity", "alpha", "reject")),
    Table("strata", "analysis", analyze=True, optional=True, columns=(
        "eval_noise", "a", "b", "seed", "noise_seed", "n_items", "n_a_only", "n_b_only",
        "accuracy_a", "accuracy_b", "estimate", "test", "statistic", "pvalue")),
    Table("hypotheses", "analysis", analyze=True, show=True, levels="adjusted",
          read_first=True, columns=(
              "id", "statement", "metric", "a", "b", "eval_noise", "relation", "margin",
              "estimate", "ci_low", "ci_high", "ci_level", "ci_method", "pvalue",
              "pvalue_adjusted", "multiplicity", "verdict", "reason")),
    Table("missing", "analysis", analyze=True, show=True, optional=True, columns=(
        "condition", "seed", "eval_noise", "noise_seed")),
    Table("dropped", "analysis", analyze=True, show=True, optional=True, columns=(
        "condition", "seed", "eval_noise", "noise_seed", "item_id", "reason")),
    Table("thresholds", "dose", columns=(
        "condition", "model", "drop", "n_levels", "n_seeds", "n_items",
        "fitted_clean_accuracy", "estimate", "ci_low", "ci_high", "ci_level", "ci_method",
        "n_not_reached", "note")),
    Table("dose_fits", "dose", columns=(
        "condition", "model", "parameter", "estimate", "se_parameter", "fixed", "loglik",
        "aic")),
    Table("dose_models", "dose", columns=(
        "condition", "model", "loglik", "aic", "n_parameters", "converged")),
    Table("dose_curves", "dose", columns=(
        "condition", "eval_noise", "estimate", "ci_low", "ci_high", "ci_level", "ci_method")),
    Table("sequential_looks", "sequential", columns=(
        "id", "look", "n_seeds", "fraction", "estimate", "statistic_z", "efficacy_bound",
        "futility_bound", "nominal_level", "ci_low", "ci_high", "ci_level", "ci_method",
        "decision", "reason", "pvalue", "median_unbiased")),
    Table("gate", "gate", columns=(
        "eval_noise", "metric", "question", "margin_type", "max_degradation", "candidate",
        "baseline", "estimate", "lower_bound", "upper_bound", "alpha", "passed", "statistic",
        "dof", "pvalue", "standard_error", "detectable_degradation", "power_at_margin", "underpowered",
        "design", "n_seeds_candidate", "n_seeds_baseline", "n_items", "var_seed", "var_item",
        "var_resid", "method", "reason")),
    Table("power", "power", stored=False, columns=(
        "design", "method", "discordance", "effect", "baseline", "n", "power",
        "achieved_power", "n_evaluations", "n_effective", "repeats", "icc", "design_effect",
        "alpha", "alternative", "solved_for", "pool_size", "exceeds_pool", "min_repeats",
        "note")),
    Table("power_seeds", "power", stored=False, columns=(
        "n_seeds", "n_items", "n_evaluations", "power", "achieved_power", "max_power",
        "effect", "discordance", "seed_sd_difference", "icc", "dof", "standard_error",
        "method", "alpha", "alternative", "pool_size", "exceeds_pool", "note")),
)

#: the two orders of the registry. ``file``: the order above, in which a version's tables
#: are written, and the manifest's row counts and ``robuststats analyze`` (text and JSON)
#: list them.
#: ``reading``: the same with the ``read_first`` tables moved to the front, in which
#: :func:`robuststats.results.read_tables` and ``robuststats results show`` list them.
ORDERS = ("file", "reading")

#: table -> declared column order (pingouin's ``col_order``), from :data:`REGISTRY`
TABLE_COLUMNS: Mapping[str, tuple[str, ...]] = {t.name: t.columns for t in REGISTRY}


def table_names(kind: str | None = None, *, order: str = "file", stored: bool | None = None,
                analyze: bool | None = None, show: bool | None = None,
                optional: bool | None = None, levels: str | None = None
                ) -> tuple[str, ...]:
    """Names of the registered tables of ``kind`` (every kind when None) whose fields equal
    the ones given (None: any), in ``order`` (:data:`ORDERS`)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    wanted = {"kind": kind, "stored": stored, "analyze": analyze, "show": show,
              "optional": optional, "levels": levels}
    rows = [t for t in REGISTRY
            if all(v is None or getattr(t, k) == v for k, v in wanted.items())]
    if order == "reading":
        rows.sort(key=lambda t: not t.read_first)  # stable: file order otherwise
    return tuple(t.name for t in rows)


def ordered(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """``df`` with the declared columns of ``table`` first, in order (absent ones added
    empty), then any further columns as they were."""
    import pandas as pd

    declared = list(TABLE_COLUMNS[table])
    if df.empty and not len(df.columns):
        return pd.DataFrame(columns=declared)
    out = df.copy()
    for col in declared:
        if col not in out.columns:
            out[col] = pd.NA
    extra = [c for c in out.columns if c not in declared]
    return out[declared + extra]
