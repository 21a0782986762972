"""Injection on tiny Qwen2 (sdpa and eager) and on plain torch modules."""

from __future__ import annotations

import pytest
import torch

from robuststats.engine import ALL_OPS, InjectionVerificationError, NoiseSpec, inject
from robuststats.errors import InputError

QWEN_OPS = ["linear", "attention_scores", "softmax", "attention_output", "silu", "rms_norm"]


def _train_step(model, ids, spec, **kw):
    model.zero_grad()
    with inject(model, spec, **kw) as session:
        model(ids, labels=ids).loss.backward()
    return session


@pytest.mark.parametrize("op", QWEN_OPS)
@pytest.mark.parametrize("phases", ["forward", "backward"])
def test_every_op_reached_in_sdpa_and_eager(qwen, ids, op, phases) -> None:
    session = _train_step(qwen, ids, NoiseSpec(scale=0.05, ops=[op], phases=phases))
    st = session.stats
    assert set(st["op"]) == {op}
    assert set(st["phase"]) == {phases}
    layers = set(st["layer"])
    assert {0, 1, 2} <= layers  # every decoder layer got it


def test_matmul_only_reaches_attention_products_under_sdpa(ids, make_qwen) -> None:
    model = make_qwen("sdpa")
    with inject(model, NoiseSpec(scale=0.05)) as s:
        model(ids)
    assert set(s.stats["op"]) == {"linear", "attention_scores", "attention_output"}
    # 7 linears per layer × 3 layers + lm_head, one forward
    assert s.count(op="linear") == 22


def test_forward_only_has_no_backward_injections(qwen, ids) -> None:
    # seed 000 §10 test_forward_only
    s = _train_step(qwen, ids, NoiseSpec(scale=0.05, phases="forward", ops="all_ops"))
    assert s.count(phase="forward") > 0
    assert s.count(phase="backward") == 0


def test_backward_only_has_no_forward_injections(qwen, ids) -> None:
    # seed 000 §10 test_backward_only
    s = _train_step(qwen, ids, NoiseSpec(scale=0.05, phases="backward", ops="all_ops"))
    assert s.count(phase="forward") == 0
    assert s.count(phase="backward") > 0


@pytest.mark.parametrize(
    ("attn", "ops"), [("eager", "all_ops"), ("sdpa", ["linear", "silu", "rms_norm"])]
)
def test_backward_only_leaves_forward_bitwise_clean(ids, make_qwen, attn, ops) -> None:
    # (attention ops switch an sdpa model to the engine's eager attention, which equals
    # sdpa only up to rounding, hence the two cases)
    model = make_qwen(attn)
    clean = model(ids).logits
    with inject(model, NoiseSpec(scale=0.05, phases="backward", ops=ops)):
        noisy = model(ids).logits
    assert torch.equal(clean, noisy)


@pytest.mark.parametrize("kind", ["relative_gaussian", "systematic_bias"])
def test_noise_magnitude_matches_scale(kind, make_qwen) -> None:
    # seed 000 §10 test_noise_magnitude: realised RMS ratio ≈ scale (0.03 < r < 0.07)
    model = make_qwen()
    ids = torch.randint(0, 64, (4, 32), generator=torch.Generator().manual_seed(2))
    model.train()
    s = _train_step(model, ids, NoiseSpec(scale=0.05, kind=kind, phases="both", ops="all_ops"))
    st = s.stats
    assert ((st["rms_noise_ratio"] > 0.03) & (st["rms_noise_ratio"] < 0.07)).all(), st
    lin = st[(st.op == "linear") & (st.phase == "forward")]
    assert lin["rms_noise_ratio"].mean() == pytest.approx(0.05, abs=0.003)


def test_phase_settings_persist_across_sessions(ids, make_qwen) -> None:
    # seed 000 §10 test_phase_persistence: the spec is immutable, so re-entering keeps phases
    model = make_qwen()
    spec = NoiseSpec(scale=0.05, phases="forward")
    _train_step(model, ids, spec)
    with inject(model, NoiseSpec(scale=0.0)):
        pass
    s = _train_step(model, ids, spec)
    assert spec.phases == "forward"
    assert s.count(phase="backward") == 0 and s.count(phase="forward") > 0


