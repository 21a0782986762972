"""The ``diagnose:`` section of a study file: what ``robuststats diagnose`` probes, and how.

Every key is optional; a study without the section is diagnosed with the defaults below
(``docs/diagnose.md``). Unknown keys and bad values are errors naming the key path and its
line, like every other key of a study file. The section is outside the run hash
(:func:`robuststats.runs.ledger.run_hash`): changing it never retrains a model, and a study
file without it keeps its spec hash. No torch here.
"""

from __future__ import annotations

import math

from pydantic import Field, field_validator

from robuststats.config._strict import Strict
from robuststats.config.bounds import MAX_ITEMS, MAX_NOISE_SEEDS  # the study's own bounds
from robuststats.engine import ALL_OPS, KINDS, OP_PRESETS
from robuststats.errors import did_you_mean
from robuststats.stats import MULTIPLICITY_METHODS

__all__ = ["DEFAULT_MODULES", "LEVELS", "MAX_ITEMS", "MAX_NOISE_SEEDS", "MAX_SEED_VALUE",
           "MAX_WINDOW", "DiagnoseSpec"]

#: the probe's levels, in the order they run and are reported
LEVELS: tuple[str, ...] = ("operator", "layer", "window", "channel")
#: modules whose inputs the channel level watches by default: the inputs of the two
#: products that write into the residual stream (seed 004's ``o_proj`` and ``down_proj``)
DEFAULT_MODULES: tuple[str, ...] = ("o_proj", "down_proj")
#: largest seed value (robuststats.config.fields.MAX_SEED_VALUE)
MAX_SEED_VALUE = 2**32 - 1
#: largest window (the builtin model allows 256 layers)
MAX_WINDOW = 256
#: calibration items of the channel level
MAX_CALIBRATION_ITEMS = 100_000


def _choice(value: str, choices: tuple[str, ...] | list[str], what: str) -> str:
    if value not in choices:
        hint = did_you_mean(value, choices)
        raise ValueError(f"{what} must be one of {', '.join(map(repr, choices))}, got "
                         f"{value!r}{hint}")
    return value


class DiagnoseSpec(Strict):
    """Options of the diagnostic probe (the ``diagnose:`` section of a study file).

    ``None`` means "as the study says": ``condition`` the first condition, ``kind`` and
    ``ops`` those of ``evaluation``, ``noise_seeds`` and ``n_items`` those of ``evaluation``,
    ``multiplicity`` that of ``analysis``.
    """

    levels: list[str] = Field(default_factory=lambda: list(LEVELS), min_length=1,
                              max_length=len(LEVELS))
    condition: str | None = None
    scale: float = Field(default=0.05, gt=0, lt=1)
    kind: str | None = None
    ops: str | None = None
    operators: list[str] | None = Field(default=None, min_length=1, max_length=len(ALL_OPS))
    window: int = Field(default=3, ge=2, le=MAX_WINDOW)
    stride: int = Field(default=1, ge=1, le=MAX_WINDOW)
    noise_seeds: int | list[int] | None = None
    # a probe's paired tests need two items (as --n-items): refused when the file is read
    n_items: int | None = Field(default=None, ge=2, le=MAX_ITEMS)
    modules: list[str] = Field(default_factory=lambda: list(DEFAULT_MODULES), min_length=1,
                               max_length=100)
    calibration_items: int = Field(default=64, gt=0, le=MAX_CALIBRATION_ITEMS)
    channel_threshold: float = Field(default=10.0, gt=1)
    multiplicity: str | None = None
    labels: bool = False
    avalanche_label: float = Field(default=0.15, gt=0, lt=1)
    critical_label: float = Field(default=3.0, gt=0)

    @field_validator("levels")
    @classmethod
    def _levels(cls, v: list[str]) -> list[str]:
        for level in v:
            _choice(level, LEVELS, "each level")
        if len(set(v)) != len(v):
            raise ValueError(f"levels must be distinct, got {v}")
        return [level for level in LEVELS if level in v]

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str | None) -> str | None:
        # an output error model: its scale is the probe's scale, on the ops of each target
        # (operand models such as nvfp4_weights fix their own ops and cannot be scoped)
        return None if v is None else _choice(v, KINDS, "kind")

    @field_validator("ops")
    @classmethod
    def _ops(cls, v: str | None) -> str | None:
        return None if v is None else _choice(v, [*OP_PRESETS, *ALL_OPS], "ops")

    @field_validator("operators")
    @classmethod
    def _operators(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return None
        for op in v:
            _choice(op, ALL_OPS, "each operator")
        if len(set(v)) != len(v):
            raise ValueError(f"operators must be distinct, got {v}")
        return v

    @field_validator("noise_seeds")
    @classmethod
    def _noise_seeds(cls, v: int | list[int] | None) -> int | list[int] | None:
        if v is None:
            return None
        if isinstance(v, int):
            if not 1 <= v <= MAX_NOISE_SEEDS:
                raise ValueError(f"a count must be in [1, {MAX_NOISE_SEEDS:,}], got {v}")
            return v
        if not v or len(v) > MAX_NOISE_SEEDS:
            raise ValueError(f"the list must hold 1 to {MAX_NOISE_SEEDS:,} seeds, got {len(v)}")
        bad = [s for s in v if not 0 <= s <= MAX_SEED_VALUE]
        if bad:
            raise ValueError(f"seeds must be in [0, {MAX_SEED_VALUE}], got {bad[0]}")
        if len(set(v)) != len(v):
            raise ValueError(f"seeds must be distinct, got {v}")
        return list(v)

    @field_validator("modules")
    @classmethod
    def _modules(cls, v: list[str]) -> list[str]:
        for name in v:
            if not name or not name.isprintable() or name.strip() != name or len(name) > 200:
                raise ValueError(f"each module must be a printable module name (suffix), got "
                                 f"{name!r}")
        if len(set(v)) != len(v):
            raise ValueError(f"modules must be distinct, got {v}")
        return v

    @field_validator("channel_threshold", "critical_label")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError(f"must be finite, got {v}")
        return float(v)

    @field_validator("multiplicity")
    @classmethod
    def _multiplicity(cls, v: str | None) -> str | None:
        return None if v is None else _choice(v, tuple(MULTIPLICITY_METHODS), "multiplicity")
