"""Model coverage: every matrix product of many transformers architectures, the layer list
of hybrid and vision-language models, calls of the base model, and verification edge cases.

The reference for "every matrix product" is a clean forward under a TorchFunctionMode that
counts each call of a product function (``F.linear``, ``addmm``, ``matmul``, ``bmm``,
``baddbmm``, ``einsum``, ``_grouped_mm``, ...; sdpa counts as its two products), with eager
attention. Under ``matmul_only`` the session must inject exactly that many products.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from robuststats.engine import InjectionVerificationError, NoiseSpec, inject
from robuststats.engine._model_map import build_model_map
from robuststats.engine._products import PRODUCT_NAMES
from robuststats.errors import InputError
from tests.engine.conftest import set_checkpointing

transformers = pytest.importorskip("transformers")

COMMON = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              pad_token_id=0, bos_token_id=1, eos_token_id=2)
MAMBA2 = dict(mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=1, mamba_d_state=4,
              mamba_chunk_size=8)
# model_type → config overrides; tiny sizes, one forward takes milliseconds
ARCHS: dict[str, dict] = {
    "llama": {}, "mistral": {}, "qwen2": {}, "qwen3": dict(head_dim=8),
    "gemma": dict(head_dim=8), "gemma2": dict(head_dim=8), "gemma3_text": dict(head_dim=8),
    "phi3": {}, "phi": {}, "gpt_neox": {},
    "gpt2": dict(n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0),
    "opt": dict(ffn_dim=64, word_embed_proj_dim=32),
    "falcon": dict(new_decoder_architecture=True, num_kv_heads=2),
    "bloom": dict(n_head=4), "olmo2": {}, "starcoder2": {}, "stablelm": {}, "granite": {},
    "cohere": {}, "glm": dict(head_dim=8), "gptj": dict(n_positions=64, rotary_dim=4),
    "gpt_bigcode": dict(n_positions=64), "xglm": {},
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2),
    "qwen2_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                      shared_expert_intermediate_size=32),
    "qwen3_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                      head_dim=8),
    "olmoe": dict(num_experts=4, num_experts_per_tok=2),
    "gpt_oss": dict(num_local_experts=4, num_experts_per_tok=2, head_dim=8,
                    layer_types=["sliding_attention", "full_attention"]),
    "deepseek_v3": dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                        q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=4,
                        qk_nope_head_dim=4, v_head_dim=8, head_dim=4, first_k_dense_replace=1,
                        n_group=1, topk_group=1, num_key_value_heads=4),
    "jamba": dict(num_hidden_layers=4, attn_layer_period=2, attn_layer_offset=1,
                  expert_layer_period=2, expert_layer_offset=1, num_experts=2,
                  mamba_d_state=4, mamba_dt_rank=4),
    "bamba": dict(num_hidden_layers=3, attn_layer_indices=[1], **MAMBA2),
    "granitemoehybrid": dict(layer_types=["mamba", "attention"], num_local_experts=2,
                             num_experts_per_tok=1, **MAMBA2),
    "lfm2": dict(num_hidden_layers=3, layer_types=["conv", "full_attention", "conv"]),
}
# the named architectures of the coverage items run in the default suite; the rest of
# the sweep is marked slow
FAST = {"llama", "gpt2", "falcon", "bloom", "qwen2_moe", "qwen3_moe", "mixtral", "jamba",
        "bamba", "granitemoehybrid"}


def tiny_lm(arch: str, attn: str = "eager", seed: int = 0) -> nn.Module:
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(arch, **{**COMMON, **ARCHS[arch]})
    cfg._attn_implementation = attn
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoModelForCausalLM.from_config(cfg).eval()


class ProductCounter(TorchFunctionMode):
    """Counts top-level calls of matrix-product functions (sdpa counts two)."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = getattr(func, "__name__", "")
        if name in PRODUCT_NAMES:
            self.n += 1
        elif name == "scaled_dot_product_attention":
            self.n += 2
        return func(*args, **(kwargs or {}))


def clean_products(model: nn.Module, ids: torch.Tensor) -> int:
    with torch.no_grad(), ProductCounter() as c:
        model(ids)
    return c.n


PRODUCT_OPS = ("linear", "matmul", "bmm", "attention_scores", "attention_output")


def injected_products(s) -> int:
    return sum(s.count(op=op, phase="forward") for op in PRODUCT_OPS)