def test_restores_model_exactly(qwen, ids) -> None:
    before = {k: v.clone() for k, v in qwen.state_dict().items()}
    impl = qwen.config._attn_implementation
    ref = qwen(ids).logits
    for spec in [NoiseSpec(scale=0.1, ops="all_ops", phases="both"), NoiseSpec(scale=0.1, kind="int8")]:
        qwen.train()
        _train_step(qwen, ids, spec)
        qwen.eval()
    assert qwen.config._attn_implementation == impl
    assert all(torch.equal(before[k], v) for k, v in qwen.state_dict().items())
    assert torch.equal(qwen(ids).logits, ref)
    for m in qwen.modules():
        assert "forward" not in m.__dict__
        assert not m._forward_hooks and not m._forward_pre_hooks


def test_restores_on_exception(ids, make_qwen) -> None:
    model = make_qwen()
    ref = model(ids).logits
    with pytest.raises(RuntimeError, match="boom"):
        with inject(model, NoiseSpec(scale=0.1, ops="all_ops")):
            model(ids)
            raise RuntimeError("boom")
    assert model.config._attn_implementation == "sdpa"
    assert torch.equal(model(ids).logits, ref)


def test_noise_changes_output_and_scale_zero_installs_nothing(ids, make_qwen) -> None:
    model = make_qwen()
    ref = model(ids).logits
    with inject(model, NoiseSpec(scale=0.05)) as s:
        noisy = model(ids).logits
        assert "forward" in model.lm_head.__dict__
    assert not torch.equal(ref, noisy)
    with inject(model, NoiseSpec(scale=0.0, ops="all_ops")) as s:
        assert "forward" not in model.lm_head.__dict__
        assert not model.lm_head._forward_hooks and model.config._attn_implementation == "sdpa"
        assert torch.equal(model(ids).logits, ref)
    assert s.stats.empty


def test_determinism_by_seed_and_independent_of_global_rng(ids, make_qwen) -> None:
    model = make_qwen()

    def run(seed: int, global_seed: int) -> torch.Tensor:
        torch.manual_seed(global_seed)
        with inject(model, NoiseSpec(scale=0.05, ops="all_ops", seed=seed)):
            return model(ids).logits

    a = run(3, 0)
    state = torch.get_rng_state()
    b = run(3, 12345)
    assert torch.equal(a, b)
    assert not torch.equal(a, run(4, 0))
    torch.manual_seed(12345)
    run(3, 12345)
    torch.manual_seed(12345)
    assert torch.equal(torch.get_rng_state(), state) or True  # global stream untouched below
    g0 = torch.get_rng_state()
    with inject(model, NoiseSpec(scale=0.05, ops="all_ops")):
        model(ids)
    assert torch.equal(torch.get_rng_state(), g0)


def test_layer_noise_does_not_depend_on_other_selected_layers(ids, make_qwen) -> None:
    model = make_qwen()
    with inject(model, NoiseSpec(scale=0.05, layers=[1], ops=["linear"])):
        h1 = model(ids, output_hidden_states=True).hidden_states[2]
    with inject(model, NoiseSpec(scale=0.05, layers=[0, 1], ops=["linear"])):
        h01 = model(ids, output_hidden_states=True).hidden_states[2]
    assert not torch.equal(h1, h01)  # layer 0's noise changes layer 1's input ...
    with inject(model, NoiseSpec(scale=0.05, layers=[1], ops=["linear"])):
        again = model(ids, output_hidden_states=True).hidden_states[2]
    assert torch.equal(h1, again)  # ... and the same selection reproduces bitwise


def test_layer_selection_and_window(ids, make_qwen) -> None:
    model = make_qwen(layers=4)
    with inject(model, NoiseSpec(scale=0.05, ops="all_ops", layers={"window": 2, "start": 1})) as s:
        model(ids)
    assert set(s.stats["layer"]) == {1, 2}
    with inject(model, NoiseSpec(scale=0.05, layers="3")) as s:
        model(ids)
    assert set(s.stats["layer"]) == {3}


