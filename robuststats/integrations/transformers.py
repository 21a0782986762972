"""Noise-aware training inside Hugging Face trainers: :class:`NoiseCallback`.

A ``transformers.TrainerCallback`` that runs the engine's :func:`~robuststats.engine.inject`
inside the training steps of ``Trainer``, TRL's ``SFTTrainer`` and ``GRPOTrainer``::

    from robuststats.integrations.transformers import add_noise
    callback = add_noise(trainer, {"scale": 0.05, "phases": "both"}, during=["update"])
    trainer.train()                       # noise/update/... keys in the trainer's logs
    verify_noise_proof(trainer.args.output_dir)

A training step has parts (:data:`PARTS`): ``rollout`` (GRPO's sampling of completions),
``logprob`` (its gradient-free log-probability passes: old policy and reference model),
``update`` (the loss forward and its backward) and ``evaluation``. ``during`` names the
parts that get noise; every other part runs clean, evaluation included unless named. Each
part runs in sessions of its own: a session opens when the part starts and closes (and is
verified) when it ends, always before the optimizer step. The noise of a session is drawn
from streams keyed by (spec seed, rank, part, global step, session within the step), so a
run resumed from a checkpoint draws exactly the noise the uninterrupted run drew from
there on. Counts per part, layer, op and phase are written as a proof file
(:mod:`robuststats.integrations._noise_proof`) into every checkpoint directory and the
output directory, and logged as ``noise/<part>/injections``.

``trainer.add_callback(NoiseCallback(spec))`` alone suffices for ``update`` noise in a
``Trainer`` or ``SFTTrainer``. Rollout, log-probability and evaluation parts need the
trainer's methods: :func:`add_noise` (or :meth:`NoiseCallback.bind`) wraps them on the
trainer instance. An unbound callback refuses, loudly, a forward without gradients inside
a training step (GRPO's sampling or log-probability passes), rather than putting update
noise into it. Needs ``transformers`` (and TRL for its trainers): ``robuststats[trl]``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from robuststats.engine import AQNSchedule, NoiseSpec
from robuststats.errors import InputError, did_you_mean
from robuststats.integrations._noise_proof import (
    PARTS,
    NoiseProof,
    NoiseProofError,
    read_noise_proof,
    verify_noise_proof,
    write_noise_proof,
)

try:
    from transformers import TrainerCallback
except ImportError as exc:  # pragma: no cover - the optional extra is missing
    raise ImportError("robuststats.integrations.transformers needs transformers: "
                      "pip install 'robuststats[trl]'") from exc

__all__ = ["PARTS", "NoiseCallback", "NoiseProof", "NoiseProofError", "add_noise",
           "read_noise_proof", "segment_seed", "verify_noise_proof"]

_AQN_STREAM = 0xA9A


def segment_seed(seed: int, rank: int, part: str, step: int, segment: int) -> int:
    """Seed of one session: numpy's ``SeedSequence`` over (seed, rank, part, step, segment)."""
    import numpy as np

    entropy = [int(seed), int(rank), PARTS.index(part), int(step), int(segment)]
    return int(np.random.SeedSequence(entropy).generate_state(1)[0] & 0x7FFFFFFF)


def _parts(key: str, value: Iterable[str] | str) -> frozenset[str]:
    values = [value] if isinstance(value, str) else list(value)
    for v in values:
        if v not in PARTS:
            raise InputError(f"`{key}` must name parts among {list(PARTS)}, got {v!r}"
                             f"{did_you_mean(v, PARTS)}.")
    return frozenset(values)