@pytest.mark.parametrize(
    "arch", [a if a in FAST else pytest.param(a, marks=pytest.mark.slow) for a in ARCHS]
)
def test_matmul_only_injects_every_product(arch, ids) -> None:
    model = tiny_lm(arch)
    expected = clean_products(model, ids)
    if model._supports_attention_backend:
        model.config._attn_implementation = "sdpa"  # the engine must also see through sdpa
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05)) as s:
        model(ids)
    assert injected_products(s) == expected
    assert s.count(op="linear", phase="forward") > 0


@pytest.mark.parametrize("arch", ["gpt2", "qwen2_moe"])
def test_products_get_backward_noise(arch, ids) -> None:
    model = tiny_lm(arch)
    model.train()
    with inject(model, NoiseSpec(scale=0.05, phases="both")) as s:
        model(ids, labels=ids).loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    assert s.count(op="linear", phase="backward") > 0


def test_gpt2_conv1d_is_a_linear_op(ids) -> None:
    # 4 Conv1D per block (c_attn, c_proj, c_fc, mlp.c_proj) × 2 blocks + lm_head = 9 of
    # GPT-2's 13 products; the seeds' engine reached only lm_head
    model = tiny_lm("gpt2")
    model.train()
    with inject(model, NoiseSpec(scale=0.05, ops=["linear"], phases="backward")) as s:
        model(ids, labels=ids).loss.backward()
    assert s.count(op="linear", phase="backward") == 2 * 9  # grad_input and grad_weight each
    assert s.count(op="linear", phase="backward", layer=0) == 2 * 4
    clean = model(ids).logits
    spec = NoiseSpec(scale=0.05, ops=["linear"], layer_scales={"lm_head": 0.0})
    with inject(model, spec) as s:
        noisy = model(ids).logits
    assert s.count(op="linear") == 8 and not torch.equal(clean, noisy)


@pytest.mark.parametrize("arch", ["qwen2_moe", "qwen3_moe"])
@pytest.mark.parametrize("impl", ["eager", "batched_mm", "grouped_mm"])
def test_moe_experts_reached_in_every_implementation(arch, impl, ids) -> None:
    model = tiny_lm(arch)
    model.set_experts_implementation(impl)
    expected = clean_products(model, ids)
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05)) as s:
        model(ids)
    assert injected_products(s) == expected
    # the experts of layer 0 alone: noise reaches the output through them only
    clean = model(ids).logits
    only = {"model": 0.0, "lm_head": 0.0, "model.layers.0.mlp.experts": 1.0}
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, layer_scales=only)) as s:
        noisy = model(ids).logits
    assert set(s.stats["layer"]) == {0} and set(s.stats["op"]) == {"linear"}
    assert not torch.equal(clean, noisy)
    # and the router: one F.linear per forward
    router = {"model": 0.0, "lm_head": 0.0, "model.layers.0.mlp.gate": 1.0}
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, layer_scales=router)) as s:
        model(ids)
    assert s.count() == 1


def test_expert_weights_get_gradient_noise(ids) -> None:
    model = tiny_lm("qwen3_moe")
    model.train()
    w = model.model.layers[1].mlp.experts.gate_up_proj
    model(ids, labels=ids).loss.backward()
    clean = w.grad.clone()
    model.zero_grad()
    spec = NoiseSpec(scale=0.05, ops=["linear"], phases="backward", layers=[1])
    with inject(model, spec) as s:
        model(ids, labels=ids).loss.backward()
    assert not torch.equal(clean, w.grad) and torch.isfinite(w.grad).all()
    assert (s.count(layer=1) > 0) and set(s.stats["layer"]) == {1}


class _MHANet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.attn(x, x, x, need_weights=False)[0])


