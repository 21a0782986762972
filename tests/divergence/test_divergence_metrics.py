"""The per-item metrics against a brute-force computation, and the running statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from robuststats.divergence import METRICS, RunningStats, item_metrics
from robuststats.divergence._analysis import mean_interval, module_table


def _brute(a: np.ndarray, b: np.ndarray, mask: np.ndarray, eps: float) -> dict[str, list[float]]:
    """Element by element, one item at a time, in plain numpy."""
    out: dict[str, list[float]] = {k: [] for k in (*METRICS, "err_norm", "ref_norm")}
    for i in range(a.shape[0]):
        rows = [t for t in range(a.shape[1]) if mask[i, t]]
        av = np.concatenate([a[i, t].ravel() for t in rows])
        bv = np.concatenate([b[i, t].ravel() for t in rows])
        d = bv - av
        rms = math.sqrt(float((av ** 2).mean()))
        ape = np.abs(d) / (np.abs(av) + eps * rms)
        out["mape"].append(float(ape.mean()))
        out["mdape"].append(float(np.sort(ape)[(ape.size - 1) // 2]))  # lower median
        out["wape"].append(float(np.abs(d).sum() / np.abs(av).sum()))
        out["rel_rms"].append(float(np.linalg.norm(d) / np.linalg.norm(av)))
        cos = [float(a[i, t].ravel() @ b[i, t].ravel() /
                     (np.linalg.norm(a[i, t]) * np.linalg.norm(b[i, t]))) for t in rows]
        out["cosine"].append(float(np.mean(cos)))
        out["err_norm"].append(float(np.linalg.norm(d)))
        out["ref_norm"].append(float(np.linalg.norm(av)))
    return out


def test_metrics_match_brute_force_on_stored_tensors():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 5, 2, 4, generator=g)
    # relative and additive error, and a few reference elements at exactly 0
    b = a * (1 + 0.05 * torch.randn(a.shape, generator=g)) + 0.01 * torch.randn(a.shape,
                                                                                 generator=g)
    a[0, 1, 0, :2] = 0.0
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 1, 1, 1, 1]], dtype=torch.bool)
    got = item_metrics(a, b, mask, eps=0.01)
    want = _brute(a.double().numpy(), b.double().numpy(), mask.numpy(), 0.01)
    for key, values in want.items():
        np.testing.assert_allclose(got[key].numpy(), values, rtol=1e-12, err_msg=key)
    # the guard: without it one exact zero in the reference makes MAPE infinite
    assert np.isfinite(got["mape"].numpy()).all()


def test_identical_activations_give_zero_divergence_exactly():
    a = torch.randn(2, 7, 16, generator=torch.Generator().manual_seed(1), dtype=torch.bfloat16)
    got = item_metrics(a, a.clone())
    for key in ("mape", "mdape", "wape", "rel_rms", "err_norm"):
        assert got[key].tolist() == [0.0, 0.0], key
    assert got["cosine"].tolist() == [1.0, 1.0]


def test_zero_reference_item_and_zero_positions():
    a = torch.zeros(2, 3, 4)
    b = torch.zeros(2, 3, 4)
    b[1, 0, 0] = 1.0
    got = item_metrics(a, b)
    assert got["mape"].tolist() == [0.0, math.inf]
    assert got["rel_rms"].tolist() == [0.0, math.inf]
    # a position where both are 0 counts as aligned, one where only one is 0 as orthogonal
    assert got["cosine"].tolist() == [1.0, pytest.approx(2 / 3)]


def test_shape_mismatch_is_refused():
    with pytest.raises(ValueError, match="differ in shape"):
        item_metrics(torch.zeros(1, 2, 3), torch.zeros(1, 2, 4))


def test_running_statistics_equal_batch_statistics():
    rng = np.random.default_rng(3)
    x = rng.gamma(2.0, 0.01, size=257)
    acc = RunningStats()
    acc.update_many(x)
    assert acc.n == x.size
    assert acc.mean == pytest.approx(x.mean(), rel=1e-13)
    assert acc.variance == pytest.approx(x.var(ddof=1), rel=1e-11)
    # merging two halves is the same as one pass (Chan et al.)
    left, right = RunningStats(), RunningStats()
    left.update_many(x[:100])
    right.update_many(x[100:])
    merged = left.merge(right)
    assert merged.mean == pytest.approx(x.mean(), rel=1e-13)
    assert merged.variance == pytest.approx(x.var(ddof=1), rel=1e-11)
    inf = RunningStats()
    inf.update_many([1.0, math.inf, 3.0])
    assert (inf.n, inf.n_infinite, inf.mean) == (2, 1, 2.0)


def test_t_interval_matches_r():
    # R: x <- c(0.1, 0.4, 0.35, 0.8, 0.2); t.test(x, conf.level = 0.9)$conf.int
    #    0.114178385640802 0.625821614359198
    acc = RunningStats()
    acc.update_many([0.1, 0.4, 0.35, 0.8, 0.2])
    low, high = acc.t_interval(0.9)
    assert low == pytest.approx(0.114178385640802, abs=1e-12)
    assert high == pytest.approx(0.625821614359198, abs=1e-12)
    assert mean_interval(np.array([0.1, 0.4, 0.35, 0.8, 0.2]), confidence_level=0.9)[1:] == \
        pytest.approx((low, high), abs=1e-14)
    assert all(math.isnan(v) for v in RunningStats(1, 0.5, 0.0).t_interval())


def test_module_table_from_running_equals_from_items():
    import pandas as pd

    rng = np.random.default_rng(4)
    rows, running = [], {}
    for i in range(30):
        values = {m: float(rng.gamma(2.0, 0.01)) for m in METRICS}
        rows.append({"mode": "accumulated", "site": "s", "layer": 0, "module_type": "residual",
                     "item_id": f"i{i}", **values})
        for m, v in values.items():
            running.setdefault(("accumulated", "s", m), RunningStats()).update(v)
    items = pd.DataFrame(rows)
    a = module_table(items, running)
    b = module_table(items)
    pd.testing.assert_frame_equal(a, b, rtol=1e-12)
    boot = module_table(items, interval="bootstrap", n_resamples=4000)
    assert boot["mape_ci_low"].iloc[0] == pytest.approx(a["mape_ci_low"].iloc[0], rel=0.05)
    assert boot["ci_method"].iloc[0] == "percentile bootstrap over items"
