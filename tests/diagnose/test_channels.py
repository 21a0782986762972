"""Running channel statistics against brute force on stored activations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from robuststats.diagnose import ChannelStats, capture_channels, channel_table
from robuststats.errors import InputError

BPO = 16
#: the histogram's guarantee: within half a bin, a factor 2^(1/(2·BPO)), of the order statistic
FACTOR = 2 ** (1 / (2 * BPO)) * (1 + 1e-12)


def _stored(n: int = 2000, c: int = 24, seed: int = 0) -> np.ndarray:
    """Activations with heavy tails, zeros, tiny values and one outlier channel (5)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c))
    x[:, 3] = rng.standard_t(2, n)            # heavy tails
    x[:, 5] *= 50.0                            # an outlier channel
    x[rng.random(n) < 0.6, 7] = 0.0            # mostly exact zeros
    x[:, 9] = rng.standard_normal(n) * 1e-9    # tiny (above the 2^-40 floor)
    x[17, 11] = 400.0                          # one spike (a "massive activation")
    return x.astype(np.float32)


def _order_stat(col: np.ndarray, q: float) -> float:
    s = np.sort(np.abs(col.astype(np.float64)))
    return float(s[max(1, math.ceil(q * len(s))) - 1])


def _fed(x: np.ndarray) -> ChannelStats:
    acc = ChannelStats(x.shape[1], bins_per_octave=BPO)
    # uneven batches, one of them 3-D (batch, tokens, channels)
    acc.update(torch.from_numpy(x[:333]))
    acc.update(torch.from_numpy(x[333:333 + 600]).reshape(20, 30, x.shape[1]))
    acc.update(x[933:])
    return acc


def test_running_statistics_match_brute_force() -> None:
    x = _stored()
    acc = _fed(x)
    a = np.abs(x.astype(np.float64))
    assert acc.n_tokens == len(x)
    np.testing.assert_array_equal(acc.max_abs, a.max(axis=0))           # exact
    np.testing.assert_allclose(acc.rms, np.sqrt((a ** 2).mean(axis=0)), rtol=1e-12)
    for q in (0.5, 0.1, 0.9):
        est = acc.quantile(q)
        for ch in range(x.shape[1]):
            true = _order_stat(x[:, ch], q)
            if true == 0.0:
                assert est[ch] == 0.0, (q, ch)
            else:
                assert true / FACTOR <= est[ch] <= true * FACTOR, (q, ch, est[ch], true)
    assert acc.median_abs[7] == 0.0  # 60 % zeros
    # memory does not grow with tokens: one count per channel and bin
    assert acc.counts.shape == (24, 80 * BPO) and acc.counts.dtype == np.int32


def test_values_below_the_range_read_as_zero() -> None:
    acc = ChannelStats(2, min_exp=-10, max_exp=10)
    acc.update(np.array([[1e-6, 1.0], [2e-6, 3.0], [3e-6, 2.0]]))
    assert acc.median_abs[0] == 0.0 and acc.max_abs[0] == 3e-6
    assert 2.0 / FACTOR <= acc.median_abs[1] <= 2.0 * FACTOR


def test_merge_is_one_pass() -> None:
    x = _stored(seed=1)
    whole = ChannelStats(24, bins_per_octave=BPO)
    whole.update(x)
    parts = ChannelStats(24, bins_per_octave=BPO)
    other = ChannelStats(24, bins_per_octave=BPO)
    parts.update(x[:700])
    other.update(x[700:])
    parts.merge(other)
    np.testing.assert_array_equal(parts.counts, whole.counts)
    np.testing.assert_array_equal(parts.max_abs, whole.max_abs)
    assert parts.n_tokens == whole.n_tokens


