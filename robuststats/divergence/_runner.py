"""Run one model on the same items under two conditions and compare them module by module.

Per batch of items, in one process:

1. **reference** pass: forward hooks keep this batch's output of every site (and each decoder
   layer's input) — one batch's activations, never more;
2. **candidate** pass: each site's hook compares its output with the reference's at once
   (``accumulated``: the divergence of everything up to and including that module);
3. **local** pass (``local=True``): the candidate again, with every decoder layer fed the
   *reference's* input of that layer, so a site inside layer ``i`` measures the divergence
   that layer ``i`` alone adds (``local``). Its error model is opened with the same seed as
   in pass 2, so it draws the same noise.

Then the batch's activations are dropped. Only per-item scalars are kept (a few per site),
and a Welford accumulator per (mode, site, metric).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from robuststats._fields import check_whole
from robuststats.divergence._conditions import Condition, parse_condition
from robuststats.divergence._fit import GrowthFit
from robuststats.divergence._metrics import DEFAULT_EPS, METRICS, RunningStats, item_metrics
from robuststats.divergence._sites import (
    Site,
    find_sites,
    first_tensor,
    layer_input,
    replace_layer_input,
)
from robuststats.errors import InputError

__all__ = ["MODES", "Divergence", "check_device", "compare_runs"]

_INTERVALS = ("t", "bootstrap")
MODES = ("accumulated", "local")


@dataclass(frozen=True)
class Divergence:
    """What :func:`compare_runs` measured.

    ``items``: one row per (mode, site, item) with the per-item metrics (``docs/divergence.md``);
    ``modules``: per (mode, site) the mean of each metric over items with its interval;
    ``depth``: per decoder layer, the residual stream's accumulated and local divergence and
    the additive, quadrature and compounding predictions; ``fit``: the per-layer growth
    rate and the accumulation verdict (:class:`GrowthFit`; its notes are among ``notes``);
    ``injections``: the engine's counts per pass; ``one_side``: for two msprobe dumps, the
    calls only one of them holds (``side``, ``site``, ``layer``, ``call``, ``n_calls``,
    ``shape``, ``dtype``), None for other sources.
    """

    reference: Condition
    candidate: Condition
    items: pd.DataFrame
    modules: pd.DataFrame
    depth: pd.DataFrame
    fit: GrowthFit
    injections: pd.DataFrame
    running: dict[tuple[str, str, str], RunningStats] = field(repr=False)
    n_layers: int = 0
    n_items: int = 0
    settings: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    seconds: float = 0.0
    one_side: pd.DataFrame | None = field(default=None, repr=False)


def _compare_iv(texts: Any, item_ids: Any, batch_size: Any, eps: Any, confidence_level: Any,
                interval: Any, n_resamples: Any, max_length: Any) -> tuple[list[str], list[str]]:
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not texts:
        raise InputError("`texts` must be a non-empty sequence of strings.")
    bad = next((t for t in texts if not isinstance(t, str) or not t), None)
    if bad is not None or any(not isinstance(t, str) for t in texts):
        raise InputError(f"`texts` must hold non-empty strings, got {bad!r}.")
    ids = [f"item-{i:05d}" for i in range(len(texts))] if item_ids is None else \
        [str(i) for i in item_ids]
    if len(ids) != len(texts) or len(set(ids)) != len(ids):
        raise InputError(f"`item_ids` must be {len(texts)} distinct ids, one per text.")
    check_whole(batch_size, "batch_size", low=1)
    check_whole(n_resamples, "n_resamples", low=1)
    if max_length is not None:
        check_whole(max_length, "max_length", low=1, what="a positive integer or None")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
        raise InputError(f"`eps` must be a number in (0, 1), got {eps!r}.")
    if isinstance(confidence_level, bool) or not isinstance(confidence_level, (int, float)) \
            or not 0 < confidence_level < 1:
        raise InputError(f"`confidence_level` must be in (0, 1), got {confidence_level!r}.")
    if interval not in _INTERVALS:
        raise InputError(f"`interval` must be one of {', '.join(_INTERVALS)}, got {interval!r}.")
    return list(texts), ids


def check_device(condition: Condition, name: str) -> None:
    """A device that this machine lacks is an error before any compute
    (:func:`robuststats.runs.machine.check_torch_device`)."""
    from robuststats.runs.machine import check_torch_device

    check_torch_device(condition.device, name)


def _placed(model: Any, condition: Condition, cache: dict[tuple[str, str], Any]) -> Any:
    """``model`` in the condition's dtype and device (a copy when either differs)."""
    import torch

    param = next(model.parameters())
    dtype = getattr(torch, condition.dtype) if condition.dtype else param.dtype
    device = torch.device(condition.device)
    if param.dtype == dtype and param.device.type == device.type and \
            (device.index is None or param.device.index == device.index):
        return model
    key = (str(dtype), str(device))
    if key not in cache:
        cache[key] = copy.deepcopy(model).to(device=device, dtype=dtype).eval()
    return cache[key]


