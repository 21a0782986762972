"""Compare two capture files: the divergence of one run from another, made elsewhere.

``compare_captures("gpu.npz", "npu.npz")`` returns the same :class:`Divergence` as the
in-process :func:`compare_runs` (per-item table, modules with intervals over items, depth
table, growth fit), estimated from the two runs' sketches (:mod:`._sketch`), plus each
estimate's standard error from the sketch. There is no local pass (it needs the reference's
layer inputs inside the candidate's process), hence no accumulation verdict.

The captures must hold the same items (ids and tokens), sites, shapes and sketch
parameters; anything else is refused with one line that names what differs. Differences
of model, tokenizer or machine are recorded as notes (two checkpoints, two software
stacks, two devices are what the comparison is for).

Errors of the estimates and the interval over items: each item's sketch is drawn
independently, so its error is independent from item to item and already inside the
variance over items that the interval is computed from. The modules table gives the part
of the mean's standard error that comes from the sketch alone (``{metric}_sketch_se``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from robuststats.divergence._capfile import CaptureReader
from robuststats.divergence._conditions import Condition
from robuststats.divergence._metrics import DEFAULT_EPS, METRICS
from robuststats.divergence._sites import Site, _select
from robuststats.divergence._sketch import estimate
from robuststats.errors import InputError

__all__ = ["SKETCH_SE", "compare_captures", "condition_from_dict"]

#: metrics whose sketch standard error is stated per item and module
SKETCH_SE = ("mape", "wape", "rel_rms", "cosine")


def condition_from_dict(data: dict[str, Any]) -> Condition:
    """The :class:`Condition` a capture's header recorded (``Condition.to_dict``)."""
    from robuststats.engine import NoiseSpec

    noise = data.get("noise")
    return Condition(name=str(data.get("name") or "run"), dtype=data.get("dtype"),
                     device=str(data.get("device") or "cpu"),
                     noise=None if noise is None else NoiseSpec.from_dict(noise),
                     noise_label=data.get("noise_label"), checkpoint=data.get("checkpoint"))


def _condition(header: dict[str, Any], path: str | Path, name: str) -> Condition:
    try:
        return condition_from_dict(header["condition"])
    except (InputError, TypeError, ValueError, KeyError):
        raise InputError(f"`{name}`: {str(path)!r} has an invalid condition in its "
                         "header.") from None


def _differ(name: str, what: str) -> InputError:
    return InputError(f"`{name}`: the captures differ in {what}; they cannot be compared.")


def _check_pair(a: CaptureReader, b: CaptureReader, name: str) -> None:
    """Refuse captures of different items, tokens, sketches or sites (one line each)."""
    ha, hb = a.header, b.header
    ids_a, ids_b = a.item_ids, b.item_ids
    if len(ids_a) != len(ids_b):
        raise _differ(name, f"their items: {len(ids_a)} against {len(ids_b)}")
    for i, (x, y) in enumerate(zip(ids_a, ids_b, strict=True)):
        if x != y:
            raise _differ(name, f"their items: item {i} is {x!r} against {y!r}")
    for key, what in (("n_tokens", "token count"), ("tokens_sha256", "tokens")):
        ta, tb = ha["items"].get(key), hb["items"].get(key)
        if ta != tb:
            la, lb = (t if isinstance(t, list) else [] for t in (ta, tb))
            bad = next((i for i, (x, y) in enumerate(zip(la, lb, strict=False)) if x != y),
                       None)
            where = f"item {ids_a[bad]!r}" if bad is not None else "their items"
            raise _differ(name, f"the {what} of {where} (tokenizer or --max-length)")
    sa, sb = ha["sketch"], hb["sketch"]
    for key in ("method", "subset_size", "projection_dim", "seed"):
        if sa.get(key) != sb.get(key):
            raise _differ(name, f"their sketch parameters: {key} {sa.get(key)!r} against "
                                f"{sb.get(key)!r}")
    sites_a = [(s.get("name"), s.get("layer"), s.get("module_type")) for s in ha["sites"]]
    sites_b = [(s.get("name"), s.get("layer"), s.get("module_type")) for s in hb["sites"]]
    if sites_a != sites_b:
        only = [s[0] for s in sites_a if s not in sites_b] + \
            [s[0] for s in sites_b if s not in sites_a]
        what = f"site {only[0]!r}" if only else "the order of their sites"
        raise _differ(name, f"their sites: {what} (--modules, or another architecture)")
    for x, y in zip(ha["sites"], hb["sites"], strict=True):
        fa, fb = x.get("n_features"), y.get("n_features")
        if fa is not None and fb is not None and fa != fb:
            raise _differ(name, f"the shape of site {x['name']!r}: {fa} against {fb} "
                                "features")


