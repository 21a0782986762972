"""The diagnostic probe's per-layer sensitivity, as the divergence report cross-references it.

Reads ``sensitivity.json``/``.yaml`` as ``robuststats diagnose`` writes it (``format:
robuststats.sensitivity``, docs/diagnose.md): per layer the sensitivity score (relative
degradation per unit of noise scale) and whether its drop is significant after the
multiplicity adjustment. A layer is *sensitive* when its drop is positive and significant.
Any other file that :func:`robuststats.search.read_sensitivity` accepts (``{layer: score}``,
or records with ``layer`` and ``sensitivity``) gives scores only, and no layer is marked
sensitive (no test stands behind a bare score).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from robuststats.errors import InputError

__all__ = ["SENSITIVITY_FORMAT", "read_layer_sensitivity"]

#: the diagnostic probe's file format (robuststats.diagnose writes it)
SENSITIVITY_FORMAT = "robuststats.sensitivity"
_MAX_BYTES = 16 << 20


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
    data = _load(p, name)
    if isinstance(data, dict) and data.get("format") == SENSITIVITY_FORMAT:
        return _diagnose_file(data, p, name)
    from robuststats.search import read_sensitivity

    try:
        scores = read_sensitivity(p)
    except InputError as exc:
        raise InputError(f"`{name}`: {exc}") from None
    return {layer: {"sensitivity": s, "sensitive": False, "significant": None}
            for layer, s in scores.items()}


def _load(p: Path, name: str) -> Any:
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            raise InputError(f"`{name}`: {str(p)!r} is not valid YAML.") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"`{name}`: {str(p)!r} (line {exc.lineno}) is not valid JSON: "
                         f"{exc.msg}.") from None


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