@contextmanager
def _noise(model: Any, condition: Condition, offset: int, counts: list[dict[str, Any]],
           label: dict[str, Any]) -> Iterator[None]:
    if condition.noise is None:
        yield
        return
    from robuststats.engine import inject

    spec = condition.noise.replace(seed=condition.noise.seed + offset)
    with inject(model, spec) as session:
        yield
    stats = session.stats
    counts.append({**label, "injections": int(stats["count"].sum()) if len(stats) else 0,
                   "rms_noise_ratio": float((stats["rms_noise_ratio"] ** 2 * stats["count"])
                                            .sum() / max(stats["count"].sum(), 1)) ** 0.5
                   if len(stats) else 0.0})


class _Hooks:
    """Forward hooks on a model's sites, removed on exit (registered after the engine's)."""

    def __init__(self) -> None:
        self.handles: list[Any] = []

    def add(self, module: Any, hook: Callable[..., Any], *, pre: bool = False) -> None:
        if pre:
            self.handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
        else:
            self.handles.append(module.register_forward_hook(hook))

    def __enter__(self) -> _Hooks:
        return self

    def __exit__(self, *exc: object) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()


class _Accumulator:
    """Per-item rows and the Welford accumulators of every (mode, site, metric)."""

    def __init__(self, eps: float) -> None:
        self.eps = eps
        self.rows: list[dict[str, Any]] = []
        self.running: dict[tuple[str, str, str], RunningStats] = {}
        self.notes: list[str] = []
        self.skipped: set[str] = set()

    def add(self, site: Site, mode: str, item_ids: Sequence[str], a: Any, b: Any,
            mask: Any | None) -> None:
        values = item_metrics(a, b, mask, eps=self.eps)
        cpu = {key: v.cpu().tolist() for key, v in values.items()}
        for i, item in enumerate(item_ids):
            row = {"mode": mode, "site": site.name, "layer": site.layer,
                   "module_type": site.module_type, "item_id": item,
                   **{key: cpu[key][i] for key in _STORED}}
            self.rows.append(row)
            for metric in _STORED:
                self.running.setdefault((mode, site.name, metric),
                                        RunningStats()).update(row[metric])


_STORED = (*METRICS, "err_norm", "ref_norm")


