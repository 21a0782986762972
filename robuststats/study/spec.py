"""Study files: YAML mapped one-to-one onto a validated :class:`StudySpec`.

Every key of a study file is a field here; unknown keys, wrong types and impossible values
raise :class:`~robuststats.errors.InputError` naming the key path and the line of the file
(``conditions.E8c.train_noise.scale (line 23): ...``). The reference for every key is
``docs/studies.md``. Importing this module never imports torch: noise specifications are
checked against the engine only by :meth:`StudySpec.check_noise`, which the runner calls.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from robuststats.errors import InputError, closest_match

__all__ = [
    "SPEC_FORMAT",
    "AnalysisSpec",
    "ConditionSpec",
    "EvaluationSpec",
    "NamedParams",
    "StudySpec",
]

#: format of the resolved spec written into run directories and manifests
SPEC_FORMAT = 1

_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
_HYPOTHESIS_KEYS = {"id", "statement", "metric", "a", "b", "eval_noise", "relation", "margin"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


class NamedParams(_Strict):
    """A registry name plus keyword parameters (``task``, ``trainer``)."""

    name: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)


class ConditionSpec(_Strict):
    """One training condition: training-time noise and an optional AQN schedule."""

    description: str = ""
    train_noise: dict[str, Any] | None = None
    aqn: dict[str, Any] | None = None


class EvaluationSpec(_Strict):
    """Inference-time noise levels, the error model and the item set."""

    noise_levels: list[float] = Field(min_length=1)
    kind: str = "relative_gaussian"
    ops: str = "matmul_only"
    noise_seeds: int | list[int] = 1
    split: str = "test"
    n_items: int | None = Field(default=None, gt=0)
    batch_size: int = Field(default=64, gt=0)

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
        return _check_seed_field(v)

    def noise_seed_list(self) -> list[int]:
        return _seed_list(self.noise_seeds)


class AnalysisSpec(_Strict):
    """Options of the statistical analysis (all have documented defaults)."""

    alpha: float = Field(default=0.05, gt=0, lt=1)
    confidence_level: float = Field(default=0.95, gt=0, lt=1)
    n_resamples: int = Field(default=2000, gt=0)
    multiplicity: Literal["holm", "fdr_bh", "bonferroni", "sidak", "holm-sidak",
                          "simes-hochberg", "hommel", "fdr_by", "none"] = "holm"
    reference: str | None = None
    mcnemar: Literal["clustered", "mantel-haenszel"] = "clustered"
    rng_seed: int = Field(default=0, ge=0)


class StudySpec(_Strict):
    """A validated study: what to train, how to evaluate, which claims to test."""

    name: str = Field(pattern=_NAME_PATTERN)
    version: int = Field(ge=1)
    description: str = ""
    task: NamedParams
    model: dict[str, Any] = Field(default_factory=dict)
    trainer: NamedParams = NamedParams(name="builtin")
    conditions: dict[str, ConditionSpec] = Field(min_length=1)
    evaluation: EvaluationSpec
    seeds: int | list[int] = 1
    hypotheses: list[dict[str, Any]] = Field(default_factory=list)
    analysis: AnalysisSpec = AnalysisSpec()

    # key path -> line number in the source file (1-based); empty for specs from dicts
    _lines: dict[tuple[str | int, ...], int] = PrivateAttr(default_factory=dict)
    _source: str | None = PrivateAttr(default=None)

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: int | list[int]) -> int | list[int]:
        return _check_seed_field(v)

    @field_validator("conditions")
    @classmethod
    def _condition_names(cls, v: dict[str, ConditionSpec]) -> dict[str, ConditionSpec]:
        import re

        for name in v:
            if not re.match(_NAME_PATTERN, str(name)):
                raise ValueError(f"condition name {name!r} must match {_NAME_PATTERN}")
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> StudySpec:
        conds = set(self.conditions)
        ref = self.analysis.reference
        if ref is not None and ref not in conds:
            raise _KeyedError(("analysis", "reference"), f"unknown condition {ref!r}; "
                              f"the study defines {sorted(conds)}")
        seen: set[str] = set()
        for i, h in enumerate(self.hypotheses):
            if not isinstance(h, Mapping):
                raise _KeyedError(("hypotheses", i), f"must be a mapping, got {type(h).__name__}")
            unknown = set(h) - _HYPOTHESIS_KEYS
            if unknown:
                raise _KeyedError(("hypotheses", i, sorted(unknown)[0]),
                                  f"unknown key; allowed keys are {sorted(_HYPOTHESIS_KEYS)}")
            for key in ("id", "metric", "a", "b", "eval_noise", "relation", "margin"):
                if key not in h:
                    raise _KeyedError(("hypotheses", i), f"missing required key {key!r}")
            if h["id"] in seen:
                raise _KeyedError(("hypotheses", i, "id"), f"duplicate hypothesis id {h['id']!r}")
            seen.add(h["id"])
            for key in ("a", "b"):
                if h[key] not in conds:
                    raise _KeyedError(("hypotheses", i, key), f"unknown condition {h[key]!r}; "
                                      f"the study defines {sorted(conds)}")
            if h["metric"] not in ("accuracy", "retention"):
                raise _KeyedError(("hypotheses", i, "metric"),
                                  f"must be 'accuracy' or 'retention', got {h['metric']!r}")
            if h["relation"] not in ("greater", "less", "equivalent"):
                raise _KeyedError(("hypotheses", i, "relation"), "must be 'greater', 'less' or "
                                  f"'equivalent', got {h['relation']!r}")
            level = h["eval_noise"]
            if not isinstance(level, (int, float)) or float(level) not in self.evaluation.noise_levels:
                raise _KeyedError(("hypotheses", i, "eval_noise"), f"{level!r} is not one of the "
                                  f"evaluation noise levels {self.evaluation.noise_levels}")
            if h["metric"] == "retention" and (float(level) == 0.0
                                               or 0.0 not in self.evaluation.noise_levels):
                raise _KeyedError(("hypotheses", i, "eval_noise"), "a retention hypothesis needs "
                                  "a noisy level > 0 and the clean level 0 among noise_levels")
            margin = h["margin"]
            if isinstance(margin, bool) or not isinstance(margin, (int, float)) or margin < 0:
                raise _KeyedError(("hypotheses", i, "margin"),
                                  f"must be a number >= 0, got {margin!r}")
            if h["relation"] == "equivalent" and margin == 0:
                raise _KeyedError(("hypotheses", i, "margin"),
                                  "an 'equivalent' hypothesis needs a margin > 0, got 0")
        return self

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None,
                  lines: Mapping[tuple[str | int, ...], int] | None = None) -> StudySpec:
        """Validate a mapping; errors name the key path (and line, when ``lines`` is given)."""
        if not isinstance(data, Mapping):
            raise InputError(f"{source or 'study'}: the top level must be a mapping of keys, "
                             f"got {type(data).__name__}.")
        line_map = dict(lines or {})
        try:
            spec = cls.model_validate(dict(data))
        except ValidationError as exc:
            raise InputError(_pydantic_message(exc, source, line_map)) from None
        spec._lines = line_map
        spec._source = source
        return spec

    @classmethod
    def from_file(cls, path: str | Path) -> StudySpec:
        """Load and validate a YAML study file; errors name the key path and its line."""
        path = Path(path)
        if not path.is_file():
            raise InputError(f"study file {str(path)!r} does not exist.")
        text = path.read_text(encoding="utf-8")
        data, lines = load_yaml_with_lines(text, str(path))
        return cls.from_dict(data, source=str(path), lines=lines)

    # ------------------------------------------------------------------ resolution
    def seed_list(self) -> list[int]:
        return _seed_list(self.seeds)

    def with_overrides(self, *, seeds: int | None = None, n_items: int | None = None,
                       noise_seeds: int | None = None) -> StudySpec:
        """Apply command-line overrides; each applies only when given (not ``None``).

        ``seeds=N``: when the file gives a count, seeds ``0..N-1``; when the file lists
        seeds, the first ``N`` listed (an error if it lists fewer).
        """
        data = self.model_dump()
        if seeds is not None:
            if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
                raise InputError(f"`seeds` must be a positive integer, got {seeds!r}.")
            if isinstance(self.seeds, list):
                if seeds > len(self.seeds):
                    raise InputError(f"`seeds` asks for {seeds} seeds but the study file lists "
                                     f"only {len(self.seeds)}: {self.seeds}.")
                data["seeds"] = self.seeds[:seeds]
            else:
                data["seeds"] = seeds
        if n_items is not None:
            if isinstance(n_items, bool) or not isinstance(n_items, int) or n_items < 1:
                raise InputError(f"`n_items` must be a positive integer, got {n_items!r}.")
            data["evaluation"]["n_items"] = n_items
        if noise_seeds is not None:
            if isinstance(noise_seeds, bool) or not isinstance(noise_seeds, int) or noise_seeds < 1:
                raise InputError(f"`noise_seeds` must be a positive integer, got {noise_seeds!r}.")
            data["evaluation"]["noise_seeds"] = noise_seeds
        return StudySpec.from_dict(data, source=self._source, lines=self._lines)

    def resolved(self) -> dict[str, Any]:
        """The spec with seeds and noise seeds spelled out: what the hash covers."""
        data = self.model_dump(mode="json")
        data["seeds"] = self.seed_list()
        data["evaluation"]["noise_seeds"] = self.evaluation.noise_seed_list()
        data["spec_format"] = SPEC_FORMAT
        return data

    def spec_hash(self) -> str:
        """SHA-256 of the canonical JSON of :meth:`resolved` (key order independent)."""
        canon = json.dumps(self.resolved(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()

    def line_of(self, path: Sequence[str | int]) -> int | None:
        return _line_for(tuple(path), self._lines)

    def where(self, path: Sequence[str | int]) -> str:
        """``key.path (file line N)`` for messages raised after validation."""
        return _location(self._source, tuple(path), self._lines)

    def check_noise(self) -> None:
        """Validate each ``train_noise`` / ``aqn`` mapping against the engine (imports torch)."""
        from robuststats import engine

        for name, cond in self.conditions.items():
            for key, value in (("train_noise", cond.train_noise), ("aqn", cond.aqn)):
                if value is None:
                    continue
                factory = engine.NoiseSpec.from_dict if key == "train_noise" else _aqn_factory()
                try:
                    factory(dict(value))
                except (ValueError, TypeError) as exc:
                    where = self.where(("conditions", name, key))
                    raise InputError(f"{where}: {exc}") from None


class _KeyedError(ValueError):
    """A cross-field error that knows its key path (turned into ``InputError``)."""

    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.path = path


def _aqn_factory() -> Any:
    from robuststats import engine

    cls = engine.AQNSchedule
    from_dict = getattr(cls, "from_dict", None)
    return from_dict if from_dict is not None else (lambda d: cls(**d))


def _check_seed_field(v: int | list[int]) -> int | list[int]:
    if isinstance(v, bool):
        raise ValueError(f"must be a count or a list of integers, got {v!r}")
    if isinstance(v, int):
        if v < 1:
            raise ValueError(f"a count must be >= 1, got {v}")
        return v
    if not v:
        raise ValueError("the list must not be empty")
    if any(s < 0 for s in v):
        raise ValueError(f"seeds must be >= 0, got {v}")
    if len(set(v)) != len(v):
        raise ValueError(f"seeds must be distinct, got {v}")
    return list(v)


def _seed_list(v: int | list[int]) -> list[int]:
    return list(range(v)) if isinstance(v, int) else list(v)


# ---------------------------------------------------------------------- YAML with lines
class _LineLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (a silent overwrite hides a typo)."""


