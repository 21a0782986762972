"""Channel outliers: running per-channel activation magnitudes, no activations stored.

:class:`ChannelStats` keeps, per channel of one module's input, the token count, the exact
max ``|x|``, the sum of squares and a histogram of ``log2 |x|`` with ``bins_per_octave`` bins
per doubling over ``[2^min_exp, 2^max_exp)``. The median (any quantile) is read from the
histogram: it lies in the bin that holds the true sample median, so its relative error is at
most ``2^(1/(2·bins_per_octave)) − 1`` (2.2 % at the default 16 bins per octave) whatever the
data; a quantile below ``2^min_exp`` (2^-40 ≈ 9e-13 by default) reads as 0. Memory is
``channels × (max_exp − min_exp) × bins_per_octave`` 32-bit counts (5 KiB per channel by
default: 1 MiB for the 192 channels of the tiny model's ``down_proj`` input, 92 MiB for an
18,944-channel one), independent of the number of tokens; updates are one vectorised
``bincount`` per batch, and two accumulators merge by adding counts.

Per channel c of a module: ``ratio = max|x_c| / median|x_c|`` (how far the channel's largest
value sits above its typical value: token spikes, "massive activations") and
``channel_ratio = max|x_c| / median over channels of max|x|`` (seed 004's outlier ratio:
a channel far above the other channels, what SmoothQuant migrates into the weights). A
channel is an outlier when its ``channel_ratio`` exceeds the threshold (10 by default, seed
004's "10× median = outlier"). ``ratio`` is reported, not flagged: the inputs of
``down_proj`` are products ``silu(gate)·up`` whose median sits near 0, so every channel of a
trained model has a within-channel ratio in the hundreds (measured on the tiny Qwen2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from robuststats._fields import check_whole
from robuststats.errors import InputError, did_you_mean

__all__ = ["CHANNEL_COLUMNS", "ChannelStats", "capture_channels", "channel_table",
           "match_modules", "module_summary"]

#: declared column order of the per-channel table
CHANNEL_COLUMNS: tuple[str, ...] = (
    "module", "layer", "channel", "n_tokens", "max_abs", "median_abs", "rms", "ratio",
    "channel_ratio", "outlier",
)


class ChannelStats:
    """Running per-channel statistics of ``|x|`` for inputs of shape ``(..., n_channels)``.

    Values with ``|x|`` below ``2**min_exp`` (zeros included) count in the lowest bin and
    above ``2**max_exp`` in the highest; the exact maximum is kept separately.
    """

    def __init__(self, n_channels: int, *, bins_per_octave: int = 16, min_exp: int = -40,
                 max_exp: int = 40) -> None:
        check_whole(n_channels, "n_channels", low=1)
        if isinstance(bins_per_octave, bool) or not isinstance(bins_per_octave, int) \
                or not 1 <= bins_per_octave <= 1024:
            raise InputError(f"`bins_per_octave` must be an integer in [1, 1024], got "
                             f"{bins_per_octave!r}.")
        if not (isinstance(min_exp, int) and isinstance(max_exp, int) and min_exp < max_exp):
            raise InputError(f"`min_exp` must be an integer below `max_exp`, got {min_exp!r} "
                             f"and {max_exp!r}.")
        self.n_channels = n_channels
        self.bins_per_octave = bins_per_octave
        self.min_exp, self.max_exp = min_exp, max_exp
        self.n_bins = (max_exp - min_exp) * bins_per_octave
        self.counts = np.zeros((n_channels, self.n_bins), dtype=np.int32)
        self.n_tokens = 0
        self.max_abs = np.zeros(n_channels, dtype=np.float64)
        self.sum_sq = np.zeros(n_channels, dtype=np.float64)

    def update(self, x: Any) -> None:
        """Add the rows of ``x`` (a torch tensor or array ``(..., n_channels)``): tokens."""
        import torch

        t = torch.as_tensor(x).detach()
        if t.ndim < 1 or t.shape[-1] != self.n_channels:
            raise InputError(f"`x` must have {self.n_channels} channels in its last dimension, "
                             f"got shape {tuple(t.shape)}.")
        a = t.reshape(-1, self.n_channels).abs().to(torch.float64)
        if a.shape[0] == 0:
            return
        if not bool(torch.isfinite(a).all()):
            raise InputError("`x` must not contain NaN or infinite values.")
        self.n_tokens += int(a.shape[0])
        self.max_abs = np.maximum(self.max_abs, a.amax(dim=0).cpu().numpy())
        self.sum_sq += (a * a).sum(dim=0).cpu().numpy()
        logs = torch.log2(a.clamp_min(2.0 ** self.min_exp))
        idx = torch.floor((logs - self.min_exp) * self.bins_per_octave).long()
        idx = idx.clamp_(0, self.n_bins - 1)
        flat = idx + torch.arange(self.n_channels).unsqueeze(0) * self.n_bins
        counts = torch.bincount(flat.reshape(-1), minlength=self.n_channels * self.n_bins)
        self.counts += counts.reshape(self.n_channels, self.n_bins).cpu().numpy().astype(
            np.int32)

    def merge(self, other: ChannelStats) -> ChannelStats:
        """Add ``other``'s counts (same channels and bins) into this accumulator."""
        if (other.n_channels, other.n_bins, other.min_exp) != \
                (self.n_channels, self.n_bins, self.min_exp):
            raise InputError("`other` must have the same channels and bins.")
        self.counts += other.counts
        self.n_tokens += other.n_tokens
        self.max_abs = np.maximum(self.max_abs, other.max_abs)
        self.sum_sq += other.sum_sq
        return self

    def quantile(self, q: float) -> np.ndarray:
        """Per-channel ``q``-quantile of ``|x|`` from the histogram (bin's geometric centre).

        The bin is the one holding the order statistic ``ceil(q·n)`` (the lower median for
        ``q = 0.5``), so the estimate is within a factor ``2^(1/(2·bins_per_octave))`` of it.
        """
        if not 0 < q < 1:
            raise InputError(f"`q` must be in (0, 1), got {q!r}.")
        if self.n_tokens == 0:
            raise InputError("no values were added: call `update` first.")
        rank = max(1, math.ceil(q * self.n_tokens))
        cum = np.cumsum(self.counts, axis=1, dtype=np.int64)
        b = np.argmax(cum >= rank, axis=1)
        centre = 2.0 ** (self.min_exp + (b + 0.5) / self.bins_per_octave)
        # a value below the lowest bin's range is (numerically) zero
        return np.where(b == 0, 0.0, np.minimum(centre, self.max_abs))

    @property
    def median_abs(self) -> np.ndarray:
        return self.quantile(0.5)

    @property
    def rms(self) -> np.ndarray:
        return np.sqrt(self.sum_sq / max(self.n_tokens, 1))


