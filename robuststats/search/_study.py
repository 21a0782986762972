"""The Optuna study of a search: created once with its record, baselines and shared clean
evaluation; loaded by every worker; checked against the search file on every load."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from robuststats.config.sensitivity import read_sensitivity
from robuststats.errors import InputError
from robuststats.search._objective import (
    SearchContext,
    directions,
    evaluate_config,
    model_digest,
    objective_values,
    outcomes,
    summarise,
)
from robuststats.search._sensitivity import heuristic_multipliers
from robuststats.search._space import SearchSpace, budget
from robuststats.search._storage import ATTR, heartbeat

if TYPE_CHECKING:
    import optuna

    from robuststats.search._spec import SearchSpec

__all__ = ["make_objective", "make_pruner", "make_sampler", "prepare_study"]

#: format of the record a study keeps in its user attributes
STUDY_FORMAT = 1
_RECORD = ATTR
_CLEAN = f"{ATTR}:clean"
_DIGESTS = f"{ATTR}:model_digests"
_SENSITIVITY = f"{ATTR}:sensitivity"


def quiet_optuna() -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def make_sampler(spec: SearchSpec, seed: int) -> optuna.samplers.BaseSampler:
    """The sampler with every setting of ``spec.search.sampler_settings`` passed explicitly
    (``seed``: this worker's, derived from ``sampler_seed``)."""
    import optuna

    settings = dict(spec.search.sampler_settings)
    name = settings.pop("name")
    settings.pop("seed")
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    with warnings.catch_warnings():  # `group` and most crossovers are experimental
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name == "nsga2":
            crossovers = {"uniform": "UniformCrossover", "blxalpha": "BLXAlphaCrossover",
                          "sbx": "SBXCrossover", "vsbx": "VSBXCrossover",
                          "undx": "UNDXCrossover", "spx": "SPXCrossover"}
            crossover = getattr(optuna.samplers.nsgaii,
                                crossovers[settings.pop("crossover")])()
            return optuna.samplers.NSGAIISampler(seed=seed, crossover=crossover, **settings)
        return optuna.samplers.TPESampler(seed=seed, **settings)


def make_pruner(spec: SearchSpec) -> optuna.pruners.BasePruner:
    """The pruner with the settings of ``spec.search.pruner_settings``."""
    import optuna

    settings = dict(spec.search.pruner_settings)
    name = settings.pop("name")
    if name == "median":
        return optuna.pruners.MedianPruner(**settings)
    if name == "mcnemar":
        from robuststats.search._pruner import McNemarPruner

        return McNemarPruner(**settings)
    return optuna.pruners.NopPruner()


def worker_seed(spec: SearchSpec, worker: int, n_trials: int) -> int:
    """Sampler seed of one worker: distinct per worker and per resume (a resumed search
    must not draw its first random trials again)."""
    return int(np.random.SeedSequence([spec.search.sampler_seed, worker, n_trials])
               .generate_state(1)[0])


def prepare_study(spec: SearchSpec, ctx: SearchContext, storage: Any, url: str, *,
                  log: Callable[[str], None] | None = None) -> optuna.Study:
    """Create the study (record, shared clean evaluation, baselines) or load and check it."""
    import optuna

    quiet_optuna()
    try:
        study = optuna.load_study(study_name=spec.name, storage=storage)
    except KeyError:
        study = optuna.create_study(study_name=spec.name, storage=storage,
                                    directions=directions(spec), load_if_exists=True)
    record = study.user_attrs.get(_RECORD)
    if record is None:
        _initialise(spec, ctx, study, log=log)
    else:
        _check(spec, ctx, study, record, url)
    if ctx.objective == "tolerance":
        clean = study.user_attrs[_CLEAN]
        ctx.clean = {int(s): np.asarray(v, dtype=np.int8) for s, v in clean.items()}
    return study


def _initialise(spec: SearchSpec, ctx: SearchContext, study: optuna.Study, *,
                log: Callable[[str], None] | None) -> None:
    record = {"format": STUDY_FORMAT, "run_hash": spec.run_hash(), "spec_hash": spec.spec_hash(),
              "objective": spec.search.objective, "space": ctx.space.to_dict(),
              "base_scale": ctx.base_scale,
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if ctx.objective == "tolerance":
        # the clean evaluation every trial compares with: computed once, here, and shared
        # through the storage with every worker
        clean = {str(s): outcomes(ctx, ctx.models[s], ctx.search_items, None, 0).tolist()
                 for s in spec.seed_list()}
        study.set_user_attr(_CLEAN, clean)
        study.set_user_attr(_DIGESTS, {str(s): model_digest(m) for s, m in ctx.models.items()})
    profile, source = sensitivity_profile(spec, ctx, log=log)
    if profile is not None:
        study.set_user_attr(_SENSITIVITY, {"source": source,
                                           "scores": {str(k): v for k, v in profile.items()}})
    study.enqueue_trial(ctx.space.uniform(), user_attrs={"baseline": "uniform"})
    if profile is not None:
        h = spec.search.heuristic
        per_layer = heuristic_multipliers(profile, ctx.space.n_layers,
                                          sensitive_above=h.sensitive_above,
                                          robust_below=h.robust_below,
                                          sensitive_factor=h.sensitive_factor,
                                          robust_factor=h.robust_factor)
        params = ctx.space.from_layers(per_layer)
        if params != ctx.space.uniform():
            study.enqueue_trial(params, user_attrs={"baseline": "heuristic"})
        elif log is not None:
            log("the heuristic baseline equals the uniform one (no layer outside the "
                "thresholds): enqueued once")
    # the record last: a study without it is initialised again by the next process
    study.set_user_attr(_RECORD, record)


def _check(spec: SearchSpec, ctx: SearchContext, study: optuna.Study, record: dict[str, Any],
           url: str) -> None:
    if record.get("run_hash") != spec.run_hash():
        raise InputError(
            f"--storage {url!r} holds a study {spec.name!r} made for another search (run hash "
            f"{str(record.get('run_hash'))[:12]}, this file {spec.run_hash()[:12]}: the task, "
            "model, trainer, evaluation, seeds or search space differ); pass --fresh to "
            "discard it, or choose another --storage.")
    if record.get("space") != ctx.space.to_dict():
        raise InputError(f"--storage {url!r}: study {spec.name!r} searches other places "
                         f"than this model has ({len(record['space']['places'])} stored, "
                         f"{len(ctx.space.places)} here); pass --fresh or another --storage.")
    if ctx.objective == "tolerance":
        stored = study.user_attrs.get(_DIGESTS, {})
        for s, m in ctx.models.items():
            if stored.get(str(s)) not in (None, model_digest(m)):
                raise InputError(
                    f"the probed model of seed {s} on this machine differs from the one study "
                    f"{spec.name!r} was started with (SHA-256 of the weights); trained weights "
                    "depend on the machine's kernels (docs/studies.md, Reproducibility): copy "
                    "the run directory's models/ from the first machine.")


def sensitivity_profile(spec: SearchSpec, ctx: SearchContext, *,
                        log: Callable[[str], None] | None = None
                        ) -> tuple[dict[int, float] | None, str]:
    """The per-layer profile of the heuristic baseline: the file of ``search.sensitivity``,
    else (tolerance) the seeds' probe on the probed model, else none."""
    path = spec.search.sensitivity
    if path is not None:
        return sensitivity_file(spec), f"file {path}"
    if ctx.objective != "tolerance":
        return None, "none"
    if log is not None:
        log(f"measuring the per-layer sensitivity profile ({ctx.space.n_layers} layers)")
    return probe_sensitivity(ctx), "probe"


def sensitivity_file(spec: SearchSpec) -> dict[int, float]:
    """The profile in the file of ``search.sensitivity``; errors name that key."""
    try:
        return read_sensitivity(spec.search.sensitivity)
    except InputError as exc:
        raise InputError(f"{spec.where(('search', 'sensitivity'))}: {exc}") from None


def probe_sensitivity(ctx: SearchContext) -> dict[int, float]:
    """Seed 003 §3.2: noise on one layer at a time at the evaluation level;
    ``sensitivity = (acc_clean − acc_layer)/acc_clean`` on the search items, averaged over
    the search's noise seeds and training seeds."""
    seeds = ctx.spec.seed_list()
    clean = float(np.mean([outcomes(ctx, ctx.models[s], ctx.search_items, None, 0).mean()
                           for s in seeds]))
    out = {}
    for layer in range(ctx.space.n_layers):
        accs = []
        for s in seeds:
            for ns in ctx.spec.search_noise_seeds():
                noise = ctx.eval_noise(ns).replace(layers=[layer])
                accs.append(outcomes(ctx, ctx.models[s], ctx.search_items, noise, ns).mean())
        noisy = float(np.mean(accs))
        out[layer] = (clean - noisy) / clean if clean > 0 else 0.0
    return out


def stored_space(study: optuna.Study) -> SearchSpace:
    return SearchSpace.from_dict(study.user_attrs[_RECORD]["space"])


def stored_sensitivity(study: optuna.Study) -> dict[str, Any] | None:
    return study.user_attrs.get(_SENSITIVITY)


def make_objective(ctx: SearchContext) -> Callable[[optuna.Trial], Any]:
    """The function Optuna calls per trial (values as :func:`objective_values` defines)."""
    import optuna

    spec = ctx.spec
    pruning = spec.search.pruner_name != "none"
    keep_items = spec.search.pruner_name == "mcnemar"
    if keep_items:
        from robuststats.search._pruner import ITEMS_ATTR

    def objective(trial: optuna.Trial) -> Any:
        with heartbeat(trial, stale_after=spec.search.stale_after):
            started = time.perf_counter()
            params = ctx.space.suggest(trial)
            report = None
            report_items = None
            if keep_items:  # the McNemar pruner's input, kept before each report
                def report_items(step: int, items: np.ndarray) -> None:
                    trial.set_user_attr(f"{ITEMS_ATTR}:{step}",
                                        np.asarray(items, dtype=int).tolist())
            if pruning:
                def report(value: float, step: int) -> None:
                    trial.report(value, step)
                    if trial.should_prune():
                        raise optuna.TrialPruned(f"pruned at step {step} (value {value:.4f})")
            if ctx.objective == "tolerance":
                result = evaluate_config(ctx, params, items=ctx.search_items,
                                         noise_seeds=spec.search_noise_seeds(),
                                         with_clean=False)
                result["clean"] = ctx.clean
            else:
                result = evaluate_config(ctx, params, items=ctx.search_items,
                                         noise_seeds=spec.search_noise_seeds(), report=report,
                                         report_items=report_items)
            summary = summarise(ctx, result)
            values, constraint = objective_values(ctx, params, summary)
            for key in ("noisy_accuracy", "clean_accuracy", "drop", "retention", "per_seed"):
                if key in summary:
                    trial.set_user_attr(key, summary[key])
            trial.set_user_attr("budget", budget(params, ctx.base_scale))
            trial.set_user_attr("seconds", round(time.perf_counter() - started, 3))
            if constraint is not None:
                trial.set_constraint("drop", constraint)
            return values[0] if len(values) == 1 else tuple(values)

    return objective
