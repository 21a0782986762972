"""The engine's attention reproduces each model's own (issue 9, items 2, 4 and 15).

Tiny models of the architectures whose attention differs: Gemma2 (logit soft-capping,
``query_pre_attn_scalar`` scaling, sliding-window layers), GPT-OSS (attention sinks,
sliding-window layers), Mistral (sliding window), Llama (grouped-query attention), Qwen2
(sliding window on some layers) and GPT-2.
"""

from __future__ import annotations

import pytest
import torch

from robuststats.engine import NoiseSpec, UnsupportedAttentionError, inject
from robuststats.engine import _attention as attention
from robuststats.errors import InputError

ATTENTION = ["attention_scores", "softmax", "attention_output"]


def tiny(arch: str, attn: str = "eager", *, dropout: float = 0.0) -> torch.nn.Module:
    import transformers as tf

    common = dict(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        attention_dropout=dropout,
    )
    if arch == "gemma2":
        # a soft cap of 1 with large weights: capping changes the scores a lot
        cfg = tf.Gemma2Config(**common, head_dim=8, sliding_window=4, attn_logit_softcapping=1.0,
                              initializer_range=0.5, query_pre_attn_scalar=16)
    elif arch == "gpt_oss":
        cfg = tf.GptOssConfig(**common, head_dim=8, sliding_window=4, num_local_experts=4,
                              num_experts_per_tok=2)
    elif arch == "mistral":
        cfg = tf.MistralConfig(**common, sliding_window=4)
    elif arch == "llama":
        cfg = tf.LlamaConfig(**common)
    elif arch == "qwen2":
        cfg = tf.Qwen2Config(**common, use_sliding_window=True, sliding_window=4, max_window_layers=1)
    elif arch == "gpt2":
        cfg = tf.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                            attn_pdrop=dropout, bos_token_id=0, eos_token_id=0)
    else:
        raise AssertionError(arch)
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(cfg)
    if arch == "gpt_oss":  # sinks start at zero; give them weight so they matter
        with torch.no_grad():
            for layer in model.model.layers:
                layer.self_attn.sinks.normal_(0.0, 2.0)
    return model.eval()


CASES = [
    ("gemma2", "eager"), ("gpt_oss", "eager"), ("mistral", "eager"), ("mistral", "sdpa"),
    ("llama", "eager"), ("llama", "sdpa"), ("qwen2", "eager"), ("qwen2", "sdpa"),
    ("gpt2", "eager"), ("gpt2", "sdpa"),
]


@pytest.fixture
def ids12() -> torch.Tensor:
    return torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize(("arch", "attn"), CASES)
def test_clean_engine_attention_equals_the_models_own(arch, attn, train, ids12) -> None:
    # backward-only noise: the engine's attention computes the forward, without noise
    model = tiny(arch, attn, dropout=0.3 if train else 0.0).train(train)
    torch.manual_seed(7)  # same dropout draws in both runs
    own = model(ids12).logits
    spec = NoiseSpec(scale=0.05, ops=ATTENTION, phases="backward")
    with inject(model, spec, verify=False):
        assert model.config._attn_implementation == attention.NAME
        torch.manual_seed(7)
        engine = model(ids12).logits
    with torch.no_grad(), inject(model, spec, verify=False):  # the in-place path
        torch.manual_seed(7)
        engine_no_grad = model(ids12).logits
    tol = 0.0 if attn == "eager" else 1e-6  # eager: the same operations in the same order
    torch.testing.assert_close(engine, own, rtol=0, atol=tol)
    torch.testing.assert_close(engine_no_grad, own, rtol=0, atol=tol)


@pytest.mark.parametrize("arch", ["gemma2", "gpt_oss"])
def test_softcap_and_sinks_matter_in_these_models(arch, ids12, monkeypatch) -> None:
    # the regression: the engine's attention ignored soft-capping and sinks
    model = tiny(arch)
    own = model(ids12).logits
    spec = NoiseSpec(scale=0.05, ops=ATTENTION, phases="backward")
    kw = "softcap" if arch == "gemma2" else "s_aux"
    original = attention.noisy_attention_forward

    def without_variant(*args, **kwargs):
        kwargs.pop(kw, None)
        return original(*args, **kwargs)

    from transformers import AttentionInterface

    # registered first: if this test registered it under the patch, the undo would delete the
    # name while the module still believes it registered, and every later test would fail
    attention.register()
    monkeypatch.setitem(AttentionInterface._global_mapping, attention.NAME, without_variant)
    monkeypatch.setattr(attention, "_self_check", lambda *a, **k: None)
    with inject(model, spec, verify=False):
        dropped = model(ids12).logits
    assert (dropped - own).abs().max() > 1e-2