def channel_table(stats: ChannelStats, *, module: str = "", layer: int = -1,
                  threshold: float = 10.0) -> pd.DataFrame:
    """One row per channel: magnitudes, the two ratios and the outlier flag."""
    if not (isinstance(threshold, (int, float)) and math.isfinite(threshold) and threshold > 1):
        raise InputError(f"`threshold` must be a finite number > 1, got {threshold!r}.")
    median = stats.median_abs
    mx = stats.max_abs
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(median > 0, mx / np.where(median > 0, median, 1.0),
                         np.where(mx > 0, np.inf, 1.0))
        typical = float(np.median(mx))
        channel_ratio = mx / typical if typical > 0 else np.where(mx > 0, np.inf, 1.0)
    table = pd.DataFrame({
        "module": module, "layer": int(layer), "channel": np.arange(stats.n_channels),
        "n_tokens": stats.n_tokens, "max_abs": mx, "median_abs": median, "rms": stats.rms,
        "ratio": ratio, "channel_ratio": channel_ratio,
    })
    table["outlier"] = table["channel_ratio"] > threshold
    return table[list(CHANNEL_COLUMNS)]


def match_modules(model: Any, names: Sequence[str]) -> dict[str, Any]:
    """Modules of ``model`` whose name is one of ``names`` or ends with ``.<name>``.

    A name that matches nothing is an error naming it, with a "did you mean" among the
    model's module leaf names.
    """
    found: dict[str, Any] = {}
    leaves = set()
    for full, module in model.named_modules():
        leaves.add(full.rsplit(".", 1)[-1])
        for name in names:
            if full == name or full.endswith("." + name):
                found[full] = module
    for name in names:
        if not any(full == name or full.endswith("." + name) for full in found):
            raise InputError(f"`diagnose.modules`: no module of the model is named {name!r} "
                             f"(or ends with '.{name}'){did_you_mean(name, sorted(leaves))}.")
    return found