class _Batch:
    """One batch: the reference's activations (and layer inputs) and the hooks that keep,
    compare and feed them. Dropped with the batch."""

    def __init__(self, acc: _Accumulator, item_ids: list[str], mask: Any) -> None:
        self.acc, self.item_ids, self.mask = acc, item_ids, mask
        self.n_items, self.n_positions = mask.shape
        self.outs: dict[str, Any] = {}
        self.ins: dict[str, Any] = {}

    def keep(self, site: Site) -> Callable[..., None]:
        def hook(_m: Any, _args: Any, output: Any) -> None:
            y = first_tensor(output)
            if y is None or y.ndim < 2 or y.shape[0] != self.n_items:
                if site.name not in self.acc.skipped:
                    self.acc.skipped.add(site.name)
                    self.acc.notes.append(f"{site.name}: its output is not (items, "
                                          "positions, ...); not compared")
                return
            self.outs[site.name] = y.detach().clone()
        return hook

    def keep_input(self, name: str) -> Callable[..., None]:
        def hook(_m: Any, args: Any, kwargs: Any) -> None:
            x = layer_input(args, kwargs)
            if x is not None:
                self.ins[name] = x.detach().clone()
        return hook

    def compare(self, site: Site, mode: str) -> Callable[..., None]:
        def hook(_m: Any, _args: Any, output: Any) -> None:
            a = self.outs.get(site.name)
            y = first_tensor(output)
            if a is None or y is None:
                return
            if tuple(y.shape) != tuple(a.shape):
                raise InputError(f"`candidate` changes the shape of {site.name!r}: "
                                 f"{tuple(a.shape)} against {tuple(y.shape)}.")
            mask = self.mask if a.shape[1] == self.n_positions else None
            self.acc.add(site, mode, self.item_ids, a, y, mask)
        return hook

    def feed(self, name: str) -> Callable[..., Any]:
        def hook(_m: Any, args: Any, kwargs: Any) -> Any:
            x = self.ins.get(name)
            if x is None:
                return None
            current = layer_input(args, kwargs)
            if current is not None:
                x = x.to(device=current.device, dtype=current.dtype)
            return replace_layer_input(args, kwargs, x)
        return hook


def tokenize_batch(tokenizer: Any, batch: list[str], max_length: int | None
                   ) -> dict[str, Any]:
    """``input_ids`` and ``attention_mask`` of a padded batch (truncated to ``max_length``)."""
    enc = tokenizer(batch, return_tensors="pt", padding=True,
                    truncation=max_length is not None, max_length=max_length)
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}


def forward_batch(model: Any, enc: dict[str, Any]) -> None:
    """One forward pass without gradients or cache (the hooks take what they need)."""
    import torch

    dev = next(model.parameters()).device
    with torch.no_grad():
        model(input_ids=enc["input_ids"].to(dev),
              attention_mask=enc["attention_mask"].to(dev), use_cache=False)