@pytest.mark.parametrize("ops", ["matmul_only", ["linear"]])
def test_multihead_attention_is_refused_before_it_runs(ops) -> None:
    # nn.MultiheadAttention multiplies its weights inside F.multi_head_attention_forward,
    # out of the engine's sight: refused when the session opens, naming the module and
    # the ways out
    net = _MHANet()
    x = torch.randn(2, 5, 16)
    ran = []
    net.register_forward_pre_hook(lambda *a: ran.append(1))
    with pytest.raises(InputError, match=r"nn.MultiheadAttention at module 'attn' computes its "
                                         r"matrix products inside F.multi_head_attention_forward.*"
                                         r"layer_scales=\{'attn': 0\}"):
        with torch.no_grad(), inject(net, NoiseSpec(scale=0.05, ops=ops)):
            net(x)
    assert not ran  # refused before the model ran
    with torch.no_grad(), inject(net, NoiseSpec(scale=0.05, ops=ops,
                                                layer_scales={"attn": 0})) as s:
        net(x)  # switched off: the head alone gets noise
    assert s.count(op="linear") == 1
    with torch.no_grad(), inject(net, NoiseSpec(scale=0.05, ops=ops), verify=False) as s:
        net(x)  # accepted deliberately: nothing in the attention block is injected
    assert s.count(op="linear") == 1


def test_weights_hidden_in_an_opaque_call_fail_verification() -> None:
    # a weight that goes into an aten op called directly: its product is out of sight
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(16, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.aten.mm.default(x, self.w)

    net = Net()
    with pytest.raises(InjectionVerificationError,
                       match=r"op 'linear' at module '' \(its weights went into mm.default, "
                             r"whose matrix products the engine cannot reach"):
        with torch.no_grad(), inject(net, NoiseSpec(scale=0.05, ops=["linear"])):
            net(torch.randn(2, 16))


def test_model_computing_attention_itself_under_sdpa_is_refused(ids) -> None:
    model = tiny_lm("falcon", attn="sdpa")
    with pytest.raises(InputError, match=r"FalconForCausalLM computes attention with 'sdpa' "
                                         r"in its own code"):
        inject(model, NoiseSpec(scale=0.05))
    with pytest.raises(InputError, match=r"`ops` requests \['attention_scores'\], but "
                                         r"FalconForCausalLM computes attention"):
        inject(model, NoiseSpec(scale=0.05, ops=["attention_scores", "linear"]))
    with inject(model, NoiseSpec(scale=0.05, ops=["linear"])) as s:  # no attention op: fine
        model(ids)
    # FalconLinear computes x @ W.T: one linear injection, not a second one as 'matmul'
    assert s.count(op="linear") == 9 and s.count(op="matmul") == 0


# --- layer lists -------------------------------------------------------------------------


def test_hybrid_layer_list_mixes_classes() -> None:
    model = tiny_lm("jamba")
    mm = build_model_map(model)
    assert mm.layer_prefix == "model.layers" and mm.n_layers == 4
    assert {type(m).__name__ for m in mm.layer_modules} == {
        "JambaAttentionDecoderLayer", "JambaMambaDecoderLayer"}


@pytest.mark.parametrize("arch", ["jamba", "qwen2_moe", "gpt2"])
def test_gradient_checkpointing_replays_noise(arch, ids) -> None:
    # Jamba: without a layer list the recompute drew fresh noise, a 60 % gradient error
    # visible only in session.unreplayed. MoE experts and Conv1D: product modules are
    # recomputed under their own mode and must replay too.
    model = tiny_lm(arch)
    model.train()
    spec = NoiseSpec(scale=0.05, phases="both", seed=3)

    def grads(checkpointing: bool):
        set_checkpointing(model, checkpointing)
        with inject(model, spec) as s:
            model(ids, labels=ids).loss.backward()
        return [p.grad.clone() for p in model.parameters() if p.grad is not None], s

    g1, s1 = grads(True)
    g0, s0 = grads(False)
    assert s1.unreplayed == 0
    # equal up to round-off: on some CPUs GPT-2's recomputed backward differs from the plain
    # one by ~1e-7 relative even without noise (scale 0: max 6e-8 on gradients of 0.57);
    # noise drawn afresh in the recompute differs by 5–60 %
    assert len(g0) == len(g1)
    for a, b in zip(g0, g1):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
    # the counts are equal; the measured noise ratio of a backward product carries the same
    # round-off as its gradient
    numeric = ["rms_noise_ratio"]
    assert s0.stats.drop(columns=numeric).equals(s1.stats.drop(columns=numeric))
    np.testing.assert_allclose(s1.stats[numeric].to_numpy(float),
                               s0.stats[numeric].to_numpy(float), rtol=1e-5)


def _tiny_vlm(kind: str) -> nn.Module:
    from transformers import AutoConfig, AutoModelForImageTextToText

    text = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                num_attention_heads=4, num_key_value_heads=2, head_dim=8)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, image_size=8, patch_size=4)
    cfgs = {
        "qwen2_vl": dict(
            text_config=dict(model_type="qwen2_vl_text", **text, rope_parameters={
                "rope_type": "default", "mrope_section": [1, 1, 2], "rope_theta": 1e4}),
            vision_config=dict(depth=2, embed_dim=32, hidden_size=32, num_heads=4,
                               mlp_ratio=2, patch_size=2, temporal_patch_size=1,
                               spatial_merge_size=1)),
        "llava": dict(text_config=dict(model_type="llama", **text),
                      vision_config=dict(model_type="clip_vision_model", projection_dim=32,
                                         **vision)),
        "gemma3": dict(text_config=dict(model_type="gemma3_text", **text),
                       vision_config=dict(model_type="siglip_vision_model", **vision),
                       mm_tokens_per_image=4),
    }
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = AutoConfig.for_model(kind, **cfgs[kind])
        return AutoModelForImageTextToText.from_config(cfg).eval()


