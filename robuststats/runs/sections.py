"""The sections of a study file other than the study itself: ``task``/``trainer``
(:class:`NamedParams`), each condition (:class:`ConditionSpec`), ``evaluation``
(:class:`EvaluationSpec`), ``analysis`` (:class:`AnalysisSpec`) and ``resources``
(:class:`ResourcesSpec`). :class:`~robuststats.runs.spec.StudySpec` composes them."""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, PrivateAttr, field_validator, model_serializer, model_validator

from robuststats._validation import check_choice
from robuststats.analysis import AnalysisOptions
from robuststats.config import Strict, omit_unset
from robuststats.config.bounds import (
    MAX_BATCH_SIZE,
    MAX_ITEMS,
    MAX_NOISE_LEVELS,
    MAX_NOISE_SEEDS,
)
from robuststats.config.fields import (
    AQN,
    TrainNoise,
    as_written,
    check_seed_field,
    written_forms,
)
from robuststats.config.fields import (
    seed_list as _seeds_of,
)
from robuststats.config.yaml_lines import (
    KeyedError,
    keyed,
)
from robuststats.engine import GENERATORS, NoiseSpec
from robuststats.engine.eval_kinds import EVALUATION_KINDS, check_kind
from robuststats.errors import InputError, did_you_mean
from robuststats.models.tasks import SPLITS

__all__ = ["AnalysisSpec", "ConditionSpec", "EvaluationSpec", "NamedParams", "ResourcesSpec"]


class NamedParams(Strict):
    """A registry name plus keyword parameters (``task``, ``trainer``)."""

    name: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)


