"""Where a noise fit runs and what it costs: the device (default: where the reference ran,
never a silent fallback to the CPU), the batched simulations (one clean pass per batch and
round, the values of one simulation at a time), and the lean metrics they use."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from divergence_models import tiny

from robuststats.cli import main
from robuststats.divergence import compare_runs, fit_device, fit_noise, item_metrics
from robuststats.divergence._simulate import Simulator
from robuststats.engine import NoiseSpec
from robuststats.errors import InputError

_NO_CUDA = not torch.cuda.is_available()


@pytest.fixture(scope="module")
def qwen():
    model, tok, texts = tiny("qwen2", n_layers=2)
    return model, tok, texts[:6], [f"item{i}" for i in range(6)]


def test_lean_metrics_equal_the_full_ones_bit_for_bit():
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(3, 5, 16, generator=gen)
    b = a * (1 + 0.03 * torch.randn(3, 5, 16, generator=gen))
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1, 3:] = False
    full = item_metrics(a, b, mask)
    lean = item_metrics(a, b, mask, only=("rel_rms", "wape"))
    for key in ("rel_rms", "wape", "err_norm", "ref_norm"):
        assert torch.equal(full[key], lean[key]), key
    assert set(item_metrics(a, b, mask, only=("rel_rms",))) == {"rel_rms", "err_norm",
                                                                 "ref_norm", "n"}
    with pytest.raises(ValueError, match="`only`"):
        item_metrics(a, b, mask, only=("mdape",))


def test_batched_simulations_equal_one_comparison_each(qwen):
    model, tok, texts, ids = qwen
    specs = [NoiseSpec(scale=s, phases="forward", layers=[layer], seed=seed)
             for s, layer, seed in ((0.02, 0, 11), (0.05, 1, 12), (0.03, 0, 13))]
    ref = compare_runs(model, tok, texts, item_ids=ids, candidate="clean", local=False,
                       modules=["residual"]).reference
    sites = ["model.layers.0", "model.layers.1"]
    sim = Simulator(model, tok, texts, ids, sites, ref, batch_size=4, max_length=None)
    got = sim.run(specs, ("rel_rms", "wape"))
    # 2 batches x (1 clean + 3 noisy) forward passes
    assert sim.forward_passes == 2 * (1 + len(specs))
    for spec, values in zip(specs, got, strict=True):
        div = compare_runs(model, tok, texts, item_ids=ids, modules=sites, local=False,
                           batch_size=4, candidate={"name": "x", "noise": spec.to_dict()})
        acc = div.items[div.items["mode"] == "accumulated"]
        for j, site in enumerate(sites):
            rows = acc[acc["site"] == site].set_index("item_id").loc[ids]
            for m in ("rel_rms", "wape"):
                assert values[m][:, j].tolist() == rows[m].tolist(), (site, m)


def test_the_device_defaults_to_where_the_reference_ran(qwen):
    model, tok, texts, ids = qwen
    div = compare_runs(model, tok, texts, item_ids=ids, candidate="bf16", local=False,
                       modules=["residual"])
    assert fit_device(div.reference, None) == "cpu"
    assert fit_device(div.reference, "cpu") == "cpu"
    dumped = replace(div.reference, device="msprobe dump")  # a dump records no device
    assert fit_device(dumped, None) == "cpu"
    with pytest.raises(InputError, match=r"`device` must be cpu, cuda, .*got 'gpu'"):
        fit_device(div.reference, "gpu")
    with pytest.raises(InputError, match="`device`: device 'npu' needs the torch_npu"):
        fit_device(div.reference, "npu")


@pytest.mark.skipif(not _NO_CUDA, reason="checks the refusal on a machine without CUDA")
def test_a_reference_captured_on_cuda_is_refused_here_not_moved(qwen):
    model, tok, texts, ids = qwen
    div = compare_runs(model, tok, texts, item_ids=ids, candidate="bf16", local=False,
                       modules=["residual"])
    on_gpu = replace(div, reference=replace(div.reference, device="cuda"))
    with pytest.raises(InputError, match=r"device 'cuda' is not available here.*the "
                                         r"reference ran there; pass --device cpu"):
        fit_noise(model, tok, texts, on_gpu, item_ids=ids, n_resamples=100)
    with pytest.raises(InputError, match="device 'cuda:1'"):
        fit_noise(model, tok, texts, div, item_ids=ids, n_resamples=100, device="cuda:1")


def test_a_fit_records_its_forward_passes(qwen):
    model, tok, texts, ids = qwen
    cand = {"name": "planted", "noise_seed": 5,
            "noise": {"scale": 0.03, "kind": "relative_gaussian", "ops": "matmul_only"}}
    div = compare_runs(model, tok, texts, item_ids=ids, candidate=cand, local=False,
                       modules=["residual"])
    fit = fit_noise(model, tok, texts, div, item_ids=ids, n_resamples=100, batch_size=3,
                    device="cpu")
    places = len(fit.scales)
    assert fit.simulations == 2 + 2 * places
    # per batch: a clean pass per round (pilot, two rounds of responses, confirmation)
    # and one noisy pass per simulation
    assert fit.settings["forward_passes"] == 2 * (4 + 2 + 2 * places)
    assert fit.settings["reference"]["device"] == "cpu"


def test_cli_device_needs_fit_noise_and_is_checked_before_compute(tmp_path, capsys, qwen):
    model, tok, _, _ = qwen
    model_dir = tmp_path / "tiny"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    code = main(["divergence", str(model_dir), "--candidate", "bf16", "--device", "cpu",
                 "--no-progress"])
    assert code == 2
    assert "`--device`: applies to --fit-noise FILE" in capsys.readouterr().err
    if _NO_CUDA:
        code = main(["divergence", str(model_dir), "--candidate", "bf16", "--device", "cuda",
                     "--fit-noise", str(tmp_path / "fit.yaml"), "--out",
                     str(tmp_path / "res"), "--no-progress", "--format", "json"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "device 'cuda' is not available" in err[0]
        assert not (tmp_path / "res").exists()  # nothing computed, nothing written


def test_two_runs_that_agree_exactly_are_refused_not_fitted_to_nan(qwen):
    model, tok, texts, ids = qwen
    div = compare_runs(model, tok, texts, item_ids=ids, candidate="fp32", local=False,
                       modules=["residual"])
    assert (div.items["rel_rms"] == 0).all()
    with pytest.raises(InputError, match=r"agree exactly at every site.*no divergence to fit"):
        fit_noise(model, tok, texts, div, item_ids=ids, n_resamples=100)