@pytest.mark.parametrize("kind", ["qwen2_vl", "llava", "gemma3"])
def test_vision_language_model_uses_the_language_layers(kind) -> None:
    model = _tiny_vlm(kind)
    mm = build_model_map(model)
    # two vision blocks, three language layers: the layers are the language model's
    assert mm.layer_prefix == "model.language_model.layers" and mm.n_layers == 3
    vision = [n for n in mm.names.values() if "vision" in n or "visual" in n]
    assert vision and all(mm.layer_of[id(m)] == -1
                          for m, n in ((m, n) for n, m in model.named_modules()) if n in vision)
    ids = torch.randint(3, 100, (2, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, layers=[2])) as s:
        model(input_ids=ids)
    assert set(s.stats["layer"]) == {2}


# --- calling the base model --------------------------------------------------------------


def test_calling_the_base_model_is_a_forward(ids, make_qwen) -> None:
    model = make_qwen()
    with inject(model, NoiseSpec(scale=0.05, ops="all_ops")) as s:
        model.model(ids)
    assert s.forward_calls == 1
    assert s.count(op="linear") == 21  # 7 per layer; lm_head is not part of model.model
    with pytest.raises(InjectionVerificationError, match=r"op 'gelu' in forward"):
        with inject(model, NoiseSpec(scale=0.05, ops=["gelu", "linear"])):
            model.model(ids)
    with inject(model, NoiseSpec(scale=0.05)) as s:  # the wrapper still counts once
        model(ids)
    assert s.forward_calls == 1


def test_calling_the_language_model_of_a_vlm_is_a_forward() -> None:
    model = _tiny_vlm("llava")
    ids = torch.randint(3, 100, (2, 8), generator=torch.Generator().manual_seed(0))
    with pytest.raises(InjectionVerificationError, match=r"op 'gelu' in forward"):
        with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops=["gelu", "linear"])):
            model.model.language_model(input_ids=ids)


# --- verification edge cases -------------------------------------------------------------


def test_sequential_with_parameterless_layer_verifies() -> None:
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(3, 8, requires_grad=True)
    for ops in ("matmul_only", "all_ops", ["linear"]):
        with inject(net, NoiseSpec(scale=0.05, ops=ops, phases="both")) as s:
            net(x).sum().backward()
        assert set(s.stats["layer"]) == {0, 2}


def test_zero_module_multipliers_do_not_require_the_layer(ids, make_qwen) -> None:
    model = make_qwen()
    off = {f"model.layers.1.{m}": 0.0 for m in ("self_attn", "mlp")}
    with inject(model, NoiseSpec(scale=0.05, ops=["linear"], layer_scales=off)) as s:
        model(ids)
    assert 1 not in set(s.stats["layer"]) and {0, 2, -1} <= set(s.stats["layer"])
    # with the preset too (the attention ops are anchored at model.layers.1.self_attn)
    with inject(model, NoiseSpec(scale=0.05, layer_scales=off)) as s:
        model(ids)
    assert 1 not in set(s.stats["layer"])
    # a layer still partly on is still required
    half = {"model.layers.1.mlp": 0.0}
    with pytest.raises(InjectionVerificationError, match=r"layer 1 in forward"):
        with inject(model, NoiseSpec(scale=0.05, ops=["linear"], layer_scales=half)):
            model.model.layers[1].forward = lambda h, *a, **k: h  # layer 1 is skipped
            try:
                model(ids)
            finally:
                del model.model.layers[1].forward


