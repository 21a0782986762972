"""The ``sequential:`` section of a study file: a group-sequential study over training seeds.

    sequential:
      looks: [3, 5, 8]          # analyse after this many seeds; the last is every seed
                                #   (`every` or `every from 3`: after every seed)
      spending: obf             # obf | pocock | hsd(γ), γ in [-10, 5] (Lan–DeMets spending)
      futility: non_binding     # none | binding | non_binding
      beta: 0.2                 # type II error spent by the futility bound
      effect: 0.05              # planned a − b of the driving hypotheses (with futility)
      drift: 2.9                # or: the planned z at the last look, fixed before the data
                                #   (`robuststats power --sequential` prints it)
      drive: [H1]               # hypotheses that decide stopping (default: all)
      run_ahead: 1              # with --workers > 1: seeds past a look that may train
                                #   while it waits (default from --workers; 0: none)

The study trains the first ``looks[k]`` seeds of ``seeds``, analyses, and stops when every
driving hypothesis is decided by its repeated confidence interval or is futile
(:mod:`robuststats.stats.sequential`; ``docs/statistics.md``, sequential studies).
Torch-free, like the rest of the spec.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_serializer

from robuststats.config import Strict, omit_unset
from robuststats.config.bounds import MAX_SEEDS

__all__ = ["SequentialSpec", "every_seed_looks", "run_ahead_seeds"]

MAX_LOOKS = 100
_EVERY = re.compile(r"^every(?:\s+from\s+(\d+))?$")


def every_seed_looks(data: Any) -> Any:
    """A study document with ``sequential.looks: every`` (or ``every from K``) written out
    as a look after every seed from 2 (or ``K``) to the number of ``seeds``; anything else
    unchanged (the fields' own checks then speak)."""
    if not isinstance(data, dict) or not isinstance(data.get("sequential"), dict):
        return data
    looks = data["sequential"].get("looks")
    match = _EVERY.match(looks.strip()) if isinstance(looks, str) else None
    seeds = data.get("seeds", 1)
    n = seeds if isinstance(seeds, int) and not isinstance(seeds, bool) else (
        len(seeds) if isinstance(seeds, list) else None)
    if match is None or n is None:
        return data
    first = int(match.group(1) or 2)
    return {**data, "sequential": {**data["sequential"],
                                   "looks": list(range(first, max(n, first) + 1))}}


class SequentialSpec(Strict):
    """Looks, spending, futility and the driving hypotheses of a sequential study."""

    looks: list[int] = Field(min_length=2, max_length=MAX_LOOKS)
    spending: str = "obf"
    futility: Literal["none", "binding", "non_binding"] = "none"
    beta: float = Field(default=0.2, gt=0, lt=0.5)
    beta_spending: str | None = None
    effect: float | None = Field(default=None, allow_inf_nan=False)
    drift: float | None = Field(default=None, gt=0, le=40, allow_inf_nan=False)
    drive: list[str] | None = Field(default=None, min_length=1)
    #: seeds past the look being waited for whose cells may train meanwhile (a run path,
    #: not part of the plan: the decisions are the same for every value); unset: from the
    #: workers (:func:`run_ahead_seeds`)
    run_ahead: int | None = Field(default=None, ge=0, le=MAX_SEEDS)

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> dict[str, Any]:
        return omit_unset(handler(self), "drift", "run_ahead")

    def plan(self) -> SequentialSpec:
        """The statistical plan alone (without the run path ``run_ahead``): what a
        re-analysis compares."""
        return self.model_copy(update={"run_ahead": None})

    @field_validator("spending", "beta_spending")
    @classmethod
    def _spending(cls, v: str | None) -> str | None:
        """``obf``, ``pocock`` or the Hwang–Shih–DeCani family ``hsd(γ)``, γ in [−10, 5]."""
        from robuststats.errors import InputError
        from robuststats.stats.sequential import check_spending

        if v is None:
            return v
        try:
            return check_spending(v, "spending")
        except InputError as exc:
            raise ValueError(str(exc).replace("`spending` ", "").replace("`spending`: ", "")
                             .rstrip(".")) from None

    @field_validator("looks")
    @classmethod
    def _looks(cls, v: list[int]) -> list[int]:
        if v[0] < 2:
            raise ValueError(f"the first look needs at least 2 seeds (the seed-random t), "
                             f"got {v[0]}")
        if any(b <= a for a, b in itertools.pairwise(v)):
            raise ValueError(f"looks must increase strictly, got {v}")
        if v[-1] > MAX_SEEDS:
            raise ValueError(f"the last look may have at most {MAX_SEEDS} seeds, got {v[-1]}")
        return v


def run_ahead_seeds(seq: SequentialSpec, *, workers: int, jobs_per_seed: int) -> int:
    """How many seeds past the look being waited for may train meanwhile.

    ``seq.run_ahead`` when the file sets it; else the fewest seeds whose training jobs
    fill every worker, ``ceil(workers / jobs_per_seed)`` (``jobs_per_seed``: the models a
    seed trains, one per condition): the work wasted when the study stops is then at most
    one round of the workers, and no worker waits for a look's last job or its analysis.
    With one worker (everything in one process) nothing runs ahead: there is no idle
    worker to fill, and a seed trained ahead would only delay the look.
    """
    if workers <= 1:
        return 0
    if seq.run_ahead is not None:
        return seq.run_ahead
    return -(-workers // max(1, jobs_per_seed))


def check_sequential(seq: SequentialSpec, hypotheses: list, n_seeds: int, *,
                     sweep: bool) -> None:
    """The checks of ``sequential`` against the rest of the study (key paths from the root)."""
    from robuststats.config.yaml_lines import KeyedError
    from robuststats.errors import did_you_mean

    if sweep:
        raise KeyedError(("sequential",), "a study cannot have both `sweep` and `sequential`")
    if seq.looks[-1] != n_seeds:
        raise KeyedError(("sequential", "looks"), f"the last look must be every seed of "
                         f"`seeds` ({n_seeds}), got {seq.looks[-1]}")
    if not hypotheses:
        raise KeyedError(("sequential",), "a sequential study needs `hypotheses` to drive "
                         "its stopping")
    ids = [h.id for h in hypotheses]
    for i, name in enumerate(seq.drive or []):
        if name not in ids:
            raise KeyedError(("sequential", "drive", i), f"unknown hypothesis {name!r}"
                             f"{did_you_mean(name, ids)}; the study defines {ids}")
    if seq.futility == "none":
        return
    if seq.effect is None and seq.drift is None:
        raise KeyedError(("sequential", "drift"), f"futility {seq.futility!r} needs the "
                         "planned drift `drift` (the z at the last look that `robuststats "
                         "power --sequential` prints) or the planned effect `effect` (a − b) "
                         "that its β-spending is under")
    for h in hypotheses:
        if seq.drive is not None and h.id not in seq.drive:
            continue
        if h.relation == "equivalent":
            raise KeyedError(("sequential", "futility"), f"a futility bound needs greater or "
                             f"less hypotheses; driving hypothesis {h.id!r} is equivalent "
                             "(drive it without futility, or leave it out of `drive`)")
        if seq.effect is None:
            continue
        ahead = seq.effect > h.margin if h.relation == "greater" else seq.effect < h.margin
        if not ahead:
            raise KeyedError(("sequential", "effect"), f"the planned effect {seq.effect!r} "
                             f"must lie on the verified side of hypothesis {h.id!r} "
                             f"({h.relation} than margin {h.margin!r})")
