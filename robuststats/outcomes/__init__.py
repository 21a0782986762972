"""The outcomes table: the one schema every experiment ends in, and every statistic reads.

One row per ``(condition, seed, eval_noise, noise_seed, item_id)`` with ``correct`` in
{0, 1} and an optional ``score`` (``docs/architecture.md``). This module is the only place
that knows the schema. It reads the table from any source, validates it, finds its holes
and aligns conditions item by item. A cell's key and the digest that seals its rows
(:func:`cell_key`, :func:`cell_digest`) live here too: the run ledger, the outcome reader
and the result store all check cells by them. Torch-free, and it never imports the statistics.

Holes come in two kinds:

* a *missing cell*: a whole ``(condition, seed, eval_noise, noise_seed)`` evaluation is
  absent (it failed or was never run). Expected cells come from the study plan or, without
  one, from the cross product present in the data (:func:`missing_cells`);
* a *missing item*: a cell exists but lacks an item that other cells have.

:func:`align` has an explicit policy for both: ``holes="raise"`` names the exact
condition, seed, noise level, noise seed and item; ``holes="drop"`` removes the seed or the
item from every aligned condition and keeps a record of what it dropped (``Aligned.dropped``,
columns of the glossary's ``dropped`` table).

lm-evaluation-harness ``--log_samples`` files are read by :func:`read_lmeval_runs` (a
mapping file assigns each run its cell) and :func:`read_lmeval_samples` (one file); Inspect AI
logs by :func:`read_inspect_runs` and :func:`read_inspect_log` (the extra ``inspect``);
:func:`read_harness_runs` reads a mapping file of either by its ``format``, and every
harness reader records what its runs were in ``attrs["harness"]`` (:func:`harness_record`).
"""


from __future__ import annotations

from robuststats.outcomes._align import (
    Aligned,
    align,
    align_by_condition,
    align_series,
    seed_pairing,
)
from robuststats.outcomes._cells import cell_digest, cell_digests, cell_key
from robuststats.outcomes._holes import Completed, complete, missing_cells
from robuststats.outcomes._inspect import is_inspect_log, read_inspect_log, read_inspect_runs
from robuststats.outcomes._lmeval import is_lmeval_samples, read_lmeval_runs, read_lmeval_samples
from robuststats.outcomes._read import read_outcomes, validate_outcomes
from robuststats.outcomes._runsfile import (
    UNRECORDED,
    harness_record,
    outcomes_protocol,
    read_harness_runs,
)
from robuststats.outcomes._schema import (
    CELL_KEY,
    COLUMNS,
    DEFAULTS,
    DROPPED_COLUMNS,
    DTYPES,
    HOLE_POLICIES,
    KEY,
    empty_outcomes,
    plain,
)

__all__ = [
    "CELL_KEY",
    "COLUMNS",
    "DEFAULTS",
    "DROPPED_COLUMNS",
    "DTYPES",
    "HOLE_POLICIES",
    "KEY",
    "UNRECORDED",
    "Aligned",
    "Completed",
    "align",
    "align_by_condition",
    "align_series",
    "cell_digest",
    "cell_digests",
    "cell_key",
    "complete",
    "empty_outcomes",
    "harness_record",
    "is_inspect_log",
    "is_lmeval_samples",
    "missing_cells",
    "outcomes_protocol",
    "plain",
    "read_harness_runs",
    "read_inspect_log",
    "read_inspect_runs",
    "read_lmeval_runs",
    "read_lmeval_samples",
    "read_outcomes",
    "seed_pairing",
    "validate_outcomes",
]