def test_channel_table_flags_the_outlier_channel() -> None:
    x = _stored()
    table = channel_table(_fed(x), module="m", layer=3, threshold=10.0)
    a = np.abs(x.astype(np.float64))
    mx = a.max(axis=0)
    np.testing.assert_allclose(table["channel_ratio"], mx / np.median(mx))
    # channel 5 (×50) is far above the median channel, channel 11 holds one 400 spike and
    # channel 3's t(2) tail reaches past 10× the typical channel's max
    assert set(table.loc[table["outlier"], "channel"]) == {3, 5, 11}
    assert table.loc[3, "max_abs"] > 10 * np.median(mx)
    assert table.loc[3, "ratio"] > table.loc[0, "ratio"]  # heavy tails: max far from median
    assert math.isinf(table.loc[7, "ratio"])  # a median of 0
    assert (table["layer"] == 3).all() and (table["module"] == "m").all()


def test_bad_inputs_are_named() -> None:
    acc = ChannelStats(4)
    with pytest.raises(InputError, match="`x` must have 4 channels"):
        acc.update(np.zeros((3, 5)))
    with pytest.raises(InputError, match="`x` must not contain NaN"):
        acc.update(np.array([[1.0, np.nan, 0.0, 0.0]]))
    with pytest.raises(InputError, match="no values were added"):
        acc.quantile(0.5)
    acc.update(np.ones((2, 4)))
    with pytest.raises(InputError, match=r"`q` must be in \(0, 1\)"):
        acc.quantile(1.0)
    with pytest.raises(InputError, match="`n_channels` must be a positive integer"):
        ChannelStats(0)
    with pytest.raises(InputError, match="`threshold` must be a finite number > 1"):
        channel_table(acc, threshold=1.0)
    with pytest.raises(InputError, match="same channels and bins"):
        acc.merge(ChannelStats(5))


@pytest.fixture(scope="module")
def tiny():
    from probe_models import agreement_setup

    trained, task = agreement_setup(n_items=12, n_layers=2)
    return trained, task


def test_capture_on_a_model_matches_stored_activations(tiny) -> None:
    trained, task = tiny
    model, tok = trained.model, trained.tokenizer
    texts = [it.prompt + " " * (i % 3) + it.solution for i, it in enumerate(task.items("test"))]
    # brute force: store every input of the watched modules, then drop the padding rows
    stored: dict[str, list[torch.Tensor]] = {}
    names = [n for n, _ in model.named_modules() if n.endswith(("o_proj", "down_proj"))]
    handles = [m.register_forward_pre_hook(
        lambda mod, args, n=n: stored.setdefault(n, []).append(args[0].detach().clone()))
        for n, m in model.named_modules() if n in names]
    tok.padding_side = "left"
    masks = []
    with torch.inference_mode():
        for start in range(0, len(texts), 5):
            batch = tok(texts[start:start + 5], return_tensors="pt", padding=True)
            masks.append(batch["attention_mask"].reshape(-1).bool())
            model(**batch)
    for h in handles:
        h.remove()
    table = capture_channels(model, tok, texts, modules=["o_proj", "down_proj"],
                             batch_size=5, bins_per_octave=BPO)
    assert set(table["module"]) == set(names)
    for name in names:
        rows = torch.cat([t.reshape(-1, t.shape[-1])[m] for t, m in zip(stored[name], masks)])
        got = table[table["module"] == name].sort_values("channel")
        assert (got["n_tokens"] == int(sum(m.sum() for m in masks))).all()
        a = rows.abs().double().numpy()
        np.testing.assert_array_equal(got["max_abs"].to_numpy(), a.max(axis=0))
        for ch in range(a.shape[1]):
            true = _order_stat(a[:, ch], 0.5)
            est = got["median_abs"].iloc[ch]
            assert true / FACTOR <= est <= true * FACTOR
        layer = int(name.split(".")[2])
        assert (got["layer"] == layer).all()


def test_unknown_module_is_named(tiny) -> None:
    trained, _ = tiny
    with pytest.raises(InputError, match=r"no module of the model is named 'o_prj'.*"
                                         r"did you mean 'o_proj'"):
        capture_channels(trained.model, trained.tokenizer, ["1 + 1"], modules=["o_prj"])
