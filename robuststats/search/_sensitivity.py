"""Per-layer sensitivity profiles: read from a file, or measured by the seeds' probe.

Accepted files (JSON, or YAML for ``.yaml``/``.yml``), one score per decoder layer:

- a mapping ``{layer index: score}`` (``{"0": 0.12, "1": 0.01}``; YAML int keys too);
- a list of records ``[{"layer": 0, "sensitivity": 0.12, ...}, ...]`` (extra fields such
  as an interval are ignored), as the diagnostic probe writes;
- either of them under a top-level ``layers`` or ``sensitivity`` key of a mapping (other
  top-level keys, such as provenance, are ignored).

A score is a relative accuracy degradation, ``(acc_clean − acc_noisy)/acc_clean`` when
noise is put on that layer alone (seed 003 §3.2); the heuristic thresholds are in those
units. Layers missing from the file get no score (multiplier 1).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robuststats.errors import InputError

__all__ = ["heuristic_multipliers", "read_sensitivity"]

_MAX_BYTES = 16 << 20
_RECORD_SCORE_KEYS = ("sensitivity", "sensitivity_score", "score")


def read_sensitivity(path: str | Path) -> dict[int, float]:
    """``{layer index: sensitivity score}`` from ``path`` (formats in the module doc)."""
    p = Path(path)
    shown = repr(str(path))
    if not p.is_file():
        raise InputError(f"sensitivity file {shown} does not exist (search.sensitivity).")
    if p.stat().st_size > _MAX_BYTES:
        raise InputError(f"sensitivity file {shown} is larger than {_MAX_BYTES >> 20} MiB.")
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            raise InputError(f"sensitivity file {shown}{where} is not valid YAML.") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"sensitivity file {shown} (line {exc.lineno}) is not valid "
                             f"JSON: {exc.msg}.") from None
    return parse_sensitivity(data, source=str(path))


def parse_sensitivity(data: Any, *, source: str = "sensitivity") -> dict[int, float]:
    """The profile held by ``data`` (already parsed JSON/YAML)."""
    if isinstance(data, Mapping):
        for key in ("layers", "sensitivity"):
            if key in data and isinstance(data[key], (Mapping, list)):
                return parse_sensitivity(data[key], source=source)
        out: dict[int, float] = {}
        for key, value in data.items():
            if isinstance(value, Mapping):
                # `robuststats diagnose`'s sensitivity file: {layer: {sensitivity, ...}};
                # a layer the probe did not evaluate has no score and is left out
                score_key = next((k for k in _RECORD_SCORE_KEYS if k in value), None)
                if score_key is None or value[score_key] is None:
                    continue
                value = value[score_key]
            out[_layer(key, source, f"key {key!r}")] = _score(value, source, f"layer {key}")
        return _non_empty(out, source)
    if isinstance(data, list):
        out = {}
        for i, rec in enumerate(data):
            if not isinstance(rec, Mapping) or "layer" not in rec:
                raise InputError(f"{source}: record {i} must be a mapping with 'layer' and "
                                 f"'sensitivity', got {_clip(rec)}.")
            score_key = next((k for k in _RECORD_SCORE_KEYS if k in rec), None)
            if score_key is None:
                raise InputError(f"{source}: record {i} has no 'sensitivity' score "
                                 f"(keys: {sorted(map(str, rec))}).")
            layer = _layer(rec["layer"], source, f"record {i} 'layer'")
            if layer in out:
                raise InputError(f"{source}: layer {layer} appears twice (record {i}).")
            out[layer] = _score(rec[score_key], source, f"record {i} '{score_key}'")
        return _non_empty(out, source)
    raise InputError(f"{source}: must hold a mapping {{layer: score}} or a list of "
                     f"{{layer, sensitivity}} records, got {type(data).__name__}.")


def heuristic_multipliers(scores: Mapping[int, float], n_layers: int, *, sensitive_above: float,
                          robust_below: float, sensitive_factor: float,
                          robust_factor: float) -> dict[int, float]:
    """Seed 003 §4.3: ``sensitive_factor`` where score > ``sensitive_above``,
    ``robust_factor`` where score < ``robust_below``, 1 elsewhere and for unscored layers."""
    beyond = sorted(k for k in scores if k >= n_layers)
    if beyond:
        raise InputError(f"sensitivity profile names layer {beyond[0]}, but the model has "
                         f"{n_layers} decoder layers (0-{n_layers - 1}).")
    out = {}
    for layer in range(n_layers):
        s = scores.get(layer)
        if s is None:
            out[layer] = 1.0
        elif s > sensitive_above:
            out[layer] = sensitive_factor
        elif s < robust_below:
            out[layer] = robust_factor
        else:
            out[layer] = 1.0
    return out


def _layer(value: Any, source: str, what: str) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{source}: {what} must be a layer index (an integer >= 0), got "
                         f"{_clip(value)}.")
    return value


def _score(value: Any, source: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        raise InputError(f"{source}: {what} must be a finite number, got {_clip(value)}.")
    return float(value)


def _non_empty(out: dict[int, float], source: str) -> dict[int, float]:
    if not out:
        raise InputError(f"{source}: the profile holds no layer.")
    return dict(sorted(out.items()))


def _clip(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."
