"""What one trial computes: the models, the items and the two objectives.

``tolerance`` (diagnostic): the models are trained once per training seed (cached in the run
directory) and their clean outcomes computed once, before any trial, and stored in the
study; a trial evaluates the search items under the configuration's per-layer noise. Its
value is the noise budget, with the constraint ``drop − bound ≤ 0`` (single objective), or
(noisy accuracy, budget) (multi-objective).

``training``: a trial trains one model per training seed with the configuration's per-layer
training noise and evaluates it at the evaluation noise level. Its value is the noisy
accuracy or the retention (single objective), or (that metric, training-noise budget).
``search.reports`` intermediate evaluations per training run are reported to the pruner.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from robuststats.errors import InputError
from robuststats.search._space import SearchSpace, budget, discover_space

if TYPE_CHECKING:
    from robuststats.engine import NoiseSpec
    from robuststats.search._spec import SearchSpec

__all__ = ["SearchContext", "evaluate_config", "model_digest", "preflight"]


@dataclass
class SearchContext:
    """Everything a worker needs besides the study: task, items, models, space."""

    spec: SearchSpec
    run_dir: Path
    task: Any
    trainer: Any
    search_items: list[Any]
    holdout_items: list[Any]
    space: SearchSpace
    #: tolerance: the probed model of each training seed
    models: dict[int, Any] = field(default_factory=dict)
    #: tolerance: clean outcomes of each seed's model on the search items
    clean: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def objective(self) -> str:
        return self.spec.search.objective

    @property
    def base_scale(self) -> float:
        """The scale the multipliers multiply (evaluation level or training-noise scale)."""
        if self.objective == "tolerance":
            return self.spec.eval_level
        assert self.spec.search.train_noise is not None
        return float(self.spec.search.train_noise.scale)

    def eval_noise(self, noise_seed: int) -> NoiseSpec:
        """The uniform evaluation noise of one noise seed."""
        ev = self.spec.evaluation
        spec = ev.noise(self.spec.eval_level, noise_seed)
        assert spec is not None
        return spec

    def config_noise(self, params: dict[str, float], noise_seed: int = 0) -> NoiseSpec:
        """The noise spec a configuration stands for (the output config's content)."""
        if self.objective == "tolerance":
            return self.space.noise(self.eval_noise(noise_seed), params)
        assert self.spec.search.train_noise is not None
        return self.space.noise(self.spec.search.train_noise, params)


# ---------------------------------------------------------------------- building
def build_context(spec: SearchSpec, run_dir: str | Path, *,
                  log: Callable[[str], None] | None = None) -> SearchContext:
    """Task, trainer, items and space; for ``tolerance`` also the probed models (trained
    now, or loaded from the run directory's cache) and their clean outcomes."""
    task, trainer, search_items, holdout_items = _task_trainer_items(spec)
    run_dir = Path(run_dir)
    ctx = SearchContext(spec, run_dir, task, trainer, search_items, holdout_items,
                        space=SearchSpace((), 1.0, 1.0, 0))
    if spec.search.objective == "tolerance":
        for seed in spec.seed_list():
            ctx.models[seed] = cached_model(ctx, seed, log=log)
        probe = ctx.models[spec.seed_list()[0]].model
        ops = ctx.eval_noise(0).op_set
    else:
        probe = _untrained_model(ctx)
        assert spec.search.train_noise is not None
        ops = spec.search.train_noise.op_set
    lo, hi = spec.search.scale_range
    ctx.space = discover_space(probe, ops, spec.search.space, lo, hi)
    return ctx


def preflight(spec: SearchSpec) -> tuple[list[Any], list[Any]]:
    """What a search checks before it trains or evaluates anything: the task and the
    trainer build (errors name their key and line), the split holds the search and
    held-out items, and the ``search.sensitivity`` file reads. The search and held-out
    items."""
    from robuststats.search._study import sensitivity_file

    _, _, search_items, holdout_items = _task_trainer_items(spec)
    if spec.search.sensitivity is not None:
        sensitivity_file(spec)
    return search_items, holdout_items


def _task_trainer_items(spec: SearchSpec) -> tuple[Any, Any, list[Any], list[Any]]:
    from robuststats.runs import build_task, build_trainer

    with pointing(spec, "task"):
        task = build_task(spec)  # type: ignore[arg-type]
    with pointing(spec, "trainer"):
        trainer = build_trainer(spec)  # type: ignore[arg-type]
    return (task, trainer, *split_items(spec, task))


def split_items(spec: SearchSpec, task: Any) -> tuple[list[Any], list[Any]]:
    """Search items (the split cut to ``evaluation.n_items``) and the held-out items after
    them; fewer items than asked for is an error naming the key."""
    items = list(task.items(spec.evaluation.split))
    n = spec.evaluation.n_items if spec.evaluation.n_items is not None else len(items)
    hold = spec.search.reevaluation.holdout_items
    if hold and spec.evaluation.n_items is None:
        raise InputError(f"{spec.where(('search', 'reevaluation', 'holdout_items'))}: held-out "
                         "items follow the search items: set evaluation.n_items to leave "
                         "some of the split for them.")
    if n + hold > len(items):
        key = ("search", "reevaluation", "holdout_items") if hold else \
            ("evaluation", "n_items")
        raise InputError(f"{spec.where(key)}: the {spec.evaluation.split!r} split has "
                         f"{len(items)} items, fewer than {n} search + {hold} held-out items.")
    return items[:n], items[n:n + hold]


def pointing(spec: SearchSpec, section: str) -> Any:
    """Errors of the task or trainer name their key and line (as for study files)."""
    import contextlib

    from robuststats.config.yaml_lines import component_key

    @contextlib.contextmanager
    def ctx() -> Any:
        try:
            yield
        except InputError as exc:
            message = str(exc)
            raise InputError(f"{spec.where(component_key(section, message))}: {message}") \
                from None

    return ctx()


def _untrained_model(ctx: SearchContext) -> Any:
    """A model of the trainer's architecture, to discover the layers (nothing trained)."""
    spec = ctx.spec
    if spec.trainer.name == "builtin":
        from robuststats.models.model import build_model, build_tokenizer

        tokenizer = build_tokenizer(ctx.task.vocabulary())
        return build_model(tokenizer, ctx.trainer.params["model"], seed=0)
    # any other trainer: its model for the first seed without noise (a checkpoint loads)
    from robuststats.models.trainer import TrainingCondition

    return ctx.trainer.train(ctx.task, TrainingCondition("layout"), seed=spec.seed_list()[0]).model


def cached_model(ctx: SearchContext, seed: int, *,
                 log: Callable[[str], None] | None = None) -> Any:
    """The probed model of ``seed``: trained once under ``search.train_noise`` and cached in
    ``<run dir>/models/s<seed>``; an ``flock`` lets one process train it while others wait."""
    from robuststats.models.trainer import TrainedModel, TrainingCondition

    target = ctx.run_dir / "models" / f"s{seed}"
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = ctx.run_dir / "models" / f".s{seed}.lock"
    with open(lock_path, "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            if target.is_dir() and (target / "config.json").is_file():
                loader = getattr(ctx.trainer, "load", None) or TrainedModel.load
                return loader(target)
            if log is not None:
                log(f"training the probed model of seed {seed}")
            cond = TrainingCondition("probe", ctx.spec.search.train_noise)
            trained = ctx.trainer.train(ctx.task, cond, seed=seed)
            trained.save(target)
            return trained
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def model_digest(trained: Any) -> str:
    """SHA-256 of a model's parameters (names, shapes and bytes), to check that every worker
    probes the same weights."""
    h = hashlib.sha256()
    for name, tensor in sorted(trained.model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.view(-1).view(dtype=__import__("torch").uint8).numpy().tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------------- evaluation
def outcomes(ctx: SearchContext, trained: Any, items: Sequence[Any],
             noise: NoiseSpec | None, noise_seed: int) -> np.ndarray:
    """0/1 outcomes of ``items`` (in order) under ``noise`` (None: clean)."""
    from robuststats.models.evaluate import evaluate

    df = evaluate(trained, ctx.task, items, noise=noise, noise_seed=int(noise_seed),
                  batch_size=ctx.spec.evaluation.batch_size)
    return df["correct"].to_numpy(dtype=np.int8)


def evaluate_config(ctx: SearchContext, params: dict[str, float], *, items: Sequence[Any],
                    noise_seeds: Sequence[int], seeds: Sequence[int] | None = None,
                    report: Callable[[float, int], None] | None = None,
                    with_clean: bool = True,
                    report_items: Callable[[int, np.ndarray], None] | None = None
                    ) -> dict[str, Any]:
    """Outcomes of one configuration: ``noisy[seed]`` of shape ``(n_noise_seeds, n_items)``
    and ``clean[seed]`` of shape ``(n_items,)`` for each training seed.

    tolerance: the cached models under the configuration's evaluation noise; training:
    a model trained per seed with the configuration's training noise, evaluated under the
    uniform evaluation noise. ``report(value, step)`` receives intermediate values of a
    training run (the pruner's input; it may raise ``optuna.TrialPruned``).
    """
    seeds = list(seeds if seeds is not None else ctx.spec.seed_list())
    noisy: dict[int, np.ndarray] = {}
    clean: dict[int, np.ndarray] = {}
    for k, seed in enumerate(seeds):
        if ctx.objective == "tolerance":
            trained = ctx.models[seed]
            rows = [outcomes(ctx, trained, items, ctx.config_noise(params, ns), ns)
                    for ns in noise_seeds]
            if with_clean:
                clean[seed] = outcomes(ctx, trained, items, None, 0)
        else:
            trained = train_config(ctx, params, seed, report=report, offset=k,
                                   report_items=report_items)
            rows = [outcomes(ctx, trained, items, ctx.eval_noise(ns), ns)
                    for ns in noise_seeds]
            if with_clean:
                clean[seed] = outcomes(ctx, trained, items, None, 0)
        noisy[seed] = np.vstack(rows)
    return {"noisy": noisy, "clean": clean}


def train_config(ctx: SearchContext, params: dict[str, float], seed: int, *,
                 report: Callable[[float, int], None] | None = None,
                 offset: int = 0,
                 report_items: Callable[[int, np.ndarray], None] | None = None) -> Any:
    """Train one model with the configuration's per-layer training noise.

    With ``report`` and the builtin trainer, ``search.reports`` evenly spaced evaluations of
    the noisy accuracy on the search items (first search noise seed) are reported at steps
    ``offset × steps + step`` (the pruner's input); ``report_items(step, outcomes)`` gets
    the items' 0/1 outcomes first (the McNemar pruner's input). The builtin trainer's own loop
    (:func:`robuststats.models.training.run_training`) runs on a model built exactly as
    :func:`~robuststats.models.training.train_builtin` builds it, so the weights are the
    same with or without reports. Other trainers train without intermediate reports.
    """
    from robuststats.models.trainer import TrainedModel, TrainingCondition

    cond = TrainingCondition(f"search-{os.getpid()}", ctx.config_noise(params))
    n_reports = ctx.spec.search.reports
    if report is None or n_reports == 0 or ctx.spec.trainer.name != "builtin":
        return ctx.trainer.train(ctx.task, cond, seed=seed)
    from robuststats.models.model import build_model, build_tokenizer
    from robuststats.models.training import run_training

    tokenizer = build_tokenizer(ctx.task.vocabulary())
    model = build_model(tokenizer, ctx.trainer.params["model"], seed=seed)
    live = TrainedModel(model=model, tokenizer=tokenizer)
    ns = ctx.spec.search_noise_seeds()[0]
    steps = int(ctx.trainer.params["steps"])
    marks = {max(1, round(steps * (j + 1) / (n_reports + 1))) for j in range(n_reports)}

    def progress(step: int, total: int) -> None:
        if step in marks and step < total:
            scored = outcomes(ctx, live, ctx.search_items, ctx.eval_noise(ns), ns)
            if report_items is not None:
                report_items(offset * total + step, scored)
            report(float(scored.mean()), offset * total + step)

    info = run_training(model, tokenizer, ctx.task, list(ctx.task.items("train")), cond,
                        seed=seed, params=ctx.trainer.params, progress=progress)
    model.eval()
    live.info = {**info, "trainer": "builtin", "seed": seed}
    return live


# ---------------------------------------------------------------------- trial values
def summarise(ctx: SearchContext, result: dict[str, Any]) -> dict[str, Any]:
    """Accuracies, drop, retention and per-seed values of one evaluation (JSON-able)."""
    noisy = np.vstack([m.mean(axis=0) for m in result["noisy"].values()])
    out: dict[str, Any] = {"noisy_accuracy": float(noisy.mean())}
    if result["clean"]:
        clean = np.vstack(list(result["clean"].values()))
        c, z = float(clean.mean()), float(noisy.mean())
        out.update(clean_accuracy=c, drop=c - z, retention=(z / c) if c > 0 else None)
    out["per_seed"] = {str(s): [float(v) for v in m.mean(axis=1)]
                       for s, m in result["noisy"].items()}
    return out


def objective_values(ctx: SearchContext, params: dict[str, float],
                     summary: dict[str, Any]) -> tuple[list[float], float | None]:
    """``(values, constraint)``: the study's objective values for a trial and, for the
    single-objective tolerance search, ``drop − bound`` (feasible when ≤ 0)."""
    s = ctx.spec.search
    b = budget(params, ctx.base_scale)
    if s.objective == "tolerance":
        if s.multi_objective:
            return [summary["noisy_accuracy"], b], None
        return [b], summary["drop"] - s.bound
    metric = summary["noisy_accuracy"] if s.metric == "accuracy" else summary["retention"]
    if metric is None:
        raise InputError("retention is undefined: the trained model has clean accuracy 0 "
                         "on the search items; train longer or use metric: accuracy.")
    return ([metric, b] if s.multi_objective else [metric]), None


def directions(spec: SearchSpec) -> list[str]:
    return ["maximize", "maximize"] if spec.search.multi_objective else ["maximize"]
