"""Capture one run of one model on the items, for a comparison made later or elsewhere.

``capture_run(model, tokenizer, texts, "gpu.npz", condition="bf16+cuda")`` runs the model
once under ``condition`` (its dtype, device and error model, as in :func:`compare_runs`)
and writes, per item and site (the same sites and layer numbering as the in-process
comparison), the exact squared norm and a sketch (:mod:`._sketch`) to a capture file
(:mod:`._capfile`). Two captures of the same model and items, made on two machines, are
compared with :func:`~robuststats.divergence.compare_captures`.

Memory: a forward hook sketches each site's output as soon as the module returns it (one
item at a time, moved to the CPU), so no more than one batch's activation of one site is
copied, and the file is written batch by batch.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from robuststats._fields import check_whole
from robuststats.divergence._capfile import CAPTURE_FORMAT, CAPTURE_VERSION, CaptureWriter
from robuststats.divergence._conditions import Condition, parse_condition
from robuststats.divergence._sites import Site, find_sites, first_tensor
from robuststats.divergence._sketch import SketchParams, item_sketch
from robuststats.errors import InputError

__all__ = ["MAX_SKETCH", "CaptureInfo", "capture_run", "model_identity", "tokenizer_identity"]

#: the largest subset size and projection dimension (a batch's sketches are held in memory)
MAX_SKETCH = 1 << 20

# config keys that say how a model was loaded, not what it is
_LOAD_KEYS = ("torch_dtype", "dtype", "transformers_version", "_name_or_path",
              "_commit_hash", "use_cache", "_attn_implementation_autoset")


@dataclass(frozen=True)
class CaptureInfo:
    """What :func:`capture_run` wrote: the file, its size, and its header."""

    path: Path
    n_bytes: int
    n_items: int
    n_sites: int
    seconds: float
    header: dict[str, Any] = field(repr=False)

    @property
    def bytes_per_item(self) -> float:
        return self.n_bytes / max(self.n_items, 1)

    def summary(self) -> dict[str, Any]:
        """The plain-JSON summary the CLI prints: the file and its size, the counts, and the
        header's condition, sketch, model, machine (without its environment) and notes."""
        h = self.header
        return {"capture": str(self.path), "bytes": self.n_bytes,
                "bytes_per_item": round(self.bytes_per_item, 1), "n_items": self.n_items,
                "n_sites": self.n_sites, "condition": h["condition"], "sketch": h["sketch"],
                "model": h["model"], "machine": {k: v for k, v in h["machine"].items()
                                                 if k != "environment"},
                "seconds": round(self.seconds, 2), "notes": h["notes"]}


def _sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def model_identity(model: Any, *, weights: bool = True) -> dict[str, Any]:
    """Architecture, parameter count, SHA-256 of the config (load-time keys left out) and,
    with ``weights``, of every parameter's bytes in the model's own dtype."""
    import torch

    config = getattr(model, "config", None)
    cfg = config.to_dict() if config is not None and hasattr(config, "to_dict") else {}
    cfg = {k: v for k, v in cfg.items() if k not in _LOAD_KEYS}
    out: dict[str, Any] = {
        "architecture": type(model).__name__, "model_type": cfg.get("model_type"),
        "config_sha256": _sha256(json.dumps(cfg, sort_keys=True, default=str)),
        "n_parameters": int(sum(p.numel() for p in model.parameters())),
        "dtype": str(next(model.parameters()).dtype).replace("torch.", "")}
    if weights:
        h = hashlib.sha256()
        for name, p in sorted(model.named_parameters()):
            t = p.detach().cpu().contiguous()
            h.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        out["weights_sha256"] = h.hexdigest()
    return out


def tokenizer_identity(tokenizer: Any) -> dict[str, Any]:
    """Class, vocabulary size and SHA-256, padding side."""
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    return {"class": type(tokenizer).__name__, "vocab_size": len(vocab),
            "vocab_sha256": _sha256(json.dumps(sorted(vocab.items()), default=str)),
            "padding_side": getattr(tokenizer, "padding_side", None)}


def _device_name(condition: Condition) -> str:
    import torch

    kind = condition.device.partition(":")[0]
    backend = getattr(torch, kind, None)
    if kind != "cpu" and backend is not None and hasattr(backend, "get_device_name"):
        try:
            return str(backend.get_device_name(torch.device(condition.device)))
        except Exception:  # a backend without names: the device string says enough
            return condition.device
    from robuststats.runs import environment

    return str(environment().get("cpu") or platform.processor() or "cpu")


