"""The opt-in ``philox`` noise stream: known answers, a numpy reference, invariance under
threads and splits, the N(0, 1) law, sessions on it, and the refusal when it cannot build."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
import torch
from scipy import stats

from robuststats.engine import NoiseSpec, _philox, inject
from robuststats.engine import _attention as attention
from robuststats.engine._error_models import ERROR_MODELS
from robuststats.engine._model_map import OUTSIDE
from robuststats.engine._philox import TILE, GeneratorUnavailableError, PhiloxStream, philox_block
from robuststats.engine._streams import stream_seed
from robuststats.errors import InputError

ATTENTION = ["attention_scores", "softmax", "attention_output"]
_M32 = np.uint64(0xFFFFFFFF)


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def _philox_ref(c: np.ndarray, k0: int, k1: int) -> np.ndarray:
    """Philox4x32-10 in numpy (Salmon et al. 2011, §4): ``c`` of shape (4, n) → (4, n)."""
    c0, c1, c2, c3 = (np.asarray(w, dtype=np.uint64) for w in c)
    ka, kb = np.uint64(k0), np.uint64(k1)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ ka, p1 & _M32,
                          (p0 >> np.uint64(32)) ^ c3 ^ kb, p0 & _M32)
        ka = (ka + np.uint64(0x9E3779B9)) & _M32
        kb = (kb + np.uint64(0xBB67AE85)) & _M32
    return np.stack((c0, c1, c2, c3))


def _normals_ref(key: int, positions: np.ndarray) -> np.ndarray:
    """The stream's N(0, 1) at ``positions`` (the layout of ``_philox``), Box–Muller in float64
    from the kernel's float32 uniform."""
    positions = np.asarray(positions, dtype=np.uint64)
    tile, j = positions // np.uint64(TILE), positions % np.uint64(TILE)
    ctr = tile * np.uint64(TILE // 4) + j % np.uint64(TILE // 4)
    zero = np.zeros_like(ctr)
    w = _philox_ref(np.stack((ctr & _M32, ctr >> np.uint64(32), zero, zero)),
                    key & 0xFFFFFFFF, key >> 32)
    lane = (j // np.uint64(TILE // 4)).astype(int)
    wr = np.where(lane < 2, w[0], w[2])
    wt = np.where(lane < 2, w[1], w[3])
    u = (wr >> np.uint64(1)).astype(np.float32) * np.float32(2.0 ** -31) + np.float32(2.0 ** -32)
    r = np.sqrt(-2.0 * np.log(u.astype(np.float64)))
    theta = 2 * np.pi * (wt >> np.uint64(8)).astype(np.float64) / 2.0 ** 24
    return np.where(lane % 2 == 0, r * np.cos(theta), r * np.sin(theta))


def _draw(key: int, n: int, offset: int = 0) -> torch.Tensor:
    out = torch.empty(n)
    _philox.kernel().normal_(out, key, offset)
    return out


# --- the generator ---------------------------------------------------------------------------


@pytest.mark.parametrize(("counter", "key", "expected"), [
    # the "philox4x32 10" known-answer vectors of Random123 (kat_vectors; Salmon et al. 2011)
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_known_answers_of_philox4x32_10(counter, key, expected) -> None:
    assert philox_block(counter, key) == expected
    ref = _philox_ref(np.array(counter, dtype=np.uint64)[:, None], *key)[:, 0]
    assert tuple(int(w) for w in ref) == expected


def test_draws_match_a_numpy_reference() -> None:
    key = 0x9E3779B97F4A7C15
    signed = key - (1 << 64)
    positions = np.array([0, 1, 255, 256, 511, 512, 767, 768, 1023, 1024, 5000, 123457])
    z = _draw(signed, int(positions.max()) + 1).numpy()[positions]
    ref = _normals_ref(key, positions)
    assert np.all(np.abs(z - ref) <= 2e-6 * np.maximum(1.0, np.abs(ref))), (z, ref)
    # many positions, far along the stream (a counter past 2^32: the high word is used)
    far = (1 << 42) + 7 * TILE
    zf = _draw(5, 4 * TILE, far).numpy()
    rf = _normals_ref(5, np.arange(far, far + 4 * TILE))
    assert np.max(np.abs(zf - rf) / np.maximum(1.0, np.abs(rf))) < 2e-6


def test_same_values_for_any_thread_count_and_split(threads) -> None:
    n = 37 * TILE + 311
    threads(1)
    one = _draw(11, n, 3 * TILE)
    threads(2)
    two = _draw(11, n, 3 * TILE)
    assert torch.equal(one, two)
    # a draw split into calls at arbitrary points is the same draw
    cuts = [0, 5, 1030, 4097, 20000, n]
    parts = [_draw(11, b - a, 3 * TILE + a) for a, b in itertools.pairwise(cuts)]
    assert torch.equal(torch.cat(parts), one)
    assert not torch.equal(_draw(12, n, 3 * TILE), one)


def test_draws_are_standard_normal_to_five_sigma() -> None:
    n = 10_000_000
    z = _draw(20260, n).double().numpy()
    assert abs(z.mean()) < 4 / np.sqrt(n)
    assert abs(z.var() - 1) < 4 * np.sqrt(2 / n)
    assert abs(stats.skew(z)) < 4 * np.sqrt(6 / n)
    assert abs(stats.kurtosis(z)) < 4 * np.sqrt(24 / n)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    for k in (2, 3, 4, 5):  # two-sided tail counts against Poisson bounds
        expected = n * 2 * stats.norm.sf(k)
        seen = int((np.abs(z) > k).sum())
        assert abs(seen - expected) < 5 * np.sqrt(expected) + 1, (k, seen, expected)
    # lanes that share a Philox block, neighbours and keys are uncorrelated
    t = z[: (n // TILE) * TILE].reshape(-1, 4, TILE // 4)
    for a, b in ((t[:, 0], t[:, 1]), (t[:, 0], t[:, 2]), (t[:, 1] ** 2, t[:, 0] ** 2),
                 (z[:-1], z[1:]), (z, _draw(20261, n).double().numpy())):
        assert abs(np.corrcoef(a.ravel(), b.ravel())[0, 1]) < 4 / np.sqrt(a.size)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_fused_pass_is_bitwise_the_unfused_form(threads, dtype) -> None:
    y0 = torch.randn(3 * TILE + 17, generator=torch.Generator().manual_seed(0)).to(dtype)
    results = []
    for n in (1, 2):
        threads(n)
        y = y0.clone()
        norms = PhiloxStream(99).perturb_relative_(y, 0.05)
        results.append((y, norms))
    assert torch.equal(results[0][0], results[1][0])
    assert torch.equal(results[0][1], results[1][1])
    assert results[0][0]._version > 0  # counted as an in-place change
    yf = y0.float()
    eps = PhiloxStream(99).randn(y0.shape, torch.float32)
    expected = torch.add(yf, eps * yf, alpha=0.05).to(dtype)
    assert torch.equal(results[0][0], expected)
    realised = expected.float() - yf
    ref = torch.stack((yf.double().square().sum(), realised.double().square().sum()))
    torch.testing.assert_close(results[0][1], ref, rtol=1e-5, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_fused_pass_keeps_special_values_as_the_unfused_form(dtype) -> None:
    y0 = torch.randn(2 * TILE + 5, generator=torch.Generator().manual_seed(1))
    y0[[0, 7, TILE + 3, 2 * TILE + 4]] = torch.tensor([float("nan"), float("inf"), -float("inf"),
                                                      -float("nan")])
    y0[[1, 2]] = torch.tensor([0.0, -0.0])
    y0 = y0.to(dtype)
    y = y0.clone()
    PhiloxStream(4).perturb_relative_(y, 0.05)
    yf = y0.float()
    expected = torch.add(yf, PhiloxStream(4).randn(y0.shape, torch.float32) * yf, alpha=0.05)
    expected = expected.to(dtype)
    nan = expected.isnan()
    assert torch.equal(y.isnan(), nan) and nan.sum() >= 2  # an infinity may become NaN too
    # every other value bitwise, signed zeros and infinities included (a NaN's payload bits
    # follow no rule: torch's own conversions write different ones in a vector body and tail)
    bits = torch.int32 if dtype == torch.float32 else torch.int16
    assert torch.equal(y[~nan].view(bits), expected[~nan].view(bits))


def test_state_replays_and_draws_advance_by_whole_tiles() -> None:
    s = PhiloxStream(3)
    s.randn((10,), torch.float32)
    state = s.get_state()
    assert state == {"position": TILE}
    a = s.randn((2, 700), torch.float32)
    b = PhiloxStream(3).set_state(state).randn((2, 700), torch.float32)
    assert torch.equal(a, b) and s.get_state() == {"position": 3 * TILE}
    assert s.randn((0,), torch.float32).shape == (0,) and s.get_state() == {"position": 3 * TILE}


# --- in sessions -------------------------------------------------------------------------------


def test_spec_field_and_its_record() -> None:
    default = NoiseSpec(scale=0.05)
    assert default.generator == "mt" and "generator" not in default.to_dict()
    assert NoiseSpec(scale=0.05, generator="mt") == default
    spec = NoiseSpec(scale=0.05, generator="philox")
    assert spec.to_dict()["generator"] == "philox"
    assert NoiseSpec.from_dict(spec.to_dict()) == spec and hash(spec) != hash(default)
    with pytest.raises(InputError, match=r"`generator` must be one of 'mt', 'philox', got 'philx'"
                                         r".*did you mean 'philox'"):
        NoiseSpec(scale=0.05, generator="philx")


def test_sessions_on_philox_reproduce_and_differ_from_mt(make_qwen, ids, threads) -> None:
    model = make_qwen("sdpa")
    spec = NoiseSpec(scale=0.05, ops="matmul_only", seed=4, generator="philox")
    outs, counts = [], []
    for n in (1, 2, 2):
        threads(n)
        with torch.no_grad(), inject(model, spec) as s:
            outs.append(model(ids).logits)
        counts.append(s.stats["count"].tolist())
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[1], outs[2])
    assert counts[0] == counts[1]
    with torch.no_grad(), inject(model, spec.replace(generator="mt")) as s_mt:
        mt = model(ids).logits
    assert not torch.equal(mt, outs[0])
    assert s_mt.stats["count"].tolist() == counts[0]
    ratio = s.stats["rms_noise_ratio"]
    assert ((ratio > 0.03) & (ratio < 0.07)).all(), s.stats


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_generation_with_the_kv_cache_reproduces_on_any_thread_count(make_qwen, threads,
                                                                    dtype) -> None:
    """One token at a time with the KV cache and a left-padded batch: the engine's
    attention then sees one query row against the cached keys."""
    model = make_qwen("sdpa").to(dtype)
    ids = torch.randint(0, 64, (3, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    spec = NoiseSpec(scale=0.05, ops="all_ops", seed=1, generator="philox")
    runs = []
    for n in (1, 2):
        threads(n)
        with torch.no_grad(), inject(model, spec) as s:
            out = model.generate(ids, attention_mask=mask, max_new_tokens=6, do_sample=False,
                                 pad_token_id=0, output_logits=True,
                                 return_dict_in_generate=True)
        runs.append((out.sequences, torch.stack(out.logits), s.stats))
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])
    assert runs[0][2].equals(runs[1][2])  # counts and realised ratios, bit for bit
    with torch.no_grad(), inject(model, spec.replace(generator="mt")) as s_mt:
        model.generate(ids, attention_mask=mask, max_new_tokens=6, do_sample=False,
                       pad_token_id=0)
    assert s_mt.stats["count"].tolist() == runs[0][2]["count"].tolist()
    assert (runs[0][2]["count"] > 1).all()  # the prefill and every generated token


def test_concurrent_sessions_share_the_thread_pool_without_changing_a_draw(make_qwen,
                                                                          threads) -> None:
    """Sessions in two Python threads at once, each splitting its passes over two torch
    threads through the one shared pool: forward logits, gradients and statistics are bit
    for bit those of the same sessions run one after another."""
    threads(2)
    models = [make_qwen("sdpa", layers=2) for _ in range(2)]
    ids = torch.randint(0, 64, (2, 96), generator=torch.Generator().manual_seed(1))

    barrier: threading.Barrier | None = None

    def run(i: int, out: dict) -> None:
        spec = NoiseSpec(scale=0.05, ops="all_ops", seed=i, generator="philox")
        if barrier is not None:
            barrier.wait()  # both sessions open and draw at the same time
        with torch.no_grad(), inject(models[i], spec) as s:
            logits = models[i](ids).logits
        with inject(models[i], spec.replace(phases="both")) as s2:
            models[i](ids).logits.float().square().mean().backward()
        grads = [p.grad.clone() for p in models[i].parameters()]
        models[i].zero_grad()
        out[i] = (logits, grads, s.stats, s2.stats)

    alone: dict = {}
    for i in range(2):
        run(i, alone)
    together: dict = {}
    barrier = threading.Barrier(2, timeout=120)
    workers = [threading.Thread(target=run, args=(i, together)) for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for i in range(2):
        assert torch.equal(alone[i][0], together[i][0])
        assert all(torch.equal(a, b) for a, b in zip(alone[i][1], together[i][1], strict=True))
        assert alone[i][2].equals(together[i][2]) and alone[i][3].equals(together[i][3])


@pytest.mark.parametrize("kind", sorted(ERROR_MODELS))
def test_every_error_model_draws_from_the_philox_stream(make_qwen, ids, kind) -> None:
    """Error models other than relative Gaussian take their draws through ``randn``, which
    once passed the philox stream to torch as if it were a ``torch.Generator``."""
    model = make_qwen("sdpa")
    spec = NoiseSpec(scale=0.05, kind=kind, ops="all_ops", phases="both", seed=2,
                     generator="philox")
    runs = []
    for _ in range(2):
        model.zero_grad()
        with inject(model, spec) as s:
            logits = model(ids).logits
            logits.float().square().mean().backward()
        runs.append((logits.detach(), [p.grad.clone() for p in model.parameters()]))
        assert (s.stats["count"] > 0).all()
    assert torch.equal(runs[0][0], runs[1][0])
    assert all(torch.equal(a, b) for a, b in zip(runs[0][1], runs[1][1], strict=True))
    with torch.no_grad():
        clean = model(ids).logits
    assert not torch.equal(clean, runs[0][0])


def test_absolute_gaussian_error_is_the_streams_draws() -> None:
    torch.manual_seed(0)
    linear = torch.nn.Linear(16, 8)
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(5))
    spec = NoiseSpec(scale=0.25, kind="absolute_gaussian", ops="linear", seed=7,
                     generator="philox")
    with torch.no_grad():
        exact = linear(x)
        with inject(linear, spec):
            noisy = linear(x)
    stream = PhiloxStream(stream_seed(7, "forward", OUTSIDE))
    expected = exact + 0.25 * stream.randn(exact.shape, torch.float32)
    torch.testing.assert_close(noisy, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_blocked_attention_noise_in_place_is_the_tracked_one(make_qwen, dtype, monkeypatch) -> None:
    model = make_qwen("sdpa").to(dtype)
    ids = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(6))
    monkeypatch.setattr(attention, "BLOCK_ELEMENTS", 4 * 24 * 4)  # blocks of 4 query rows
    spec = NoiseSpec(scale=0.05, ops=ATTENTION, seed=3, generator="philox")
    with torch.no_grad(), inject(model, spec) as s1:
        in_place = model(ids).logits
    with inject(model, spec) as s2:
        tracked = model(ids).logits
    assert torch.equal(in_place, tracked.detach())
    assert (s1.stats["count"] == 1).all()  # one injection per op and layer, however many blocks
    assert s1.stats["count"].tolist() == s2.stats["count"].tolist()


def test_static_weight_noise_draws_from_the_selected_stream(tiny_net) -> None:
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(2))
    out = {}
    for gen in ("mt", "philox"):
        spec = NoiseSpec(scale=0.05, ops="linear", target="weights", seed=1, generator=gen)
        with torch.no_grad(), inject(tiny_net, spec):
            out[gen] = tiny_net(x)
    with torch.no_grad(), inject(tiny_net, spec):
        again = tiny_net(x)
    assert torch.equal(again, out["philox"]) and not torch.equal(out["mt"], out["philox"])


def test_no_build_is_one_clear_refusal_before_the_model_runs(make_qwen, ids, monkeypatch) -> None:
    class NoCompiler(_philox._Kernel):
        def build(self):
            raise RuntimeError("Error building extension 'robuststats_philox_v1':\n c++: not found")

    monkeypatch.setattr(_philox, "_KERNEL", NoCompiler())
    model = make_qwen()
    with pytest.raises(GeneratorUnavailableError) as info:
        with inject(model, NoiseSpec(scale=0.05, generator="philox")):
            raise AssertionError("the block must not run")
    message = str(info.value)
    assert "\n" not in message and "generator 'philox'" in message and "c++: not found" in message
    assert "generator 'mt'" in message and isinstance(info.value, InputError)
    with pytest.raises(GeneratorUnavailableError):  # the failure is remembered, not rebuilt
        PhiloxStream(1)
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05)):  # the default stream works
        model(ids)


@pytest.mark.parametrize("backend", ["eager", pytest.param("aot_eager", marks=pytest.mark.slow)])
@pytest.mark.parametrize("phases", ["forward", "both"])
def test_compiled_training_step_draws_the_eager_philox_noise(make_qwen, ids, backend,
                                                               phases) -> None:
    torch._dynamo.reset()
    model = make_qwen()
    model.train()
    compiled = torch.compile(model, backend=backend)
    compiled(ids, labels=ids).loss.backward()  # compile forward and backward first
    spec = NoiseSpec(scale=0.05, ops="all_ops", phases=phases, seed=2, generator="philox")
    runs = []
    for call in (model, compiled):
        model.zero_grad()
        with inject(model, spec) as s:
            out = call(ids, labels=ids)
            out.loss.backward()
        runs.append((out.logits.detach(), [p.grad.clone() for p in model.parameters()], s))
    (ref, g_ref, s_ref), (got, g_got, s_got) = runs
    assert torch.equal(got, ref)
    assert all(torch.equal(a, b) for a, b in zip(g_ref, g_got, strict=True))
    assert s_got.stats.equals(s_ref.stats) and int(s_ref.stats["count"].sum()) > 0
