"""The coverage rule: every module derived from a linear, convolution or normalization base,
and every product inside a layer, is injected and counted or named as unreached.

Attacked on tiny models built from transformers configs (no downloads): routers that
subclass ``nn.Linear`` and return tuples (PhiMoE, Llama 4), Mamba's ``dt_proj`` whose weight
the mixer multiplies itself, gated RMSNorms (Mamba-2, Bamba), tanh- and sigmoid-formula GELU
modules (Bloom, GPT-Neo, CodeGen, CLIP), functional ops outside the decoder layers (T5,
Whisper, BERT's MLM head), more MoE routers, a convolutional and two vision models.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from robuststats.engine import InjectionVerificationError, NoiseSpec, inject
from robuststats.engine._model_map import build_model_map
from tests.engine.test_architectures import COMMON, clean_products, injected_products

transformers = pytest.importorskip("transformers")

ARCHS: dict[str, dict] = {
    "phimoe": dict(num_local_experts=4, num_experts_per_tok=2),
    "llama4_text": dict(num_local_experts=4, num_experts_per_tok=1, head_dim=8,
                        intermediate_size_mlp=64, interleave_moe_layer_step=1,
                        no_rope_layers=[1, 1]),
    "mamba": dict(state_size=4, time_step_rank=4, expand=2, conv_kernel=4),
    "falcon_mamba": dict(state_size=4, time_step_rank=4, expand=2, conv_kernel=4),
    "mamba2": dict(num_heads=4, head_dim=16, n_groups=1, state_size=4, chunk_size=8, expand=2),
    "bamba": dict(num_hidden_layers=3, attn_layer_indices=[1], mamba_n_heads=4,
                  mamba_d_head=16, mamba_n_groups=1, mamba_d_state=4, mamba_chunk_size=8),
    "bloom": dict(n_head=4),
    "gpt_neo": dict(num_layers=2, attention_types=[[["global", "local"], 1]], num_heads=4,
                    window_size=8),
    "codegen": dict(n_layer=2, n_head=4, n_embd=32, rotary_dim=4, n_positions=64, n_ctx=64),
    # more MoE routers (gating modules around an nn.Linear, sigmoid routers, shared experts)
    "granitemoe": dict(num_local_experts=4, num_experts_per_tok=2),
    "jetmoe": dict(num_local_experts=4, num_experts_per_tok=2, kv_channels=8,
                   num_key_value_heads=4),
    "glm4_moe": dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                     first_k_dense_replace=0, n_group=1, topk_group=1, head_dim=8),
    "qwen3_next": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                       shared_expert_intermediate_size=16, head_dim=8,
                       linear_num_value_heads=4, linear_num_key_heads=2,
                       linear_key_head_dim=8, linear_value_head_dim=8,
                       layer_types=["linear_attention", "full_attention"]),
}
# the sweep is slow (13 architectures × 4 forwards); the named items have fast tests below
FAST: set[str] = set()


def tiny(arch: str) -> nn.Module:
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(arch, **{**COMMON, **ARCHS[arch]})
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoModelForCausalLM.from_config(cfg).eval()


def _param(arch: str):  # type: ignore[no-untyped-def]
    return arch if arch in FAST else pytest.param(arch, marks=pytest.mark.slow)


def _linear_like(model: nn.Module) -> list[str]:
    """Names of the modules whose class derives from a linear or convolution base."""
    return [n for n, m in model.named_modules()
            if isinstance(m, (nn.Linear, nn.modules.conv._ConvNd))]


@pytest.mark.parametrize("arch", [_param(a) for a in ARCHS])
def test_every_product_and_every_linear_is_injected(arch, ids) -> None:
    model = tiny(arch)
    expected = clean_products(model, ids)
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05)) as s:
        model(ids)
    assert injected_products(s) == expected
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops=["linear"])) as s:
        model(ids)
    # every linear-like module is reached once in this forward (MoE experts, whose stacked
    # weights run once per routed expert, are product modules and counted in `expected`)
    assert s.count(op="linear") >= len(_linear_like(model))
    assert set(_linear_like(model)) <= s.reached
    mm = build_model_map(model)
    calls = [0]
    hooks = [m.register_forward_hook(lambda *a: calls.__setitem__(0, calls[0] + 1))
             for m in mm.norm_modules]
    with torch.no_grad():
        model(ids)
    for h in hooks:
        h.remove()
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops="all_ops")) as s:
        model(ids)
    norms = sum(s.count(op=op) for op in ("rms_norm", "layer_norm"))
    assert norms == calls[0] >= len(mm.norm_modules)  # every call of every norm module
    names = {type(m).__name__ for m in model.modules()}
    assert {n for n in names if "Norm" in n} <= {type(m).__name__ for m in mm.norm_modules}


@pytest.mark.parametrize(("arch", "router"), [("phimoe", "model.layers.0.mlp.router"),
                                              ("llama4_text", "model.layers.0.feed_forward.router")])
def test_routers_subclassing_linear_are_linear_ops(arch, router, ids) -> None:
    # PhimoeTopKRouter and Llama4Router derive from nn.Linear and return tuples: they ran
    # clean and uncounted, and verification passed
    model = tiny(arch)
    mm = build_model_map(model)
    assert router in {mm.names[id(m)] for m in mm.product_modules}
    counts = []
    for mult in (1.0, 0.0):
        with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops=["linear"],
                                                      layer_scales={router: mult})) as s:
            model(ids)
        counts.append(s.count(op="linear"))
    assert counts[0] == counts[1] + 1


@pytest.mark.parametrize("arch", ["mamba", pytest.param("falcon_mamba", marks=pytest.mark.slow)])
def test_mamba_dt_proj_weight_product_is_its_linear_op(arch, ids) -> None:
    # the mixer computes `self.dt_proj.weight @ time_step`: dt_proj's forward never runs
    model = tiny(arch)
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    only_dt = {n: 0.0 for n in names if not n.endswith("dt_proj")}
    only_dt.update({n: 0.0 for n, m in model.named_modules()
                    if isinstance(m, nn.Conv1d)})
    with torch.no_grad():
        clean = model(ids).logits
        with inject(model, NoiseSpec(scale=0.05, ops=["linear"], layer_scales=only_dt)) as s:
            noisy = model(ids).logits
        assert s.count(op="linear") == 2 and not torch.equal(noisy, clean)
        # weight-only quantization reaches it as well
        spec = NoiseSpec(scale=1.0, kind="nvfp4", target="weights", ops="linear",
                         layer_scales=only_dt)
        with inject(model, spec) as s:
            quant = model(ids).logits
        assert s.count(op="linear") == 2 and not torch.equal(quant, clean)
        with inject(model, NoiseSpec(scale=0.05)) as s:  # matmul_only: linear, not matmul
            model(ids)
    assert s.count(op="linear") == len(names) + 2  # + 2 depthwise conv1d


@pytest.mark.parametrize(("arch", "gated"), [
    ("mamba2", "MambaRMSNormGated"),
    pytest.param("bamba", "BambaRMSNormGated", marks=pytest.mark.slow)])
def test_gated_rms_norms_are_norms(arch, gated, ids) -> None:
    model = tiny(arch)
    mm = build_model_map(model)
    found = {type(m).__name__ for m in mm.norm_modules}
    assert gated in found and all(mm.norms[id(m)] == "rms_norm" for m in mm.norm_modules)
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops=["rms_norm"])) as s:
        model(ids)
    n_gated = sum(type(m).__name__ == gated for m in model.modules())
    assert n_gated > 0 and s.count(op="rms_norm") == len(mm.norm_modules)


@pytest.mark.parametrize("arch", ["bloom", "gpt_neo", pytest.param("codegen", marks=pytest.mark.slow)])
def test_all_ops_on_tanh_gelu_models(arch, ids) -> None:
    # BloomGelu and NewGELUActivation compute a tanh formula without F.gelu: `all_ops`
    # required gelu and always raised; the activation module's output is the op now
    model = tiny(arch)
    with torch.no_grad():
        clean = model(ids).logits
        with inject(model, NoiseSpec(scale=0.05, ops=["gelu"])) as s:
            noisy = model(ids).logits
    assert s.count(op="gelu") == 2 and not torch.equal(clean, noisy)  # one per layer
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops="all_ops")):
        model(ids)


def test_clip_quick_gelu_and_functional_gelu_counted_once(ids) -> None:
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    model = CLIPTextModel(CLIPTextConfig(
        attn_implementation="eager", vocab_size=64, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64,
        bos_token_id=1, eos_token_id=2)).eval()
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops="all_ops")) as s:
        model(ids)
    assert s.count(op="gelu") == 2
    # nn.GELU calls F.gelu: its hooks inject, the session's mode does not inject it again
    net = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))
    with torch.no_grad(), inject(net, NoiseSpec(scale=0.05, ops=["gelu"]), verify="ops") as s:
        net(torch.randn(2, 8))
    assert s.count(op="gelu") == 1


def _t5() -> nn.Module:
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    return T5ForConditionalGeneration(T5Config(
        attn_implementation="eager", vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2,
        num_heads=4, decoder_start_token_id=0)).eval()


def _whisper() -> nn.Module:
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(0)
    return WhisperForConditionalGeneration(WhisperConfig(
        attn_implementation="eager", vocab_size=64, d_model=32, encoder_layers=2,
        decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=8, max_source_positions=16,
        max_target_positions=32, pad_token_id=0, decoder_start_token_id=1, eos_token_id=2,
        bos_token_id=1)).eval()


def _bert() -> nn.Module:
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    return BertForMaskedLM(BertConfig(
        attn_implementation="eager", vocab_size=64, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)).eval()


def _inputs(kind: str, ids: torch.Tensor) -> dict:
    if kind == "t5":
        return dict(input_ids=ids, decoder_input_ids=ids)
    if kind == "whisper":
        feats = torch.randn(ids.shape[0], 8, 32, generator=torch.Generator().manual_seed(0))
        return dict(input_features=feats, decoder_input_ids=ids[:, :5])
    return dict(input_ids=ids)


@pytest.mark.parametrize("kind", ["t5", pytest.param("whisper", marks=pytest.mark.slow), "bert"])
def test_zero_multipliers_switch_off_functional_ops_outside_layers(kind, ids) -> None:
    model = {"t5": _t5, "whisper": _whisper, "bert": _bert}[kind]()
    inputs = _inputs(kind, ids)
    zero = {n: 0.0 for n, _ in model.named_children()}
    with torch.no_grad():
        clean = model(**inputs).logits
        for ops in ("matmul_only", "all_ops"):
            with inject(model, NoiseSpec(scale=0.05, ops=ops, layer_scales=zero),
                        verify=False) as s:
                off = model(**inputs).logits
            assert torch.equal(off, clean), ops  # T5's encoder matmuls, BERT's head GELU
            assert s.stats.empty
        with inject(model, NoiseSpec(scale=0.05, ops="all_ops")) as s:
            on = model(**inputs).logits
    assert not torch.equal(on, clean)
    assert s.count(layer=-1) > 0


@pytest.mark.slow
def test_outside_functional_ops_are_booked_under_their_module(ids) -> None:
    model = _bert()
    head = "cls.predictions.transform.transform_act_fn"
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops=["gelu"],
                                                  layer_scales={head: 0.0})) as s:
        model(ids)
    assert s.count(layer=-1) == 0 and s.count(op="gelu") == 2  # the two layers' GELUs
    t5 = _t5()
    counts = {}
    for key in ("encoder", "decoder"):
        with torch.no_grad(), inject(t5, NoiseSpec(scale=0.05, ops=["matmul"],
                                                   layer_scales={key: 0.0}),
                                     verify=False) as s:
            t5(**_inputs("t5", ids))
        counts[key] = s.count(op="matmul")
    with torch.no_grad(), inject(t5, NoiseSpec(scale=0.05, ops=["matmul"])) as s:
        t5(**_inputs("t5", ids))
    assert 0 < counts["encoder"] < s.count(op="matmul")
    assert counts["encoder"] + counts["decoder"] == s.count(op="matmul")


@pytest.mark.slow
def test_conv_and_vision_models() -> None:
    from transformers import AutoConfig, AutoModel

    def make(arch: str, **kw) -> nn.Module:  # type: ignore[no-untyped-def]
        cfg = AutoConfig.for_model(arch, **kw)
        cfg._attn_implementation = "eager"
        torch.manual_seed(0)
        return AutoModel.from_config(cfg).eval()

    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    resnet = make("resnet", embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                  layer_type="basic")
    swin = make("swin", embed_dim=8, depths=[1, 1], num_heads=[2, 2], image_size=32,
                patch_size=4, window_size=4)
    for model, norm in [(resnet, nn.BatchNorm2d), (swin, nn.LayerNorm)]:
        expected = clean_products(model, x)
        with torch.no_grad(), inject(model, NoiseSpec(scale=0.05)) as s:
            model(pixel_values=x)
        assert injected_products(s) == expected
        with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops="all_ops")) as s:
            model(pixel_values=x)
        n_norm = sum(isinstance(m, norm) for m in model.modules())
        assert s.count(op="layer_norm") == n_norm  # BatchNorm2d by its base class
    # Swin's relative position bias is a table lookup (a 2-d parameter, no product)
    assert any(n.endswith("relative_position_bias") for n in s.reached)


# ------------------------------------------------------------------ plain torch models
class _Router(nn.Linear):
    """An nn.Linear subclass that returns a tuple (top-1 index and the logits)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        logits = super().forward(x)
        return logits.argmax(-1), logits