def _notes(ha: dict[str, Any], hb: dict[str, Any]) -> list[str]:
    notes = []
    ma, mb = ha["model"], hb["model"]
    for key, what in (("architecture", "architecture"), ("config_sha256", "config"),
                      ("weights_sha256", "weights")):
        if ma.get(key) != mb.get(key):
            notes.append(f"the captures' models differ in their {what} "
                         f"({str(ma.get(key))[:16]} against {str(mb.get(key))[:16]})")
    if _dict(ha, "tokenizer") != _dict(hb, "tokenizer"):
        notes.append("the captures' tokenizers differ (their tokens of every item agree)")
    if ha.get("package_version") != hb.get("package_version"):
        notes.append(f"captured with robuststats {ha.get('package_version')} and "
                     f"{hb.get('package_version')}")
    return notes


class _Rows:
    """Arrays of any item range of a capture, whatever its chunks (one chunk cached)."""

    def __init__(self, reader: CaptureReader) -> None:
        self.reader = reader
        self.bounds = [(c["start"], c["stop"]) for c in reader.header["chunks"]]
        self.cached: tuple[int, dict[str, np.ndarray]] | None = None

    def _chunk(self, index: int) -> dict[str, np.ndarray]:
        if self.cached is None or self.cached[0] != index:
            self.cached = (index, self.reader.chunk(index))
        return self.cached[1]

    def get(self, start: int, stop: int) -> dict[str, np.ndarray]:
        parts: list[dict[str, np.ndarray]] = []
        for index, (lo, hi) in enumerate(self.bounds):
            if hi <= start or lo >= stop:
                continue
            arrays = self._chunk(index)
            parts.append({k: v[:, max(start, lo) - lo:min(stop, hi) - lo]
                          for k, v in arrays.items()})
        return {k: np.concatenate([p[k] for p in parts], axis=1) for k in parts[0]}


def _sites(header: dict[str, Any]) -> list[Site]:
    return [Site(s["name"], int(s["layer"]), s["module_type"]) for s in header["sites"]]


def _named(cond: Condition, other: Condition, path: Path) -> Condition:
    """Two captures of the same condition on two machines: tell them apart by file."""
    if cond.name != other.name:
        return cond
    from dataclasses import replace

    return replace(cond, name=f"{cond.name} ({path.name})")


