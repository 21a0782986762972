"""Read MindStudio Probe (msprobe) dumps as the two runs of a divergence.

msprobe's PyTorch dump (``from msprobe.pytorch import PrecisionDebugger``) writes, per step
and rank, a directory ``<dump_path>/step<N>/rank<R>/`` (``proc<pid>`` without a process
group) with ``dump.json``: ``task`` (``statistics`` or ``tensor``), ``level`` and ``data``,
one entry per call, in call order, named

- ``Module.<path>.<Class>.<forward|backward>.<k>`` (level ``L0``: the k-th call of module
  ``<path>``), or
- ``<Prefix>.<api>.<k>.<forward|backward>`` (level ``L1``: ``Functional.linear.3.forward``);

each entry holds ``input_args``, ``input_kwargs``, ``output`` and (modules) ``parameters``,
every tensor as ``{type, dtype, shape, Max, Min, Mean, Norm}``, plus, for ``task: tensor``, a
``data_name`` whose file under ``dump_tensor_data/`` is the tensor (``torch.save``).

Two dumps, one per device or software stack, are aligned by what each forward call computes
(module path and call index; for API calls their scope, API, caller and ordinal:
:mod:`._msprobe_align`), and the calls both hold are compared (their first output tensor);
the calls only one holds (a fused kernel, eager attention's matmuls) are listed per side in
``Divergence.one_side``. In an L1 dump the API calls are mapped to their decoder layer from
the recorded call stacks, and each layer's last call is its residual stream. With tensors, every row of a call's output (dimension 0, the batch)
is an item and the per-item metrics are those of :func:`item_metrics`; with statistics only,
each call is one observation of the differences of its statistics (below), and the interval
of a module is over its calls (several forward passes in one step). Dumps with no call in
common, of different models (layer count, hidden size, parameter or input shapes), steps or
item sets (the model input's shape or statistics) are refused with one line naming the first
difference.

Statistics-only metrics (``a`` the reference's output, ``b`` the candidate's, ``n`` elements,
RMS(a) = Norm_a/√n): ``norm_rel_diff`` = \\|Norm_b − Norm_a\\| / Norm_a, a lower bound of the
relative RMS error ‖b − a‖/‖a‖ (triangle inequality), and ``mean_diff``, ``max_diff``,
``min_diff``: the absolute differences of Mean, Max and Min divided by RMS(a). msprobe's own
comparison reports the same four differences with fixed thresholds and no interval.
By default msprobe computes Mean and Norm in the tensor's own dtype, so a bf16 dump's
statistics are bf16 numbers (relative rounding up to 2^-8; measured: Norm 36.5 for a tensor
whose norm is 36.61): differences below that are the statistic's rounding, and a note says
so.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from robuststats.divergence._conditions import Condition
from robuststats.divergence._metrics import DEFAULT_EPS, METRICS
from robuststats.divergence._msprobe_align import LAYER, check_pair
from robuststats.divergence._sites import RESIDUAL
from robuststats.errors import InputError

__all__ = ["STAT_METRICS", "Dump", "compare_dumps", "is_dump", "read_dump"]

#: the metrics of a statistics-only dump, in table order
STAT_METRICS = ("norm_rel_diff", "mean_diff", "max_diff", "min_diff")
_MODULE = re.compile(r"^Module\.(?P<path>.+)\.(?P<cls>[^.]+)\.(?P<dir>forward|backward)"
                     r"\.(?P<k>\d+)$")
_API = re.compile(r"^(?P<path>[A-Za-z_]\w*\.\w+\.\d+)\.(?P<dir>forward|backward)$")
_STEP = re.compile(r"^step(\d+)$")
_MAX_JSON = 1 << 30


@dataclass(frozen=True)
class Call:
    """One forward call of a dump: its site (module path or API name), class, call index and
    the record of its first output tensor."""

    name: str
    site: str
    cls: str
    k: int
    output: dict[str, Any]
    inputs: list[dict[str, Any]]
    parameters: dict[str, Any]


@dataclass
class Dump:
    """A dump directory as read: ``task``, ``level``, ``step``, ``rank``, its forward calls
    in order and how many backward calls were left aside."""

    path: Path
    task: str
    level: str
    step: int | None
    rank: str | None
    calls: list[Call]
    tensor_dir: Path | None
    n_backward: int = 0
    notes: list[str] = field(default_factory=list)
    construct: dict[str, Any] = field(default_factory=dict)
    stacks: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def has_tensors(self) -> bool:
        return self.task == "tensor"


def _find_json(path: Path, name: str) -> Path:
    if path.is_file():
        return path
    if (path / "dump.json").is_file():
        return path / "dump.json"
    found = sorted(path.glob("step*/*/dump.json")) + sorted(path.glob("*/dump.json"))
    if not found:
        raise InputError(f"`{name}`: {str(path)!r} holds no msprobe dump.json.")
    if len(found) > 1:
        where = ", ".join(str(p.parent.relative_to(path)) for p in found[:4])
        raise InputError(f"`{name}`: {str(path)!r} holds {len(found)} dumps ({where}); give "
                         "the directory of one step and rank.")
    return found[0]


def is_dump(path: str | Path) -> bool:
    """True when ``path`` is an msprobe dump.json or a directory that holds one (in it, or
    under ``step*/<rank>/``)."""
    p = Path(path)
    if p.is_file():
        return p.name == "dump.json"
    return p.is_dir() and ((p / "dump.json").is_file() or any(p.glob("step*/*/dump.json"))
                           or any(p.glob("*/dump.json")))


def _tensor_record(value: Any) -> dict[str, Any] | None:
    """The first tensor record of an ``output`` or ``input_args`` entry."""
    if isinstance(value, dict) and value.get("type") == "torch.Tensor":
        return value
    if isinstance(value, list):
        for v in value:
            r = _tensor_record(v)
            if r is not None:
                return r
    return None


def _read_json(file: Path, name: str) -> Any:
    if file.stat().st_size > _MAX_JSON:
        raise InputError(f"`{name}`: {str(file)!r} is larger than 1 GiB.")
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"`{name}`: {str(file)!r} is not complete JSON (truncated or "
                         f"damaged: {exc.msg} at line {exc.lineno}).") from None


def _beside(file: Path, name: str) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
    """``construct.json`` (each call's parent module) and ``stack.json`` (groups of calls
    with their call stack) beside a dump.json; empty when absent."""
    construct: dict[str, Any] = {}
    stacks: dict[str, tuple[str, ...]] = {}
    if (file.parent / "construct.json").is_file():
        data = _read_json(file.parent / "construct.json", name)
        construct = data if isinstance(data, dict) else {}
    if (file.parent / "stack.json").is_file():
        data = _read_json(file.parent / "stack.json", name)
        for group in (data.values() if isinstance(data, dict) else []):
            if isinstance(group, list) and len(group) == 2 and isinstance(group[0], list):
                frames = tuple(str(f) for f in group[1] or [])
                stacks.update(dict.fromkeys((str(n) for n in group[0]), frames))
    return construct, stacks


def read_dump(path: str | Path, *, name: str = "SOURCE") -> Dump:
    """Read the dump at ``path`` (a dump.json, its directory, or a dump root with one step
    and rank); a missing, truncated or foreign file is an :class:`InputError` naming
    ``name``."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"`{name}`: {str(path)!r} does not exist.")
    file = _find_json(p, name)
    data = _read_json(file, name)
    if not isinstance(data, dict) or not isinstance(data.get("data"), dict) \
            or data.get("task") not in ("statistics", "tensor"):
        raise InputError(f"`{name}`: {str(file)!r} is not an msprobe dump of task "
                         "'statistics' or 'tensor'.")
    if data.get("framework", "pytorch") != "pytorch":
        raise InputError(f"`{name}`: {str(file)!r} is a {data.get('framework')} dump; "
                         "robuststats reads PyTorch dumps.")
    calls, n_backward = [], 0
    for key, entry in data["data"].items():
        m = _MODULE.match(key) or _API.match(key)
        if m is None or not isinstance(entry, dict):
            continue
        if m.group("dir") == "backward":
            n_backward += 1
            continue
        out = _tensor_record(entry.get("output"))
        if out is None:
            continue
        is_module = key.startswith("Module.")
        calls.append(Call(
            key, m.group("path"), m.group("cls") if is_module else m.group("path").split(".")[0],
            int(m.group("k")) if is_module else 0, out,
            [r for r in (_tensor_record(v) for v in entry.get("input_args") or [])
             if r is not None],
            entry.get("parameters") if isinstance(entry.get("parameters"), dict) else {}))
    if not calls:
        raise InputError(f"`{name}`: {str(file)!r} has no forward call with a tensor output.")
    step = next((int(m.group(1)) for part in file.parts
                 if (m := _STEP.match(part)) is not None), None)
    rank = file.parent.name if file.parent.name.startswith(("rank", "proc")) else None
    tdir = data.get("dump_data_dir")
    tensor_dir = file.parent / "dump_tensor_data" if data["task"] == "tensor" else None
    if tensor_dir is not None and not tensor_dir.is_dir() and tdir and Path(tdir).is_dir():
        tensor_dir = Path(tdir)
    if tensor_dir is not None and not tensor_dir.is_dir():
        raise InputError(f"`{name}`: the tensor dump {str(file)!r} has no dump_tensor_data "
                         "directory beside it.")
    construct, stacks = _beside(file, name)
    return Dump(file, data["task"], str(data.get("level")), step, rank, calls, tensor_dir,
                n_backward, construct=construct, stacks=stacks)


