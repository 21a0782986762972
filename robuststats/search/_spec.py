"""Search files: a study file's ``task``/``model``/``trainer``/``evaluation``/``seeds`` plus a
``search:`` section, mapped one-to-one onto a validated :class:`SearchSpec`.

Validation follows the study files (``docs/studies.md``): unknown keys, wrong types and
impossible values are one :class:`~robuststats.errors.InputError` line naming the key path
and its line (``studies/s.yaml: search.scale_range (line 31): ...``). The sections shared
with study files are the study's own classes (:class:`~robuststats.runs.spec.NamedParams`,
:class:`~robuststats.runs.spec.EvaluationSpec`, the ``train_noise`` adapter), so a search
file and a study file mean the same thing by the same key. Loading never imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from robuststats._canonical import canonical_sha256
from robuststats._fields import check_whole
from robuststats.config import Strict
from robuststats.config.bounds import MAX_NOISE_SEEDS, MAX_SEEDS, check_name
from robuststats.config.fields import (
    MAX_SEED_VALUE,
    TrainNoise,
    check_seed_field,
    seed_list,
)
from robuststats.config.hints import field_hints
from robuststats.config.yaml_lines import (
    KeyedError,
    KeyPath,
    check_document,
    line_for,
    load_yaml_with_lines,
    location,
    read_study_text,
    validate_keyed,
)
from robuststats.engine.eval_kinds import check_kind
from robuststats.runs.spec import EvaluationSpec, NamedParams
from robuststats.search._settings import MAX_TRIALS, NSGA2Settings, PrunerSettings, TPESettings

__all__ = ["MAX_TRIALS", "HeuristicSpec", "ReevaluationSpec", "SearchSection", "SearchSpec"]

#: bound of ``search.scale_range``: a multiplier beyond 10⁴ is a typo, not a noise level
_MAX_MULTIPLIER = 1e4


class HeuristicSpec(Strict):
    """The seeds' adaptive rule (seed 003 §4.3; seed 004 "Adaptive AQN training"):
    ``sensitive_factor`` × the scale on layers whose sensitivity exceeds
    ``sensitive_above``, ``robust_factor`` × on layers below ``robust_below``, 1 elsewhere.

    Seed 003 uses 0.10 / 0.02 (the defaults), seed 004 0.15 / 0.05.
    """

    sensitive_above: float = Field(default=0.10, allow_inf_nan=False)
    robust_below: float = Field(default=0.02, allow_inf_nan=False)
    sensitive_factor: float = Field(default=0.5, gt=0, allow_inf_nan=False)
    robust_factor: float = Field(default=2.0, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> HeuristicSpec:
        if self.robust_below > self.sensitive_above:
            raise KeyedError(("robust_below",), f"must not exceed sensitive_above "
                             f"({self.sensitive_above}), got {self.robust_below}")
        return self


class ReevaluationSpec(Strict):
    """The chosen configuration evaluated again, away from the draws that chose it."""

    #: fresh noise seeds: a count (seeds after the search's largest) or a list disjoint
    #: from ``evaluation.noise_seeds``
    noise_seeds: int | list[int] = 3
    #: held-out items: the next ``holdout_items`` items of ``evaluation.split`` after the
    #: search's ``evaluation.n_items``; 0 re-evaluates on the search items
    holdout_items: int = Field(default=0, ge=0, le=1_000_000)
    #: training objective: fresh training seeds (count after the search's largest, or a
    #: list disjoint from ``seeds``)
    seeds: int | list[int] = 3
    confidence_level: float = Field(default=0.95, gt=0, lt=1)

    @field_validator("noise_seeds")
    @classmethod
    def _noise_seeds(cls, v: int | list[int]) -> int | list[int]:
        return check_seed_field(v, max_count=MAX_NOISE_SEEDS)

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: int | list[int]) -> int | list[int]:
        return check_seed_field(v, max_count=MAX_SEEDS)


class SearchSection(Strict):
    """The ``search:`` section: objective, search space, sampler and re-evaluation."""

    objective: Literal["tolerance", "training"]
    #: training objective: maximise noisy accuracy or retention (noisy / clean)
    metric: Literal["accuracy", "retention"] = "accuracy"
    #: tolerance objective: largest accuracy drop (clean − noisy, a proportion) allowed
    bound: float = Field(default=0.05, gt=0, lt=1)
    #: one multiplier per decoder layer, or per layer × block (the layer's sub-modules
    #: holding its ops: attention and MLP in a Qwen2 layer)
    space: Literal["layer", "block"] = "layer"
    #: log-uniform range of each multiplier; must contain 1 (the uniform baseline)
    scale_range: tuple[float, float] = (0.25, 4.0)
    trials: int = Field(default=40, ge=1, le=MAX_TRIALS)
    multi_objective: bool = False
    sampler: Literal["tpe", "random", "nsga2"] | None = None
    sampler_seed: int = Field(default=0, ge=0, le=MAX_SEED_VALUE)
    tpe: TPESettings = TPESettings()
    nsga2: NSGA2Settings = NSGA2Settings()
    pruner: Literal["median", "mcnemar", "none"] | None = None
    pruning: PrunerSettings = PrunerSettings()
    #: training objective: intermediate evaluations per training run (for pruning)
    reports: int = Field(default=2, ge=0, le=100)
    #: tolerance: noise the probed model is trained with (null: clean); training: the
    #: base training noise whose ``layer_scales`` the search sets
    train_noise: TrainNoise = None
    #: per-layer sensitivity file for the heuristic baseline (docs/search.md)
    sensitivity: str | None = None
    heuristic: HeuristicSpec = HeuristicSpec()
    #: seconds without a heartbeat after which a RUNNING trial of another host is stale
    stale_after: float = Field(default=600.0, gt=0, le=7 * 86400)
    reevaluation: ReevaluationSpec = ReevaluationSpec()

    @field_validator("scale_range", mode="before")
    @classmethod
    def _range_list(cls, v: Any) -> Any:
        if isinstance(v, list):
            return tuple(v)  # YAML gives a list; strict mode wants the tuple
        return v

    @field_validator("scale_range")
    @classmethod
    def _range(cls, v: tuple[float, float]) -> tuple[float, float]:
        lo, hi = v
        if not all(math.isfinite(x) and x > 0 for x in v):
            raise ValueError(f"must be two positive numbers [low, high], got {list(v)}")
        if not lo < hi:
            raise ValueError(f"low must be below high, got {list(v)}")
        if not lo <= 1.0 <= hi:
            raise ValueError(f"must contain 1 (the uniform baseline), got {list(v)}")
        if hi > _MAX_MULTIPLIER or lo < 1 / _MAX_MULTIPLIER:
            raise ValueError(f"must lie within [{1 / _MAX_MULTIPLIER:g}, {_MAX_MULTIPLIER:g}], "
                             f"got {list(v)}")
        return float(lo), float(hi)

    @field_validator("sensitivity")
    @classmethod
    def _path(cls, v: str | None) -> str | None:
        if v is not None and (not v or "\0" in v):
            raise ValueError(f"must be a file path, got {v!r}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> SearchSection:
        if self.objective == "training":
            if self.train_noise is None or not self.train_noise.is_active:
                raise KeyedError(("train_noise",), "the training objective needs the base "
                                 "training noise (a noise spec with a positive scale) whose "
                                 "per-layer multipliers it searches")
            if self.train_noise.layer_scales:
                raise KeyedError(("train_noise", "layer_scales"), "is what the search sets; "
                                 "leave it out of the base training noise")
        if self.pruner in ("median", "mcnemar"):
            if self.multi_objective:
                raise KeyedError(("pruner",), "pruning needs a single objective; use "
                                 "pruner: none with multi_objective: true")
            if self.objective == "tolerance":
                raise KeyedError(("pruner",), "the tolerance objective has nothing to prune "
                                 "(no training run); use pruner: none")
        if self.sampler == "nsga2" and not self.multi_objective:
            raise KeyedError(("sampler",), "nsga2 is a multi-objective sampler; use tpe or "
                             "random, or set multi_objective: true")
        return self

    @property
    def sampler_name(self) -> str:
        return self.sampler or ("nsga2" if self.multi_objective else "tpe")

    @property
    def sampler_settings(self) -> dict[str, Any]:
        """The sampler and every setting it runs with, none left to Optuna's defaults
        (recorded in the search version's manifest)."""
        name = self.sampler_name
        out: dict[str, Any] = {"name": name, "seed": self.sampler_seed}
        if name == "tpe":
            tpe = self.tpe.model_dump()
            if tpe["multivariate"] is None:
                tpe["multivariate"] = not self.multi_objective
            out |= tpe
        elif name == "nsga2":
            out |= self.nsga2.model_dump()
        return out

    @property
    def pruner_settings(self) -> dict[str, Any]:
        """The pruner and the settings it reads."""
        name = self.pruner_name
        p = self.pruning
        reads = {"median": {"n_startup_trials": p.n_startup_trials,
                            "n_warmup_steps": p.n_warmup_steps},
                 "mcnemar": {"n_startup_trials": p.n_startup_trials,
                             "p_threshold": p.p_threshold}}.get(name, {})
        return {"name": name, **reads}

    @property
    def pruner_name(self) -> str:
        if self.pruner is not None:
            return self.pruner
        single_training = self.objective == "training" and not self.multi_objective
        return "median" if single_training and self.reports > 0 else "none"


class SearchSpec(Strict):
    """A validated search file."""

    name: str
    version: int = Field(ge=1, le=1_000_000)
    description: str = ""
    task: NamedParams
    model: dict[str, Any] = Field(default_factory=dict)
    trainer: NamedParams = NamedParams(name="builtin")
    evaluation: EvaluationSpec
    #: training seeds of every trial (tolerance: the probed models; training: each trial
    #: trains one model per seed); a trial's value is the mean over them
    seeds: int | list[int] = 1
    search: SearchSection

    _lines: dict[KeyPath, int] = PrivateAttr(default_factory=dict)
    _source: str | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _plain_document(cls, data: Any) -> Any:
        check_document(data)
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v, "search name")

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: int | list[int]) -> int | list[int]:
        return check_seed_field(v, max_count=MAX_SEEDS)

    @model_validator(mode="after")
    def _cross_checks(self) -> SearchSpec:
        ev = self.evaluation
        positive = [x for x in ev.noise_levels if x > 0]
        if len(positive) != 1:
            raise KeyedError(("evaluation", "noise_levels"), "a search evaluates every "
                             "configuration at one noise level: give exactly one positive "
                             f"level (0 may be listed too), got {ev.noise_levels}")
        entry = check_kind(ev.kind)
        if not entry.level_is_scale:
            raise KeyedError(("evaluation", "kind"), f"{ev.kind!r} is a number format applied "
                             "at full strength: per-layer multipliers cannot scale it; use an "
                             "error model whose level is its scale (relative_gaussian, ...)")
        search_noise = set(ev.noise_seed_list())
        re = self.search.reevaluation
        if isinstance(re.noise_seeds, list) and search_noise & set(re.noise_seeds):
            both = sorted(search_noise & set(re.noise_seeds))
            raise KeyedError(("search", "reevaluation", "noise_seeds"), "must be fresh: "
                             f"noise seed(s) {both} are also evaluation.noise_seeds")
        if isinstance(re.seeds, list) and set(self.seed_list()) & set(re.seeds):
            both = sorted(set(self.seed_list()) & set(re.seeds))
            raise KeyedError(("search", "reevaluation", "seeds"), "must be fresh: training "
                             f"seed(s) {both} are also the search's seeds")
        return self

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None,
                  lines: Mapping[KeyPath, int] | None = None) -> SearchSpec:
        """Validate a mapping; errors name the key path (and line, when ``lines`` is given)."""
        return validate_keyed(cls, data, source=source, lines=lines, suggest=field_hints(cls),
                              what="search")

    @classmethod
    def from_file(cls, path: str | Path) -> SearchSpec:
        """Load and validate a YAML search file; errors name the key path and its line."""
        text = read_study_text(path, what="search file")
        data, lines = load_yaml_with_lines(text, str(path))
        return cls.from_dict(data, source=str(path), lines=lines)

    def with_overrides(self, *, trials: int | None = None) -> SearchSpec:
        """``--trials``: flag > file > default, applied only when given."""
        if trials is None:
            return self
        check_whole(trials, "trials", low=1, high=MAX_TRIALS, interval=True)
        data = self.model_dump()
        data["search"]["trials"] = trials
        lines = {p: n for p, n in self._lines.items() if p[:2] != ("search", "trials")}
        return SearchSpec.from_dict(data, source=self._source, lines=lines)

    # ------------------------------------------------------------------ resolution
    def seed_list(self) -> list[int]:
        return seed_list(self.seeds)

    @property
    def eval_level(self) -> float:
        """The one positive evaluation noise level: the base scale of every configuration."""
        return next(x for x in self.evaluation.noise_levels if x > 0)

    def search_noise_seeds(self) -> list[int]:
        return self.evaluation.draws(self.eval_level)

    def fresh_noise_seeds(self) -> list[int]:
        """Re-evaluation noise seeds: the list given, or a count after the search's."""
        given = self.search.reevaluation.noise_seeds
        if check_kind(self.evaluation.kind).deterministic:
            return [0]
        if isinstance(given, list):
            return list(given)
        start = max(self.evaluation.noise_seed_list()) + 1
        return list(range(start, start + given))

    def fresh_seeds(self) -> list[int]:
        """Re-evaluation training seeds (training objective)."""
        given = self.search.reevaluation.seeds
        if isinstance(given, list):
            return list(given)
        start = max(self.seed_list()) + 1
        return list(range(start, start + given))

    def resolved(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["seeds"] = self.seed_list()
        data["evaluation"]["noise_seeds"] = self.evaluation.noise_seed_list()
        return data

    def spec_hash(self) -> str:
        return canonical_sha256(self.resolved())

    def run_hash(self) -> str:
        """SHA-256 of what determines a trial's value and the search space: the trials of a
        stored study are comparable only under the same run hash. Trial count, sampler,
        pruner, baselines, re-evaluation and descriptions are outside it (changing them
        continues the same study)."""
        data = self.resolved()
        search = data["search"]
        kept = {k: search[k] for k in ("objective", "metric", "bound", "space", "scale_range",
                                       "multi_objective", "train_noise")}
        if search["objective"] == "training":
            kept["reports"] = search["reports"]
        outcome = {k: data[k] for k in ("task", "model", "trainer", "evaluation", "seeds")}
        return canonical_sha256({**outcome, "search": kept})

    def where(self, path: Sequence[str | int]) -> str:
        return location(self._source, tuple(path), self._lines)

    def line_of(self, path: Sequence[str | int]) -> int | None:
        return line_for(tuple(path), self._lines)

    @property
    def source(self) -> str | None:
        return self._source
