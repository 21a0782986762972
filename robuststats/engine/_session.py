"""`NoiseSession`: one active injection. It composes the pieces of one ``inject`` block and
applies the error model at each site the installed hooks report:

- ``_streams``: the noise streams, one per (phase, layer, device);
- ``_replay``: gradient-checkpoint records, so a recompute draws its forward's noise;
- ``_tracking``: which layer is running on each thread;
- ``_scales``: the (forward, backward) scale of each op at each module;
- ``_ledger``: counts and squared norms of the injections, the source of :attr:`stats`.

Hot-path rules: no ``.item()`` and no host sync while the session is open (``_ledger``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from robuststats.engine._autograd import BackwardNoise
from robuststats.engine._error_models import error_tensor
from robuststats.engine._ledger import LOW_PRECISION, InjectionLedger
from robuststats.engine._model_map import ModelMap
from robuststats.engine._replay import CheckpointReplay
from robuststats.engine._rng import NoiseStream
from robuststats.engine._scales import ScaleTable
from robuststats.engine._spec import ALL_OPS, PHASES, NoiseSpec
from robuststats.engine._streams import NoiseStreams, in_backward
from robuststats.engine._tracking import LayerTracker
from robuststats.errors import RobuststatsError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["InjectionVerificationError", "NoiseSession"]


class InjectionVerificationError(RobuststatsError, RuntimeError):
    """A requested op or layer received zero injections in a phase that ran."""

    def __init__(self, message: str, missing: list[tuple[str, str]]) -> None:
        super().__init__(message)
        #: ``[(what, phase)]``, e.g. ``[("op 'softmax'", "forward"), ("layer 3", "backward")]``
        self.missing = missing


class NoiseSession:
    """State of one ``inject(model, spec)`` block; returned by its ``__enter__``."""

    def __init__(self, model: torch.nn.Module, spec: NoiseSpec, mm: ModelMap, verify: bool) -> None:
        self.model = model
        self.spec = spec
        self.map = mm
        self.verify = verify
        self.kind = spec.kind
        self._scales = ScaleTable(spec, mm)
        self.phase_scales = self._scales.phase_scales
        self.ops = self._scales.ops
        self.layers = self._scales.layers
        devices = {p.device for p in model.parameters()} or {torch.device("cpu")}
        self._streams = NoiseStreams(spec.seed, devices, spec.generator)
        self._replay = CheckpointReplay(self._streams)
        self._tracker = LayerTracker()
        self._ledger = InjectionLedger()
        self._lock = threading.Lock()  # graph_tasks: autograd threads add to it
        self.open = False
        self.forward_calls = 0
        self.backward_ran = False
        #: backward noise requests after the block closed (the gradients pass unchanged)
        self.late_backward = 0
        self._stats: pd.DataFrame | None = None
        #: matrix products that ran out of the engine's sight: what → why (a product
        #: module's weights in an opaque kernel; the model's own sdpa call)
        self.blind: dict[str, str] = {}
        #: names of the linear and product modules whose products were reached, and ids of
        #: the modules whose forward ran while their children carry weights
        self.reached: set[str] = set()
        self.parents_ran: set[int] = set()
        #: ids of the autograd graph tasks (backward calls) that reached the model's outputs
        self.graph_tasks: dict[int, None] = {}
        self.mode: Any = None  # the session's TorchFunctionMode, when functional ops are requested
        # target 'inputs' / 'weights': the error model acts on the operands of products
        self._operands: Any = None
        if spec.target != "output":
            from robuststats.engine._operands import OperandNoise

            self._operands = OperandNoise(self)

    @property
    def unreplayed(self) -> int:
        """Forward draws during a backward that had no checkpoint record to replay (fresh
        noise: checkpointing of functions other than whole decoder layers)."""
        return self._replay.unreplayed

    # --- layers and gradient checkpointing --------------------------------------------------

    def layer_enter(self, layer: int, module: torch.nn.Module) -> None:
        self._tracker.push(layer, self._replay.enter(layer, module))

    def layer_exit(self) -> None:
        entry = self._tracker.pop()
        if entry is not None and entry[1] is not None:
            self._replay.exit(*entry)

    def current_layer(self) -> int | None:
        """Layer whose forward is running on this thread; ``OUTSIDE`` inside the model but
        outside any layer; ``None`` when the model is not running at all."""
        return self._tracker.current()

    def child_enter(self, layer: int) -> None:
        """A direct child of ``layer`` starts during a recompute: the only sign of which
        layer is running (transformers checkpoints ``forward``, not ``__call__``)."""
        self._tracker.recompute_in(layer)

    def root_enter(self) -> None:
        self._tracker.enter_model()
        if not in_backward():
            self.forward_calls += 1

    def root_exit(self, output: Any) -> None:
        self._tracker.exit_model()
        if torch.is_grad_enabled():
            for t in _tensors(output):
                if t.requires_grad:
                    t.register_hook(self._mark_backward)

    def _mark_backward(self, grad: torch.Tensor) -> None:
        self.backward_ran = True
        # this backward (graph task) belongs to this session: autograd threads that
        # recompute checkpointed layers for it find the session by the task id
        task = torch._C._current_graph_task_id()
        if task != -1:
            with self._lock:
                self.graph_tasks[task] = None
                while len(self.graph_tasks) > 64:
                    self.graph_tasks.pop(next(iter(self.graph_tasks)))

    # --- scales ------------------------------------------------------------------------------

    def scales(self, op: str, layer: int, name: str) -> tuple[float, float]:
        """(forward, backward) scale of ``op`` at module ``name`` in ``layer``; (0, 0) when
        the op or layer is not selected."""
        return self._scales.scales(op, layer, name)

    def scales_any(self, layer: int, phase: str) -> bool:
        """Whether ``layer`` must receive an injection in ``phase`` (``ScaleTable.required``)."""
        return self._scales.required(layer, phase)

    # --- noise -------------------------------------------------------------------------------

    def apply_op(
        self,
        op: str,
        layer: int,
        name: str,
        fn: Callable[..., torch.Tensor],
        tensors: tuple[Any, ...],
    ) -> torch.Tensor:
        """Run ``fn(*tensors)`` as a noisy ``op``: backward noise on the gradients of every
        differentiable tensor input, forward noise on the output (straight-through)."""
        fs, bs = self._scales.scales(op, layer, name)
        if self._operands is not None:  # input quantization or static weight noise
            return self._operands.run(op, layer, name, fn, tensors, fs) if fs > 0.0 else fn(*tensors)
        if bs > 0.0 and torch.is_grad_enabled():
            tensors = tuple(
                BackwardNoise.apply(t, self, layer, op, bs)
                if isinstance(t, torch.Tensor) and t.requires_grad
                else t
                for t in tensors
            )
        out = fn(*tensors)
        if fs > 0.0:
            out = self.forward_noise(out, layer, op, fs)
        return out

    def forward_noise(
        self, y: torch.Tensor, layer: int, op: str, scale: float, *, count: bool = True
    ) -> torch.Tensor:
        """``y + e`` with ``e`` from the error model; gradient passes straight through
        (the error is a constant to autograd, as in hardware: the backward matmuls never
        see the forward error of their own output). ``count=False`` for the later blocks
        of an op computed in blocks: one injection, norms summed over its blocks."""
        if not (isinstance(y, torch.Tensor) and y.is_floating_point()):
            return y
        recompute = in_backward()
        tracked = y.requires_grad and torch.is_grad_enabled()
        # draw, multiply, measure and add in one pass (chunk by chunk, in parallel), a
        # bf16/fp16 result in float32 and rounded once: bitwise the values of the unfused
        # paths below. In place when autograd does not track y; else (the philox stream's
        # kernel only: the default stream's chunked pass would need a copy first, which
        # costs more than it saves) into a new tensor that the gradient passes straight
        # through (y may be saved for backward)
        if self.kind == "relative_gaussian" and y.device.type == "cpu" and (
                self._streams.generator == "philox" if tracked else y.is_contiguous()):
            g = self._replay.forward_stream(layer, y.device)
            if tracked:
                made: list[torch.Tensor] = []

                def make(t: torch.Tensor) -> torch.Tensor:
                    out, norms = g.perturbed(t, scale)
                    made.append(norms)
                    return out

                out = _StraightThrough.apply(y, make)
                norms = made[0]
            else:
                with torch.no_grad():
                    out, norms = y, g.perturb_relative_(y, scale)
            if not recompute:
                self._ledger.book(layer, op, "forward", norms, count=count)
            return out
        if y.dtype in LOW_PRECISION:
            with torch.no_grad():
                out, realised, yf = self._low_precision(
                    y, scale, self._replay.forward_stream(layer, y.device))
                if not recompute:
                    self._ledger.record(layer, op, "forward", yf, realised, 1.0, count=count)
                if not tracked:
                    return y.copy_(out)
            return _StraightThrough.apply(y, lambda _: out)
        with torch.no_grad():
            g = self._replay.forward_stream(layer, y.device)
            e, alpha = self._error(y, scale, g)
            if not recompute:
                self._ledger.record(layer, op, "forward", y, e, alpha, count=count)
            if not tracked:
                # no autograd graph to protect: one in-place add, no extra allocation
                return y.add_(e, alpha=alpha)
        # out of place when autograd tracks y: an op may save its output for backward
        # (softmax does), and in-place edits of tracked views are unsafe
        return torch.add(y, e, alpha=alpha)

    def backward_noise(
        self, grad: torch.Tensor, layer: int, op: str, scale: float, *, count: bool = True
    ) -> torch.Tensor:
        self.backward_ran = True
        if not self.open:
            self.late_backward += 1
            return grad
        with torch.no_grad():
            g = self._streams.get("backward", layer, grad.device)
            if (self.kind == "relative_gaussian" and grad.device.type == "cpu"
                    and self._streams.generator == "philox"):
                # the philox kernel's one pass into a new tensor (never in place: autograd
                # may hand the same gradient buffer to several inputs); bitwise the unfused
                # values below
                out, norms = g.perturbed(grad, scale)
                self._ledger.book(layer, op, "backward", norms, count=count)
                return out
            if grad.dtype in LOW_PRECISION:
                out, realised, gf = self._low_precision(grad, scale, g)
                self._ledger.record(layer, op, "backward", gf, realised, 1.0, count=count)
                return out
            e, alpha = self._error(grad, scale, g)
            self._ledger.record(layer, op, "backward", grad, e, alpha, count=count)
            # never in place: autograd may hand the same gradient buffer to several inputs
            return torch.add(grad, e, alpha=alpha)

    def _error(
        self, y: torch.Tensor, scale: float, g: NoiseStream
    ) -> tuple[torch.Tensor, float]:
        """``(e, alpha)`` with noisy result ``y + alpha·e``."""
        if self.kind == "relative_gaussian":
            # fused form of y·(1 + s·ε): e = ε·y in place on the fresh draw, alpha = s
            # (ε·y has the law of ε·|y|; no |y| temporary, one pass fewer than the naive form)
            return g.randn(y.shape, y.dtype).mul_(y), scale
        return error_tensor(self.kind, y, scale, g), 1.0

    def _low_precision(
        self, y: torch.Tensor, scale: float, g: NoiseStream
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A bf16/fp16 result: the error is computed in fp32 from the fp32 value of ``y``
        and the sum is rounded once to ``y``'s dtype. Returns ``(noisy, realised, y_fp32)``
        with ``realised`` = noisy − y in fp32: what survived the rounding (an error below
        half an ulp of ``y`` rounds away, and the statistics must say so)."""
        yf = y.detach().float()
        e, alpha = self._error(yf, scale, g)
        out = torch.add(yf, e, alpha=alpha).to(y.dtype)
        return out, out.float().sub_(yf), yf

    def _book(self, layer: int, op: str, phase: str, norms: torch.Tensor, *,
              count: bool = True) -> None:
        """Count one injection with squared norms ``(‖y‖², ‖e‖²)`` (operand noise books
        the norms it computes itself)."""
        self._ledger.book(layer, op, phase, norms, count=count)

    # --- results -----------------------------------------------------------------------------

    @property
    def stats(self) -> pd.DataFrame:
        """One row per layer × op × phase with at least one injection: ``count`` and the
        realised ``rms_noise_ratio`` = ‖error‖ / ‖exact result‖ over all injections, with
        the spec's ``kind`` and ``target`` (so tables of several sessions keep per-call
        noise, static weight noise and quantization apart)."""
        if self._stats is not None:
            return self._stats
        df = self._ledger.frame(self.phase_scales, self.spec.kind, self.spec.target)
        if not self.open:
            self._stats = df
        return df

    def count(self, *, op: str | None = None, phase: str | None = None, layer: int | None = None) -> int:
        """Number of injections matching the given filters."""
        return self._ledger.count(op=op, phase=phase, layer=layer)

    def verification_problems(self, required_ops: set[str]) -> list[tuple[str, str]]:
        """``[(what, phase)]`` that were requested, should have run and got zero injections."""
        ran = {"forward": self.forward_calls > 0, "backward": self.backward_ran}
        missing: list[tuple[str, str]] = []
        for phase in PHASES:
            if not ran[phase] or self.phase_scales[phase] <= 0.0:
                continue
            for op in ALL_OPS:
                if op in required_ops and self.count(op=op, phase=phase) == 0:
                    missing.append((f"op {op!r}", phase))
            layers = self.layers if self.layers is not None else range(self.map.n_layers)
            for layer in layers:
                if self.scales_any(layer, phase) and self.count(layer=layer, phase=phase) == 0:
                    missing.append((f"layer {layer}", phase))
        return missing


class _StraightThrough(torch.autograd.Function):
    """Forward: ``make(y)``, a new tensor that autograd treats as a function of ``y`` with
    the identity as its derivative (the noise is a constant); backward: the gradient goes
    to ``y`` unchanged. The output is made inside ``forward`` and is never ``y`` or a view
    of it, so a model may update it in place (Falcon adds to its attention output)."""

    @staticmethod
    def forward(ctx: Any, y: torch.Tensor,  # type: ignore[override]
                make: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        return make(y)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        return grad, None


def _tensors(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, dict):
        return [v for v in output.values() if isinstance(v, torch.Tensor)]
    if isinstance(output, (tuple, list)):
        return [v for v in output if isinstance(v, torch.Tensor)]
    return []
