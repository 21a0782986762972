"""AQN schedules against the seeds' tables (seed 002, E5a/E5b) and the QeRL formula.

Where seed 002's hand-written table disagrees with the formula the formula wins (the
seed lists rounded or approximate values): E5a's second stage is 0.0281, not "0.037";
E5b's second stage 0.0334 ("0.035"); E5a steps 104 and E5b steps 48 and 106 still belong
to the previous stage (0.00089, 0.0150, 0.00106).
"""

from __future__ import annotations

import pytest
import torch

from robuststats.engine import AQNSchedule, aqn_perturb
from robuststats.errors import InputError


@pytest.fixture
def e5a() -> AQNSchedule:
    return AQNSchedule(total_steps=116, sigma_start=0.05, sigma_end=0.0005, num_stages=10)


@pytest.fixture
def e5b() -> AQNSchedule:
    return AQNSchedule(total_steps=116, epochs=2, epoch_ranges=[(0.05, 0.01), (0.01, 0.0005)],
                       stages_per_epoch=5)


def test_e5a_global_schedule(e5a) -> None:
    # seed 002: "Warmup phase: Steps 0-11 (sigma=0)"; "Step 12-23: sigma=0.05"; 10 stages
    assert [e5a.sigma(s) for s in range(12)] == [0.0] * 12
    assert all(e5a.sigma(s) == 0.05 for s in range(12, 24))
    assert e5a.sigma(24) == pytest.approx(0.05 * 0.01 ** (1 / 8))  # 0.0281 (seed: "0.037")
    assert len(e5a.sigma_trend) == 9
    assert e5a.sigma(104) == pytest.approx(0.05 * 0.01 ** (7 / 8))
    assert e5a.sigma(105) == pytest.approx(0.0005) and e5a.sigma(116) == pytest.approx(0.0005)
    assert e5a.sigma(500) == pytest.approx(0.0005)  # past the end: last stage


def test_e5b_option_c_schedule(e5b) -> None:
    # seed 002: epoch 1 warm-up 0-9, 10-19: 0.05, 20-29: 0.035, ..., 48-57: 0.01;
    # epoch 2 warm-up 58-67, 68-77: 0.01, ..., 106-116: 0.0005
    assert all(e5b.sigma(s) == 0.0 for s in range(10))
    assert all(e5b.sigma(s) == 0.05 for s in range(10, 20))
    assert e5b.sigma(20) == pytest.approx(0.05 * 0.2 ** 0.25)  # 0.0334
    assert e5b.sigma(49) == pytest.approx(0.01) and e5b.sigma(57) == pytest.approx(0.01)
    assert all(e5b.sigma(s) == 0.0 for s in range(58, 68))
    assert all(e5b.sigma(s) == pytest.approx(0.01) for s in range(68, 78))
    assert e5b.sigma(107) == pytest.approx(0.0005) and e5b.sigma(116) == pytest.approx(0.0005)


def test_schedule_errors() -> None:
    with pytest.raises(InputError, match=r"`total_steps` must be a positive integer, got 0"):
        AQNSchedule(total_steps=0)
    with pytest.raises(InputError, match=r"one \(start, end\) pair per epoch \(2\), got 1"):
        AQNSchedule(total_steps=10, epochs=2, epoch_ranges=[(0.05, 0.01)])
    with pytest.raises(InputError, match=r"`step` must be a non-negative integer, got -1"):
        AQNSchedule(total_steps=10).sigma(-1)


def test_aqn_perturb_changes_only_norm_weights_and_restores(make_qwen) -> None:
    model = make_qwen()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(0)
    with aqn_perturb(model, 0.05, generator=g) as p:
        changed = {k for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
        assert changed == {f"{n}.weight" for n in p.modules}
        assert len(p.modules) == 2 * 3 + 1  # two RMSNorms per layer + final norm
        delta = model.model.norm.weight.detach() - before["model.norm.weight"]
        assert float(delta.std()) == pytest.approx(0.05, rel=0.3)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_aqn_perturb_restores_on_exception(make_qwen) -> None:
    model = make_qwen()
    before = model.model.norm.weight.clone()
    with pytest.raises(ValueError, match="inside"):
        with aqn_perturb(model, 0.1, generator=torch.Generator().manual_seed(0)):
            raise ValueError("inside")
    assert torch.equal(model.model.norm.weight, before)


def test_aqn_perturb_errors(tiny_net) -> None:
    lin = torch.nn.Linear(3, 3)
    with pytest.raises(InputError, match="found no RMSNorm/LayerNorm weight"):
        with aqn_perturb(lin, 0.1, generator=torch.Generator()):
            pass
    with pytest.raises(InputError, match="`generator` is required"):
        with aqn_perturb(tiny_net, 0.1):
            pass
    with pytest.raises(InputError, match=r"`sigma` must be a non-negative number, got -1"):
        with aqn_perturb(tiny_net, -1):
            pass
    with aqn_perturb(lin, 0.0) as p:  # sigma 0 (warm-up): a no-op, even without norms
        assert p.modules == ()


def test_from_dict_and_template_without_steps() -> None:
    template = AQNSchedule.from_dict({"epochs": 2, "epoch_ranges": [[0.05, 0.01], [0.01, 0.0005]]})
    with pytest.raises(InputError, match="`total_steps` is not set"):
        template.sigma(3)
    import dataclasses

    assert dataclasses.replace(template, total_steps=116).sigma(10) == 0.05
    with pytest.raises(InputError, match=r"AQN schedule: unknown key 'sigma_strat' \(did you mean 'sigma_start'\?\); allowed keys"):
        AQNSchedule.from_dict({"sigma_strat": 0.1})


def test_schedule_round_trips_pickles_and_rejects_bad_ranges(e5b) -> None:
    import pickle

    assert AQNSchedule.from_dict(e5b.to_dict()) == e5b
    assert e5b.to_dict()["epoch_ranges"] == [[0.05, 0.01], [0.01, 0.0005]]
    assert pickle.loads(pickle.dumps(e5b)) == e5b
    with pytest.raises(InputError, match=r"`epoch_ranges` must be a list of \(start, end\) pairs"):
        AQNSchedule(epochs=2, epoch_ranges=[0.05, 0.01])
    with pytest.raises(InputError, match=r"`epoch_ranges\[1\]\[0\]` must be a positive number"):
        AQNSchedule(epochs=2, epoch_ranges=[(0.05, 0.01), (-1, 0.001)])
