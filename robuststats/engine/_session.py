"""`NoiseSession`: one active injection: generators, per-site scales, statistics, verification.

Hot-path rules: no ``.item()`` and no host sync while the session is open. Counts are
Python integers (they are facts the host already knows); squared norms of signal and
error are accumulated as device tensors and reduced once, when :attr:`stats` is read.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from robuststats._validation import check_choice, check_int
from robuststats.engine._autograd import BackwardNoise
from robuststats.engine._error_models import error_tensor
from robuststats.engine._model_map import OUTSIDE, ModelMap
from robuststats.engine._rng import NoiseStream
from robuststats.engine._spec import ALL_OPS, PHASES, NoiseSpec
from robuststats.errors import RobuststatsError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["InjectionVerificationError", "NoiseSession"]

_STATS_COLUMNS = ["layer", "op", "phase", "count", "rms_noise_ratio", "target_scale", "kind",
                  "target"]


def in_backward() -> bool:
    """True while the autograd engine runs a backward pass on this thread (e.g. while a
    checkpointed segment is recomputed)."""
    return torch._C._current_graph_task_id() != -1


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
        self.phase_scales = spec.phase_scales
        self.ops = frozenset(spec.op_set)
        self.layers = spec.layer_indices
        self._layer_set = None if self.layers is None else frozenset(self.layers)
        self._module_scales = {
            k: v for k, v in (spec.layer_scales or {}).items() if isinstance(k, str)
        }
        self._index_scales = {
            k: v for k, v in (spec.layer_scales or {}).items() if isinstance(k, int)
        }
        self._scale_cache: dict[tuple[str, int, str], tuple[float, float]] = {}
        self._gens: dict[tuple[str, int, torch.device], NoiseStream] = {}
        self._lock = threading.Lock()
        self._counts: dict[tuple[int, str, str], int] = defaultdict(int)
        self._acc: dict[tuple[int, str, str], torch.Tensor] = {}
        self._tls = threading.local()
        self.open = False
        self.forward_calls = 0
        self.backward_ran = False
        self.late_backward = 0
        self._stats: pd.DataFrame | None = None
        # gradient checkpointing: per layer, the forward-stream states at the start of each
        # checkpointed forward and the number of draws it made; popped when it is recomputed
        self._ckpt_states: dict[int, deque[Any]] = defaultdict(lambda: deque(maxlen=64))
        self._draws: dict[int, int] = defaultdict(int)
        self._replay: dict[int, list[Any]] = {}
        self.unreplayed = 0
        #: matrix products that ran out of the engine's sight: what → why (a product
        #: module's weights in an opaque kernel; the model's own sdpa call)
        self.blind: dict[str, str] = {}
        #: ids of the autograd graph tasks (backward calls) that reached the model's outputs
        self.graph_tasks: dict[int, None] = {}
        self.mode: Any = None  # the session's TorchFunctionMode, when functional ops are requested
        self._devices = {p.device for p in model.parameters()} or {torch.device("cpu")}
        # target 'inputs' / 'weights': the error model acts on the operands of products
        self._operands: Any = None
        if spec.target != "output":
            from robuststats.engine._operands import OperandNoise

            self._operands = OperandNoise(self)

    # --- randomness ------------------------------------------------------------------------

    def _gen(self, phase: str, layer: int, device: torch.device) -> NoiseStream:
        """Each (phase, layer) has its own stream, so the noise of one layer does not depend
        on which other layers are selected, and a checkpointed layer can be replayed alone.
        Streams draw in parallel on CPU, identically for any thread count (``_rng``)."""
        key = (phase, layer, device)
        g = self._gens.get(key)
        if g is None:
            g = NoiseStream(_stream_seed(self.spec.seed, phase, layer), device)
            self._gens[key] = g
        return g

    def _forward_gen(self, layer: int, device: torch.device) -> NoiseStream:
        if not in_backward():
            self._draws[layer] += 1
            return self._gen("forward", layer, device)
        # recomputation of a checkpointed layer during backward: replay its original draws
        replay = self._replay.get(layer)
        if replay is None or replay[1] <= 0:
            saved = self._ckpt_states.get(layer)
            if not saved:
                self.unreplayed += 1
                return self._gen("forward", layer, device)
            rec = saved.pop()
            states, n_draws = rec[0], rec[1]
            seed = _stream_seed(self.spec.seed, "forward", layer)
            gens = {dev: NoiseStream(seed, dev).set_state(state) for dev, state in states.items()}
            replay = self._replay[layer] = [gens, n_draws if n_draws is not None else 1 << 62]
        replay[1] -= 1
        g = replay[0].get(device)
        if g is None:
            g = replay[0][device] = NoiseStream(_stream_seed(self.spec.seed, "forward", layer), device)
        return g

    # --- layers and gradient checkpointing --------------------------------------------------

    def layer_enter(self, layer: int, module: torch.nn.Module) -> None:
        record = None
        if (
            torch.is_grad_enabled()
            and module.training
            and getattr(module, "gradient_checkpointing", False)
            and not in_backward()
        ):
            # transformers checkpoints the layer's forward: remember where its noise stream
            # starts and (at exit) how many draws it made, to replay them on recompute
            states = {
                dev: g.get_state()
                for (ph, ly, dev), g in self._gens.items()
                if ph == "forward" and ly == layer
            }
            if not states:
                for dev in self._devices:
                    states[dev] = self._gen("forward", layer, dev).get_state()
            record = [states, None, self._draws[layer]]
            self._ckpt_states[layer].append(record)
        self._layer_stack().append((layer, record))

    def layer_exit(self) -> None:
        stack = self._layer_stack()
        if stack:
            layer, record = stack.pop()
            if record is not None:
                record[1] = self._draws[layer] - record.pop()

    def _layer_stack(self) -> list[tuple[int, Any]]:
        stack = getattr(self._tls, "layers", None)
        if stack is None:
            stack = self._tls.layers = []
        return stack

    def current_layer(self) -> int | None:
        """Layer whose forward is running on this thread; ``OUTSIDE`` inside the model but
        outside any layer; ``None`` when the model is not running at all."""
        stack = getattr(self._tls, "layers", None)
        if stack:
            return stack[-1][0]
        if getattr(self._tls, "depth", 0) > 0:
            return OUTSIDE
        if in_backward():  # recomputing a checkpointed layer: its hooks do not run again
            return getattr(self._tls, "recompute_layer", None)
        return None

    def child_enter(self, layer: int) -> None:
        """A direct child of ``layer`` starts during a recompute: the only sign of which
        layer is running (transformers checkpoints ``forward``, not ``__call__``)."""
        self._tls.recompute_layer = layer

    def root_enter(self) -> None:
        self._tls.depth = getattr(self._tls, "depth", 0) + 1
        if not in_backward():
            self.forward_calls += 1

    def root_exit(self, output: Any) -> None:
        self._tls.depth = max(getattr(self._tls, "depth", 1) - 1, 0)
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
        key = (op, layer, name)
        hit = self._scale_cache.get(key)
        if hit is not None:
            return hit
        if op not in self.ops or (
            self._layer_set is not None and layer not in self._layer_set
        ):
            res = (0.0, 0.0)
        else:
            mult = self._multiplier(layer, name)
            res = (self.phase_scales["forward"] * mult, self.phase_scales["backward"] * mult)
        self._scale_cache[key] = res
        return res

    def _multiplier(self, layer: int, name: str) -> float:
        best, best_len = None, -1
        for prefix, mult in self._module_scales.items():
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = mult, len(prefix)
        if best is not None:
            return best
        return self._index_scales.get(layer, 1.0)

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
        fs, bs = self.scales(op, layer, name)
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
        if y.dtype in LOW_PRECISION:
            with torch.no_grad():
                out, realised, yf = self._low_precision(y, scale, self._forward_gen(layer, y.device))
                if not recompute:
                    self._record(layer, op, "forward", yf, realised, 1.0, count=count)
                if not tracked:
                    return y.copy_(out)
            return _StraightThrough.apply(y, out)
        with torch.no_grad():
            g = self._forward_gen(layer, y.device)
            if (not tracked and self.kind == "relative_gaussian" and y.device.type == "cpu"
                    and y.is_contiguous()):
                # draw, multiply, measure and add chunk by chunk in parallel (bitwise equal)
                norms = g.perturb_relative_(y, scale)
                if not recompute:
                    self._book(layer, op, "forward", norms, count=count)
                return y
            e, alpha = self._error(y, scale, g)
            if not recompute:
                self._record(layer, op, "forward", y, e, alpha, count=count)
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
            g = self._gen("backward", layer, grad.device)
            if grad.dtype in LOW_PRECISION:
                out, realised, gf = self._low_precision(grad, scale, g)
                self._record(layer, op, "backward", gf, realised, 1.0, count=count)
                return out
            e, alpha = self._error(grad, scale, g)
            self._record(layer, op, "backward", grad, e, alpha, count=count)
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
        self, y: torch.Tensor, scale: float, g: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A bf16/fp16 result: the error is computed in fp32 from the fp32 value of ``y``
        and the sum is rounded once to ``y``'s dtype. Returns ``(noisy, realised, y_fp32)``
        with ``realised`` = noisy − y in fp32: what survived the rounding (an error below
        half an ulp of ``y`` rounds away, and the statistics must say so)."""
        yf = y.detach().float()
        e, alpha = self._error(yf, scale, g)
        out = torch.add(yf, e, alpha=alpha).to(y.dtype)
        return out, out.float().sub_(yf), yf

    def _record(
        self,
        layer: int,
        op: str,
        phase: str,
        y: torch.Tensor,
        e: torch.Tensor,
        alpha: float,
        *,
        count: bool = True,
    ) -> None:
        # norms in at least fp32: an fp16 norm overflows past 65504 (→ inf/inf = NaN)
        dtype = torch.float32 if y.dtype in LOW_PRECISION else None
        norms = torch.stack((torch.linalg.vector_norm(y, dtype=dtype),
                             torch.linalg.vector_norm(e, dtype=dtype) * alpha))
        self._book(layer, op, phase, norms.double().square_(), count=count)

    def _book(self, layer: int, op: str, phase: str, norms: torch.Tensor, *,
              count: bool = True) -> None:
        """Count one injection with squared norms ``(‖y‖², ‖e‖²)`` (a float64 device tensor);
        ``count=False`` adds the norms of a later block of an injection already counted."""
        key = (layer, op, phase)
        with self._lock:
            if count:
                self._counts[key] += 1
            acc = self._acc.get(key)
            if acc is None:
                # a normal tensor even under torch.inference_mode(), so that a session used
                # for a rollout can keep accumulating in a training step afterwards
                with torch.inference_mode(False):
                    self._acc[key] = norms.clone()  # callers may pass a cached tensor
            else:
                acc.add_(norms)

    # --- results -----------------------------------------------------------------------------

    @property
    def stats(self) -> pd.DataFrame:
        """One row per layer × op × phase with at least one injection: ``count`` and the
        realised ``rms_noise_ratio`` = ‖error‖ / ‖exact result‖ over all injections, with
        the spec's ``kind`` and ``target`` (so tables of several sessions keep per-call
        noise, static weight noise and quantization apart)."""
        if self._stats is not None:
            return self._stats
        import pandas as pd

        rows = []
        with self._lock:
            items = sorted(self._counts.items(), key=lambda kv: (kv[0][0], ALL_OPS.index(kv[0][1]), kv[0][2]))
            accs = {k: v.cpu() for k, v in self._acc.items()}  # one sync, here, not on the hot path
        for (layer, op, phase), count in items:
            sig, err = accs[(layer, op, phase)].tolist()
            ratio = (err / sig) ** 0.5 if sig > 0 else float("nan")
            rows.append((layer, op, phase, count, ratio, self.phase_scales[phase],
                         self.spec.kind, self.spec.target))
        df = pd.DataFrame(rows, columns=_STATS_COLUMNS).astype(
            {"layer": "int64", "count": "int64", "rms_noise_ratio": "float64"}
        )
        if not self.open:
            self._stats = df
        return df

    def count(self, *, op: str | None = None, phase: str | None = None, layer: int | None = None) -> int:
        """Number of injections matching the given filters."""
        if op is not None:
            check_choice(op, "op", ALL_OPS)
        if phase is not None:
            check_choice(phase, "phase", PHASES)
        if layer is not None:
            check_int(layer, "layer")
        with self._lock:
            return sum(
                c
                for (ly, o, ph), c in self._counts.items()
                if (op is None or o == op) and (phase is None or ph == phase)
                and (layer is None or ly == layer)
            )

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

    def scales_any(self, layer: int, phase: str) -> bool:
        """Whether ``layer`` must receive an injection in ``phase``: some module in it that
        anchors a requested op (a linear or product module, a norm, an attention module,
        an activation) has a positive scale there, after multipliers. Functional ops with
        no module of their own (``matmul``, ``bmm``, a softmax outside attention) make a
        layer required only when the spec names its ops explicitly: a preset does not
        promise that every layer computes one (``nn.Sequential(Linear, ReLU, Linear)``)."""
        i = 0 if phase == "forward" else 1
        for ly, op, name in self.map.sites:
            if ly == layer and op in self.ops and self.scales(op, ly, name)[i] > 0:
                return True
        if isinstance(self.spec.ops, str):
            return False
        path = self.map.layer_path(layer)
        return any(op in _FUNCTIONAL and self.scales(op, layer, path)[i] > 0 for op in self.ops)


_FUNCTIONAL = frozenset({"matmul", "bmm", "softmax", "silu", "gelu"})


#: Output dtypes whose noise is computed in fp32 and rounded once (see ``_low_precision``).
LOW_PRECISION = frozenset({torch.float16, torch.bfloat16})


class _StraightThrough(torch.autograd.Function):
    """Forward: ``noisy`` (a constant); backward: the gradient goes to ``y`` unchanged."""

    @staticmethod
    def forward(ctx: Any, y: torch.Tensor, noisy: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return noisy

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        return grad, None


def _stream_seed(seed: int, phase: str, layer: int) -> int:
    """Distinct 63-bit seeds per (seed, phase, layer): a splitmix64 finalizer of the triple."""
    x = (seed * 0x9E3779B97F4A7C15 + (layer + 2) * 0xBF58476D1CE4E5B9
         + (0 if phase == "forward" else 0x94D049BB133111EB)) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 31
    return x & 0x7FFFFFFFFFFFFFFF


def _tensors(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, dict):
        return [v for v in output.values() if isinstance(v, torch.Tensor)]
    if isinstance(output, (tuple, list)):
        return [v for v in output if isinstance(v, torch.Tensor)]
    return []
