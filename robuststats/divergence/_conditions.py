"""The two runs a divergence compares: dtype, device, error model and checkpoint.

A condition is written as a short string or as a mapping (inline YAML/JSON, or a file):

- ``"fp32"``, ``"bf16"``, ``"fp16"``: the model's dtype;
- ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"npu"`` (Ascend, with ``torch_npu``), ``"xpu"``,
  ``"mps"``: its device;
- ``"nvfp4_weights"`` (``"nvfp4-weights"``), ``"fp8_e4m3_inputs"``, ``"int8"``, ...: an
  error model of the study's registry (``robuststats.engine.eval_kinds``); a Gaussian one
  needs its level, ``"relative_gaussian@0.05"``; a number format is the format itself;
- ``"clean"``: no error model;

joined with ``+`` (``"bf16+cuda"``, ``"fp32+nvfp4_weights"``). The mapping form has the keys
``name``, ``dtype``, ``device``, ``noise`` (a kind name as above, or a full
:class:`~robuststats.engine.NoiseSpec` mapping), ``level``, ``ops``, ``noise_seed`` and
``checkpoint`` (a model directory of the same architecture). No torch here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robuststats._fields import DEVICE_PATTERN, check_whole
from robuststats.engine import NoiseSpec
from robuststats.errors import InputError, did_you_mean

__all__ = ["DTYPES", "Condition", "parse_condition"]

#: accepted dtype spellings -> torch dtype name
DTYPES: dict[str, str] = {
    "fp32": "float32", "float32": "float32", "float": "float32",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp16": "float16", "float16": "float16", "half": "float16",
    "fp64": "float64", "float64": "float64", "double": "float64",
}
_KEYS = ("name", "dtype", "device", "noise", "level", "ops", "noise_seed", "checkpoint")
_MAX_TEXT = 10_000


@dataclass(frozen=True)
class Condition:
    """One run: the model in ``dtype`` on ``device``, under ``noise`` (None: clean).

    ``dtype`` None keeps the model's own dtype. ``checkpoint`` names another model directory
    of the same architecture (the two-checkpoint comparison); ``noise_label`` is the kind
    name it was given by (``nvfp4_weights``), for tables.
    """

    name: str
    dtype: str | None = None
    device: str = "cpu"
    noise: NoiseSpec | None = None
    noise_label: str | None = None
    checkpoint: str | None = None

    def describe(self) -> str:
        parts = [self.dtype or "model dtype", self.device, self.noise_label or
                 ("clean" if self.noise is None else self.noise.kind)]
        if self.checkpoint:
            parts.append(f"checkpoint {self.checkpoint}")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "device": self.device,
                "noise": None if self.noise is None else self.noise.to_dict(),
                "noise_label": self.noise_label, "checkpoint": self.checkpoint}


def parse_condition(value: str | Mapping[str, Any] | Condition, *, name: str = "condition",
                    ops: str = "matmul_only") -> Condition:
    """A :class:`Condition` from the module docstring's forms; errors name ``name``
    (the flag or key the value came from)."""
    if isinstance(value, Condition):
        return value
    if isinstance(value, str):
        text = value.strip()
        if not text or len(text) > _MAX_TEXT:
            raise InputError(f"`{name}` must be a condition such as 'fp32' or "
                             f"'bf16+nvfp4_weights', got {value[:60]!r}.")
        if text.startswith("{"):
            return _from_mapping(_load_text(text, name, "inline"), name, ops, default=text)
        if text.endswith((".yaml", ".yml", ".json")):
            path = Path(text)
            if not path.is_file():
                raise InputError(f"`{name}`: condition file {text!r} does not exist.")
            return _from_mapping(_load_text(path.read_text(encoding="utf-8"), name, text),
                                 name, ops, default=path.stem)
        return _from_tokens(text, name, ops)
    if isinstance(value, Mapping):
        return _from_mapping(value, name, ops, default="condition")
    raise InputError(f"`{name}` must be a string or a mapping, got {type(value).__name__}.")


def _load_text(text: str, name: str, where: str) -> Any:
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise InputError(f"`{name}`: {where} condition is not valid YAML/JSON.") from None
    if not isinstance(data, Mapping):
        raise InputError(f"`{name}`: a condition mapping must be a mapping, got "
                         f"{type(data).__name__}.")
    return data


def _kind_names() -> list[str]:
    from robuststats.engine.eval_kinds import EVALUATION_KINDS

    return list(EVALUATION_KINDS)


def _noise(kind: str, level: float | None, ops: str, seed: int, name: str
           ) -> NoiseSpec | None:
    from robuststats.engine.eval_kinds import EVALUATION_KINDS

    kind = kind.replace("-", "_")
    if kind == "clean":
        return None
    entry = EVALUATION_KINDS.get(kind)
    if entry is None:
        raise InputError(f"`{name}`: unknown error model {kind!r}"
                         f"{did_you_mean(kind, [*EVALUATION_KINDS, 'clean'])}; choose from "
                         f"{', '.join(EVALUATION_KINDS)} (or a dtype, a device, 'clean').")
    if level is None:
        if entry.level_is_scale:
            raise InputError(f"`{name}`: error model {kind!r} needs a level, e.g. "
                             f"'{kind}@0.05'.")
        level = 1.0
    if not math.isfinite(level) or level <= 0:
        raise InputError(f"`{name}`: the level of {kind!r} must be a positive number, got "
                         f"{level!r}.")
    return entry.spec(level, seed, ops)


def _level(text: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"`{name}`: level {text!r} is not a number.") from None


def _from_tokens(text: str, name: str, ops: str) -> Condition:
    dtype = device = kind = None
    level = None
    for raw in text.split("+"):
        token = raw.strip().lower()
        if not token:
            raise InputError(f"`{name}`: empty part in {text!r}.")
        if token in DTYPES:
            if dtype is not None:
                raise InputError(f"`{name}`: two dtypes in {text!r}.")
            dtype = DTYPES[token]
        elif DEVICE_PATTERN.match(token):
            if device is not None:
                raise InputError(f"`{name}`: two devices in {text!r}.")
            device = token
        else:
            base, _, lvl = token.partition("@")
            if kind is not None:
                raise InputError(f"`{name}`: two error models in {text!r}.")
            kind = base.replace("-", "_")
            if kind not in (*_kind_names(), "clean"):
                choices = [*DTYPES, "cpu", "cuda", "clean", *_kind_names()]
                raise InputError(f"`{name}`: {raw.strip()!r} is not a dtype, a device or an "
                                 f"error model{did_you_mean(kind, choices)}.")
            level = _level(lvl, name) if lvl else None
    noise = _noise(kind, level, ops, 0, name) if kind else None
    return Condition(name=text, dtype=dtype, device=device or "cpu", noise=noise,
                     noise_label=None if noise is None else _label(kind, level))


def _label(kind: str, level: float | None) -> str:
    return kind if level is None else f"{kind}@{level:g}"


def _from_mapping(data: Mapping[str, Any], name: str, ops: str, *, default: str) -> Condition:
    for key in data:
        if key not in _KEYS:
            raise InputError(f"`{name}.{key}`: unknown key{did_you_mean(str(key), _KEYS)}; "
                             f"accepted: {', '.join(_KEYS)}.")
    label = data.get("name", default)
    if not isinstance(label, str) or not label.strip():
        raise InputError(f"`{name}.name` must be a non-empty string, got {label!r}.")
    dtype = data.get("dtype")
    if dtype is not None:
        if not isinstance(dtype, str) or dtype.lower() not in DTYPES:
            raise InputError(f"`{name}.dtype` must be one of {', '.join(DTYPES)}, got "
                             f"{dtype!r}{did_you_mean(str(dtype), DTYPES)}.")
        dtype = DTYPES[dtype.lower()]
    device = data.get("device", "cpu")
    if not isinstance(device, str) or not DEVICE_PATTERN.match(device):
        raise InputError(f"`{name}.device` must be cpu, cuda, cuda:N, npu, npu:N, xpu, xpu:N or mps, got {device!r}.")
    key_ops = data.get("ops", ops)
    if not isinstance(key_ops, str):
        raise InputError(f"`{name}.ops` must be an op preset or op name, got {key_ops!r}.")
    seed = check_whole(data.get("noise_seed", 0), f"{name}.noise_seed")
    level = data.get("level")
    if level is not None and (isinstance(level, bool) or not isinstance(level, (int, float))):
        raise InputError(f"`{name}.level` must be a number, got {level!r}.")
    noise, label_noise = data.get("noise"), None
    if isinstance(noise, str):
        spec = _noise(noise, None if level is None else float(level), key_ops, seed,
                      f"{name}.noise")
        label_noise = None if spec is None else _label(noise.replace("-", "_"), level)
    elif isinstance(noise, Mapping):
        try:
            spec = NoiseSpec.from_dict({"seed": seed, **noise})
        except InputError as exc:
            raise InputError(f"`{name}.noise`: {exc}") from None
        label_noise = json.dumps(noise, sort_keys=True, default=str)
    elif noise is None:
        spec = None
    else:
        raise InputError(f"`{name}.noise` must be a kind name or a NoiseSpec mapping, got "
                         f"{type(noise).__name__}.")
    checkpoint = data.get("checkpoint")
    if checkpoint is not None and (not isinstance(checkpoint, str) or not checkpoint):
        raise InputError(f"`{name}.checkpoint` must be a directory path, got {checkpoint!r}.")
    return Condition(name=label.strip(), dtype=dtype, device=device, noise=spec,
                     noise_label=label_noise, checkpoint=checkpoint)