def test_sdpa_called_by_the_model_itself_fails_verification() -> None:
    # a plain torch model whose attention is F.scaled_dot_product_attention: its two
    # products cannot be reached, and matmul_only promises them
    class Attn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(16, 48)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    net = nn.Sequential(Attn(), Attn())
    x = torch.randn(2, 5, 16)
    with pytest.raises(InjectionVerificationError,
                       match=r"op 'attention_scores' in F.scaled_dot_product_attention "
                             r"\(layer 0\)"):
        with torch.no_grad(), inject(net, NoiseSpec(scale=0.05)):
            net(x)
    # attention products not requested: nothing is hidden from this spec
    spec = NoiseSpec(scale=0.05, ops=["linear", "matmul"])
    with torch.no_grad(), inject(net, spec, verify=False) as s:
        net(x)
    assert s.count(op="linear") == 2 and s.blind == {}


def test_model_inside_a_plain_wrapper(ids, make_qwen) -> None:
    # a value-head wrapper (as RL libraries build): same layers, attention still switched
    class ValueHead(nn.Module):
        def __init__(self, lm: nn.Module) -> None:
            super().__init__()
            self.pretrained_model = lm
            self.v_head = nn.Linear(32, 1)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            out = self.pretrained_model(ids, output_hidden_states=True)
            return self.v_head(out.hidden_states[-1])

    net = ValueHead(make_qwen("sdpa"))
    mm = build_model_map(net)
    assert mm.layer_prefix == "pretrained_model.model.layers" and mm.attention_backend
    with torch.no_grad(), inject(net, NoiseSpec(scale=0.05)) as s:
        net(ids)
    assert s.count(op="attention_scores") == 3 and s.count(op="linear") == 23
    assert net.pretrained_model.config._attn_implementation == "sdpa"


@pytest.mark.parametrize(("arch", "n_matmul"), [("gpt2", 4), ("falcon", 4)])
def test_weight_products_are_never_booked_as_matmul(arch, n_matmul, ids) -> None:
    # GPT-2's Conv1D (addmm) and FalconLinear (x @ W.T) multiply weights: `linear`, never
    # `matmul`, also when only `matmul` is requested (then they stay clean)
    model = tiny_lm(arch)
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops=["matmul"])) as s:
        model(ids)
    assert s.count(op="matmul") == n_matmul and s.count(op="linear") == 0
    off = {"lm_head": 0.0, "transformer.h.0": 0.0}
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, layer_scales=off)) as s:
        model(ids)
    # layer 1: 4 weight products and the 2 attention products, each once
    assert s.count(layer=0) == 0 and s.count(layer=1) == 6
    assert s.count(op="linear", layer=1) == 4


def test_batched_experts_are_never_booked_as_bmm(ids) -> None:
    model = tiny_lm("qwen2_moe")
    model.set_experts_implementation("batched_mm")
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops=["bmm"]), verify=False) as s:
        out = model(ids).logits
    assert s.count() == 0 and torch.equal(out, model(ids).logits)


@pytest.mark.parametrize("early_stop", [True, False])
def test_two_checkpointed_forwards_then_one_backward(early_stop, ids, make_qwen) -> None:
    # with torch's early stop a recompute ends before its forward's last draws; the replay
    # of the next recompute used to continue the previous record (gradients ~10 % off)
    import torch.utils.checkpoint as cp

    model = make_qwen("eager", layers=2).train()
    other = torch.randint(0, 64, ids.shape, generator=torch.Generator().manual_seed(2))
    spec = NoiseSpec(scale=0.05, phases="both", seed=3)

    def grads(checkpointing: bool):
        set_checkpointing(model, checkpointing)
        with cp.set_checkpoint_early_stop(early_stop), inject(model, spec) as s:
            loss = model(ids, labels=ids).loss + model(other, labels=other).loss
            loss.backward()
        return [p.grad.clone() for p in model.parameters() if p.grad is not None], s

    g1, s1 = grads(True)
    g0, s0 = grads(False)
    assert s1.unreplayed == 0 and len(g0) == len(g1)
    for a, b in zip(g0, g1):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)
    assert s0.stats["count"].equals(s1.stats["count"])
