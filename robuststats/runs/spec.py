"""Study files: YAML mapped one-to-one onto a validated :class:`StudySpec`, typed all the way.

Every key of a study file is a field here; unknown keys, wrong types and impossible values
raise :class:`~robuststats.errors.InputError` naming the key path and the line of the file
(``studies/x.yaml: conditions.E8c.train_noise.scale (line 23): ...``). The reference for
every key is ``docs/studies.md``.

The values are the classes that use them: ``train_noise`` is an engine
:class:`~robuststats.engine.NoiseSpec`, ``aqn`` an :class:`~robuststats.engine.AQNSchedule`,
each hypothesis a :class:`~robuststats.stats.Hypothesis`, so one validation (at load time)
serves the whole run. None of them needs torch: loading a study never imports it.

:meth:`StudySpec.resolved` (and so :meth:`StudySpec.spec_hash`) records ``train_noise``,
``aqn`` and the hypotheses as they were written, so the hash of a study file does not move
when the classes that read them gain a field with a default.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    PrivateAttr,
    field_validator,
    model_serializer,
    model_validator,
)

from robuststats._canonical import canonical_sha256
from robuststats._fields import DEVICE_PATTERN
from robuststats.analysis import MULTIPLICITY_CHOICES
from robuststats.config import Strict, omit_unset
from robuststats.config.bounds import (
    MAX_BATCH_SIZE,
    MAX_CELLS,
    MAX_CONDITIONS,
    MAX_HYPOTHESES,
    MAX_ITEMS,
    MAX_NAME_LENGTH,
    MAX_NOISE_LEVELS,
    MAX_NOISE_SEEDS,
    MAX_SEEDS,
    MAX_VERSION,
    check_count,
    check_name,
)
from robuststats.config.diagnose import DiagnoseSpec
from robuststats.config.fields import (
    MAX_SEED_VALUE,
    HypothesisField,
    as_written,
    check_seed_field,
    written_forms,
)
from robuststats.config.fields import (
    seed_list as _seeds_of,
)
from robuststats.config.hints import field_hints
from robuststats.config.sequential import SequentialSpec, check_sequential, every_seed_looks
from robuststats.config.sweep import SweepSpec, sweep_levels
from robuststats.config.yaml_lines import (
    KeyedError,
    KeyPath,
    check_document,
    component_key,
    line_for,
    load_yaml_with_lines,
    location,
    read_study_text,
    validate_keyed,
)
from robuststats.engine import NoiseSpec
from robuststats.errors import InputError, did_you_mean
from robuststats.runs.sections import (
    AnalysisSpec,
    ConditionSpec,
    EvaluationSpec,
    NamedParams,
    ResourcesSpec,
)

__all__ = [
    "MAX_BATCH_SIZE",
    "MAX_CELLS",
    "MAX_CONDITIONS",
    "MAX_HYPOTHESES",
    "MAX_ITEMS",
    "MAX_NAME_LENGTH",
    "MAX_NOISE_LEVELS",
    "MAX_NOISE_SEEDS",
    "MAX_SEEDS",
    "MAX_SEED_VALUE",
    "MAX_VERSION",
    "MULTIPLICITY_CHOICES",
    "SPEC_FORMAT",
    "AnalysisSpec",
    "ConditionSpec",
    "EvaluationSpec",
    "NamedParams",
    "ResourcesSpec",
    "StudySpec",
    "load_yaml_with_lines",
]

#: format of the resolved spec written into run directories and manifests
SPEC_FORMAT = 1


class StudySpec(Strict):
    """A validated study: what to train, how to evaluate, which claims to test."""

    name: str
    version: int = Field(ge=1, le=MAX_VERSION)
    description: str = ""
    task: NamedParams
    model: dict[str, Any] = Field(default_factory=dict)
    trainer: NamedParams = NamedParams(name="builtin")
    conditions: dict[str, ConditionSpec] = Field(min_length=1, max_length=MAX_CONDITIONS)
    evaluation: EvaluationSpec
    seeds: int | list[int] = 1
    hypotheses: list[HypothesisField] = Field(default_factory=list, max_length=MAX_HYPOTHESES)
    analysis: AnalysisSpec = AnalysisSpec()
    #: a dose-response sweep (:mod:`robuststats.config.sweep`); its grid makes the levels
    sweep: SweepSpec | None = None
    #: options of ``robuststats diagnose`` (docs/diagnose.md); outside the run hash
    diagnose: DiagnoseSpec | None = None
    #: per-cell resources under ``--executor ray``; outside the run hash
    resources: ResourcesSpec | None = None
    #: a group-sequential study over the seeds (:mod:`robuststats.config.sequential`)
    sequential: SequentialSpec | None = None
    #: where the builtin trainer trains and every cell evaluates (cpu, cuda, cuda:N, npu,
    #: ...); unset: the CPU. Part of the run hash: another device computes other numbers
    device: str | None = None

    # key path -> line number in the source file (1-based); empty for specs from dicts
    _lines: dict[KeyPath, int] = PrivateAttr(default_factory=dict)
    _source: str | None = PrivateAttr(default=None)
    _written: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _plain_document(cls, data: Any) -> Any:
        # bounded nesting and size, and no control characters, before pydantic walks it
        check_document(data)
        return every_seed_looks(sweep_levels(data))

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v, "study name")

    @field_validator("device")
    @classmethod
    def _device(cls, v: str | None) -> str | None:
        if v is not None and not DEVICE_PATTERN.match(v):
            raise ValueError(f"must be cpu, cuda, cuda:N, npu, npu:N, xpu, xpu:N or mps, "
                             f"got {v!r}")
        return None if v == "cpu" else v  # the default: the same run, the same hash

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: int | list[int]) -> int | list[int]:
        return check_seed_field(v, max_count=MAX_SEEDS)

    @field_validator("conditions")
    @classmethod
    def _condition_names(cls, v: dict[str, ConditionSpec]) -> dict[str, ConditionSpec]:
        for name in v:
            try:
                check_name(name, "condition name")
            except ValueError as exc:
                raise KeyedError((name,), str(exc)) from None
        return v

    @model_validator(mode="wrap")
    @classmethod
    def _remember(cls, data: Any, handler: Any) -> StudySpec:
        spec = handler(data)
        if not isinstance(data, StudySpec):
            written = as_written(data, ("hypotheses",))
            if all(isinstance(h, Mapping) for h in written.get("hypotheses", [])):
                spec._written = written
        return spec

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> dict[str, Any]:
        data = {**handler(self), **written_forms(self._written,
                                                 {"hypotheses": self.hypotheses})}
        return omit_unset(data, "sweep", "diagnose", "resources", "sequential", "device")

    @model_validator(mode="after")
    def _cross_checks(self) -> StudySpec:
        conds = list(self.conditions)
        levels = self.evaluation.noise_levels
        self._check_plan_size()

        def condition(path: KeyPath, name: str | None) -> None:
            if name is not None and name not in conds:
                raise KeyedError(path, f"unknown condition {name!r}{did_you_mean(name, conds)}; "
                                 f"the study defines {conds}")

        condition(("analysis", "reference"), self.analysis.reference)
        if self.diagnose is not None:
            condition(("diagnose", "condition"), self.diagnose.condition)
        seen: set[str] = set()
        for i, h in enumerate(self.hypotheses):
            if not h.id.isprintable() or len(h.id) > MAX_NAME_LENGTH:
                raise KeyedError(("hypotheses", i, "id"), f"a hypothesis id must be printable "
                                 f"text of at most {MAX_NAME_LENGTH} characters, got {h.id!r}")
            if h.id in seen:
                raise KeyedError(("hypotheses", i, "id"), f"duplicate hypothesis id {h.id!r}")
            seen.add(h.id)
            for key in ("a", "b"):
                condition(("hypotheses", i, key), getattr(h, key))
            if h.eval_noise not in levels:
                raise KeyedError(("hypotheses", i, "eval_noise"), f"{h.eval_noise!r} is not one "
                                 f"of the evaluation noise levels {levels}")
            if h.metric == "retention" and 0.0 not in levels:
                raise KeyedError(("hypotheses", i, "eval_noise"), "a retention hypothesis needs "
                                 "the clean level 0 among the evaluation noise levels")
            if h.margin < 0:
                raise KeyedError(("hypotheses", i, "margin"),
                                 f"must be a number >= 0, got {h.margin!r}")
        if self.sequential is not None:
            check_sequential(self.sequential, self.hypotheses, len(self.seed_list()),
                             sweep=self.sweep is not None)
        return self

    def n_cells(self) -> int:
        """Cells of the plan, counted without building it (:func:`robuststats.runs.plan`)."""
        levels = self.evaluation.noise_levels
        clean = sum(1 for x in levels if x == 0.0)
        noisy = len(levels) - clean
        per_model = clean + noisy * len(_seeds_of(self.evaluation.noise_seeds))
        return len(self.conditions) * len(_seeds_of(self.seeds)) * per_model

    def _check_plan_size(self) -> None:
        n = self.n_cells()
        if n <= MAX_CELLS:
            return
        n_seeds = len(_seeds_of(self.seeds))
        n_noise = len(_seeds_of(self.evaluation.noise_seeds))
        key: KeyPath = ("seeds",) if n_seeds >= n_noise else ("evaluation", "noise_seeds")
        raise KeyedError(key, f"the plan has {n:,} cells ({len(self.conditions)} conditions × "
                         f"{n_seeds} seeds × {len(self.evaluation.noise_levels)} noise levels, "
                         f"{n_noise} noise seeds per noisy level), more than {MAX_CELLS:,}; "
                         "use fewer seeds, noise seeds or levels")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None,
                  lines: Mapping[KeyPath, int] | None = None) -> StudySpec:
        """Validate a mapping; errors name the key path (and line, when ``lines`` is given)."""
        return validate_keyed(cls, data, source=source, lines=lines, suggest=field_hints(cls),
                              what="study")

    @classmethod
    def from_file(cls, path: str | Path) -> StudySpec:
        """Load and validate a YAML study file; errors name the key path and its line."""
        text = read_study_text(path)
        data, lines = load_yaml_with_lines(text, str(path))
        return cls.from_dict(data, source=str(path), lines=lines)

    # ------------------------------------------------------------------ resolution
    def seed_list(self) -> list[int]:
        return _seeds_of(self.seeds)

    def eval_kind(self, condition: str) -> str:
        """The evaluation error model of ``condition`` (its ``eval_kind`` or ``evaluation.kind``)."""
        return self.conditions[condition].eval_kind or self.evaluation.kind

    def cell_noise(self, condition: str, eval_noise: float, noise_seed: int) -> NoiseSpec | None:
        """The NoiseSpec of one cell (``None`` when clean)."""
        return self.evaluation.noise(eval_noise, noise_seed, kind=self.eval_kind(condition),
                                     ops=self.conditions[condition].eval_ops)

    def with_overrides(self, *, seeds: int | None = None, n_items: int | None = None,
                       noise_seeds: int | None = None, device: str | None = None
                       ) -> StudySpec:
        """Apply command-line overrides; each applies only when given (not ``None``).

        ``seeds=N``: when the file gives a count, seeds ``0..N-1``; when the file lists
        seeds, the first ``N`` listed (an error if it lists fewer).
        """
        data = self.model_dump()
        overridden: list[KeyPath] = []

        if seeds is not None:
            check_count(seeds, "seeds", MAX_SEEDS)
            if isinstance(self.seeds, list):
                if seeds > len(self.seeds):
                    raise InputError(f"`seeds` asks for {seeds} seeds but the study file lists "
                                     f"only {len(self.seeds)}: {self.seeds}.")
                data["seeds"] = self.seeds[:seeds]
            else:
                data["seeds"] = seeds
            overridden.append(("seeds",))
        if n_items is not None:
            data["evaluation"]["n_items"] = check_count(n_items, "n_items", MAX_ITEMS)
            overridden.append(("evaluation", "n_items"))
        if noise_seeds is not None:
            data["evaluation"]["noise_seeds"] = check_count(noise_seeds, "noise_seeds",
                                                            MAX_NOISE_SEEDS)
            overridden.append(("evaluation", "noise_seeds"))
        if device is not None:
            data["device"] = device
            overridden.append(("device",))
        # an overridden value is no longer on its line of the file: errors about it name
        # the key without a line
        lines = {path: line for path, line in self._lines.items()
                 if not any(path[: len(o)] == o for o in overridden)}
        return StudySpec.from_dict(data, source=self._source, lines=lines)

    def resolved(self) -> dict[str, Any]:
        """The spec as plain JSON data with seeds and noise seeds spelled out: what the hash
        covers, and what run directories and manifests record."""
        data = self.model_dump(mode="json")
        data["seeds"] = self.seed_list()
        data["evaluation"]["noise_seeds"] = self.evaluation.noise_seed_list()
        data["spec_format"] = SPEC_FORMAT
        return data

    def spec_hash(self) -> str:
        """SHA-256 of the canonical JSON of :meth:`resolved` (key order independent)."""
        return canonical_sha256(self.resolved())

    def line_of(self, path: Sequence[str | int]) -> int | None:
        return line_for(tuple(path), self._lines)

    def where(self, path: Sequence[str | int]) -> str:
        """``key.path (file line N)`` for messages raised after validation."""
        return location(self._source, tuple(path), self._lines)

    @contextmanager
    def pointing_at(self, section: Literal["task", "trainer"]) -> Iterator[None]:
        """Errors raised while the task or trainer is built name the key and its line.

        The task and the trainer validate their own ``params`` when they are built (before
        the first cell, see :func:`robuststats.runs.executor.preflight`); their messages
        name the parameter in backticks, or ``unknown parameter 'x'``::

            with spec.pointing_at("task"):
                build_task(spec)
            # studies/x.yaml: task.params.max_value (line 17): `max_value` must be ...
        """
        try:
            yield
        except InputError as exc:
            message = str(exc)
            path = component_key(section, message)
            raise InputError(f"{location(self._source, path, self._lines)}: {message}") \
                from None
