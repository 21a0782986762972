"""`inject(model, spec)`: the scoped, verified noise context."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from torch import nn

from robuststats.engine import _install
from robuststats.engine._mode import FUNCTIONAL_OPS, NoiseMode, remove_mode
from robuststats.engine._model_map import ModelMap, build_model_map
from robuststats.engine._session import InjectionVerificationError, NoiseSession
from robuststats.engine._spec import NoiseSpec
from robuststats.errors import InputError, did_you_mean

__all__ = ["Injection", "inject"]

_ATTENTION_OPS = frozenset({"attention_scores", "softmax", "attention_output"})
_VERIFY_CHOICES = (True, False, "ops", "layers")


def _attention_switchable(mm: ModelMap) -> bool:
    cfg = mm.hf_config
    return (bool(mm.attention) and cfg is not None and hasattr(cfg, "_attn_implementation")
            and mm.attention_backend)


def _check_attention_reachable(spec: NoiseSpec, mm: ModelMap, model: nn.Module) -> None:
    """Refuse a model whose attention the engine can reach neither through transformers'
    AttentionInterface nor as functional ops (Falcon computes sdpa in its own code)."""
    cfg = mm.hf_config
    if not mm.attention or cfg is None or _attention_switchable(mm):
        return
    cls = type(model).__name__
    ops = set(spec.op_set)
    named = ops & _ATTENTION_OPS if not isinstance(spec.ops, str) else set()
    if named:
        raise InputError(
            f"`ops` requests {sorted(named)}, but {cls} computes attention in its own code, "
            "not through transformers' AttentionInterface; request 'matmul' and 'softmax' "
            "on the model loaded with attn_implementation='eager' instead."
        )
    impl = getattr(cfg, "_attn_implementation", None)
    if impl != "eager" and ops & {"matmul", "softmax", "attention_scores", "attention_output"}:
        raise InputError(
            f"{cls} computes attention with {impl!r} in its own code, not through "
            "transformers' AttentionInterface, which hides the attention matrix products "
            f"and softmax from `ops`={spec.ops!r}; load the model with "
            "attn_implementation='eager' (its eager attention is reached as 'matmul' and "
            "'softmax')."
        )


def _refuse_opaque_modules(session: NoiseSession, mm: ModelMap) -> None:
    """Refuse, before the model runs, modules whose matrix products happen where the engine
    cannot reach them: ``nn.MultiheadAttention`` multiplies its in-projection, both
    attention products and its out-projection inside ``F.multi_head_attention_forward``
    (a TorchFunctionMode sees that call, but none of the products inside it)."""
    for module in mm.product_modules:
        if not isinstance(module, nn.MultiheadAttention):
            continue
        name = mm.names[id(module)]
        if max(session.scales("linear", mm.layer_of[id(module)], name)) > 0.0:
            raise InputError(
                f"nn.MultiheadAttention at module {name!r} computes its matrix products "
                "inside F.multi_head_attention_forward, which the engine cannot reach: its "
                "projections and attention products would stay exact. Switch it off with "
                f"layer_scales={{{name!r}: 0}}, pass verify=False to accept that, or build the "
                "block from nn.Linear layers and F.scaled_dot_product_attention."
            )


def _features(spec: NoiseSpec, mm: ModelMap) -> set[str]:
    ops = set(spec.op_set)
    features = set()
    # weight products belong to `linear` only: with `matmul`/`bmm` requested, the wrappers
    # also keep a Linear subclass's `x @ W.T` and a product module's products out of them
    if ops & {"linear", "matmul", "bmm"} and (mm.linears or mm.product_modules):
        features.add("linear")
    if ops & {"rms_norm", "layer_norm"} and mm.norm_modules:
        features.add("norm")
    if ops & _ATTENTION_OPS and _attention_switchable(mm):
        features.add("attention")
    if ops & {"silu", "gelu"} and mm.activations:
        features.add("activation")
    if ops & FUNCTIONAL_OPS and mm.outside:
        features.add("paths")
    return features


def required_ops(spec: NoiseSpec, mm: ModelMap) -> set[str]:
    """Ops that must receive injections for the session to verify.

    Every op named explicitly is required. A preset (``matmul_only``, ``all_ops``) requires
    the ops the model structurally contains in the selected layers: ``linear`` (an
    ``nn.Linear``), the three attention ops (a transformers attention module), ``rms_norm``
    / ``layer_norm`` (a norm module), ``silu`` / ``gelu`` (an activation module). Ops with no
    module to anchor them (``matmul``, ``bmm``) are injected when they occur but not
    required by a preset.
    """
    if not isinstance(spec.ops, str):
        return set(spec.op_set)
    layers = spec.layer_indices
    out = set()
    for op in spec.op_set:
        anchored = mm.anchors.get(op, set())
        if op in _ATTENTION_OPS and not _attention_switchable(mm):
            continue
        if (layers is None and anchored) or anchored & set(layers or ()):
            out.add(op)
    return out


class Injection:
    """Context manager returned by :func:`inject`; ``__enter__`` gives the session."""

    def __init__(self, model: nn.Module, spec: NoiseSpec, mm: ModelMap, verify: bool | str) -> None:
        self.model = model
        self.spec = spec
        self.map = mm
        self.verify = verify
        self.session: NoiseSession | None = None
        self._inst: _install.Installation | None = None
        self._mode: NoiseMode | None = None
        self._features: set[str] = set()
        self._thread: int | None = None

    def __enter__(self) -> NoiseSession:
        if self.session is not None:
            raise InputError("an inject(...) context can be entered only once; call inject again.")
        session = NoiseSession(self.model, self.spec, self.map, bool(self.verify))
        self.session = session
        self._thread = threading.get_ident()
        session.open = True
        if not self.spec.is_active:
            return session  # scale 0: nothing is installed, zero overhead
        if self.verify:
            _refuse_opaque_modules(session, self.map)
        self._features = _features(self.spec, self.map)
        self._inst = _install.acquire(self.model, self.map, session, self._features)
        try:
            if session.ops & FUNCTIONAL_OPS:
                self._mode = NoiseMode(self._inst, session)
                session.mode = self._mode
                self._mode.__enter__()
        except BaseException:
            _install.release(self._inst, session, self._features)
            raise
        return session

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        session = self.session
        assert session is not None
        if not session.open:
            return  # closed already (e.g. by stop_from_env after an exception)
        if self._inst is not None and threading.get_ident() != self._thread:
            raise InputError(
                "an inject(...) session must be closed in the thread that opened it "
                "(its patches and TorchFunctionMode are that thread's)."
            )
        try:
            if self._mode is not None:
                # wherever it sits: sessions of other models may have been opened after it
                remove_mode(self._mode)
        finally:
            if self._inst is not None:
                _install.release(self._inst, session, self._features)
            session.open = False
        if exc_type is None and self.verify:
            self._verify(session)

    def _verify(self, session: NoiseSession) -> None:
        required = required_ops(self.spec, self.map) if self.verify != "layers" else set()
        if isinstance(self.spec.ops, str):
            # a preset does not require an op whose every place was switched off by a
            # multiplier of 0
            required = {op for op in required if any(
                o == op and max(session.scales(o, ly, name)) > 0
                for ly, o, name in self.map.sites
            ) or op not in self.map.anchors}
        missing = session.verification_problems(required)
        if self.verify != "layers":
            ran = {"forward": session.forward_calls > 0, "backward": session.backward_ran}
            for what, why in session.blind.items():
                for phase, on in ran.items():
                    if on and session.phase_scales[phase] > 0:
                        missing.append((f"{what} ({why})", phase))
            if ran["forward"] and session.phase_scales["forward"] > 0:
                missing.extend((what, "forward") for what in _unreached(session, self.map))
        if self.verify == "ops":
            missing = [m for m in missing if m[0].startswith("op ")]
        if missing:
            listed = ", ".join(f"{what} in {phase}" for what, phase in missing)
            raise InjectionVerificationError(
                f"noise was requested but never injected: {listed} "
                f"(spec ops={self.spec.ops!r}, layers={self.spec.layers!r}, "
                f"phases={self.spec.phases!r}). Pass verify=False to allow this deliberately.",
                missing,
            )


def _unreached(session: NoiseSession, mm: ModelMap) -> list[str]:
    """The linear and product modules with forward noise whose parent ran but which were
    never reached: neither their forward nor a product with their weights ran (a parent
    that uses a child's weight in a way the engine does not watch, or never calls it)."""
    out = []
    for pid in session.parents_ran:
        for child in mm.weight_parents[pid][1]:
            name = mm.names[id(child)]
            where = f"op 'linear' at module {name!r}"
            if (name in session.reached or where in session.blind
                    or session.scales("linear", mm.layer_of[id(child)], name)[0] <= 0.0):
                continue
            out.append(f"{where} (its parent {mm.names[pid]!r} ran, but neither its forward "
                       "nor a product with its weights did; if it is unused, switch it off "
                       f"with layer_scales={{{name!r}: 0}})")
    return out


def inject(
    model: nn.Module, spec: NoiseSpec | Mapping[str, Any], *, verify: bool | str = True
) -> Injection:
    """Inject noise into ``model`` for the duration of a ``with`` block.

    ``with inject(model, spec) as session: ...`` perturbs the ops, layers and phases that
    ``spec`` selects, only inside the block and only in the calling thread, and restores
    the model exactly on exit. ``session.stats`` is a DataFrame of injection counts and
    realised RMS noise ratios per layer × op × phase.

    Parameters
    ----------
    model : torch.nn.Module
        A Hugging Face model (sdpa, eager or flash attention) or any torch module.
    spec : NoiseSpec or mapping
        What to inject (a mapping is read with :meth:`NoiseSpec.from_dict`).
    verify : bool or {"ops", "layers"}
        On a clean exit, raise :class:`InjectionVerificationError` when a requested op or
        layer got zero injections in a phase that ran (forward ran: the model was called;
        backward ran: a gradient reached the model's output). ``"ops"`` checks ops only,
        ``"layers"`` layers only, ``False`` nothing.
    """
    if isinstance(spec, Mapping):
        spec = NoiseSpec.from_dict(spec)
    if not isinstance(spec, NoiseSpec):
        raise InputError(f"`spec` must be a NoiseSpec or a mapping, got {type(spec).__name__}.")
    if not isinstance(verify, (bool, str)) or verify not in _VERIFY_CHOICES:
        raise InputError(f"`verify` must be True, False, 'ops' or 'layers', got {verify!r}"
                         f"{did_you_mean(verify, ('ops', 'layers'))}.")
    mm = build_model_map(model)
    mm.check_layers(spec.layer_indices)
    _check_attention_reachable(spec, mm, model)
    for key in spec.layer_scales or {}:
        if isinstance(key, int):
            mm.check_layers((key,), "layer_scales")
        else:
            mm.check_module_prefix(key)
    if spec.is_active and set(spec.op_set) & _ATTENTION_OPS and _attention_switchable(mm):
        from robuststats.engine import _attention

        _attention.check_supported(mm)  # an attention variant it cannot reproduce: refuse now
    return Injection(model, spec, mm, verify)