def _capture_iv(path: Any, texts: Any, item_ids: Any, batch_size: Any, max_length: Any,
                subset_size: Any, projection_dim: Any, sketch_seed: Any
                ) -> tuple[Path, list[str], list[str]]:
    from robuststats.divergence._runner import _compare_iv

    texts, ids = _compare_iv(texts, item_ids, batch_size, 0.01, 0.95, "t", 1, max_length)
    for key, value in (("subset_size", subset_size), ("projection_dim", projection_dim)):
        if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= MAX_SKETCH:
            raise InputError(f"`{key}` must be an integer in [2, {MAX_SKETCH}], got {value!r}.")
    check_whole(sketch_seed, "sketch_seed")
    p = Path(path)
    if p.is_dir():
        raise InputError(f"`path`: {str(path)!r} is a directory; give a file name.")
    if not p.parent.is_dir():
        raise InputError(f"`path`: the directory of {str(path)!r} does not exist.")
    return p, texts, ids


class _Sketcher:
    """Forward hooks that sketch each site's output of one batch into ``(n_sites, B, ...)``
    arrays.

    A hook copies its site's output to the host and hands the sketching (NumPy: the
    hashing, the projection) to a thread pool, so the model runs on while earlier sites are
    sketched (on a GPU host, the CPUs sketch while the GPU computes); :meth:`wait` joins
    them before the batch is written. Each (site, item) fills its own cells: the arrays do
    not depend on which thread ran first.
    """

    def __init__(self, sites: list[Site], params: SketchParams, notes: list[str],
                 skipped: set[str], n_features: dict[str, int], pool: Any) -> None:
        self.sites, self.params, self.notes = sites, params, notes
        self.skipped, self.n_features = skipped, n_features
        self.pool = pool
        self.pending: list[Any] = []
        self.lock = threading.Lock()  # the subset array may be swapped for a float64 one

    def start(self, item_ids: list[str], mask: Any) -> None:
        s, b = len(self.sites), len(item_ids)
        self.item_ids, self.mask = item_ids, mask
        kk, k = self.params.subset_size, self.params.projection_dim
        self.arrays: dict[str, np.ndarray] = {
            "sq_norm": np.full((s, b), np.nan), "zero_rows": np.zeros((s, b), np.int64),
            "n_rows": np.zeros((s, b), np.int64), "subset": np.full((s, b, kk), np.nan,
                                                                     np.float32),
            "sketch": np.zeros((s, b, k)), "unit_sketch": np.zeros((s, b, k))}

    def hook(self, index: int) -> Callable[..., None]:
        site = self.sites[index]

        def run(_m: Any, _args: Any, output: Any) -> None:
            import torch

            y = first_tensor(output)
            n_items, n_pos = self.mask.shape
            if y is None or y.ndim < 2 or y.shape[0] != n_items:
                if site.name not in self.skipped:
                    self.skipped.add(site.name)
                    self.notes.append(f"{site.name}: its output is not (items, positions, "
                                      "...); not captured")
                return
            keep = self.mask.numpy() if y.shape[1] == n_pos else None
            dtype = torch.float64 if y.dtype == torch.float64 else torch.float32
            features = int(np.prod(y.shape[2:])) if y.ndim > 2 else 1
            if self.n_features.setdefault(site.name, features) != features:
                raise InputError(f"site {site.name!r} changes its feature size between "
                                 f"batches ({self.n_features[site.name]} and {features}).")
            # one copy of this site's batch on the CPU (bf16/fp16 are exact in float32)
            host = y.detach().to("cpu", dtype).reshape(n_items, y.shape[1], features).numpy()
            if host.dtype == np.float64 and self.arrays["subset"].dtype != np.float64:
                with self.lock:
                    self.arrays["subset"] = self.arrays["subset"].astype(np.float64)
            self.pending.append(self.pool.submit(self._sketch, index, host, keep))
        return run

    def _sketch(self, index: int, host: np.ndarray, keep: np.ndarray | None) -> None:
        name = self.sites[index].name
        for i, item in enumerate(self.item_ids):
            x = host[i] if keep is None else host[i][keep[i]]
            sk = item_sketch(x, self.params, name, item)
            with self.lock:
                self.arrays["subset"][index, i, :sk["subset"].size] = sk["subset"]
            self.arrays["sq_norm"][index, i] = sk["sq_norm"]
            self.arrays["zero_rows"][index, i] = sk["zero_rows"]
            self.arrays["n_rows"][index, i] = x.shape[0]
            self.arrays["sketch"][index, i] = sk["sketch"]
            self.arrays["unit_sketch"][index, i] = sk["unit_sketch"]

    def wait(self) -> None:
        """Join this batch's sketches (an error in one is raised here)."""
        pending, self.pending = self.pending, []
        for future in pending:
            future.result()


