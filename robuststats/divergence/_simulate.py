"""The noise fit's simulations: many noisy runs of one model against one clean reference.

A fit simulates ``2 + 2L`` noisy runs (a pilot, two rounds of one run per place, a
confirmation; :mod:`._noisefit`). Run one by one through :func:`._runner.compare_runs`, each
simulation repeats the reference pass, computes every metric of every site and builds the
divergence tables: about twice the forward passes the fit needs. :class:`Simulator` turns the
loops around. Per batch of items, the reference runs **once** and keeps its sites' outputs
(one batch's activations, as in ``compare_runs``); then each noise spec of the round runs
against it and each site keeps only the metrics the fit reads (rel RMS, and WAPE for the
confirmation), computed by the same operations as :func:`._metrics.item_metrics`.

A round of ``K`` specs costs ``K + 1`` forward passes, so a fit costs ``2L + 2`` noisy passes
and four clean ones (one per round: pilot, two rounds of responses, confirmation), against
``2 (2L + 2)`` before. The draws are those of ``compare_runs``: spec seed + batch index, so
the fit's values are unchanged.

Everything runs on the reference condition's device and dtype (``Condition.device``): a fit
of a 1.5B checkpoint belongs on the GPU its captures came from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from robuststats.divergence._conditions import Condition
from robuststats.divergence._sites import first_tensor

__all__ = ["Simulator"]


class Simulator:
    """Noisy runs of ``model`` on ``texts``, measured against its clean (or ``ref.noise``)
    run at ``sites`` (module names), ``batch_size`` items per forward pass.

    ``run(specs, metrics)`` returns per spec a mapping of metric to an ``(n_items, n_sites)``
    float array (NaN where a site's output is not per item).
    """

    def __init__(self, model: Any, tokenizer: Any, texts: Sequence[str], ids: Sequence[str],
                 sites: Sequence[str], ref: Condition, *, batch_size: int,
                 max_length: int | None) -> None:
        from robuststats.divergence._runner import _placed, check_device

        check_device(ref, "reference")
        self.model = _placed(model, ref, {})
        self.tokenizer, self.texts, self.ids = tokenizer, list(texts), list(ids)
        self.sites, self.ref = list(sites), ref
        self.batch_size, self.max_length = batch_size, max_length
        by_name = dict(self.model.named_modules())
        self.modules = [by_name[s] for s in self.sites]
        self.forward_passes = 0

    @property
    def n_batches(self) -> int:
        return -(-len(self.texts) // self.batch_size)

    def run(self, specs: Sequence[Any], metrics: tuple[str, ...] = ("rel_rms",), *,
            progress: Callable[[int], None] | None = None) -> list[dict[str, np.ndarray]]:
        """One reference pass and ``len(specs)`` noisy passes per batch; ``progress(1)``
        after each noisy pass."""
        from robuststats.divergence._runner import _Hooks, _noise, forward_batch, tokenize_batch

        n, t = len(self.texts), len(self.sites)
        out = [{m: np.full((n, t), np.nan) for m in metrics} for _ in specs]
        ignored: list[dict[str, Any]] = []
        for k, start in enumerate(range(0, n, self.batch_size)):
            stop = min(start + self.batch_size, n)
            enc = tokenize_batch(self.tokenizer, self.texts[start:stop], self.max_length)
            mask = enc["attention_mask"].bool()
            kept: dict[int, Any] = {}
            with _noise(self.model, self.ref, k, ignored, {}), _Hooks() as hooks:
                for j, module in enumerate(self.modules):
                    hooks.add(module, self._keep(kept, j, stop - start))
                forward_batch(self.model, enc)
            self.forward_passes += 1
            for s, spec in enumerate(specs):
                cand = Condition(name="simulation", dtype=self.ref.dtype,
                                 device=self.ref.device, noise=spec)
                found: list[tuple[int, dict[str, Any]]] = []
                with _noise(self.model, cand, k, ignored, {}), _Hooks() as hooks:
                    for j, module in enumerate(self.modules):
                        hooks.add(module, self._compare(kept, j, mask, found, metrics))
                    forward_batch(self.model, enc)
                self.forward_passes += 1
                _store(found, out[s], start, metrics)
                if progress is not None:
                    progress(1)
            del kept  # this batch's activations
        return out

    @staticmethod
    def _keep(kept: dict[int, Any], j: int, n_items: int) -> Callable[..., None]:
        def hook(_m: Any, _args: Any, output: Any) -> None:
            y = first_tensor(output)
            if y is not None and y.ndim >= 2 and y.shape[0] == n_items:
                kept[j] = y.detach().clone()
        return hook

    @staticmethod
    def _compare(kept: dict[int, Any], j: int, mask: Any, found: list[Any],
                 metrics: tuple[str, ...]) -> Callable[..., None]:
        from robuststats.divergence._metrics import item_metrics

        def hook(_m: Any, _args: Any, output: Any) -> None:
            a, y = kept.get(j), first_tensor(output)
            if a is None or y is None or tuple(y.shape) != tuple(a.shape):
                return
            values = item_metrics(a, y, mask if a.shape[1] == mask.shape[1] else None,
                                  only=metrics)
            found.append((j, {m: values[m] for m in metrics}))  # still on the device
        return hook


def _store(found: list[tuple[int, dict[str, Any]]], into: dict[str, np.ndarray], start: int,
           metrics: tuple[str, ...]) -> None:
    """One pass's per-site values into ``into``'s rows of this batch, copied to the host at
    once (one synchronisation per pass on a GPU, not one per site)."""
    import torch

    if not found:
        return
    cols = [j for j, _ in found]
    for m in metrics:
        block = torch.stack([v[m] for _, v in found], dim=1).cpu().numpy()
        into[m][start:start + block.shape[0], cols] = block
