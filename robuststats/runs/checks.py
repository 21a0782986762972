"""Before any worker starts: the task, the trainer, the layers and the checkpoints of a run.

Unknown names, bad parameters, layers the model does not have and missing checkpoints stop
a run with one error naming the key and its line, instead of failing every cell.
"""

from __future__ import annotations

from typing import Any

from robuststats.errors import InputError
from robuststats.models.checkpoints import CheckpointRef, resolve_checkpoint, template_fields
from robuststats.runs.spec import StudySpec

__all__ = ["build_task", "build_trainer", "check_checkpoints", "planned_items", "preflight"]


def build_task(spec: StudySpec) -> Any:
    """The study's task, from the task registry (or a ``module:factory`` reference)."""
    from robuststats.models.tasks import TASKS

    return TASKS.build(spec.task.name, **spec.task.params)


def build_trainer(spec: StudySpec) -> Any:
    """The study's trainer with its parameters (``model`` sizes included when given)."""
    from robuststats.models.trainer import TRAINERS

    params = dict(spec.trainer.params)
    if spec.model:
        params["model"] = dict(spec.model)
    return TRAINERS.build(spec.trainer.name, **params)


def preflight(spec: StudySpec) -> Any:
    """Build the task and the trainer once in the calling process; returns the task.

    Unknown names and bad parameters then stop the study with one clear error before any
    worker starts, instead of failing every cell.
    """
    with spec.pointing_at("task"):
        task = build_task(spec)
    with spec.pointing_at("trainer"):
        trainer = build_trainer(spec)
    _check_layers(spec, trainer)
    _check_generators(spec)
    check_checkpoints(spec)  # every (condition, seed) checkpoint exists and is complete
    return task


def _check_generators(spec: StudySpec) -> None:
    """A noise stream other than the default (``philox``) must be usable on the study's
    device here: refused once, naming the key, before any cell trains or evaluates."""
    from robuststats.engine import GeneratorUnavailableError, check_generator

    wanted = [(("evaluation", "generator"), spec.evaluation.generator)]
    wanted += [(("conditions", name, "train_noise", "generator"), c.train_noise.generator)
               for name, c in spec.conditions.items() if c.train_noise is not None]
    for path, generator in wanted:
        if generator not in (None, "mt"):
            try:
                check_generator(generator, spec.device)
            except GeneratorUnavailableError as exc:
                raise GeneratorUnavailableError(f"{spec.where(path)}: {exc}") from None


def _check_layers(spec: StudySpec, trainer: Any) -> None:
    """Layers named by a condition's ``train_noise`` (``layers``, integer ``layer_scales``
    keys) must exist in the model the trainer builds; a model loaded from a checkpoint is
    checked by the engine when it is loaded."""
    from robuststats.models.model import ModelSpec

    sizes = getattr(trainer, "params", {}).get("model")
    if not isinstance(sizes, dict) or spec.trainer.name != "builtin":
        return
    depth = ModelSpec.from_dict(sizes).num_layers
    for name, condition in spec.conditions.items():
        noise = condition.train_noise
        if noise is None:
            continue
        named = {"layers": noise.layer_indices or (),
                 "layer_scales": [k for k in (noise.layer_scales or {}) if isinstance(k, int)]}
        for key, indices in named.items():
            beyond = sorted(i for i in indices if i >= depth)
            if beyond:
                where = spec.where(("conditions", name, "train_noise", key))
                raise InputError(f"{where}: layer {beyond[0]} does not exist: the model has "
                                 f"{depth} decoder layers (0-{depth - 1}).")


def planned_items(spec: StudySpec, task: Any) -> list[Any]:
    """The items every cell evaluates: the task's ``evaluation.split``, cut to
    ``evaluation.n_items`` (which may ask for more than the split has: then all of them)."""
    items = list(task.items(spec.evaluation.split))
    if spec.evaluation.n_items is not None:
        items = items[: spec.evaluation.n_items]
    return items


def check_checkpoints(spec: StudySpec) -> dict[tuple[str, int], CheckpointRef]:
    """Resolve every (condition, seed) checkpoint of ``spec`` before anything runs.

    Errors name the key and its line (``studies/x.yaml: conditions.E8b.checkpoint (line 9):
    `checkpoint` (seed 2): no such directory 'ckpts/E8b/seed002'.``). A pattern without
    ``{seed}`` serves one seed only: several seeds would evaluate the same model as if it
    were several.
    """
    refs: dict[tuple[str, int], CheckpointRef] = {}
    seeds = spec.seed_list()
    for name, condition in spec.conditions.items():
        pattern = getattr(condition, "checkpoint", None)
        if pattern is None:
            continue
        path = ("conditions", name, "checkpoint")
        try:
            if len(seeds) > 1 and "seed" not in template_fields(pattern):
                raise InputError(f"`checkpoint` {pattern!r} names one model for {len(seeds)} "
                                 "seeds; use a template with {seed} (e.g. "
                                 "'ckpts/run-seed{seed}') or one seed.")
            for seed in seeds:
                refs[(name, seed)] = resolve_checkpoint(pattern, condition=name, seed=seed)
        except InputError as exc:
            raise InputError(f"{spec.where(path)}: {exc}") from None
    return refs
