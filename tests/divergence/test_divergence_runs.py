"""Two runs of tiny models of three architectures: identical, planted, dtype and NVFP4."""

from __future__ import annotations

import numpy as np
import pytest
from divergence_models import tiny

from robuststats.divergence import compare_runs, find_sites
from robuststats.errors import InputError


def _residual(div, mode="accumulated"):
    t = div.modules
    return t[(t["mode"] == mode) & (t["module_type"] == "residual")].set_index("layer")


@pytest.fixture(scope="module")
def qwen():
    return tiny("qwen2")


def test_identical_conditions_give_zero_divergence_exactly(qwen):
    model, tok, texts = qwen
    div = compare_runs(model, tok, texts[:6], reference="fp32", candidate="fp32",
                       batch_size=4)
    acc = div.items[div.items["mode"] == "accumulated"]
    assert len(acc) == 6 * len(div.modules[div.modules["mode"] == "accumulated"])
    for metric in ("mape", "mdape", "wape", "rel_rms", "err_norm"):
        assert (div.items[metric] == 0).all(), metric
    assert (div.items["cosine"] == 1).all()
    assert div.fit.verdict is None
    assert any("no item diverges" in n for n in div.notes)


def test_planted_noise_in_one_layer_shows_there_first_and_persists(qwen):
    model, tok, texts = qwen
    planted = {"name": "layer 2 noisy", "noise": {"scale": 0.05, "kind": "relative_gaussian",
                                                  "layers": 2, "ops": "linear"}}
    div = compare_runs(model, tok, texts, reference="fp32", candidate=planted, batch_size=6)
    acc, loc = _residual(div), _residual(div, "local")
    assert acc.loc[0, "rel_rms"] == 0 and acc.loc[1, "rel_rms"] == 0
    assert acc.loc[2, "rel_rms"] > 0.01
    assert acc.loc[3, "rel_rms"] > 0.5 * acc.loc[2, "rel_rms"]
    # only the noisy layer adds divergence of its own; the local pass draws the same noise
    assert loc.loc[[0, 1, 3], "rel_rms"].tolist() == [0.0, 0.0, 0.0]
    assert loc.loc[2, "rel_rms"] == pytest.approx(acc.loc[2, "rel_rms"], rel=1e-12)
    # the modules before layer 2 and the input of its first linear are untouched
    t = div.modules[div.modules["mode"] == "accumulated"].set_index("site")
    assert t.loc["model.layers.2.input_layernorm", "rel_rms"] == 0
    assert t.loc["model.layers.2.self_attn.q_proj", "rel_rms"] > 0
    # the engine's noise went where it was asked: counts per pass, equal in both passes
    inj = div.injections
    assert set(inj["pass"]) == {"candidate", "local"}
    assert (inj["injections"] == 7).all()  # the 7 linears of layer 2, once per batch


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_other_architectures_bf16_and_nvfp4(arch):
    model, tok, texts = tiny(arch, n_layers=3)
    sites, mm = find_sites(model)
    types = {s.module_type for s in sites}
    if arch == "gpt2":  # Conv1D product modules are compared like linears
        assert {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj", "ln_1"} <= types
    else:
        assert {"self_attn.q_proj", "mlp.down_proj", "input_layernorm"} <= types
    assert mm.n_layers == 3
    bf16 = compare_runs(model, tok, texts[:8], reference="fp32", candidate="bf16",
                        batch_size=4)
    nv = compare_runs(model, tok, texts[:8], reference="fp32", candidate="nvfp4_weights",
                      batch_size=4)
    rb, rn = _residual(bf16), _residual(nv)
    # bf16 keeps 8 significant bits (relative rounding 2^-9); NVFP4 weights ~0.095 per weight
    assert (rb["rel_rms"] > 1e-4).all() and (rb["rel_rms"] < 0.05).all()
    assert (rn["rel_rms"] > 0.03).all() and (rn["rel_rms"] < 1.0).all()
    assert (rn["rel_rms"] > 3 * rb["rel_rms"]).all()
    assert (rb["cosine"] > 0.99).all()
    assert (rn["rel_rms_ci_low"] <= rn["rel_rms"]).all()
    assert (rn["rel_rms"] <= rn["rel_rms_ci_high"]).all()
    assert (nv.injections["injections"] > 0).all()
    assert nv.fit.verdict in ("amplifying", "additive", "sub-additive", "independent",
                              "damped")


def test_depth_predictions_are_consistent(qwen):
    model, tok, texts = qwen
    div = compare_runs(model, tok, texts[:8], reference="fp32", candidate="nvfp4_weights",
                       batch_size=8)
    d = div.depth
    assert d["layer"].tolist() == [0, 1, 2, 3]
    # at layer 0 everything is the layer's own error
    row = d.iloc[0]
    for key in ("local_rel_rms", "additive", "quadrature", "seed004", "compounding"):
        assert row[key] == pytest.approx(row["rel_rms"], rel=1e-9), key
    assert row["amplification"] == pytest.approx(1.0)
    # quadrature <= additive (triangle inequality on the summed norms)
    assert (d["quadrature"] <= d["additive"] + 1e-12).all()
    assert np.isfinite(div.fit.slope) and div.fit.slope_ci_low <= div.fit.slope
    # the plain record (JSON output, report.json): every part, in its fixed order
    assert list(div.fit.to_dict()) == [
        "n_layers", "confidence_level", "n_items_fit", "slope", "slope_ci_low",
        "slope_ci_high", "growth_per_layer", "growth_per_layer_ci_low",
        "growth_per_layer_ci_high", "first_layer", "last_layer", "first_rel_rms",
        "last_rel_rms", "last_rel_rms_ci_low", "last_rel_rms_ci_high", "local_last",
        "additive_last", "quadrature_last", "seed004_last", "compounding_last",
        "mean_local_per_layer", "amplification", "amplification_ci_low",
        "amplification_ci_high", "vs_quadrature", "vs_quadrature_ci_low",
        "vs_quadrature_ci_high", "verdict"]


def test_unknown_module_pattern_and_condition(qwen):
    model, tok, texts = qwen
    with pytest.raises(InputError, match="`modules`: 'down_prj' matches no compared module "
                                         r"\(did you mean 'mlp.down_proj'\?\)"):
        compare_runs(model, tok, texts[:2], candidate="bf16", modules=["down_prj"])
    with pytest.raises(InputError, match="`candidate`: 'bf61' is not a dtype"):
        compare_runs(model, tok, texts[:2], candidate="bf61")
    with pytest.raises(InputError, match="`batch_size` must be a positive integer"):
        compare_runs(model, tok, texts[:2], candidate="bf16", batch_size=0)


def test_modules_filter_keeps_residual_only(qwen):
    model, tok, texts = qwen
    div = compare_runs(model, tok, texts[:3], candidate="bf16", modules=["residual"],
                       local=False)
    assert set(div.modules["module_type"]) == {"residual"}
    assert set(div.modules["mode"]) == {"accumulated"}
    assert div.fit.verdict is None


def test_depth_figure_draws_the_predictions_and_the_residual_interval(qwen, tmp_path):
    """The figure shows what the report's verdict weighs: the measured residual stream with
    its interval (error bars and a band), its local error and the additive, quadrature and
    compounding predictions, at the depth table's values."""
    import matplotlib.pyplot as plt

    from robuststats.divergence._report import _depth, depth_figure

    model, tok, texts = qwen
    div = compare_runs(model, tok, texts[:6], reference="fp32", candidate="bf16", batch_size=6)
    fig = _depth(div)
    try:
        residual, types, mape = fig.axes[:3]
        depth = div.depth.sort_values("layer")
        for column in ("additive", "quadrature", "compounding"):
            (line,) = [ln for ln in residual.get_lines()
                       if ln.get_gid() == f"prediction:{column}"]
            assert np.allclose(line.get_ydata(), depth[column].to_numpy(float))
        (band,) = [c for c in residual.collections if c.get_gid() == "residual:band"]
        assert band.get_alpha() >= 0.2
        from matplotlib.collections import LineCollection

        bars = [c for c in residual.collections if isinstance(c, LineCollection)]
        assert bars and len(bars[0].get_segments()) == div.n_layers  # one error bar a layer
        labels = residual.get_legend().get_texts()
        assert {t.get_text().split(":")[0] for t in labels} >= {
            "additive", "quadrature", "compounding", "local", "measured (95% CI)"}
        assert types.get_yscale() == "log" and "MAPE" in mape.get_ylabel()
        assert "module type" in fig.legends[0].get_title().get_text()
    finally:
        plt.close(fig)
    path = depth_figure(div, tmp_path / "depth.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