class ConditionSpec(Strict):
    """One training condition: training-time noise and an optional AQN schedule.

    ``aqn.total_steps`` may be omitted: the trainer stretches the schedule to its steps.
    """

    description: str = ""
    train_noise: TrainNoise = None
    aqn: AQN = None
    #: evaluate this condition under another error model than ``evaluation.kind`` (a name of
    #: ``robuststats.engine.eval_kinds.EVALUATION_KINDS``), at the same noise levels
    eval_kind: str | None = None
    #: evaluate this condition on another op scope than ``evaluation.ops`` (a scope of
    #: :class:`~robuststats.engine.NoiseSpec`: ``matmul_only``, ``all_ops``, ...)
    eval_ops: str | None = None

    @field_validator("eval_ops")
    @classmethod
    def _eval_ops(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                NoiseSpec(scale=0.0, ops=v)
            except InputError as exc:
                raise ValueError(str(exc).replace("`ops`", "the op scope")) from None
        return v

    #: evaluate existing local checkpoints instead of training: a directory, a glob or a
    #: template with ``{seed}`` (``robuststats.models.checkpoints``; resolved before compute)
    checkpoint: str | None = Field(default=None, max_length=4096)

    @field_validator("checkpoint")
    @classmethod
    def _checkpoint(cls, v: str | None) -> str | None:
        from robuststats.models.checkpoints import check_template

        if v is not None:
            try:
                check_template(v)
            except InputError as exc:
                raise KeyedError((), str(exc)) from None
        return v

    @model_validator(mode="after")
    def _checkpoint_is_not_trained(self) -> ConditionSpec:
        if self.checkpoint is not None:
            for key in ("train_noise", "aqn"):
                if getattr(self, key) is not None:
                    raise KeyedError((key,), "a condition with a `checkpoint` is loaded, not "
                                     f"trained, so `{key}` would have no effect; remove one")
        return self

    @field_validator("eval_kind")
    @classmethod
    def _eval_kind(cls, v: str | None) -> str | None:
        if v is not None and v not in EVALUATION_KINDS:
            hint = did_you_mean(v, EVALUATION_KINDS)
            raise ValueError(f"must be one of {', '.join(map(repr, EVALUATION_KINDS))}{hint}")
        return v

    _written: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _remember(cls, data: Any, handler: Any) -> ConditionSpec:
        spec = handler(data)
        if not isinstance(data, ConditionSpec):
            spec._written = as_written(data, ("train_noise", "aqn"))
        return spec

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> dict[str, Any]:
        values = {"train_noise": self.train_noise, "aqn": self.aqn}
        data = {**handler(self), **written_forms(self._written, values)}
        return omit_unset(data, "eval_kind", "eval_ops", "checkpoint")


class EvaluationSpec(Strict):
    """Inference-time noise levels, the error model and the item set."""

    noise_levels: list[float] = Field(min_length=1, max_length=MAX_NOISE_LEVELS)
    kind: str = "relative_gaussian"
    ops: str = "matmul_only"
    noise_seeds: int | list[int] = 1
    split: str = "test"
    n_items: int | None = Field(default=None, gt=0, le=MAX_ITEMS)
    batch_size: int = Field(default=64, gt=0, le=MAX_BATCH_SIZE)
    #: multipliers of every noisy level by layer index or module name (the engine's
    #: ``NoiseSpec.layer_scales``), e.g. the fit of ``robuststats divergence --fit-noise``:
    #: with ``noise_levels: [0, s]`` the noisy cells run that spec of scale s exactly
    layer_scales: dict[Any, Any] | None = None
    #: the noise stream of every noisy cell (the engine's ``NoiseSpec.generator``): absent or
    #: ``mt`` for the default stream, ``philox`` for the opt-in counter-based one
    generator: str | None = None

    @field_validator("generator")
    @classmethod
    def _generator(cls, v: str | None) -> str | None:
        try:
            v = None if v is None else check_choice(v, "generator", GENERATORS)
        except InputError as exc:
            raise KeyedError((), str(exc)) from None
        return None if v == "mt" else v  # the default stream: the spec (and its hash) as before

    @field_validator("layer_scales")
    @classmethod
    def _layer_scales(cls, v: dict[Any, Any] | None) -> dict[int | str, float] | None:
        if v is None:
            return None
        try:
            return NoiseSpec(scale=0.0, layer_scales=v).layer_scales
        except InputError as exc:
            raise ValueError(str(exc).rstrip(".")) from None

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> dict[str, Any]:
        return omit_unset(handler(self), "layer_scales", "generator")

    @field_validator("noise_levels")
    @classmethod
    def _levels(cls, v: list[float]) -> list[float]:
        for x in v:
            if not math.isfinite(x) or x < 0 or x >= 1:
                raise ValueError(f"each noise level must lie in [0, 1), got {x}")
        if len(set(v)) != len(v):
            raise ValueError(f"noise levels must be distinct, got {v}")
        return sorted(float(x) for x in v)

    @field_validator("noise_seeds")
    @classmethod
    def _noise_seeds(cls, v: int | list[int]) -> int | list[int]:
        return check_seed_field(v, max_count=MAX_NOISE_SEEDS)

    @field_validator("split")
    @classmethod
    def _split(cls, v: str) -> str:
        # the splits every task serves (robuststats.models.tasks.SPLITS)
        try:
            return check_choice(v, "split", SPLITS)
        except InputError as exc:
            raise KeyedError((), str(exc)) from None

    @model_validator(mode="after")
    def _engine_accepts(self) -> EvaluationSpec:
        try:
            entry = check_kind(self.kind)
            if entry.uses_ops:
                NoiseSpec(scale=0.0, kind=self.kind, ops=self.ops)
        except InputError as exc:
            raise keyed(exc, ("kind", "ops")) from None
        if not entry.level_is_scale and sum(x > 0 for x in self.noise_levels) > 1:
            raise KeyedError(("noise_levels",), f"kind {self.kind!r} is a number format: every "
                             f"positive level evaluates the format itself, so give one "
                             f"positive level, got {self.noise_levels}")
        return self

    def noise_seed_list(self) -> list[int]:
        return _seeds_of(self.noise_seeds)

    def noise(self, eval_noise: float, noise_seed: int, *,
              kind: str | None = None, ops: str | None = None) -> NoiseSpec | None:
        """The inference noise of one cell: forward only; ``None`` for the clean level 0.

        ``kind`` (default ``evaluation.kind``) is a name of
        :data:`~robuststats.engine.eval_kinds.EVALUATION_KINDS`: for an engine error model
        the level is its ``scale`` on ``evaluation.ops``; a number format is applied at
        full strength on its own ops. ``ops`` (default ``evaluation.ops``) is the op scope.
        """
        spec = check_kind(kind or self.kind).spec(float(eval_noise), int(noise_seed),
                                                  ops or self.ops)
        if spec is not None and self.generator is not None:
            spec = spec.replace(generator=self.generator)
        if spec is None or not self.layer_scales:
            return spec
        return spec.replace(layer_scales={**(spec.layer_scales or {}), **self.layer_scales})

    def draws(self, eval_noise: float, kind: str | None = None) -> list[int]:
        """Noise seeds of the cells at ``eval_noise``: one (``0``) when the outcome cannot
        depend on the seed (the clean level, a deterministic error model)."""
        if eval_noise == 0.0 or check_kind(kind or self.kind).deterministic:
            return [0]
        return self.noise_seed_list()


class AnalysisSpec(AnalysisOptions):
    """The ``analysis:`` section of a study file: the options the analysis owns
    (:class:`~robuststats.analysis.AnalysisOptions`), under the section's name."""


class ResourcesSpec(Strict):
    """``resources:``: what each cell (a training job with its evaluations) asks of a Ray
    cluster under ``--executor ray``; the local executor ignores it. Outside the run hash."""

    num_cpus: float = Field(default=1.0, ge=0, le=1024)
    num_gpus: float = Field(default=0.0, ge=0, le=64)
    #: Ray reruns a job whose worker died this many times before its cells count as failed
    max_retries: int = Field(default=2, ge=0, le=100)