def _layer_of(name: str, model: Any) -> int:
    from robuststats.engine import NoiseSpec, inject

    mm = inject(model, NoiseSpec(scale=0.0)).map
    prefix = mm.layer_prefix
    if prefix is not None:
        head = f"{prefix}." if prefix else ""
        if name.startswith(head):
            first = name[len(head):].split(".", 1)[0]
            if first.isdigit():
                return int(first)
    return -1


def capture_channels(model: Any, tokenizer: Any, texts: Sequence[str], *,
                     modules: Sequence[str], threshold: float = 10.0,
                     batch_size: int = 64, bins_per_octave: int = 16) -> pd.DataFrame:
    """Per-channel statistics of the inputs of ``modules`` over ``texts`` (teacher-forced).

    One forward per batch; padding positions are left out (their rows never reach the
    statistics). Returns :func:`channel_table` rows for every matched module.
    """
    import torch

    if not texts:
        raise InputError("`texts` must not be empty.")
    found = match_modules(model, modules)
    accs: dict[str, ChannelStats] = {}
    keep: dict[str, torch.Tensor] = {}

    def hook_for(name: str):
        def hook(module: Any, args: tuple[Any, ...]) -> None:
            x = args[0]
            rows = x.reshape(-1, x.shape[-1])
            mask = keep.get("mask")
            if mask is not None and mask.numel() == rows.shape[0]:
                rows = rows[mask]
            if name not in accs:
                accs[name] = ChannelStats(int(x.shape[-1]), bins_per_octave=bins_per_octave)
            accs[name].update(rows)
        return hook

    handles = [m.register_forward_pre_hook(hook_for(n)) for n, m in found.items()]
    was_training = model.training
    model.eval()
    side = tokenizer.padding_side
    try:
        tokenizer.padding_side = "left"
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch = tokenizer(list(texts[start:start + batch_size]), return_tensors="pt",
                                  padding=True)
                keep["mask"] = batch["attention_mask"].reshape(-1).bool()
                model(**batch)
    finally:
        for h in handles:
            h.remove()
        tokenizer.padding_side = side
        model.train(was_training)
    frames = [channel_table(accs[name], module=name, layer=_layer_of(name, model),
                            threshold=threshold) for name in found if name in accs]
    return pd.concat(frames, ignore_index=True)


def module_summary(channels: pd.DataFrame) -> pd.DataFrame:
    """Per (seed,) module: channels, outliers, the largest ratios and the top channels."""
    keys = [k for k in ("seed", "module", "layer") if k in channels.columns]
    rows = []
    for key, g in channels.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        top = g.sort_values("channel_ratio", ascending=False).head(3)
        rows.append({**dict(zip(keys, key)), "n_channels": len(g),
                     "n_outliers": int(g["outlier"].sum()),
                     "max_ratio": float(g["ratio"].max()),
                     "max_channel_ratio": float(g["channel_ratio"].max()),
                     "top_channels": ",".join(str(int(c)) for c in top["channel"])})
    return pd.DataFrame(rows)