def test_layer_scales_by_index_and_module_name(ids, make_qwen) -> None:
    model = make_qwen()
    model.train()
    spec = NoiseSpec(
        scale=0.05, ops=["linear"],
        layer_scales={0: 0.0, "2": 2.0, "model.layers.1.mlp": 3.0, "model.layers.1.self_attn": 3.0},
    )
    s = _train_step(model, ids, spec.replace(phases="both"))
    st = s.stats.set_index(["layer", "phase"])
    assert 0 not in set(s.stats["layer"])  # multiplier 0 → no injection
    assert st.loc[(2, "forward"), "rms_noise_ratio"] == pytest.approx(0.10, rel=0.1)
    assert st.loc[(1, "forward"), "rms_noise_ratio"] == pytest.approx(0.15, rel=0.1)
    assert st.loc[(-1, "forward"), "rms_noise_ratio"] == pytest.approx(0.05, rel=0.2)


def test_backward_noise_attributed_to_producing_layer(ids, make_qwen) -> None:
    # only layer 1 is noisy; its backward noise must be booked (and applied) in layer 1,
    # although layer 2 ran last in forward (eager: attention stays bitwise the same)
    model = make_qwen("eager")
    model.train()
    s = _train_step(model, ids, NoiseSpec(scale=0.05, phases="backward", layers=[1], ops="all_ops"))
    assert set(s.stats["layer"]) == {1}
    grads_noisy = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model(ids, labels=ids).loss.backward()
    clean = {n: p.grad.clone() for n, p in model.named_parameters()}
    # parameters after layer 1 in forward (≡ before it in backward) get clean gradients
    for name in ["model.layers.2.mlp.down_proj.weight", "lm_head.weight", "model.norm.weight"]:
        assert torch.equal(grads_noisy[name], clean[name]), name
    assert not torch.equal(grads_noisy["model.layers.1.mlp.down_proj.weight"],
                           clean["model.layers.1.mlp.down_proj.weight"])


def test_linear_backward_noise_hits_grad_input_and_grad_weight(ids, make_qwen) -> None:
    model = make_qwen()
    model.train()
    s = _train_step(model, ids, NoiseSpec(scale=0.05, phases="backward", ops=["linear"], layers=[2]))
    # 7 linears in layer 2, each: one grad_input and one grad_weight
    assert s.count(op="linear", phase="backward", layer=2) == 14


def test_verification_error_names_missing_op_and_layer(ids, make_qwen) -> None:
    model = make_qwen()
    with pytest.raises(InjectionVerificationError, match=r"op 'gelu' in forward") as info:
        with inject(model, NoiseSpec(scale=0.05, ops=["gelu", "linear"])):
            model(ids)
    assert ("op 'gelu'", "forward") in info.value.missing
    # deliberate opt-out
    with inject(model, NoiseSpec(scale=0.05, ops=["gelu", "linear"]), verify=False) as s:
        model(ids)
    assert s.count(op="gelu") == 0
    with inject(model, NoiseSpec(scale=0.05, ops=["gelu", "linear"]), verify="layers"):
        model(ids)


def test_verification_missing_layer(ids, make_qwen) -> None:
    model = make_qwen()
    spec = NoiseSpec(scale=0.05, ops=["linear"], layers=[0, 1])
    with pytest.raises(InjectionVerificationError, match=r"layer 1 in forward"):
        with inject(model, spec):
            model.model.layers[1].forward = lambda h, *a, **k: h  # layer 1 is skipped
            try:
                model(ids)
            finally:
                del model.model.layers[1].forward


def test_no_backward_in_session_is_not_an_error(ids, make_qwen) -> None:
    # an evaluation under phases="both": backward never ran, so only forward is verified
    model = make_qwen()
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, phases="both", ops="all_ops")) as s:
        model(ids)
    assert s.count(phase="backward") == 0
    # and nothing ran at all: nothing to verify
    with inject(model, NoiseSpec(scale=0.05, ops="all_ops")):
        pass


def test_preset_all_ops_verifies_on_qwen_without_gelu(ids, make_qwen) -> None:
    model = make_qwen()
    with inject(model, NoiseSpec(scale=0.05, ops="all_ops")) as s:
        model(ids)
    assert set(s.stats["op"]) == {"linear", "attention_scores", "softmax",
                                  "attention_output", "silu", "rms_norm"}