def capture_run(model: Any, tokenizer: Any, texts: Sequence[str], path: str | Path, *,
                condition: Condition | str | dict[str, Any] = "fp32",
                item_ids: Sequence[Any] | None = None, modules: Sequence[str] | None = None,
                batch_size: int = 8, max_length: int | None = None,
                subset_size: int = 1024, projection_dim: int = 256, sketch_seed: int = 0,
                source: dict[str, Any] | None = None,
                progress: Callable[[int], None] | None = None) -> CaptureInfo:
    """Run ``model`` once on ``texts`` under ``condition`` and write the capture ``path``.

    ``subset_size`` K element positions and a ``projection_dim`` k sign projection per item
    and site, seeded by ``sketch_seed`` (``docs/divergence.md``); the other options as in
    :func:`~robuststats.divergence.compare_runs`. ``source`` (where the model and items
    came from) goes into the header. ``progress(n)`` gets the number of items finished.
    """
    import torch

    from robuststats import __version__
    from robuststats.divergence._runner import (
        _Hooks,
        _noise,
        _placed,
        check_device,
        forward_batch,
        tokenize_batch,
    )
    from robuststats.runs import environment

    path, texts, ids = _capture_iv(path, texts, item_ids, batch_size, max_length,
                                   subset_size, projection_dim, sketch_seed)
    cond = parse_condition(condition, name="condition")
    if cond.checkpoint is not None:
        raise InputError("`condition.checkpoint`: a capture runs the model it is given; "
                         "capture the other checkpoint with its own model.")
    check_device(cond, "condition")
    t0 = time.perf_counter()
    identity = model_identity(model)
    placed = _placed(model, cond, {})
    sites, mm = find_sites(placed, modules=modules)
    if not sites:
        raise InputError("`model` has no module to capture (no decoder layers, linear or "
                         "norm modules).")
    params = SketchParams(subset_size, projection_dim, sketch_seed)
    by_name = dict(placed.named_modules())
    notes: list[str] = []
    skipped: set[str] = set()
    n_features: dict[str, int] = {}
    counts: list[dict[str, Any]] = []
    n_tokens: list[int] = []
    token_sha: list[str] = []
    pool = ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1)),
                              thread_name_prefix="sketch")
    sketcher = _Sketcher(sites, params, notes, skipped, n_features, pool)
    writer = CaptureWriter(path)
    try:
        for k, start in enumerate(range(0, len(texts), batch_size)):
            enc = tokenize_batch(tokenizer, texts[start:start + batch_size], max_length)
            mask = enc["attention_mask"].bool()
            for row, m in zip(enc["input_ids"], mask, strict=True):
                real = row[m].to(dtype=torch.int64).numpy()
                n_tokens.append(int(real.size))
                token_sha.append(_sha256(real.tobytes())[:16])
            sketcher.start(ids[start:start + batch_size], mask)
            with _noise(placed, cond, k, counts, {"pass": "capture", "batch": k}), \
                    _Hooks() as hooks:
                for i, s in enumerate(sites):
                    hooks.add(by_name[s.name], sketcher.hook(i))
                forward_batch(placed, enc)
            sketcher.wait()
            writer.add_chunk(start, start + len(sketcher.item_ids), sketcher.arrays)
            if progress is not None:
                progress(len(sketcher.item_ids))
        header = {
            "format": CAPTURE_FORMAT, "format_version": CAPTURE_VERSION,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "package_version": __version__, "condition": cond.to_dict(),
            "model": {**identity, "n_layers": mm.n_layers},
            "tokenizer": tokenizer_identity(tokenizer),
            "items": {"n": len(ids), "ids": ids,
                      "ids_sha256": _sha256(json.dumps(ids)),
                      "texts_sha256": _sha256(json.dumps(list(texts))),
                      "text_sha256": [_sha256(t)[:16] for t in texts],
                      "n_tokens": n_tokens, "tokens_sha256": token_sha},
            "sites": [{"name": s.name, "layer": s.layer, "module_type": s.module_type,
                       "n_features": n_features.get(s.name),
                       "captured": s.name not in skipped} for s in sites],
            "sketch": params.to_dict(),
            "settings": {"batch_size": batch_size, "max_length": max_length,
                         "modules": None if modules is None else list(modules)},
            "machine": {"host": platform.node(), "device": cond.device,
                        "device_name": _device_name(cond), "environment": environment()},
            "source": source or {}, "injections": counts, "notes": notes,
            "seconds": round(time.perf_counter() - t0, 3)}
        n_bytes = writer.close(header)
    except BaseException:
        writer.abort()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return CaptureInfo(path, n_bytes, len(ids), sum(s["captured"] for s in header["sites"]),
                       time.perf_counter() - t0, header)
