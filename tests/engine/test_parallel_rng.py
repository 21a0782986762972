"""Parallel noise streams: identical for any thread count, and statistically N(0, 1) and independent."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from robuststats.engine import NoiseSpec, inject
from robuststats.engine._rng import CHUNK, NoiseStream, mix64, seeded_generator


@pytest.fixture
def threads():
    """Set the torch thread count inside a test, restored afterwards."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def _draws(n_threads: int, set_threads) -> list[torch.Tensor]:
    set_threads(n_threads)
    s = NoiseStream(mix64(7, 1))
    return [s.randn((3, CHUNK + 5), torch.float32), s.randn((100,), torch.float32),
            s.randn((5 * CHUNK // 2,), torch.bfloat16)]


def test_same_numbers_for_one_and_two_threads(threads) -> None:
    one = _draws(1, threads)
    two = _draws(2, threads)
    for a, b in zip(one, two):
        assert torch.equal(a, b)


def test_session_output_identical_for_one_and_two_threads(threads) -> None:
    # 64 × 4096 outputs = 2 chunks, so the noise is drawn in parallel. One-hot inputs make
    # the clean product exact (a matmul's own rounding may depend on the thread count)
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 4096, bias=False)
    x = torch.eye(64)
    spec = NoiseSpec(scale=0.05, ops=["linear"], seed=3)
    outs = []
    for n in (1, 2, 1):
        threads(n)
        with torch.no_grad(), inject(model, spec):
            outs.append(model(x))
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])
    with torch.no_grad():
        assert torch.equal(model(x), model.weight.T)  # the clean product is exact
        assert not torch.equal(outs[0], model(x))  # and the noise was there


def test_chunks_and_calls_are_standard_normal_and_uncorrelated(threads) -> None:
    threads(2)
    s = NoiseStream(mix64(11, 0))
    first = s.randn((4 * CHUNK,), torch.float32).double().view(4, CHUNK)
    second = s.randn((4 * CHUNK,), torch.float32).double().view(4, CHUNK)
    other = NoiseStream(mix64(11, 1)).randn((4 * CHUNK,), torch.float32).double().view(4, CHUNK)
    rows = torch.cat([first, second, other])  # 12 samples of CHUNK values each
    # mean 0 and SD 1 per chunk: SE of a mean is 1/sqrt(CHUNK) ~ 0.0028; of an SD ~ 0.002
    assert rows.mean(dim=1).abs().max() < 5 / CHUNK ** 0.5
    assert (rows.std(dim=1) - 1).abs().max() < 5 / (2 * CHUNK) ** 0.5
    # normal shape: Kolmogorov-Smirnov on the pooled draws (fixed keys, so deterministic)
    assert stats.kstest(rows.flatten()[:200_000].numpy(), "norm").pvalue > 0.01
    # no correlation between chunks of a call, between calls, between streams:
    # |r| of independent samples has SD 1/sqrt(CHUNK); 66 pairs, bound 5 SD
    corr = torch.corrcoef(rows)
    off = corr[~torch.eye(12, dtype=torch.bool)]
    assert off.abs().max() < 5 / CHUNK ** 0.5
    # and none between neighbours within a chunk (lag-1 autocorrelation)
    lag = torch.corrcoef(torch.stack([rows[:, :-1].flatten(), rows[:, 1:].flatten()]))[0, 1]
    assert abs(float(lag)) < 5 / (12 * CHUNK) ** 0.5


def test_keys_use_all_64_bits() -> None:
    # manual_seed keeps only the low 32 bits of a seed; the streams' generators do not
    lo = 12345
    hi = lo + (1 << 32)
    a = torch.randn(8, generator=seeded_generator(lo))
    b = torch.randn(8, generator=seeded_generator(hi))
    assert not torch.equal(a, b)
    assert torch.equal(torch.randn(8, generator=torch.Generator().manual_seed(lo)),
                       torch.randn(8, generator=torch.Generator().manual_seed(hi)))
    assert torch.equal(a, torch.randn(8, generator=seeded_generator(lo)))


def test_state_snapshot_replays_the_same_draws() -> None:
    s = NoiseStream(99)
    s.randn((CHUNK + 1,), torch.float32)
    state = s.get_state()
    expected = [s.randn((3 * CHUNK,), torch.float32), s.randn((7,), torch.float32)]
    again = NoiseStream(99).set_state(state)
    assert torch.equal(again.randn((3 * CHUNK,), torch.float32), expected[0])
    assert torch.equal(again.randn((7,), torch.float32), expected[1])


def test_global_rng_untouched() -> None:
    before = torch.get_rng_state()
    NoiseStream(5).randn((3 * CHUNK,), torch.float32)
    assert torch.equal(before, torch.get_rng_state())


def test_mix64_separates_parts() -> None:
    keys = {mix64(s, p, layer) for s in range(4) for p in range(2) for layer in range(-1, 30)}
    assert len(keys) == 4 * 2 * 31
    assert mix64(1, 2) != mix64(2, 1)
    assert np.uint64(mix64(3)) == np.uint64(mix64(3))


