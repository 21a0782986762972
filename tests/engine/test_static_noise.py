"""Static weight noise (``target="weights"``): one perturbation per noise seed and parameter."""

from __future__ import annotations

import pytest
import torch

from robuststats.engine import NoiseSpec, inject
from robuststats.errors import InputError

SIGMA = 0.05


def _static(seed: int = 0, **kw) -> NoiseSpec:
    return NoiseSpec(scale=SIGMA, kind="relative_gaussian", target="weights", ops="linear",
                     seed=seed, **kw)


def _perturbed_weight(lin: torch.nn.Linear, spec: NoiseSpec) -> torch.Tensor:
    """The weight the session uses: an identity input reads it out exactly."""
    with torch.no_grad(), inject(lin, spec):
        return lin(torch.eye(lin.in_features)).T - (0 if lin.bias is None else lin.bias[:, None])


def test_same_seed_same_perturbation_across_calls_and_sessions(make_qwen, ids) -> None:
    model = make_qwen("sdpa", layers=2)
    with torch.no_grad(), inject(model, _static(1)) as session:
        a = model(ids).logits
        b = model(ids).logits
    with torch.no_grad(), inject(model, _static(1)):
        c = model(ids).logits
    assert torch.equal(a, b) and torch.equal(a, c)
    # fresh noise, by contrast, differs from call to call
    with torch.no_grad(), inject(model, NoiseSpec(scale=SIGMA, ops="linear", seed=1)):
        assert not torch.equal(model(ids).logits, model(ids).logits)
    # verified by counts: every linear call of both forwards is booked, in every layer
    n_linear = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    assert session.count(op="linear") == 2 * n_linear
    assert set(session.stats["layer"]) == {-1, 0, 1}
    assert session.stats["rms_noise_ratio"].between(0.8 * SIGMA, 1.2 * SIGMA).all()


def test_different_seeds_differ_and_weights_are_restored(make_qwen, ids) -> None:
    model = make_qwen("sdpa", layers=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        clean = model(ids).logits
        outs = []
        for seed in (0, 1):
            with inject(model, _static(seed)):
                outs.append(model(ids).logits)
        assert not torch.equal(outs[0], outs[1])
        assert not torch.equal(outs[0], clean)
        assert torch.equal(model(ids).logits, clean)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_perturbation_is_relative_gaussian_with_the_requested_sigma() -> None:
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 512, bias=False)
    w = lin.weight.detach()
    eps = (_perturbed_weight(lin, _static(3)) - w) / (SIGMA * w)
    assert float(eps.mean()) == pytest.approx(0, abs=0.02)
    assert float(eps.std()) == pytest.approx(1, abs=0.02)
    absolute = NoiseSpec(scale=0.01, kind="absolute_gaussian", target="weights", ops="linear")
    e = (_perturbed_weight(lin, absolute) - w) / 0.01
    assert float(e.std()) == pytest.approx(1, abs=0.02)


class _Readout(torch.nn.Module):
    """Three linears applied to the same input: with an identity input, the output reads
    out the weights the session uses."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8, bias=False) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([layer(x).T for layer in self.layers])


def test_epsilon_belongs_to_the_parameter_not_the_selection() -> None:
    torch.manual_seed(0)
    model = _Readout()
    eye = torch.eye(8)
    with torch.no_grad():
        with inject(model, _static(5)):
            every = model(eye)
        with inject(model, _static(5, layers=[2])):
            only = model(eye)
        clean = model(eye)
    assert torch.equal(every[2], only[2])  # layer 2's ε does not depend on the selection
    assert torch.equal(only[:2], clean[:2]) and not torch.equal(only[2], clean[2])
    assert not torch.equal(every[0] / clean[0], every[1] / clean[1])  # own ε per parameter


def test_an_optimizer_step_keeps_the_same_epsilon() -> None:
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 8, bias=False)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    x = torch.randn(32, 16, generator=torch.Generator().manual_seed(1))
    eye = torch.eye(16)
    with inject(lin, _static(2)) as session:
        w0 = lin.weight.detach().clone()
        e0 = (lin(eye).T.detach() - w0) / (SIGMA * w0)
        lin(x).square().mean().backward()
        opt.step()
        w1 = lin.weight.detach().clone()
        e1 = (lin(eye).T.detach() - w1) / (SIGMA * w1)
    assert not torch.equal(w0, w1)  # the parameter did change, and received a gradient
    assert torch.allclose(e0, e1, atol=1e-3)  # the same static error on the new weights
    assert session.count(op="linear", phase="backward") == 0


def test_static_noise_refuses_what_it_cannot_do() -> None:
    with pytest.raises(InputError, match="`ops` must be 'linear'"):
        NoiseSpec(scale=0.05, target="weights", ops="matmul_only")
    with pytest.raises(InputError, match="forward-phase"):
        NoiseSpec(scale=0.05, target="weights", ops="linear", phases="both")
    with pytest.raises(InputError, match="target 'weights' needs `kind`"):
        NoiseSpec(scale=0.05, kind="systematic_bias", target="weights", ops="linear")
    with pytest.raises(InputError, match="number formats"):
        NoiseSpec(scale=0.05, target="weights", ops="linear", ties="away")


def test_spec_round_trip_with_target() -> None:
    spec = NoiseSpec(scale=1.0, kind="fp8_e4m3", target="inputs", granularity="block",
                     block_size=64, ties="away")
    assert NoiseSpec.from_dict(spec.to_dict()) == spec
    assert spec.replace(seed=4).target == "inputs"
