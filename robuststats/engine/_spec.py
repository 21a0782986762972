"""`NoiseSpec`: the immutable, validated description of one noise configuration.

A spec says *what* to perturb (ops, layers, phases), *how* (error model ``kind`` and
``scale``) and *with which randomness* (``seed``). It knows nothing about a model; the
layer indices and module names it mentions are checked against the model by
:func:`robuststats.engine.inject`.

Longer than 400 lines on purpose: one frozen dataclass whose every field is validated
here, with its messages, so that a spec cannot exist in an invalid state; splitting the
checks from the fields would let them drift apart.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robuststats._datafile import DataSyntaxError, parse_data
from robuststats._fields import check_whole, field_names, from_mapping
from robuststats._validation import check_choice
from robuststats.engine._formats import QUANT_FORMATS, check_format
from robuststats.errors import InputError, did_you_mean

__all__ = ["ALL_OPS", "GENERATORS", "KINDS", "MATMUL_OPS", "OP_PRESETS", "PHASES", "TARGETS", "NoiseSpec"]

#: Every op the engine can reach, in a fixed order (used for stats and verification).
ALL_OPS: tuple[str, ...] = (
    "linear",
    "matmul",
    "bmm",
    "attention_scores",
    "softmax",
    "attention_output",
    "silu",
    "gelu",
    "rms_norm",
    "layer_norm",
)

#: Named op sets. ``matmul_only`` is every matrix product (the scope an FP4/FP8 matmul
#: engine quantizes), including the two products inside attention, which sdpa/flash
#: attention would otherwise hide.
OP_PRESETS: dict[str, tuple[str, ...]] = {
    "matmul_only": ("linear", "matmul", "bmm", "attention_scores", "attention_output"),
    "all_ops": ALL_OPS,
}

#: Error models. Stochastic: relative/absolute Gaussian; deterministic: the rest.
KINDS: tuple[str, ...] = (
    "relative_gaussian",
    "absolute_gaussian",
    "systematic_bias",
    "fp8_e4m3",
    "fp8_e5m2",
    "int8",
    "mxfp4",
    "nvfp4",
)

#: Where an error model acts: an op's ``output`` (default), the ``inputs`` of a matrix
#: product (weights and activations quantized, as a low-precision kernel does), or its
#: ``weights`` only (weight-only quantization such as W4A16, or static weight noise drawn
#: once per session).
TARGETS: tuple[str, ...] = ("output", "inputs", "weights")
#: Ops that are matrix products: the ops input quantization applies to.
MATMUL_OPS: tuple[str, ...] = ("linear", "matmul", "bmm", "attention_scores", "attention_output")
#: Error models of ``target="weights"`` besides the number formats: static Gaussian noise.
_STATIC_KINDS = ("relative_gaussian", "absolute_gaussian")

#: Noise streams: the default chunked Mersenne Twisters, or Philox v1 (``_philox``, opt-in).
GENERATORS: tuple[str, ...] = ("mt", "philox")

PHASES: tuple[str, ...] = ("forward", "backward")
_PHASE_NAMES = ("forward", "backward", "both")


def _check_scale(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"`{name}` must be a non-negative number, got {value!r}.")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise InputError(f"`{name}` must be a non-negative number, got {value!r}.")
    return value


#: largest layer index a spec may name (no model has this many layers; a range past it
#: would only allocate)
MAX_LAYER_INDEX = 99_999


def _check_index(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"`{name}` must hold non-negative layer indices, got {value!r}.")
    if value > MAX_LAYER_INDEX:
        raise InputError(f"`{name}` must hold layer indices up to {MAX_LAYER_INDEX:,}, "
                         f"got {value!r}.")
    return value


_RANGE_RE = re.compile(r"^\s*(\d{1,9})\s*(?:-\s*(\d{1,9})\s*)?$")


def _parse_layers(layers: Any) -> tuple[int, ...] | None:
    """Layer selection → sorted tuple of indices (``None`` = every layer).

    Accepted forms: an int; a list of ints; a string of comma-separated indices and
    inclusive ranges (``"3-5"``, ``"0,2,7-9"``); a sliding window
    ``{"start": 4, "window": 3}`` (layers 4, 5, 6).
    """
    if layers is None:
        return None
    if isinstance(layers, bool):
        raise InputError(f"`layers` must be indices, a range string or a window, got {layers!r}.")
    if isinstance(layers, int):
        return (_check_index(layers, "layers"),)
    if isinstance(layers, str):
        out: set[int] = set()
        for part in layers.split(","):
            m = _RANGE_RE.match(part)
            if m is None:
                raise InputError(
                    f"`layers` string must look like '3', '3-5' or '0,2,7-9', got {layers!r}."
                )
            lo = _check_index(int(m.group(1)), "layers")
            hi = _check_index(int(m.group(2)), "layers") if m.group(2) is not None else lo
            if hi < lo:
                raise InputError(f"`layers` range {part.strip()!r} is empty (end < start).")
            out.update(range(lo, hi + 1))
        return tuple(sorted(out))
    if isinstance(layers, Mapping):
        unknown = set(layers) - {"start", "window"}
        if unknown or "window" not in layers:
            raise InputError(
                "`layers` window must be a mapping with keys 'window' and optional 'start', "
                f"got {dict(layers)!r}."
            )
        start = _check_index(layers.get("start", 0), "layers.start")
        window = check_whole(layers["window"], "layers.window", low=1)
        _check_index(start + window - 1, "layers")
        return tuple(range(start, start + window))
    if isinstance(layers, Iterable):
        items = list(layers)
        if not items:
            raise InputError("`layers` must not be empty; use None for every layer.")
        return tuple(sorted({_check_index(v, "layers") for v in items}))
    raise InputError(f"`layers` must be indices, a range string or a window, got {layers!r}.")


def _parse_layer_scales(layer_scales: Any) -> dict[int | str, float] | None:
    """``{layer index or module-name prefix: multiplier}``; JSON string keys of digits → int."""
    if layer_scales is None:
        return None
    if not isinstance(layer_scales, Mapping):
        raise InputError(
            f"`layer_scales` must be a mapping of layer index or module name to a multiplier, "
            f"got {layer_scales!r}."
        )
    out: dict[int | str, float] = {}
    for key, value in layer_scales.items():
        if isinstance(key, bool):
            raise InputError(f"`layer_scales` key must be a layer index or module name, got {key!r}.")
        if isinstance(key, str) and key.strip().isdigit():
            key = int(key.strip())
        if isinstance(key, int):
            _check_index(key, "layer_scales")
        elif not isinstance(key, str) or not key:
            raise InputError(f"`layer_scales` key must be a layer index or module name, got {key!r}.")
        out[key] = _check_scale(value, f"layer_scales[{key!r}]")
    return out


def _parse_ops(ops: Any) -> str | tuple[str, ...]:
    if isinstance(ops, str):
        if ops in OP_PRESETS:
            return ops
        if ops in ALL_OPS:
            return (ops,)
        raise InputError(
            f"`ops` must be an op name or one of the presets {sorted(OP_PRESETS)}, got {ops!r}"
            f"{did_you_mean(ops, [*ALL_OPS, *OP_PRESETS])}."
        )
    if isinstance(ops, Iterable) and not isinstance(ops, Mapping):
        names = list(ops)
        if not names:
            raise InputError("`ops` must name at least one op.")
        for name in names:
            if not isinstance(name, str) or name not in ALL_OPS:
                raise InputError(
                    f"`ops` contains an unknown op {name!r}{did_you_mean(name, ALL_OPS)}; "
                    f"known ops: {list(ALL_OPS)}."
                )
        return tuple(op for op in ALL_OPS if op in set(names))
    raise InputError(f"`ops` must be a preset name or a list of op names, got {ops!r}.")


def _parse_phases(phases: Any) -> str | dict[str, float]:
    if isinstance(phases, str):
        if phases not in _PHASE_NAMES:
            raise InputError(
                f"`phases` must be 'forward', 'backward', 'both' or a mapping phase → scale, "
                f"got {phases!r}{did_you_mean(phases, _PHASE_NAMES)}."
            )
        return phases
    if isinstance(phases, Mapping):
        out: dict[str, float] = {}
        for key, value in phases.items():
            if key not in PHASES:
                raise InputError(
                    f"`phases` mapping keys must be 'forward' or 'backward', got {key!r}"
                    f"{did_you_mean(key, PHASES)}."
                )
            out[key] = _check_scale(value, f"phases[{key!r}]")
        if not out:
            raise InputError("`phases` mapping must name at least one phase.")
        return out
    raise InputError(
        f"`phases` must be 'forward', 'backward', 'both' or a mapping phase → scale, got {phases!r}."
    )


@dataclass(frozen=True)
class NoiseSpec:
    """One noise configuration: error model, scale, phases, ops, layers, seed.

    Parameters
    ----------
    scale : float
        Noise scale, ≥ 0. Meaning depends on ``kind`` (see ``docs/engine.md``):
        relative Gaussian ``y·(1 + scale·ε)``; absolute Gaussian ``y + scale·ε``;
        systematic bias ``y + scale·|y|``; deterministic formats ``y + scale·(q(y) − y)``
        (1 = the format itself). When ``phases`` is a mapping its values are the per-phase
        scales and ``scale`` may be omitted (it becomes their maximum).
    kind : str
        Error model, one of :data:`KINDS`.
    phases : str or mapping
        ``"forward"``, ``"backward"``, ``"both"``, or ``{"forward": s_f, "backward": s_b}``.
    ops : str or list of str
        A preset (``"matmul_only"``, ``"all_ops"``), one op name or a list of op names.
    layers : None, int, list of int, str or mapping
        Decoder layers to perturb (``None`` = the whole model, including modules outside
        the decoder layers such as ``lm_head``). ``"3-5"``, ``[0, 2]``,
        ``{"window": 3, "start": 4}``.
    layer_scales : mapping, optional
        Multipliers by layer index (``{3: 0.5}``, JSON ``{"3": 0.5}``) or by module-name
        prefix (``{"model.layers.0.mlp": 2.0}``). A module-name entry wins over an index.
    seed : int
        Seed of the session's own noise generators (never the global RNG).
    target : {"output", "inputs", "weights"}
        ``output`` (default): the error model acts on each op's result. ``inputs``: the
        operands of each selected matrix product are fake-quantized to the format ``kind``
        (weights and activations, e.g. W8A8) and the product is computed in float32.
        ``weights``: only the weights of ``linear`` ops, either quantized (weight-only, e.g.
        NVFP4A16) or perturbed by Gaussian noise drawn once per session and parameter
        (static noise: the same perturbation on every call). Both are forward-phase models.
    granularity : {"tensor", "row", "block"}, optional
        Scale sharing of input quantization along the contraction dimension (default per
        format: ``tensor`` for fp8/int8; MXFP4/NVFP4 blocks are fixed).
    block_size : int, optional
        Elements per block for ``granularity="block"`` (default 128 for fp8/int8).
    ties : {"even", "away", "zero"}
        Tie rule of input quantization's round-to-nearest (default ``even``).
    generator : {"mt", "philox"}
        Noise stream. ``mt`` (default): chunked Mersenne Twisters (``_rng``), the numbers
        every earlier result was drawn with. ``philox``: Philox4x32-10 with a Box–Muller
        transform fused into one C pass (``_philox``, version 1), CPU only, opt-in; its
        numbers differ from ``mt``'s. :meth:`to_dict` names it only when it is not ``mt``,
        so the records of default specs are unchanged.
    """

    scale: float | None = None
    _: dataclasses.KW_ONLY
    kind: str = "relative_gaussian"
    phases: str | dict[str, float] = "forward"
    ops: str | tuple[str, ...] = "matmul_only"
    layers: Any = None
    layer_scales: dict[int | str, float] | None = None
    seed: int = 0
    target: str = "output"
    granularity: str | None = None
    block_size: int | None = None
    ties: str = "even"
    generator: str = "mt"

    def __post_init__(self) -> None:
        phases = _parse_phases(self.phases)
        if isinstance(phases, dict):
            top = max(phases.values())
            scale = top if self.scale is None else _check_scale(self.scale, "scale")
            if not math.isclose(scale, top, rel_tol=1e-12, abs_tol=0.0):
                raise InputError(
                    f"`scale` ({self.scale!r}) conflicts with the per-phase scales {phases!r}; "
                    "omit `scale` or set it to their maximum."
                )
        else:
            if self.scale is None:
                raise InputError("`scale` is required (a non-negative number), got None.")
            scale = _check_scale(self.scale, "scale")
        check_choice(self.kind, "kind", KINDS)
        check_choice(self.generator, "generator", GENERATORS)
        check_whole(self.seed, "seed")
        layers = self.layers
        parsed = _parse_layers(layers)
        if isinstance(layers, (list, tuple, set, frozenset)):
            layers = parsed  # canonical: sorted tuple
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "phases", phases)
        object.__setattr__(self, "ops", _parse_ops(self.ops))
        object.__setattr__(self, "layers", layers)
        object.__setattr__(self, "layer_scales", _parse_layer_scales(self.layer_scales))
        self._check_target()

    def _check_target(self) -> None:
        check_choice(self.target, "target", TARGETS)
        if self.target == "output":
            if self.granularity is not None or self.block_size is not None or self.ties != "even":
                raise InputError("`granularity`, `block_size` and `ties` apply to input "
                                 "quantization (target 'inputs' or 'weights'), not to "
                                 "target 'output'.")
            return
        if self.phase_scales["backward"] > 0:
            raise InputError(f"target {self.target!r} is a forward-phase error model (its "
                             f"gradients pass straight through); `phases` must be 'forward', "
                             f"got {self.phases!r}.")
        ops = self.op_set
        if self.target == "inputs":
            if self.kind not in QUANT_FORMATS:
                raise InputError(f"target 'inputs' quantizes to a number format: `kind` must be "
                                 f"one of {list(QUANT_FORMATS)}, got {self.kind!r}.")
            extra = [op for op in ops if op not in MATMUL_OPS]
            if extra:
                raise InputError(f"target 'inputs' applies to matrix products {list(MATMUL_OPS)}; "
                                 f"`ops` also names {extra}.")
        else:
            if self.kind not in (*QUANT_FORMATS, *_STATIC_KINDS):
                raise InputError(f"target 'weights' needs `kind` in "
                                 f"{[*QUANT_FORMATS, *_STATIC_KINDS]}, got {self.kind!r}.")
            if tuple(ops) != ("linear",):
                raise InputError(f"target 'weights' perturbs the weights of 'linear' ops; "
                                 f"`ops` must be 'linear', got {self.ops!r}.")
        if self.kind in QUANT_FORMATS:
            check_format(self.kind, self.granularity, self.block_size, self.ties)
        elif self.granularity is not None or self.block_size is not None or self.ties != "even":
            raise InputError(f"`granularity`, `block_size` and `ties` apply to number formats, "
                             f"not to static {self.kind!r} noise.")

    def __hash__(self) -> int:
        # fields may hold dicts (phases, layer_scales): hash a canonical text form instead
        return hash(tuple((k, repr(v)) for k, v in self.to_dict().items()))

    # --- derived views -------------------------------------------------------------------

    @property
    def op_set(self) -> tuple[str, ...]:
        """The requested ops, presets expanded, in :data:`ALL_OPS` order."""
        return OP_PRESETS[self.ops] if isinstance(self.ops, str) else self.ops

    @property
    def phase_scales(self) -> dict[str, float]:
        """``{"forward": s_f, "backward": s_b}`` (0 for a phase without noise)."""
        if isinstance(self.phases, dict):
            return {p: float(self.phases.get(p, 0.0)) for p in PHASES}
        s = float(self.scale)  # type: ignore[arg-type]
        return {
            "forward": s if self.phases in ("forward", "both") else 0.0,
            "backward": s if self.phases in ("backward", "both") else 0.0,
        }

    @property
    def layer_indices(self) -> tuple[int, ...] | None:
        """Selected decoder-layer indices (``None`` = all)."""
        return _parse_layers(self.layers)

    @property
    def is_active(self) -> bool:
        """True when some phase has a positive scale (otherwise injection installs nothing)."""
        return any(v > 0 for v in self.phase_scales.values())

    # --- construction and serialisation --------------------------------------------------

    def replace(self, **changes: Any) -> NoiseSpec:
        """A copy with ``changes`` applied and re-validated.

        With per-phase scales (``phases`` a mapping), changing only ``scale`` rescales every
        phase by ``new / old`` so that ratios between phases are kept.
        """
        unknown = set(changes) - set(_SPEC_KEYS)
        if unknown:
            name = sorted(unknown)[0]
            raise InputError(
                f"NoiseSpec has no field {name!r}{did_you_mean(name, _SPEC_KEYS)}."
            )
        if isinstance(self.phases, dict) and "scale" in changes and "phases" not in changes:
            new = _check_scale(changes["scale"], "scale")
            old = float(self.scale)  # type: ignore[arg-type]
            if old == 0.0:
                phases = {p: new for p in self.phases}
            else:
                phases = {p: v * new / old for p, v in self.phases.items()}
            changes = {**changes, "phases": phases, "scale": max(phases.values())}
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON/YAML-ready mapping; ``NoiseSpec.from_dict(spec.to_dict()) == spec``."""
        layers = self.layers
        if isinstance(layers, tuple):
            layers = list(layers)
        elif isinstance(layers, Mapping):
            layers = dict(layers)
        doc = {
            "scale": self.scale,
            "kind": self.kind,
            "phases": dict(self.phases) if isinstance(self.phases, dict) else self.phases,
            "ops": self.ops if isinstance(self.ops, str) else list(self.ops),
            "layers": layers,
            "layer_scales": None if self.layer_scales is None else dict(self.layer_scales),
            "seed": self.seed,
            "target": self.target,
            "granularity": self.granularity,
            "block_size": self.block_size,
            "ties": self.ties,
        }
        if self.generator != "mt":  # records of default specs stay as they were
            doc["generator"] = self.generator
        return doc

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NoiseSpec:
        """Build from a mapping; unknown keys are errors (with a suggestion)."""
        return from_mapping(cls, data, "noise spec")

    @classmethod
    def from_file(cls, path: str | Path) -> NoiseSpec:
        """Load a spec from a ``.yaml``/``.yml`` or ``.json`` file (top-level mapping).

        A top-level ``provenance`` mapping (where a file came from: the search config of
        ``robuststats search`` records its study, trial, metrics and intervals there) is
        metadata and is not part of the spec.
        """
        path = Path(path)
        if not path.is_file():
            raise InputError(f"noise-spec file {str(path)!r} does not exist.")
        try:
            data = parse_data(path.read_text(encoding="utf-8"), path.suffix)
        except DataSyntaxError as exc:
            if exc.format == "YAML":
                raise InputError(f"noise-spec file {str(path)!r} is not valid YAML: "
                                 f"{exc.reason}") from None
            raise InputError(f"noise-spec file {str(path)!r} is not valid JSON (line "
                             f"{exc.line}): {exc.reason}.") from None
        if isinstance(data, Mapping) and "provenance" in data:
            if not isinstance(data["provenance"], Mapping):
                raise InputError(f"{path}: `provenance` must be a mapping of metadata, got "
                                 f"{type(data['provenance']).__name__}.")
            data = {k: v for k, v in data.items() if k != "provenance"}
        try:
            return cls.from_dict(data)
        except InputError as exc:
            raise InputError(f"{path}: {exc}") from None


#: the keys a spec mapping may give: the fields, in order
_SPEC_KEYS = tuple(field_names(NoiseSpec))