@pytest.mark.parametrize("arch", ["gemma2", "gpt_oss", "mistral", "llama", "qwen2", "gpt2"])
def test_forward_noise_reaches_every_attention_op(arch, ids12) -> None:
    model = tiny(arch)
    clean = model(ids12).logits
    with inject(model, NoiseSpec(scale=0.05, ops=ATTENTION, seed=1)) as s:
        noisy = model(ids12).logits
    st = s.stats
    assert set(st["op"]) == set(ATTENTION) and set(st["layer"]) == {0, 1}
    # one injection per product, layer and forward (GPT-OSS's router adds a softmax)
    assert (st[st.op != "softmax"]["count"] == 1).all()
    assert (st[st.op == "softmax"]["count"] == (2 if arch == "gpt_oss" else 1)).all()
    assert ((st["rms_noise_ratio"] > 0.03) & (st["rms_noise_ratio"] < 0.07)).all(), st
    assert not torch.equal(noisy, clean)


# --- item 4: probability noise respects the mask ---------------------------------------------


@pytest.mark.parametrize("grad", [True, False], ids=["autograd", "no_grad (in place)"])
@pytest.mark.parametrize("block_elements", [None, 64], ids=["one block", "blocks of 2 rows"])
@pytest.mark.parametrize("kind", ["absolute_gaussian", "relative_gaussian", "systematic_bias"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_softmax_noise_keeps_causality(make_qwen, attn, kind, block_elements, grad, monkeypatch) -> None:
    if block_elements is not None:
        monkeypatch.setattr(attention, "BLOCK_ELEMENTS", block_elements)
    model = make_qwen(attn)
    ids = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(3))
    changed = ids.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 64  # perturb the future of position 5
    spec = NoiseSpec(scale=0.05, kind=kind, ops=["softmax"], seed=2)
    with torch.set_grad_enabled(grad), inject(model, spec):
        a = model(ids).logits
    with torch.set_grad_enabled(grad), inject(model, spec):
        b = model(changed).logits
    assert torch.equal(a[:, :6], b[:, :6])  # same noise, no leak from future tokens
    assert not torch.equal(a[:, 6:], b[:, 6:])


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_softmax_noise_keeps_padding_out(make_qwen, attn) -> None:
    model = make_qwen(attn)
    ids = torch.randint(1, 64, (2, 8), generator=torch.Generator().manual_seed(4))
    pad = torch.ones_like(ids)
    pad[0, :3] = 0  # left padding on the first row
    other = ids.clone()
    other[0, :3] = (other[0, :3] + 7) % 64  # different tokens under the padding
    spec = NoiseSpec(scale=0.05, kind="absolute_gaussian", ops=["softmax"], seed=5)
    with inject(model, spec):
        a = model(ids, attention_mask=pad).logits
    with inject(model, spec):
        b = model(other, attention_mask=pad).logits
    assert torch.equal(a[0, 3:], b[0, 3:]) and torch.equal(a[1], b[1])


def test_probabilities_are_exactly_zero_where_masked() -> None:
    class _S:  # the session's forward noise only: an absolute error everywhere
        def forward_noise(self, y, layer, op, scale, *, count=True):
            return y + scale

    p = torch.softmax(torch.randn(1, 1, 4, 4).masked_fill(~torch.ones(4, 4, dtype=torch.bool).tril(), -1e30), -1)
    hidden = torch.ones(4, 4, dtype=torch.bool).triu(1)
    noisy = attention._noisy_probs(_S(), p.clone(), hidden, 0, True, 0, 0.1, True)  # type: ignore[arg-type]
    assert torch.equal(noisy[..., hidden], torch.zeros_like(noisy[..., hidden]))
    assert torch.allclose(noisy[..., ~hidden], p[..., ~hidden] + 0.1)


# --- item 15: blocked computation and the sdpa path ------------------------------------------


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_blocked_path_matches_one_block(make_qwen, attn, monkeypatch) -> None:
    model = make_qwen(attn)
    ids = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(6))
    own = model(ids).logits
    spec = NoiseSpec(scale=0.05, ops=ATTENTION, phases="backward")
    monkeypatch.setattr(attention, "BLOCK_ELEMENTS", 4 * 24 * 4)  # blocks of 4 query rows
    assert attention.block_rows(8, 24, 24) == 16 and attention.block_rows(2 * 4, 24, 24) < 24
    with torch.no_grad(), inject(model, spec, verify=False):
        blocked = model(ids).logits
    torch.testing.assert_close(blocked, own, rtol=1e-5, atol=1e-6)
    with inject(model, NoiseSpec(scale=0.05, ops=ATTENTION, phases="both", seed=1)) as s:
        model.train()
        model(ids, labels=ids).loss.backward()
    st = s.stats
    fwd = st[st.phase == "forward"]
    assert (fwd["count"] == 1).all()  # one injection per op however many blocks
    assert ((st["rms_noise_ratio"] > 0.03) & (st["rms_noise_ratio"] < 0.07)).all(), st


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("ops", [["attention_scores"], ["softmax"], ATTENTION, "matmul_only"])
def test_in_place_noisy_attention_is_bitwise_the_tracked_one(make_qwen, dtype, ops, monkeypatch) -> None:
    # no_grad: scores and probabilities in reused buffers, softmax in place, fused chunked
    # noise (bf16/fp16: float32, one rounding), the diagonal mask only; autograd: out of
    # place, whole masks, unfused noise
    model = make_qwen("sdpa").to(dtype)
    ids = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(6))
    monkeypatch.setattr(attention, "BLOCK_ELEMENTS", 4 * 24 * 4)  # blocks of 4 query rows
    spec = NoiseSpec(scale=0.05, ops=ops, seed=3)
    with torch.no_grad(), inject(model, spec) as s1:
        in_place = model(ids).logits
    with inject(model, spec) as s2:
        tracked = model(ids).logits
    assert tracked.requires_grad and torch.equal(in_place, tracked.detach())
    assert s1.stats["count"].tolist() == s2.stats["count"].tolist()
    assert s1.stats["rms_noise_ratio"].to_numpy() == pytest.approx(
        s2.stats["rms_noise_ratio"].to_numpy(), rel=1e-4)