def compare_runs(model: Any, tokenizer: Any, texts: Sequence[str], *,
                 reference: Condition | str | dict[str, Any] = "clean",
                 candidate: Condition | str | dict[str, Any],
                 candidate_model: Any | None = None, item_ids: Sequence[Any] | None = None,
                 modules: Sequence[str] | None = None, batch_size: int = 8,
                 max_length: int | None = None, local: bool = True, eps: float = DEFAULT_EPS,
                 confidence_level: float = 0.95, interval: str = "t",
                 n_resamples: int = 2000, rng: int = 0,
                 progress: Callable[[int], None] | None = None) -> Divergence:
    """Per-layer and per-module divergence of ``candidate`` from ``reference`` on ``texts``.

    ``model`` and ``tokenizer`` are a causal LM and its tokenizer; each condition puts the
    model in its dtype and device (a copy when they differ from the model's) and opens its
    error model with the engine. ``candidate_model`` replaces ``model`` for the candidate
    (another checkpoint of the same architecture). Items are tokenized whole (``max_length``
    truncates) and run ``batch_size`` at a time, padded; metrics use real positions only.
    ``interval``: ``t`` (Student's t over items, from the running statistics) or
    ``bootstrap`` (percentile bootstrap over the stored per-item values, ``n_resamples``,
    seeded by ``rng``). ``progress(n)`` is called with the number of items finished.
    """
    from robuststats.divergence._analysis import depth_table, growth_fit, module_table

    texts, ids = _compare_iv(texts, item_ids, batch_size, eps, confidence_level, interval,
                             n_resamples, max_length)
    ref = parse_condition(reference, name="reference")
    cand = parse_condition(candidate, name="candidate")
    check_device(ref, "reference")
    check_device(cand, "candidate")
    t0 = time.perf_counter()
    cache: dict[tuple[str, str], Any] = {}
    model_a = _placed(model, ref, cache)
    model_b = _placed(candidate_model if candidate_model is not None else model, cand,
                      {} if candidate_model is not None else cache)
    sites, mm = find_sites(model_a, modules=modules)
    if not sites:
        raise InputError("`model` has no module to compare (no decoder layers, linear or "
                         "norm modules).")
    by_name_b = dict(model_b.named_modules())
    missing = [s.name for s in sites if s.name not in by_name_b]
    if missing:
        raise InputError(f"`candidate_model` differs in architecture: it has no module "
                         f"{missing[0]!r}.")
    by_name_a = dict(model_a.named_modules())
    layer_names = [mm.layer_path(i) for i in range(mm.n_layers)]
    local = bool(local) and mm.n_layers > 0
    counts: list[dict[str, Any]] = []

    def tokenize(batch: list[str]) -> dict[str, Any]:
        return tokenize_batch(tokenizer, batch, max_length)

    acc = _Accumulator(eps)
    for k, start in enumerate(range(0, len(texts), batch_size)):
        enc = tokenize(texts[start:start + batch_size])
        cap = _Batch(acc, ids[start:start + batch_size], enc["attention_mask"].bool())
        with _noise(model_a, ref, k, counts, {"pass": "reference", "batch": k}), \
                _Hooks() as hooks:
            for s in sites:
                hooks.add(by_name_a[s.name], cap.keep(s))
            if local:
                for name in layer_names:
                    hooks.add(by_name_a[name], cap.keep_input(name), pre=True)
            forward_batch(model_a, enc)
        with _noise(model_b, cand, k, counts, {"pass": "candidate", "batch": k}), \
                _Hooks() as hooks:
            for s in sites:
                hooks.add(by_name_b[s.name], cap.compare(s, "accumulated"))
            forward_batch(model_b, enc)
        if local:
            with _noise(model_b, cand, k, counts, {"pass": "local", "batch": k}), \
                    _Hooks() as hooks:
                for name in layer_names:
                    hooks.add(by_name_b[name], cap.feed(name), pre=True)
                for s in sites:
                    if s.layer >= 0:
                        hooks.add(by_name_b[s.name], cap.compare(s, "local"))
                forward_batch(model_b, enc)
        del cap  # this batch's activations
        if progress is not None:
            progress(len(enc["input_ids"]))
    rows, running, notes = acc.rows, acc.running, acc.notes
    items = pd.DataFrame(rows, columns=["mode", "site", "layer", "module_type", "item_id",
                                        *METRICS, "err_norm", "ref_norm"])
    settings = {"eps": eps, "confidence_level": confidence_level, "interval": interval,
                "n_resamples": n_resamples, "rng": rng, "batch_size": batch_size,
                "max_length": max_length, "local": local,
                "modules": None if modules is None else list(modules)}
    order = {s.name: i for i, s in enumerate(sites)}
    table = module_table(items, running, order=order, confidence_level=confidence_level,
                         interval=interval, n_resamples=n_resamples, rng=rng)
    depth = depth_table(items, confidence_level=confidence_level, interval=interval,
                        n_resamples=n_resamples, rng=rng)
    fit = growth_fit(items, confidence_level=confidence_level, n_layers=mm.n_layers)
    notes += fit.notes
    return Divergence(ref, cand, items, table, depth, fit,
                      pd.DataFrame(counts, columns=["pass", "batch", "injections",
                                                    "rms_noise_ratio"]),
                      running, mm.n_layers, len(texts), settings, tuple(notes),
                      time.perf_counter() - t0)