def _site(site: str) -> tuple[int, str]:
    """(layer, module type) of a site: ``residual`` for a decoder layer's output."""
    m = LAYER.match(site)
    if m is None:
        return -1, site
    rest = m.group("rest")
    return int(m.group("i")), RESIDUAL if rest is None else rest


def _load_tensor(dump: Dump, record: dict[str, Any], name: str) -> Any:
    import torch

    file = record.get("data_name")
    if not isinstance(file, str) or dump.tensor_dir is None:
        raise InputError(f"`{name}`: {str(dump.path)!r} names no tensor file for a call "
                         "of its tensor dump.")
    p = dump.tensor_dir / file
    if not p.is_file():
        raise InputError(f"`{name}`: tensor file {file!r} of {str(dump.path)!r} is missing "
                         "(an incomplete dump).")
    try:
        return torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for a damaged file
        raise InputError(f"`{name}`: tensor file {file!r} of {str(dump.path)!r} cannot be "
                         f"read ({type(exc).__name__}).") from None


def _stat_row(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
    n = int(np.prod(a.get("shape") or [1])) or 1
    na, nb = float(a.get("Norm") or 0.0), float(b.get("Norm") or 0.0)
    rms = na / math.sqrt(n)

    def rel(key: str) -> float:
        x, y = a.get(key), b.get(key)
        if not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
            return math.nan
        return abs(float(y) - float(x)) / rms if rms > 0 else (0.0 if x == y else math.inf)

    return {"norm_rel_diff": abs(nb - na) / na if na > 0 else (0.0 if nb == 0 else math.inf),
            "mean_diff": rel("Mean"), "max_diff": rel("Max"), "min_diff": rel("Min")}


def _condition(dump: Dump, label: str) -> Condition:
    dtype = str(dump.calls[0].output.get("dtype", "")).replace("torch.", "") or None
    where = dump.path.parent.name
    return Condition(name=f"{label} ({where})", dtype=dtype, device="msprobe dump")


def compare_dumps(reference: str | Path, candidate: str | Path, *,
                  modules: Sequence[str] | None = None, eps: float = DEFAULT_EPS,
                  confidence_level: float = 0.95, interval: str = "t",
                  n_resamples: int = 2000, rng: int = 0,
                  names: tuple[str, str] = ("reference", "candidate")) -> Any:
    """The divergence of the msprobe dump ``candidate`` from ``reference`` (module
    docstring): a :class:`~robuststats.divergence.Divergence` whose ``items`` has one row
    per (site, item) with :data:`METRICS` (tensor dumps: items are the rows of each call's
    output, ``"<call>:<row>"``) or per (site, call) with :data:`STAT_METRICS` (statistics
    dumps; :data:`METRICS` are NaN there). ``modules`` keeps the sites whose type or path
    matches an entry."""
    from robuststats.divergence._analysis import depth_table, growth_fit, module_table
    from robuststats.divergence._metrics import item_metrics
    from robuststats.divergence._runner import Divergence, _compare_iv
    from robuststats.divergence._sites import Site, _select

    _compare_iv(["x"], None, 1, eps, confidence_level, interval, n_resamples, None)
    t0 = time.perf_counter()
    a, b = read_dump(reference, name=names[0]), read_dump(candidate, name=names[1])
    pairs, one_side, notes = check_pair(a, b, names[1])
    sites = {}
    for x, _ in pairs:
        layer, mtype = _site(x.site)
        sites.setdefault(x.site, Site(x.site, layer, mtype))
    chosen = list(sites.values())
    if modules:
        # named as the command line names it when the dumps came from there
        chosen = _select(chosen, modules, "--modules" if names[1].startswith("--")
                         else "modules")
    keep = {s.name for s in chosen}
    rows: list[dict[str, Any]] = []
    batch = None
    for x, y in pairs:
        if x.site not in keep:
            continue
        ca, cb, site = a.calls[x.index], b.calls[y.index], sites[x.site]
        base = {"mode": "accumulated", "site": site.name, "layer": site.layer,
                "module_type": site.module_type}
        if not a.has_tensors:
            rows.append({**base, "item_id": f"call{x.k}",
                         **dict.fromkeys(METRICS, math.nan), "err_norm": math.nan,
                         "ref_norm": float(ca.output.get("Norm") or 0.0),
                         **_stat_row(ca.output, cb.output)})
            continue
        ta, tb = _load_tensor(a, ca.output, names[0]), _load_tensor(b, cb.output, names[1])
        if ta.ndim < 2 or not ta.is_floating_point():
            continue
        if batch is None:
            batch = int(ta.shape[0])
        if int(ta.shape[0]) != batch:
            notes.append(f"{ca.name}: its output's first dimension is not the batch "
                         f"({ta.shape[0]} against {batch}); not compared")
            continue
        values = item_metrics(ta, tb, None, eps=eps)
        cpu = {k: v.tolist() for k, v in values.items()}
        for i in range(batch):
            rows.append({**base, "item_id": f"{x.k}:{i}",
                         **{k: cpu[k][i] for k in (*METRICS, "err_norm", "ref_norm")}})
    # a statistics dump's tables keep the metric columns (NaN) so every table has them
    metrics = METRICS if a.has_tensors else (*METRICS, *STAT_METRICS)
    columns = ["mode", "site", "layer", "module_type", "item_id", *METRICS, "err_norm",
               "ref_norm", *([] if a.has_tensors else STAT_METRICS)]
    items = pd.DataFrame(rows, columns=columns)
    order = {s.name: i for i, s in enumerate(chosen)}
    table = module_table(items, None, order=order, confidence_level=confidence_level,
                         interval=interval, n_resamples=n_resamples, rng=rng,
                         metrics=metrics)
    table["n_infinite_mape"] = table["n_infinite_mape"] if a.has_tensors else 0
    depth = depth_table(items, confidence_level=confidence_level, interval=interval,
                        n_resamples=n_resamples, rng=rng)
    n_layers = len({s.layer for s in chosen if s.layer >= 0})
    fit = growth_fit(items, confidence_level=confidence_level, n_layers=n_layers)
    if a.has_tensors:
        notes += [n for n in fit.notes if "needs the local pass" not in n]
        fit = replace(fit, verdict_note="dumps have no local pass")
    else:
        fit = replace(fit, verdict_note="statistics dumps hold no rel RMS")
    if a.n_backward:
        notes.append(f"{a.n_backward} backward call(s) in the dumps left aside: forward "
                     "outputs are compared")
    if a.has_tensors:
        notes.append(f"tensor dumps: items are the {batch} rows of each call's output "
                     "(every position counts: the dump holds no padding mask)")
    else:
        low = {str(d.calls[0].output.get("dtype", "")).replace("torch.", "") for d in (a, b)} \
            & {"bfloat16", "float16"}
        notes += [f"the statistics of the {t} dump are {t} numbers (msprobe computes them in "
                  f"the tensor's dtype; relative rounding up to "
                  f"{'2^-8' if t == 'bfloat16' else '2^-11'}): smaller differences of Norm "
                  "are the statistic's own rounding" for t in sorted(low)]
        notes.append("statistics dumps: only Max/Min/Mean/Norm per call, so each call is one "
                     "observation and rel RMS, MAPE and cosine cannot be computed; "
                     "norm_rel_diff is a lower bound of rel RMS; intervals are over a "
                     "module's calls")
    n_items = int(items["item_id"].nunique()) if len(items) else 0
    settings = {"eps": eps, "confidence_level": confidence_level, "interval": interval,
                "n_resamples": n_resamples, "rng": rng, "batch_size": batch,
                "max_length": None, "local": False,
                "modules": None if modules is None else list(modules),
                "dumps": {key: {"path": str(d.path), "task": d.task, "level": d.level,
                                "step": d.step, "rank": d.rank, "calls": len(d.calls),
                                "compared_calls": len(pairs),
                                "one_side_calls": int(one_side.loc[one_side["side"] == key,
                                                                   "n_calls"].sum())}
                          for key, d in (("reference", a), ("candidate", b))}}
    injections = pd.DataFrame(columns=["pass", "batch", "injections", "rms_noise_ratio"])
    return Divergence(_condition(a, "reference"), _condition(b, "candidate"), items, table,
                      depth, fit, injections, {}, n_layers, n_items, settings, tuple(notes),
                      time.perf_counter() - t0, one_side=one_side)