class NoiseCallback(TrainerCallback):
    """Inject ``spec`` into the parts of each training step named in ``during``.

    Parameters
    ----------
    spec : NoiseSpec or mapping
        The engine's spec (phases, ops, layers, per-layer scales, error model, seed).
    during : parts, default ``("update",)``
        Which parts get noise (:data:`PARTS`); ``"evaluation"`` only when named.
    aqn : AQNSchedule or mapping, optional
        AQN noise on the norm weights (QeRL), σ by global step (an epoch-aware schedule
        gives the per-epoch stages); ``total_steps`` defaults to the trainer's max steps.
    aqn_during : parts, default: ``during``
        Parts whose sessions also carry AQN.
    verify : bool or "ops" / "layers"
        The engine's verification of every session (a requested op never injected fails).
    """

    def __init__(self, spec: NoiseSpec | Mapping[str, Any], *,
                 during: Iterable[str] | str = ("update",),
                 aqn: AQNSchedule | Mapping[str, Any] | None = None,
                 aqn_during: Iterable[str] | str | None = None,
                 verify: bool | str = True) -> None:
        self.spec = NoiseSpec.from_dict(spec) if isinstance(spec, Mapping) else spec
        if not isinstance(self.spec, NoiseSpec):
            raise InputError(f"`spec` must be a NoiseSpec or a mapping, got {spec!r}.")
        self.during = _parts("during", during)
        self.aqn = AQNSchedule.from_dict(aqn) if isinstance(aqn, Mapping) else aqn
        self.aqn_during = self.during if aqn_during is None else _parts("aqn_during", aqn_during)
        self.verify = verify
        self.trainer: Any = None
        self._model: Any = None
        self._rank, self._world = 0, 1
        self._step, self._segment, self._in_step = 0, 0, False
        self._region: str | None = None
        self._open: tuple[str, Any, Any] | None = None  # (part, injection, aqn context)
        self._required: dict[str, list[str]] = {}
        self._totals: dict[str, dict[tuple[int, str, str], int]] = {}
        self._ran: dict[str, dict[str, Any]] = {}
        self._resumed_from: int | None = None
        self._guard: Any = None
        self._sigma = 0.0

    # --- binding to a trainer ---------------------------------------------------------------

    def bind(self, trainer: Any) -> NoiseCallback:
        """Wrap ``trainer``'s sampling, log-probability and evaluation methods on the
        instance so that each runs as its part; adds the callback to the trainer."""
        if self.trainer is not None:
            raise InputError("this NoiseCallback is bound to a trainer already.")
        self.trainer = trainer
        if "rollout" in self.during and not hasattr(trainer, "_generate_single_turn"):
            raise InputError(f"`during` names 'rollout', but {type(trainer).__name__} samples "
                             "no completions (TRL's GRPOTrainer does).")
        for name, part in (("_generate_single_turn", "rollout"),
                           ("_get_per_token_logps_and_entropies", "logprob"),
                           ("evaluate", "evaluation")):
            if hasattr(trainer, name):
                setattr(trainer, name, self._region_wrapper(part, getattr(trainer, name)))
        train = trainer.train

        @functools.wraps(train)
        def train_and_close(*args: Any, **kwargs: Any) -> Any:
            try:
                return train(*args, **kwargs)
            finally:  # a step that raised (a reward function) leaves no session open
                self.close()

        trainer.train = train_and_close
        callbacks = trainer.callback_handler.callbacks
        if self in callbacks:
            callbacks.remove(self)
        # first, so that the printed and reported logs carry the noise/... keys
        callbacks.insert(0, self)
        return self

    def _region_wrapper(self, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        import torch

        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if self._region is not None or (part == "logprob" and torch.is_grad_enabled()):
                return fn(*args, **kwargs)  # nested, or the update's own log-probabilities
            model = kwargs.get("model", args[0] if args and part == "logprob" else None)
            model = _unwrap(model if model is not None else self.trainer.model)
            self._close()
            self._region = part
            try:
                if part in self.during:
                    self._start(part, model)
                out = fn(*args, **kwargs)
            except BaseException as exc:
                self._close(exc)
                raise
            finally:
                self._region = None
            self._close()
            if self._in_step and "update" in self.during:
                self._start("update", self._model)
            return out

        return wrapped

    # --- sessions ---------------------------------------------------------------------------

    def _start(self, part: str, model: Any) -> None:
        import torch

        from robuststats.engine import aqn_perturb, build_model_map, inject, required_ops

        seed = segment_seed(self.spec.seed, self._rank, part, self._step, self._segment)
        self._segment += 1
        injection = inject(model, self.spec.replace(seed=seed), verify=self.verify)
        if part not in self._required:
            self._required[part] = sorted(required_ops(self.spec, build_model_map(model)))
        injection.__enter__()
        perturb = None
        if self.aqn is not None and part in self.aqn_during:
            self._sigma = float(self.aqn.sigma(self._step))
            if self._sigma > 0:
                g = torch.Generator().manual_seed(seed ^ _AQN_STREAM)
                perturb = aqn_perturb(model, self._sigma, generator=g)
                perturb.__enter__()
        self._open = (part, injection, perturb)

    def _close(self, exc: BaseException | None = None) -> None:
        if self._open is None:
            return
        part, injection, perturb = self._open
        self._open = None
        info = (type(exc), exc, exc.__traceback__) if exc is not None else (None, None, None)
        try:
            if perturb is not None:
                perturb.__exit__(*info)
        finally:
            try:
                injection.__exit__(*info)
            finally:
                self._bank(part, injection.session)

    def _bank(self, part: str, session: Any) -> None:
        totals = self._totals.setdefault(part, {})
        for row in session.stats.itertuples(index=False):
            key = (int(row.layer), str(row.op), str(row.phase))
            totals[key] = totals.get(key, 0) + int(row.count)
        ran = self._ran.setdefault(part, {"segments": 0, "forward_calls": 0,
                                          "backward_ran": False})
        ran["segments"] += 1
        ran["forward_calls"] += int(session.forward_calls)
        ran["backward_ran"] = bool(ran["backward_ran"] or session.backward_ran)

    def close(self) -> None:
        """Close an open session without verifying it (after an exception in a step)."""
        if self._open is not None:
            self._close(RuntimeError("training stopped"))
        self._in_step = False

    # --- callback events --------------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._model = _unwrap(kwargs["model"])
        self._rank, self._world = int(args.process_index), int(args.world_size)
        if self.trainer is None and self.during - {"update"}:
            raise InputError(f"`during` names {sorted(self.during - {'update'})}: bind the "
                             "callback to its trainer with add_noise(trainer, spec, ...) so "
                             "that those parts can be told apart.")
        if self.aqn is not None and self.aqn.total_steps is None:
            import dataclasses

            self.aqn = dataclasses.replace(self.aqn, total_steps=int(state.max_steps))
        if state.global_step > 0:  # resumed: carry the counts of the checkpoint's proof
            self._resumed_from = int(state.global_step)
            ckpt = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            if os.path.isdir(ckpt):
                self._load_totals(read_noise_proof(ckpt))
        if self.trainer is None:
            self._guard = self._model.register_forward_pre_hook(self._refuse_unbound)

    def _refuse_unbound(self, module: Any, args: Any) -> None:
        import torch

        if self._in_step and not torch.is_grad_enabled():
            raise InputError("a forward without gradients ran inside a training step (a "
                             "sampling or log-probability pass): bind the callback with "
                             "add_noise(trainer, spec, during=...) so that its part is known "
                             "and the update's noise stays out of it.")

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._step, self._segment, self._in_step = int(state.global_step), 0, True
        if "update" in self.during:
            self._start("update", self._model)

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # before the optimizer: AQN restores the norm weights, backward noise is done
        self._close()
        self._in_step = False

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._close()
        self._in_step = False

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        if logs is None:
            return
        extra: dict[str, float] = {"noise/scale": float(self.spec.scale)}
        for part in sorted(self.during):
            extra[f"noise/{part}/injections"] = float(sum(self._totals.get(part, {}).values()))
        if self.aqn is not None:
            extra["noise/aqn_sigma"] = self._sigma
        logs.update(extra)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(extra)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.write_proof(os.path.join(args.output_dir, f"checkpoint-{state.global_step}"),
                         state.global_step)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._close()
        if self._guard is not None:
            self._guard.remove()
            self._guard = None
        self.write_proof(args.output_dir, state.global_step)

    # --- proof ------------------------------------------------------------------------------

    def record(self, global_step: int) -> dict[str, Any]:
        """This process's proof record (see :mod:`robuststats.integrations._noise_proof`)."""
        parts = {}
        for part in sorted(self.during | set(self._totals)):
            ran = self._ran.get(part, {"segments": 0, "forward_calls": 0, "backward_ran": False})
            counts = [{"layer": ly, "op": op, "phase": ph, "count": n}
                      for (ly, op, ph), n in sorted(self._totals.get(part, {}).items())]
            parts[part] = {"phase_scales": dict(self.spec.phase_scales),
                           "required_ops": self._required.get(part, []), **ran,
                           "counts": counts}
        return {"rank": self._rank, "world_size": self._world, "global_step": int(global_step),
                "resumed_from_step": self._resumed_from, "spec": self.spec.to_dict(),
                "during": sorted(self.during), "parts": parts,
                "aqn": None if self.aqn is None else _plain(self.aqn)}

    def write_proof(self, directory: str | os.PathLike[str], global_step: int) -> None:
        write_noise_proof(directory, self.record(global_step))

    def _load_totals(self, proof: NoiseProof) -> None:
        for rec in proof.records:
            if int(rec.get("rank", -1)) != self._rank:
                continue
            for part, entry in rec.get("parts", {}).items():
                totals = self._totals.setdefault(part, {})
                for r in entry.get("counts", []):
                    key = (int(r["layer"]), str(r["op"]), str(r["phase"]))
                    totals[key] = totals.get(key, 0) + int(r["count"])
                self._ran[part] = {k: entry.get(k, v) for k, v in
                                   (("segments", 0), ("forward_calls", 0),
                                    ("backward_ran", False))}
                if entry.get("required_ops"):
                    self._required[part] = list(entry["required_ops"])


def add_noise(trainer: Any, spec: NoiseSpec | Mapping[str, Any], **options: Any) -> NoiseCallback:
    """Build a :class:`NoiseCallback` with ``options``, bind it to ``trainer`` and add it."""
    return NoiseCallback(spec, **options).bind(trainer)


def _unwrap(model: Any) -> Any:
    """The module whose parameters train: DDP's ``.module``, a compiled ``._orig_mod``."""
    while True:
        inner = getattr(model, "module", None)
        if inner is None:
            inner = getattr(model, "_orig_mod", None)
        if inner is None:
            return model
        model = inner


def _plain(value: Any) -> Any:
    import dataclasses

    return {k: v for k, v in dataclasses.asdict(value).items()}