def compare_captures(reference: str | Path, candidate: str | Path, *,
                     modules: Sequence[str] | None = None, eps: float = DEFAULT_EPS,
                     confidence_level: float = 0.95, interval: str = "t",
                     n_resamples: int = 2000, rng: int = 0,
                     names: tuple[str, str] = ("reference", "candidate"),
                     progress: Callable[[int], None] | None = None) -> Any:
    """The divergence of the run captured in ``candidate`` from the one in ``reference``.

    ``modules`` keeps some of the captured sites (as in :func:`compare_runs`); ``eps`` is
    the MAPE guard, applied now (the captures hold raw values). Intervals over items as in
    :func:`compare_runs`. ``names``: the flags or parameters the two files came from, for
    the error messages. Returns a :class:`Divergence` whose per-item table also has the
    sketch's standard error of every estimate (``{metric}_se``).
    """
    from robuststats.divergence._analysis import depth_table, growth_fit, module_table
    from robuststats.divergence._runner import Divergence, _compare_iv

    _compare_iv(["x"], None, 1, eps, confidence_level, interval, n_resamples, None)
    t0 = time.perf_counter()
    with CaptureReader(reference, name=names[0]) as ra, \
            CaptureReader(candidate, name=names[1]) as rb:
        _check_pair(ra, rb, names[1])
        ha, hb = ra.header, rb.header
        sites = _sites(ha)
        captured = [bool(x.get("captured", True)) and bool(y.get("captured", True))
                    for x, y in zip(ha["sites"], hb["sites"], strict=True)]
        notes = _notes(ha, hb)
        notes += [f"{s.name}: not captured in both runs; not compared"
                  for s, ok in zip(sites, captured, strict=True) if not ok]
        chosen = [s for s, ok in zip(sites, captured, strict=True) if ok]
        if modules:
            chosen = _select(chosen, modules, "modules")
        index = {s.name: i for i, s in enumerate(sites)}
        features = {s["name"]: int(s["n_features"] or 1) for s in ha["sites"]}
        kdim = int(ha["sketch"]["projection_dim"])
        ids = ra.item_ids
        rows, zero_mismatch = [], 0
        other = _Rows(rb)
        for start, stop, arrays_a in ra.chunks():
            arrays_b = other.get(start, stop)
            for site in chosen:
                j = index[site.name]
                for i in range(stop - start):
                    n_rows = int(arrays_a["n_rows"][j, i])
                    if n_rows != int(arrays_b["n_rows"][j, i]):
                        raise _differ(names[1], f"the shape of site {site.name!r} for item "
                                      f"{ids[start + i]!r}: {n_rows} against "
                                      f"{int(arrays_b['n_rows'][j, i])} rows")
                    zero_mismatch += int(arrays_a["zero_rows"][j, i]
                                         != arrays_b["zero_rows"][j, i])
                    n = n_rows * features[site.name]
                    kk = min(int(ha["sketch"]["subset_size"]), n)
                    one = [{"sq_norm": arrays["sq_norm"][j, i],
                            "subset": arrays["subset"][j, i, :kk],
                            "sketch": arrays["sketch"][j, i],
                            "unit_sketch": arrays["unit_sketch"][j, i]}
                           for arrays in (arrays_a, arrays_b)]
                    est = estimate(one[0], one[1], n_rows=n_rows,
                                   n_features=features[site.name], projection_dim=kdim,
                                   eps=eps)
                    rows.append({"mode": "accumulated", "site": site.name,
                                 "layer": site.layer, "module_type": site.module_type,
                                 "item_id": ids[start + i], **est})
            if progress is not None:
                progress(stop - start)
        sizes = (ra.size, rb.size)
    if zero_mismatch:
        notes.append(f"{zero_mismatch} (item, site) pair(s) have a different number of "
                     "all-zero positions in the two runs: their cosine is estimated with a "
                     "zero vector against a non-zero one counted as 1/2, not 0")
    columns = ["mode", "site", "layer", "module_type", "item_id", *METRICS, "err_norm",
               "ref_norm", *[f"{m}_se" for m in SKETCH_SE]]
    items = pd.DataFrame(rows, columns=columns)
    order = {s.name: i for i, s in enumerate(chosen)}
    table = module_table(items, None, order=order, confidence_level=confidence_level,
                         interval=interval, n_resamples=n_resamples, rng=rng)
    sketch_se = items.groupby("site", sort=False)[[f"{m}_se" for m in SKETCH_SE]].agg(
        lambda v: math.sqrt(float(np.nansum(np.square(v)))) / max(len(v), 1))
    for m in SKETCH_SE:
        table[f"{m}_sketch_se"] = table["site"].map(sketch_se[f"{m}_se"])
    depth = depth_table(items, confidence_level=confidence_level, interval=interval,
                        n_resamples=n_resamples, rng=rng)
    n_layers = ha["model"].get("n_layers")
    n_layers = n_layers if isinstance(n_layers, int) else 0
    fit = growth_fit(items, confidence_level=confidence_level, n_layers=n_layers)
    fit_notes = [n for n in fit.notes if "needs the local pass" not in n]
    fit = replace(fit, verdict_note="captures have no local pass", notes=tuple(fit_notes))
    notes += fit_notes
    notes.append("compared from two captures: no local pass (each layer fed the reference's "
                 "input needs both runs in one process), so no accumulation verdict; each "
                 "estimate's sketch error is inside its interval over items")
    ref = _condition(ha, reference, names[0])
    cand = _condition(hb, candidate, names[1])
    ref, cand = _named(ref, cand, Path(reference)), _named(cand, ref, Path(candidate))
    injections = pd.DataFrame(
        [{**row, "pass": which} for which, h in (("reference", ha), ("candidate", hb))
         for row in (h.get("injections") if isinstance(h.get("injections"), list) else [])
         if isinstance(row, dict)],
        columns=["pass", "batch", "injections", "rms_noise_ratio"])
    sa, sb = _dict(ha, "settings"), _dict(hb, "settings")
    same_batch = sa.get("batch_size") == sb.get("batch_size")
    settings = {"eps": eps, "confidence_level": confidence_level, "interval": interval,
                "n_resamples": n_resamples, "rng": rng,
                "batch_size": sa.get("batch_size") if same_batch else
                f"{sa.get('batch_size')} and {sb.get('batch_size')}",
                "max_length": sa.get("max_length"), "local": False,
                "modules": None if modules is None else list(modules),
                "sketch": ha["sketch"],
                "captures": {key: _capture_info(path, h, size) for key, path, h, size in
                             (("reference", reference, ha, sizes[0]),
                              ("candidate", candidate, hb, sizes[1]))}}
    return Divergence(ref, cand, items, table, depth, fit, injections, {}, n_layers,
                      len(ids), settings, tuple(notes), time.perf_counter() - t0)


def _dict(header: dict[str, Any], key: str) -> dict[str, Any]:
    """A header's entry that is informative only: a mapping, or {} when it is not one."""
    value = header.get(key)
    return value if isinstance(value, dict) else {}


def _capture_info(path: str | Path, header: dict[str, Any], size: int) -> dict[str, Any]:
    machine = _dict(header, "machine")
    return {"path": str(path), "bytes": size, "created": header.get("created"),
            "host": machine.get("host"), "device": machine.get("device"),
            "device_name": machine.get("device_name"),
            "package_version": header.get("package_version"),
            "model": header.get("model"), "source": header.get("source")}
