"""The entry point: :func:`analyze_outcomes` and the :class:`Analysis` it returns."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from robuststats.analysis._options import AnalysisOptions
from robuststats.errors import RobuststatsWarning
from robuststats.glossary import ordered, table_names
from robuststats.outcomes import (
    CELL_KEY,
    HOLE_POLICIES,
    Completed,
    complete,
    empty_outcomes,
    plain,
    validate_outcomes,
)

if TYPE_CHECKING:
    from robuststats.stats import Hypothesis

__all__ = ["Analysis", "analyze_outcomes"]

#: file stems of the tables, in the glossary's file order (the fields of :class:`Analysis`)
TABLES = table_names("analysis")


@dataclass(frozen=True)
class Analysis:
    """All tables of one analysis (glossary names and column order); ``options`` made them.

    ``missing`` lists absent cells (failed or never run); ``dropped`` records every seed or
    item the hole policy removed, with the reason. ``strata`` holds the paired counts of
    each ``(seed, noise_seed)`` evaluation behind a pooled test (an Inspect log's epochs, a
    study's noise seeds; :mod:`._strata`).
    """

    summary: pd.DataFrame
    retention: pd.DataFrame
    seeds: pd.DataFrame
    omnibus: pd.DataFrame
    tests: pd.DataFrame
    strata: pd.DataFrame
    hypotheses: pd.DataFrame
    missing: pd.DataFrame
    dropped: pd.DataFrame
    options: AnalysisOptions | None = None
    holes: str = "drop"
    settings: dict[str, Any] = field(default_factory=dict)
    #: further tables of a study kind (a sweep's ``thresholds``, ``dose_fits``, ...)
    extra: dict[str, pd.DataFrame] = field(default_factory=dict)

    def tables(self) -> dict[str, pd.DataFrame]:
        """File stem -> table, every column in the glossary's declared order."""
        return {**{name: ordered(getattr(self, name), name) for name in TABLES},
                **{name: ordered(df, name) for name, df in self.extra.items()}}


def default_options() -> AnalysisOptions:
    return AnalysisOptions()


def analyze_outcomes(outcomes: pd.DataFrame, *,
                     hypotheses: Sequence[Hypothesis | Mapping[str, Any]] = (),
                     options: AnalysisOptions | None = None,
                     expected_cells: Iterable[Any] | None = None,
                     holes: str = "drop") -> Analysis:
    """Every table of a study from its outcomes table.

    ``expected_cells`` (the study plan) names the cells that should exist; without it they
    are inferred from the cross product present in the data, so a study and a later
    ``robuststats analyze`` of its outcomes agree. Hypotheses that need a missing cell are
    INCONCLUSIVE with that reason. With a plan, an empty table is a study none of whose
    cells finished: every cell is missing, every hypothesis INCONCLUSIVE, the other tables
    empty (without one, an empty table is an error). ``holes`` is the policy for items missing from present
    cells (:func:`robuststats.outcomes.complete`): ``"drop"`` removes them from every table
    and records them in ``dropped``; ``"raise"`` stops with the cell and item named.
    """
    from robuststats._validation import check_choice
    from robuststats.analysis._strata import strata_table
    from robuststats.analysis._tables import retention_table, summary_tables
    from robuststats.analysis._tests import omnibus_table, pairwise_tests
    from robuststats.analysis._verdicts import as_hypotheses, hypotheses_table

    check_choice(holes, "holes", HOLE_POLICIES)
    opts = options if options is not None else default_options()
    hs = as_hypotheses(hypotheses)
    if len(outcomes) == 0 and expected_cells is not None:
        table = empty_outcomes()  # a plan none of whose cells finished: all of them missing
    else:
        table = validate_outcomes(outcomes)
    done = complete(table, holes=holes, expected=expected_cells)
    _warn_holes(done, planned=expected_cells is not None)
    out = done.outcomes
    drops: list[pd.DataFrame] = [done.dropped]
    summary, seeds = summary_tables(out, opts)
    retention = retention_table(out, seeds, opts, drops)
    omnibus = omnibus_table(out, opts, drops)
    tests = pairwise_tests(out, opts, drops)
    strata = strata_table(out, opts, drops)
    verdicts = hypotheses_table(out, hs, done.missing, opts)
    dropped = _merge_drops(drops)
    return Analysis(summary, retention, seeds, omnibus, tests, strata, verdicts, done.missing,
                    dropped, opts, holes, settings(opts, holes))


def _warn_holes(done: Completed, *, planned: bool) -> None:
    """Say on stderr what the holes took away: partial cells set aside, cells missing from
    the table's own cross product (a plan's missing cells its runner reports), items
    dropped from every table. Nothing for a complete table."""
    def where(r: Any) -> str:
        return (f"condition {r.condition!r}, seed {plain(r.seed)}, eval_noise "
                f"{plain(r.eval_noise):g}, noise_seed {plain(r.noise_seed)}")

    dropped = done.dropped
    partial = dropped[dropped["item_id"].isna()]
    items = dropped[dropped["item_id"].notna()]
    notes = []
    if len(partial):
        first = next(partial.itertuples(index=False))
        notes.append(f"{len(partial)} cell(s) set aside as missing, first {where(first)}: "
                     f"{first.reason.split(';')[0].removeprefix('cell ')}")
    gone = len(done.missing) - len(partial)
    if gone > 0 and not planned:
        key = set(partial[list(CELL_KEY)].itertuples(index=False, name=None))
        first = next(r for r in done.missing.itertuples(index=False)
                     if tuple(r) not in key)
        notes.append(f"{gone} cell(s) of the table's cross product are missing, first "
                     f"{where(first)}")
    if len(items):
        first = next(items.itertuples(index=False))
        notes.append(f"{items['item_id'].nunique()} item(s) missing from some cells were "
                     f"dropped from every table, first {first.item_id!r} under {where(first)}")
    if notes:
        tail = (" The hypotheses that need a missing cell are INCONCLUSIVE (tables `missing` "
                "and `dropped`)." if len(partial) or (gone > 0 and not planned)
                else " See the table `dropped`.")
        warnings.warn("outcomes with holes: " + "; ".join(notes) + "." + tail,
                      RobuststatsWarning, stacklevel=3)


def settings(opts: AnalysisOptions, holes: str) -> dict[str, Any]:
    """The options that, with the outcomes, reproduce every number of an analysis."""
    keys = ("alpha", "confidence_level", "n_resamples", "multiplicity", "reference",
            "mcnemar", "rng_seed")
    return {**{k: getattr(opts, k) for k in keys if hasattr(opts, k)}, "holes": holes}


def _merge_drops(drops: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [d for d in drops if not d.empty]
    if not frames:
        return drops[0].iloc[0:0]
    merged = pd.concat(frames, ignore_index=True)
    key = ["condition", "seed", "eval_noise", "noise_seed", "item_id"]
    return merged.drop_duplicates(subset=key).reset_index(drop=True)
