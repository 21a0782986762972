"""Error models a study evaluates under: ``evaluation.kind`` (and a condition's ``eval_kind``).

One registry, :data:`EVALUATION_KINDS`, read by the study-spec validator and by the cells:

- every engine output error model (``relative_gaussian``, ``fp8_e4m3``, …, ``nvfp4``): noise
  on the results of ``evaluation.ops``, drawn fresh on every call for the Gaussian kinds;
  the level is the engine ``scale``;
- named operand error models (``NoiseSpec.target``), with fixed ops:

  ==========================  ==========================================================
  ``static_relative_gaussian``  ``W·(1 + level·ε)`` on every linear weight, ε drawn once per
                                noise seed and parameter (consistent error, seed 002's
                                methodology note; like aihwkit's programming noise)
  ``nvfp4_weights``             NVFP4 weights, activations unquantized (W4A16; QeRL's
                                NVFP4A16: linear layers, ``lm_head`` kept)
  ``mxfp4_weights``             MXFP4 weights (W4A16)
  ``fp8_e4m3_inputs``           W8A8 FP8 E4M3, per-channel weights and per-token activations
  ``int8_inputs``               W8A8 int8, per-channel weights and per-token activations
  ``mxfp4_inputs``              W4A4 MXFP4
  ``nvfp4_inputs``              W4A4 NVFP4
  ==========================  ==========================================================

A number format has one strength: for the format kinds every positive level evaluates the
format itself (engine scale 1) and the level only labels the cells, so such a kind needs one
positive level, and its cells need one noise seed (they are deterministic).
No torch here: a study file is validated without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from robuststats.engine import KINDS, NoiseSpec
from robuststats.errors import InputError, did_you_mean

__all__ = ["EVALUATION_KINDS", "EvaluationKind", "check_kind", "evaluation_noise"]

#: the engine kinds whose error does not depend on a random draw
_DETERMINISTIC_ENGINE = frozenset({"systematic_bias", "fp8_e4m3", "fp8_e5m2", "int8", "mxfp4",
                                   "nvfp4"})
_KEEP_LM_HEAD = {"lm_head": 0.0}


@dataclass(frozen=True)
class EvaluationKind:
    """How a noise level becomes the engine's :class:`~robuststats.engine.NoiseSpec`."""

    name: str
    description: str
    #: NoiseSpec fields besides ``scale``, ``seed`` and ``phases``
    fields: Mapping[str, Any] = field(default_factory=dict)
    #: True: ``scale = level``; False: a number format at full strength (``scale = 1``)
    level_is_scale: bool = True
    #: the study's ``evaluation.ops`` apply (output error models); else ``fields`` fix them
    uses_ops: bool = True
    #: outcomes do not depend on the noise seed (one noise seed per cell suffices)
    deterministic: bool = False

    def spec(self, level: float, noise_seed: int, ops: str) -> NoiseSpec | None:
        if level == 0.0:
            return None
        fields = dict(self.fields)
        if self.uses_ops:
            fields["ops"] = ops
        scale = float(level) if self.level_is_scale else 1.0
        return NoiseSpec(scale=scale, phases="forward", seed=int(noise_seed), **fields)


def _operand(name: str, description: str, deterministic: bool = True, **fields: Any) -> EvaluationKind:
    return EvaluationKind(name, description, {"ops": "linear", **fields},
                          level_is_scale=not deterministic, uses_ops=False,
                          deterministic=deterministic)


EVALUATION_KINDS: dict[str, EvaluationKind] = {
    **{k: EvaluationKind(k, f"engine error model {k!r} on the results of evaluation.ops",
                         {"kind": k}, deterministic=k in _DETERMINISTIC_ENGINE)
       for k in KINDS},
    "static_relative_gaussian": _operand(
        "static_relative_gaussian", "W·(1 + level·ε) on linear weights, ε fixed per noise seed",
        deterministic=False, kind="relative_gaussian", target="weights"),
    "nvfp4_weights": _operand("nvfp4_weights", "NVFP4 weights (W4A16), lm_head kept",
                              kind="nvfp4", target="weights", layer_scales=_KEEP_LM_HEAD),
    "mxfp4_weights": _operand("mxfp4_weights", "MXFP4 weights (W4A16), lm_head kept",
                              kind="mxfp4", target="weights", layer_scales=_KEEP_LM_HEAD),
    "fp8_e4m3_inputs": _operand("fp8_e4m3_inputs", "W8A8 FP8 E4M3 per channel/token",
                                kind="fp8_e4m3", target="inputs", granularity="row",
                                layer_scales=_KEEP_LM_HEAD),
    "int8_inputs": _operand("int8_inputs", "W8A8 int8 per channel/token", kind="int8",
                            target="inputs", granularity="row", layer_scales=_KEEP_LM_HEAD),
    "mxfp4_inputs": _operand("mxfp4_inputs", "W4A4 MXFP4", kind="mxfp4", target="inputs",
                             layer_scales=_KEEP_LM_HEAD),
    "nvfp4_inputs": _operand("nvfp4_inputs", "W4A4 NVFP4", kind="nvfp4", target="inputs",
                             layer_scales=_KEEP_LM_HEAD),
}


def check_kind(kind: Any, name: str = "kind") -> EvaluationKind:
    """The registry entry of ``kind``; an unknown name raises with a suggestion."""
    entry = EVALUATION_KINDS.get(kind) if isinstance(kind, str) else None
    if entry is None:
        raise InputError(f"`{name}` must be one of {', '.join(map(repr, EVALUATION_KINDS))}, "
                         f"got {kind!r}{did_you_mean(str(kind), EVALUATION_KINDS)}.")
    return entry


def evaluation_noise(kind: str, ops: str, level: float, noise_seed: int) -> NoiseSpec | None:
    """The NoiseSpec of a cell at ``level`` (``None`` for the clean level 0)."""
    return check_kind(kind).spec(level, noise_seed, ops)
