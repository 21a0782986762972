"""The ``sweep:`` section of a study file: a dose-response sweep over the noise scale.

A study with ``sweep:`` evaluates every condition over a log grid of inference-noise
scales (``grid``, the clean level 0 always included) instead of listing
``evaluation.noise_levels``, and its result version adds the dose-response tables
(:mod:`robuststats.analysis._dose`). Conditions may differ in their op scope
(``eval_ops``: matmul-only vs all ops), error model (``eval_kind``) or training noise (the
training scale); each gets its own curve and threshold. ``adaptive`` adds levels around
each condition's fitted threshold after the grid has run (seed 004's "binary search", done
with the fitted curve). Torch-free, like the rest of the spec.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from robuststats.config import Strict
from robuststats.config.yaml_lines import KeyedError
from robuststats.errors import did_you_mean
from robuststats.stats import DOSE_MODELS as MODELS

__all__ = ["AdaptiveSpec", "GridSpec", "SweepSpec", "adaptive_levels", "round_scale"]

#: significant digits of every scale a sweep makes (a stable cell key on resume)
SCALE_DIGITS = 3


def round_scale(x: float) -> float:
    """``x`` to :data:`SCALE_DIGITS` significant digits."""
    return float(f"{x:.{SCALE_DIGITS - 1}e}")


class GridSpec(Strict):
    """``points`` log-spaced scales from ``low`` to ``high`` (plus the clean level 0)."""

    low: float = Field(gt=0, lt=1)
    high: float = Field(gt=0, lt=1)
    points: int = Field(ge=2, le=50)

    @model_validator(mode="after")
    def _order(self) -> GridSpec:
        if not self.low < self.high:
            raise KeyedError(("high",), f"must be greater than `low` ({self.low!r}), got "
                             f"{self.high!r}")
        if len(self.levels()) != self.points + 1:
            raise KeyedError(("points",), f"{self.points} points between {self.low!r} and "
                             f"{self.high!r} are not distinct at {SCALE_DIGITS} significant "
                             "digits; use fewer points or a wider range")
        return self

    def levels(self) -> list[float]:
        ratio = math.log(self.high / self.low) / (self.points - 1)
        scales = {round_scale(self.low * math.exp(i * ratio)) for i in range(self.points)}
        return [0.0, *sorted(scales)]


class AdaptiveSpec(Strict):
    """Refinement rounds: ``points`` new scales per condition and round, log-spaced over
    ``[t / s, t · s]`` around the fitted threshold ``t``, with ``s = spread`` in the first
    round and its square root in each further round."""

    rounds: int = Field(default=1, ge=0, le=5)
    points: int = Field(default=2, ge=1, le=10)
    spread: float = Field(default=2.0, gt=1, le=100)


class SweepSpec(Strict):
    """A dose-response sweep: the grid, the curve, the threshold and the refinement."""

    grid: GridSpec
    #: a drc model name, or "auto": the smallest AIC of LL.4, W1.4 and W2.4
    model: str = "auto"
    fixed: dict[str, float] = Field(default_factory=dict)
    drop: float = Field(default=0.10, gt=0, lt=1)
    interval: Literal["seed-random", "bootstrap", "delta"] = "seed-random"
    compare: list[str] = Field(default_factory=lambda: ["LL.4", "LL.3", "LL.5", "W1.4",
                                                        "W2.4"], min_length=1, max_length=20)
    adaptive: AdaptiveSpec | None = None

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        return v if v == "auto" else _model_name(v)

    @field_validator("compare")
    @classmethod
    def _compare(cls, v: list[str]) -> list[str]:
        for i, name in enumerate(v):
            try:
                _model_name(name)
            except ValueError as exc:
                raise KeyedError((i,), str(exc)) from None
        return v

    @model_validator(mode="after")
    def _fixed(self) -> SweepSpec:
        params = MODELS["LL.4" if self.model == "auto" else self.model].params
        for key, value in self.fixed.items():
            if key not in params:
                hint = did_you_mean(key, params)
                name = "the models of 'auto' (LL.4, W1.4, W2.4)" if self.model == "auto" \
                    else self.model
                raise KeyedError(("fixed", key), f"{name}: no parameter {key!r}"
                                 f"{hint}; its parameters are {list(params)}")
            if not math.isfinite(value) or (key == "e" and value <= 0):
                bound = " > 0" if key == "e" else ""
                raise KeyedError(("fixed", key), f"must be a finite number{bound}, got "
                                 f"{value!r}")
        return self


def _model_name(v: str) -> str:
    if v not in MODELS:
        hint = did_you_mean(v, MODELS)
        raise ValueError(f"must be one of {', '.join(map(repr, MODELS))}{hint}")
    return v


def adaptive_levels(threshold: float, existing: list[float], adaptive: AdaptiveSpec,
                    round_index: int) -> list[float]:
    """New scales around ``threshold`` for refinement round ``round_index`` (0-based):
    log-spaced over ``[t / s, t · s]`` with ``s = spread^(1/2^round)``, rounded, within
    (0, 1), without the ``existing`` ones. Empty when ``threshold`` is not finite."""
    if not (math.isfinite(threshold) and threshold > 0):
        return []
    spread = adaptive.spread ** (0.5 ** round_index)
    n = adaptive.points
    if n == 1:
        raw = [threshold]
    else:
        step = 2 * math.log(spread) / (n - 1)
        raw = [threshold / spread * math.exp(i * step) for i in range(n)]
    have = set(existing)
    out = []
    for x in raw:
        r = round_scale(x)
        if 0 < r < 1 and r not in have:
            have.add(r)
            out.append(r)
    return sorted(out)


def sweep_levels(data: Any) -> Any:
    """Before validation of a study: fill ``evaluation.noise_levels`` from ``sweep.grid``.

    A study with a sweep states its scales once, in the grid; giving
    ``evaluation.noise_levels`` as well is an error naming that key.
    """
    if not isinstance(data, dict) or not isinstance(data.get("sweep"), dict):
        return data
    evaluation = data.get("evaluation")
    if not isinstance(evaluation, dict):
        return data
    try:
        levels = GridSpec.model_validate(data["sweep"].get("grid")).levels()
    except (ValueError, TypeError):
        # the grid's own validation reports it at its key; a placeholder keeps a second,
        # derived error ("noise_levels missing") out of the message
        return {**data, "evaluation": {**evaluation, "noise_levels": [0.0]}}
    # the resolved spec (model_dump) carries the levels the grid made: accept exactly those
    if "noise_levels" in evaluation and evaluation["noise_levels"] != levels:
        raise KeyedError(("evaluation", "noise_levels"), "a study with a `sweep:` section "
                         "takes its noise levels from `sweep.grid`; remove this key")
    return {**data, "evaluation": {**evaluation, "noise_levels": levels}}