def load_yaml_with_lines(text: str, source: str = "<string>"
                         ) -> tuple[Any, dict[tuple[str | int, ...], int]]:
    """Parse YAML; return the data and a map ``key path -> 1-based line``."""
    loader = _LineLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise InputError(f"{source}: the study file is empty.")
        lines: dict[tuple[str | int, ...], int] = {}
        _walk(node, (), lines, source)
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{source}{where}: invalid YAML: {problem}.") from None
    finally:
        loader.dispose()
    return data, lines


def _walk(node: yaml.Node, path: tuple[str | int, ...],
          lines: dict[tuple[str | int, ...], int], source: str) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                raise InputError(f"{source} (line {key_node.start_mark.line + 1}): duplicate "
                                 f"key {'.'.join(map(str, (*path, key)))!r}.")
            seen.add(key)
            lines[(*path, key)] = key_node.start_mark.line + 1
            _walk(value_node, (*path, key), lines, source)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), lines, source)


def _line_for(path: tuple[str | int, ...], lines: Mapping[tuple[str | int, ...], int]
              ) -> int | None:
    # the longest known prefix: a missing key is reported at its parent's line
    for end in range(len(path), -1, -1):
        line = lines.get(tuple(path[:end]))
        if line is not None and (end > 0 or len(path) == 0):
            return line
    return None