def test_a_forked_child_gets_its_own_pool(threads) -> None:
    # a forked child inherits the pool object without its threads; submitting to it would
    # wait forever. (Forking a process whose OpenMP pool ran can hang in torch itself, so
    # the pid check is tested directly.)
    from robuststats.engine import _rng

    threads(2)
    NoiseStream(1).randn((3 * CHUNK,), torch.float32)
    parent = _rng._POOL.get(1)
    assert _rng._POOL.get(1) is parent
    _rng._POOL._pid = -1  # as seen from a child: another process
    child = _rng._POOL.get(1)
    assert child is not parent
    assert torch.equal(NoiseStream(2).randn((3 * CHUNK,), torch.float32),
                       NoiseStream(2).randn((3 * CHUNK,), torch.float32))


@pytest.mark.parametrize("n", [1000, 3 * CHUNK + 7])
def test_fused_relative_perturbation_is_bitwise_the_unfused_one(threads, n) -> None:
    y = torch.randn(n, generator=torch.Generator().manual_seed(4))
    for t in (1, 2):
        threads(t)
        fused = y.clone()
        norms = NoiseStream(8).perturb_relative_(fused, 0.05)
        e = NoiseStream(8).randn((n,), torch.float32).mul_(y)
        assert torch.equal(fused, torch.add(y, e, alpha=0.05))
        expected = torch.stack((y.double().norm(), 0.05 * e.double().norm())).square()
        assert torch.allclose(norms, expected, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [1000, 3 * CHUNK + 7])
def test_fused_low_precision_perturbation_is_bitwise_the_unfused_one(threads, dtype, n) -> None:
    # float32 draws on y.float(), one rounding, the realised error's norm: as _low_precision
    y = torch.randn(n, generator=torch.Generator().manual_seed(4)).to(dtype)
    y[5] = float("nan")
    y[7] = 0.0
    for t in (1, 2):
        threads(t)
        fused = y.clone()
        norms = NoiseStream(8).perturb_relative_(fused, 0.05)
        yf = y.float()
        e = NoiseStream(8).randn((n,), torch.float32).mul_(yf)
        out = torch.add(yf, e, alpha=0.05).to(dtype)
        assert fused.dtype == dtype and torch.equal(fused.isnan(), out.isnan())
        assert torch.equal(fused.nan_to_num(), out.nan_to_num()) and fused[7] == 0
        assert torch.isnan(norms).all()  # a NaN output makes both norms NaN, as unfused
        clean = y.clone()
        clean[5] = 1.0
        norms = NoiseStream(8).perturb_relative_(clean, 0.05)
        yf[5] = 1.0
        e = NoiseStream(8).randn((n,), torch.float32).mul_(yf)
        realised = torch.add(yf, e, alpha=0.05).to(dtype).float() - yf
        expected = torch.stack((yf.double().norm(), realised.double().norm())).square()
        # float32 norms, per chunk here and over the whole tensor unfused
        assert torch.allclose(norms, expected, rtol=1e-4)
        assert not torch.equal(realised, e * 0.05)  # the rounding is what gets booked


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_session_low_precision_noise_same_with_and_without_autograd(dtype) -> None:
    # no_grad takes the fused chunked path, a tracked output the unfused float32 one
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 4096, bias=False).to(dtype)
    x = torch.eye(64, dtype=dtype)
    spec = NoiseSpec(scale=0.05, ops=["linear"], seed=9)
    with torch.no_grad(), inject(model, spec) as s1:
        fused = model(x)
    with inject(model, spec) as s2:
        tracked = model(x)
    assert tracked.requires_grad and torch.equal(fused, tracked.detach())
    r1, r2 = s1.stats["rms_noise_ratio"].iloc[0], s2.stats["rms_noise_ratio"].iloc[0]
    assert r1 == pytest.approx(r2, rel=1e-4) and r1 == pytest.approx(0.05, rel=0.05)


def test_session_noise_same_with_and_without_autograd() -> None:
    # no_grad takes the fused in-place path, a tracked output the out-of-place one
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 4096, bias=False)
    x = torch.eye(64)
    spec = NoiseSpec(scale=0.05, ops=["linear"], seed=9)
    with torch.no_grad(), inject(model, spec) as s1:
        fused = model(x)
    with inject(model, spec) as s2:
        tracked = model(x)
    assert tracked.requires_grad and torch.equal(fused, tracked.detach())
    r1, r2 = s1.stats["rms_noise_ratio"].iloc[0], s2.stats["rms_noise_ratio"].iloc[0]
    assert r1 == pytest.approx(r2, rel=1e-5) and r1 == pytest.approx(0.05, rel=0.02)


def test_parallel_draws_under_inference_mode(threads) -> None:
    # outputs above one chunk are perturbed in place by pool threads too; those threads
    # must run under the caller's inference mode, or torch refuses the in-place update
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 4096, bias=False)
    x = torch.eye(64)
    outs = {}
    for n in (1, 2):
        threads(n)
        with torch.inference_mode(), inject(model, NoiseSpec(scale=0.05, seed=3)):
            outs[n] = model(x)
        assert outs[n].is_inference()
    assert torch.equal(outs[1], outs[2])