@pytest.mark.parametrize("grad", [True, False], ids=["autograd", "no_grad (in place)"])
def test_power_of_two_scaling_on_queries_is_bitwise_the_models_own(grad, ids12, monkeypatch) -> None:
    import transformers as tf

    # head_dim 16: scaling 1/4 goes on Q once instead of on every block of scores
    cfg = tf.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(cfg).eval()
    assert model.model.layers[0].self_attn.scaling == 0.25
    assert attention._power_of_two(0.25) and not attention._power_of_two(8 ** -0.5)
    own = model(ids12).logits
    monkeypatch.setattr(attention, "BLOCK_ELEMENTS", 2 * 4 * 12 * 4)  # blocks of 4 query rows
    with torch.set_grad_enabled(grad), inject(model, NoiseSpec(scale=0.05, ops=ATTENTION,
                                                               phases="backward"), verify=False):
        engine = model(ids12).logits
    assert torch.equal(engine, own)


def test_block_rows_depend_on_shapes_only() -> None:
    assert attention.block_rows(4, 128, 128) == 128  # small: one block
    rows = attention.block_rows(4, 8192, 8192)
    assert rows * 4 * 8192 <= attention.BLOCK_ELEMENTS and rows & (rows - 1) == 0


def test_attention_output_noise_keeps_sdpa(make_qwen, ids, monkeypatch) -> None:
    model = make_qwen("sdpa")
    calls = {"sdpa": 0, "blocked": 0}
    import torch.nn.functional as F

    real_sdpa, real_blocked = F.scaled_dot_product_attention, attention._blocked

    def count_sdpa(*a, **k):
        calls["sdpa"] += 1
        return real_sdpa(*a, **k)

    def count_blocked(*a, **k):
        calls["blocked"] += 1
        return real_blocked(*a, **k)

    monkeypatch.setattr(F, "scaled_dot_product_attention", count_sdpa)
    monkeypatch.setattr(attention, "_blocked", count_blocked)
    with inject(model, NoiseSpec(scale=0.05, ops=["attention_output"])) as s:
        model(ids)
    assert calls == {"sdpa": 3, "blocked": 0} and s.count(op="attention_output") == 3
    assert s.stats["rms_noise_ratio"].between(0.03, 0.07).all()
    with inject(model, NoiseSpec(scale=0.05, ops=["softmax"])):
        model(ids)
    assert calls["blocked"] == 3  # probabilities need the eager path


def test_layers_without_noise_keep_the_models_attention(make_qwen, ids) -> None:
    model = make_qwen("sdpa")
    clean = model(ids).logits
    with inject(model, NoiseSpec(scale=0.05, ops=["softmax"], layers=[2], phases="backward"), verify=False):
        out = model(ids).logits  # layers 0 and 1: sdpa itself; layer 2: the eager path
    torch.testing.assert_close(out, clean, rtol=0, atol=1e-6)


# --- refusing what cannot be reproduced --------------------------------------------------------


def test_refuses_a_position_bias_model_at_inject() -> None:
    import transformers as tf

    cfg = tf.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4)
    model = tf.T5ForConditionalGeneration(cfg)
    # refused before any attention runs: T5 computes attention (with its position bias) in
    # its own code, outside transformers' AttentionInterface
    with pytest.raises(InputError, match=r"T5ForConditionalGeneration computes attention in "
                                         r"its own code"):
        inject(model, NoiseSpec(scale=0.05, ops=["softmax"]))
    inject(model, NoiseSpec(scale=0.05, ops=["linear"]))  # other ops are fine


def test_self_check_refuses_an_unknown_variant(make_qwen, ids, monkeypatch) -> None:
    import sys

    model = make_qwen("eager")
    module = sys.modules[type(model.model.layers[0].self_attn).__module__]
    original = module.eager_attention_forward

    def doubled_scores(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kw):
        return original(module, query, key, value, attention_mask, scaling=2 * scaling,
                        dropout=dropout, **kw)

    monkeypatch.setattr(module, "eager_attention_forward", doubled_scores)
    monkeypatch.setattr(attention, "_CHECKED", {})
    with pytest.raises(UnsupportedAttentionError, match="differs from the model's own"):
        with inject(model, NoiseSpec(scale=0.05, ops=["softmax"])):
            model(ids)
    assert model.config._attn_implementation == "eager"  # restored after the refusal
