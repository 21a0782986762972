"""The options of one analysis: the ``analysis:`` section of a study file, owned here.

Every function of :mod:`robuststats.analysis` takes an :class:`AnalysisOptions`; a study
file's section is validated into one (errors name the key and its line), and
``robuststats analyze`` builds one from its flags.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from robuststats._validation import MAX_RESAMPLES
from robuststats.config import Strict
from robuststats.config.fields import MAX_SEED_VALUE
from robuststats.errors import did_you_mean
from robuststats.stats import MULTIPLICITY_METHODS

__all__ = ["MULTIPLICITY_CHOICES", "AnalysisOptions"]

#: ``analysis.multiplicity``: the methods of :func:`robuststats.stats.adjust_pvalues`
#: ("none" included)
MULTIPLICITY_CHOICES: tuple[str, ...] = tuple(MULTIPLICITY_METHODS)


class AnalysisOptions(Strict):
    """Options of the statistical analysis (all have documented defaults)."""

    alpha: float = Field(default=0.05, gt=0, lt=1)
    confidence_level: float = Field(default=0.95, gt=0, lt=1)
    n_resamples: int = Field(default=2000, gt=0, le=MAX_RESAMPLES)
    multiplicity: str = "holm"
    reference: str | None = None
    mcnemar: Literal["clustered", "mantel-haenszel"] = "clustered"
    rng_seed: int = Field(default=0, ge=0, le=MAX_SEED_VALUE)

    @field_validator("multiplicity")
    @classmethod
    def _multiplicity(cls, v: str) -> str:
        if v not in MULTIPLICITY_CHOICES:
            hint = did_you_mean(v, MULTIPLICITY_CHOICES)
            raise ValueError(f"must be one of {', '.join(map(repr, MULTIPLICITY_CHOICES))}"
                             f"{hint}")
        return v