def _location(source: str | None, path: tuple[str | int, ...],
              lines: Mapping[tuple[str | int, ...], int]) -> str:
    key = ".".join(str(p) for p in path) or "<top level>"
    line = _line_for(path, lines)
    parts = [source] if source else []
    parts.append(f"{key} (line {line})" if line is not None else key)
    return ": ".join(parts)


def _format(source: str | None, path: tuple[str | int, ...], message: str,
            lines: Mapping[tuple[str | int, ...], int]) -> str:
    return f"{_location(source, path, lines)}: {message}"


def _pydantic_message(exc: ValidationError, source: str | None,
                      lines: Mapping[tuple[str | int, ...], int]) -> str:
    # an unknown key is usually a typo that also explains a "missing" one: report it first
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    err = errors[0]
    # pydantic appends the member type of a union to loc ('int', 'list[int]'): drop it
    path = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p in
                                                                       ("int", "float", "str"))))
    ctx_err = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_err, _KeyedError):
        return _format(source, (*path, *ctx_err.path), str(ctx_err), lines) + "."
    kind = err["type"]
    if kind == "extra_forbidden":
        return _format(source, path, "unknown key", lines) + _suggest(path)
    if kind == "missing":
        return _format(source, path, "required key is missing", lines) + "."
    message = err["msg"].removeprefix("Value error, ")
    value = err.get("input")
    shown = "" if isinstance(value, (dict, list)) else f", got {value!r}"
    extra = f" ({len(exc.errors()) - 1} more problem(s))" if len(exc.errors()) > 1 else ""
    return _format(source, path, f"{message}{shown}", lines) + extra + "."


def _suggest(path: tuple[str | int, ...]) -> str:

    fields = {
        (): StudySpec.model_fields, ("evaluation",): EvaluationSpec.model_fields,
        ("analysis",): AnalysisSpec.model_fields, ("task",): NamedParams.model_fields,
        ("trainer",): NamedParams.model_fields,
    }
    parent, key = path[:-1], path[-1] if path else ""
    if len(parent) == 2 and parent[0] == "conditions":
        known = ConditionSpec.model_fields
    else:
        known = fields.get(parent, {})
    close = closest_match(key, known)
    return f"; did you mean {close!r}?" if close else f"; allowed keys: {sorted(known)}."