class _Block(nn.Module):
    def __init__(self, direct: bool) -> None:
        super().__init__()
        self.router = _Router(8, 4)
        self.proj = nn.Linear(8, 8)
        self.gate = nn.Linear(8, 8)
        self.direct = direct

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, logits = self.router(x)
        h = self.proj(x) * logits.sum(-1, keepdim=True)
        if self.direct:  # the weight reached by a name the source does not spell out
            return h @ self._modules["gate"].weight.T
        return self.gate(h)


class _Net(nn.Module):
    def __init__(self, direct: bool) -> None:
        super().__init__()
        self.layers = nn.ModuleList([_Block(direct), _Block(direct)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def test_linear_subclass_returning_a_tuple_is_counted() -> None:
    net = _Net(direct=False)
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), inject(net, NoiseSpec(scale=0.05, ops=["linear"])) as s:
        net(x)
    assert s.count(op="linear") == 6


def test_unreached_linear_is_named_by_verification() -> None:
    net = _Net(direct=True)
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    with pytest.raises(InjectionVerificationError, match=r"module 'layers\.0\.gate' \(its "
                       r"parent 'layers\.0' ran, but neither its forward nor a product"):
        with torch.no_grad(), inject(net, NoiseSpec(scale=0.05, ops=["linear"])):
            net(x)
    off = {"layers.0.gate": 0, "layers.1.gate": 0}
    with torch.no_grad(), inject(net, NoiseSpec(scale=0.05, ops=["linear"],
                                                layer_scales=off)) as s:
        net(x)
    assert s.count(op="linear") == 4


def test_shared_activation_module_is_booked_in_the_calling_layer() -> None:
    # one GELU at the root, called by every block and by the head: inside a block it
    # belongs to that block's layer (as its F.gelu call did), outside to layer -1
    class Block(nn.Module):
        def __init__(self, act: nn.Module) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.acts = [act]  # not a submodule: the root owns it

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.acts[0](self.fc(x))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.act = nn.GELU()
            self.blocks = nn.ModuleList([Block(self.act), Block(self.act)])
            self.head = nn.Linear(8, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for block in self.blocks:
                x = block(x)
            return self.head(self.act(x))

    net, x = Net(), torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), inject(net, NoiseSpec(scale=0.1, ops=["gelu"], layers=[0])) as s:
        net(x)
    assert s.stats[["layer", "count"]].values.tolist() == [[0, 1]]
    with torch.no_grad(), inject(net, NoiseSpec(scale=0.1, ops=["gelu"])) as s:
        net(x)
    assert s.stats[["layer", "count"]].values.tolist() == [[-1, 1], [0, 1], [1, 1]]