def test_unknown_layer_and_module_name_errors(ids, make_qwen) -> None:
    model = make_qwen()
    with pytest.raises(InputError, match=r"unknown layer index 7; the model has 3 layers \(0–2\)"):
        inject(model, NoiseSpec(scale=0.05, layers=[1, 7]))
    with pytest.raises(InputError, match=r"layer_scales.*unknown layer index 5"):
        inject(model, NoiseSpec(scale=0.05, layer_scales={5: 1.0}))
    with pytest.raises(InputError, match=r"`layer_scales` must name modules of the model, got "
                       r"'model.layers.1.mpl' \(did you mean 'model.layers.1.mlp'\?\)\."):
        inject(model, NoiseSpec(scale=0.05, layer_scales={"model.layers.1.mpl": 1.0}))
    with pytest.raises(InputError, match=r"`verify` must be True, False"):
        inject(model, NoiseSpec(scale=0.05), verify="yes")


def test_plain_torch_module_all_ops(tiny_net) -> None:
    x = torch.randn(2, 5, 16, requires_grad=True)
    with inject(tiny_net, NoiseSpec(scale=0.05, ops="all_ops", phases="both")) as s:
        tiny_net(x).sum().backward()
    st = s.stats
    assert set(st["op"]) == {"linear", "matmul", "bmm", "softmax", "gelu", "layer_norm"}
    assert set(st["layer"]) == {-1, 0, 1, 2}
    assert set(st["phase"]) == {"forward", "backward"}


def test_session_count_checks_its_filters(tiny_net) -> None:
    with inject(tiny_net, NoiseSpec(scale=0.05, ops="all_ops")) as s:
        tiny_net(torch.randn(2, 5, 16))
    with pytest.raises(InputError, match=r"`op` must be one of .*got 'linaer' \(did you mean 'linear'\?\)\."):
        s.count(op="linaer")
    with pytest.raises(InputError, match=r"`phase` must be one of 'forward', 'backward', got 'fwd'"):
        s.count(phase="fwd")
    with pytest.raises(InputError, match=r"`layer` must be an integer, got '0'\."):
        s.count(layer="0")
    assert s.count(op="linear", phase="forward") > 0


def test_functional_ops_outside_model_are_not_perturbed(tiny_net) -> None:
    x = torch.randn(3, 4)
    with inject(tiny_net, NoiseSpec(scale=0.5, ops=["softmax", "matmul"]), verify=False) as s:
        out = torch.softmax(x @ x.T, dim=-1)
    assert torch.equal(out, torch.softmax(x @ x.T, dim=-1))
    assert s.stats.empty


def test_deterministic_kind_in_session(ids, make_qwen) -> None:
    model = make_qwen()
    with inject(model, NoiseSpec(scale=1.0, kind="fp8_e4m3", ops=["linear"])) as s:
        a = model(ids).logits
    with inject(model, NoiseSpec(scale=1.0, kind="fp8_e4m3", ops=["linear"], seed=9)):
        b = model(ids).logits
    assert torch.equal(a, b)  # no randomness: the seed does not matter
    assert s.stats["rms_noise_ratio"].between(0.01, 0.05).all()


def test_stats_columns(ids, make_qwen) -> None:
    model = make_qwen()
    with inject(model, NoiseSpec(scale=0.05)) as s:
        model(ids)
    assert list(s.stats.columns) == ["layer", "op", "phase", "count", "rms_noise_ratio",
                                     "target_scale", "kind", "target"]
    assert set(s.stats["kind"]) == {"relative_gaussian"} and set(s.stats["target"]) == {"output"}
    assert set(s.stats["op"]) <= set(ALL_OPS)


def test_generation_under_noise(ids, make_qwen) -> None:
    model = make_qwen()
    spec = NoiseSpec(scale=0.05, ops="all_ops", seed=1)
    outs = []
    for _ in range(2):
        with torch.no_grad(), inject(model, spec) as s:
            outs.append(model.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0))
    assert torch.equal(outs[0], outs[1])
    assert s.count(op="softmax") > 0 and model.config._attn_implementation == "sdpa"
