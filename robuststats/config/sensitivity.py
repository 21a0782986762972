"""Per-layer sensitivity profiles, as files: the one reader of every command that takes one.

``robuststats diagnose`` writes them, ``search`` (its heuristic per-layer scales) and
``divergence`` (its sensitive layers) read them. :func:`read_sensitivity` gives a score per
layer; :func:`read_layer_sensitivity` also keeps the probe's test of each layer.

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

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robuststats._datafile import DataSyntaxError, parse_data
from robuststats.errors import InputError

__all__ = ["SENSITIVITY_FORMAT", "parse_sensitivity", "read_layer_sensitivity", "read_sensitivity"]

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
    data = _load(p, f"sensitivity file {shown}", yaml_line=True)
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


# The probe's own format, with its tests (robuststats divergence --sensitivity):
#
#Reads ``sensitivity.json``/``.yaml`` as ``robuststats diagnose`` writes it (``format:
#robuststats.sensitivity``, docs/diagnose.md): per layer the sensitivity score (relative
#degradation per unit of noise scale) and whether its drop is significant after the
#multiplicity adjustment. A layer is *sensitive* when its drop is positive and significant.
#Any other file that :func:`robuststats.search.read_sensitivity` accepts (``{layer: score}``,
#or records with ``layer`` and ``sensitivity``) gives scores only, and no layer is marked
#sensitive (no test stands behind a bare score).

#: the diagnostic probe's file format (robuststats.diagnose writes it)
SENSITIVITY_FORMAT = "robuststats.sensitivity"


def read_layer_sensitivity(path: str | Path, *, name: str = "sensitivity"
                           ) -> dict[int, dict[str, Any]]:
    """``{layer: {"sensitivity": score or None, "sensitive": bool, ...}}`` from ``path``;
    errors name ``name`` (the flag or key the path came from)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"`{name}`: sensitivity file {str(path)!r} does not exist.")
    if p.stat().st_size > _MAX_BYTES:
        raise InputError(f"`{name}`: sensitivity file {str(path)!r} is larger than "
                         f"{_MAX_BYTES >> 20} MiB.")
    data = _load(p, f"`{name}`: {str(p)!r}", yaml_line=False)
    if isinstance(data, dict) and data.get("format") == SENSITIVITY_FORMAT:
        return _diagnose_file(data, p, name)
    try:
        scores = read_sensitivity(p)
    except InputError as exc:
        raise InputError(f"`{name}`: {exc}") from None
    return {layer: {"sensitivity": s, "sensitive": False, "significant": None}
            for layer, s in scores.items()}


def _load(p: Path, subject: str, *, yaml_line: bool) -> Any:
    """The data of ``p``; a syntax error is an :class:`InputError` about ``subject`` (with
    the line of a YAML error when ``yaml_line``)."""
    try:
        return parse_data(p.read_text(encoding="utf-8"), p.suffix)
    except DataSyntaxError as exc:
        if exc.format == "JSON":
            raise InputError(f"{subject} (line {exc.line}) is not valid JSON: "
                             f"{exc.reason}.") from None
        where = f" (line {exc.line})" if yaml_line and exc.line is not None else ""
        raise InputError(f"{subject}{where} is not valid YAML.") from None


def _diagnose_file(data: dict[str, Any], p: Path, name: str) -> dict[int, dict[str, Any]]:
    version = data.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InputError(f"`{name}`: {str(p)!r} has format_version {version!r}; expected an "
                         "integer >= 1.")
    layers = data.get("layers")
    if not isinstance(layers, dict) or not layers:
        raise InputError(f"`{name}`: {str(p)!r} has no 'layers' mapping (run robuststats "
                         "diagnose with the layer level).")
    out: dict[int, dict[str, Any]] = {}
    for key, entry in layers.items():
        if not str(key).isdigit() or not isinstance(entry, dict):
            raise InputError(f"`{name}`: {str(p)!r}: layers.{key} must be a layer index with "
                             "a mapping.")
        score = _number(entry.get("sensitivity"))
        estimate = _number(entry.get("estimate"))
        significant = entry.get("significant")
        sensitive = bool(significant) and estimate is not None and estimate > 0
        out[int(key)] = {"sensitivity": score, "sensitive": sensitive,
                         "significant": None if significant is None else bool(significant),
                         "estimate": estimate, "rank": entry.get("rank")}
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None
