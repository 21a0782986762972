"""The probe on a real tiny Qwen2: a planted sensitive layer ranks first; scope and output."""

from __future__ import annotations

import json

import pytest
from probe_models import agreement_setup, plant_cancellation

from robuststats.diagnose import DiagnosisPlan, probe_model
from robuststats.diagnose._probe import build_targets, present_ops
from robuststats.diagnose._runner import analyse
from robuststats.errors import InputError

PLANTED = 2


def _plan(**changes) -> DiagnosisPlan:
    base = dict(study="planted", condition="A", seeds=(0,), noise_seeds=(0,),
                levels=("layer", "window"), scale=0.01, kind="relative_gaussian",
                ops="matmul_only", operators=None, window=3, stride=1, n_items=None,
                batch_size=64, modules=("o_proj", "down_proj"), calibration_items=16,
                channel_threshold=10.0, multiplicity="holm", confidence_level=0.95)
    return DiagnosisPlan(**{**base, **changes})


@pytest.fixture(scope="module")
def planted():
    trained, task = agreement_setup(n_items=40, n_layers=4)
    plant_cancellation(trained.model, PLANTED)
    plan = _plan()
    probe = probe_model(trained, task, task.items("test"), plan, seed=0)
    return trained, task, plan, probe, analyse(plan, [probe], meta={
        "n_items": 40, "layer_prefix": "model.layers", "n_calibration_items": 0})


def test_planted_sensitive_layer_ranks_first(planted) -> None:
    _, _, _, _probe, diagnosis = planted
    layers = diagnosis.table[diagnosis.table["level"] == "layer"]
    top = layers.iloc[0]
    assert top["target"] == f"layer:{PLANTED}"
    assert top["rank"] == 1
    assert top["clean_accuracy"] == 1.0  # agreement with its own clean output
    assert top["estimate"] > 0.3 and top["significant"]
    # the other layers barely move at this scale
    assert (layers.iloc[1:]["estimate"] < top["ci_low"]).all()
    windows = diagnosis.table[diagnosis.table["level"] == "window"]
    assert set(windows["target"]) == {"window:0-2", "window:1-3"}
    # both windows hold the planted layer: each drops at least about as much as it alone
    assert (windows["estimate"] >= top["estimate"] - 0.15).all()


def test_clean_evaluation_runs_once_and_noise_stays_in_its_target(planted) -> None:
    _, _, _, probe, _ = planted
    timings = probe.timings
    assert (timings["target"] == "clean").sum() == 1
    assert set(timings["target"]) == {"clean", "layer:0", "layer:1", "layer:2", "layer:3",
                                      "window:0-2", "window:1-3"}
    inj = probe.injections
    for target, layers in (("layer:2", {2}), ("window:1-3", {1, 2, 3})):
        rows = inj[(inj["target"] == target) & (inj["count"] > 0)]
        assert set(rows["layer"]) == layers
        # the planted module's two products are both linear ops of layer 2
    assert inj.loc[inj["target"] == "layer:0", "op"].isin(
        ["linear", "attention_scores", "attention_output"]).all()
    assert len(probe.outcomes) == 40 * 7


def test_heatmap_shows_every_target_with_its_interval(planted, tmp_path) -> None:
    """Layers × (alone, each window): every cell carries its drop and interval, each window
    is outlined once over its layers, nothing is clipped, and the figure is large enough to
    read (the old one was about 280 × 230 px with its title cut)."""
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from robuststats.diagnose._heatmap import figure, heatmap

    _, _, _, _, diagnosis = planted
    t = diagnosis.table
    fig = figure(diagnosis)
    try:
        ax = fig.axes[0]  # no operator level in this probe: the grid alone
        cells = [x.get_text() for x in ax.texts]
        n_layer, n_window = (t["level"] == "layer").sum(), (t["level"] == "window").sum()
        assert len(cells) == n_layer + n_window == 4 + 2
        assert all("\n[" in c for c in cells)  # an interval in every cell
        top = t[t["target"] == f"layer:{PLANTED}"].iloc[0]
        assert any(c.startswith(f"{100 * top['estimate']:+.1f}*\n") for c in cells)  # starred
        outlines = [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]
        assert sorted(p.get_height() for p in outlines) == [3, 3]  # two windows of 3 layers
        assert [x.get_text() for x in ax.get_xticklabels()] == [
            "layer\nalone", "window\nL0-2", "window\nL1-3"]
        colorbar = fig.axes[1]
        assert colorbar.get_xlabel() == "accuracy drop, clean − noisy (pp)"
        assert "95% CI" in fig.get_suptitle() and "clean accuracy" in fig.get_suptitle()
    finally:
        plt.close(fig)
    img = mpimg.imread(heatmap(diagnosis, tmp_path / "h.png"))
    assert img.shape[1] >= 600 and img.shape[0] >= 400


def test_heatmap_draws_the_operator_level(planted) -> None:
    from dataclasses import replace

    import matplotlib.pyplot as plt
    import pandas as pd

    from robuststats.diagnose._heatmap import figure

    _, _, _, _, diagnosis = planted
    t = diagnosis.table
    ops = t[t["level"] == "layer"].head(3).assign(
        level="operator", target=["op:linear", "op:softmax", "op:silu"],
        label=["linear", "softmax", "silu"], layers="all")
    fig = figure(replace(diagnosis, table=pd.concat([t, ops], ignore_index=True)))
    try:
        ax_ops = fig.axes[0]
        assert [x.get_text() for x in ax_ops.get_yticklabels()] == list(
            ops.sort_values("estimate")["label"])
        (bars,) = [c for c in ax_ops.collections if c.get_gid() == "operator:intervals"]
        assert len(bars.get_segments()) == 3
        filled = [ln for ln in ax_ops.get_lines() if ln.get_gid() == "operator:significant"]
        assert len(filled[0].get_xdata()) == int(ops["significant"].sum())
    finally:
        plt.close(fig)


def test_protection_plan_and_sensitivity_file(planted, tmp_path) -> None:
    from dataclasses import replace

    from robuststats.diagnose import sensitivity_profile, write_diagnosis
    from robuststats.diagnose._report import protection_plan
    from robuststats.results import ResultStore, verify

    _, _, _, _, diagnosis = planted
    entries = protection_plan(diagnosis)
    assert entries[0]["kind"] == "layer" and entries[0]["layers"] == str(PLANTED)
    assert "drop" in entries[0]["evidence"] and "p_adj" in entries[0]["evidence"]
    profile = sensitivity_profile(diagnosis)
    assert profile["format"] == "robuststats.sensitivity" and profile["format_version"] == 1
    assert set(profile["layers"]) == {"0", "1", "2", "3"}
    layer = profile["layers"][str(PLANTED)]
    assert layer["module"] == f"model.layers.{PLANTED}" and layer["rank"] == 1
    assert layer["significant"] is True and layer["ci_low"] > 0
    assert profile["layer_scales"][str(PLANTED)] == 0.0
    # the file the adaptive search reads: its scores are the layers' sensitivities
    from robuststats.search import read_sensitivity

    (tmp_path / "sens.json").write_text(json.dumps(profile))
    scores = read_sensitivity(tmp_path / "sens.json")
    assert set(scores) == {0, 1, 2, 3}
    assert scores[PLANTED] == pytest.approx(layer["sensitivity"])
    assert max(scores, key=scores.get) == PLANTED
    # the protected configuration is a valid engine spec for this model
    from robuststats.engine import NoiseSpec, inject

    spec = NoiseSpec(scale=0.01, layer_scales={int(k): v
                                               for k, v in profile["layer_scales"].items()})
    inject(planted[0].model, spec)

    version = write_diagnosis(replace(diagnosis, plan=replace(diagnosis.plan, study="planted")),
                              out=tmp_path)
    assert version.label == "planted.diagnose/v1"
    files = set(version.manifest["files"])
    for name in ("outcomes.parquet", "targets.csv", "avalanche.csv", "layers.csv",
                 "sensitivity.json", "sensitivity.yaml", "report.md", "report.json",
                 "figures/heatmap.png", "timings.csv", "injections.parquet"):
        assert name in files, name
    assert verify(version).ok
    stored = json.loads((version.path / "sensitivity.json").read_text())
    assert stored["layers"][str(PLANTED)]["rank"] == 1
    report = (version.path / "report.md").read_text()
    assert "## Protection plan" in report and f"**L{PLANTED}** (layer)" in report
    assert ResultStore(tmp_path).get("planted.diagnose").number == 1
    again = write_diagnosis(replace(diagnosis, plan=replace(diagnosis.plan, study="planted")),
                            out=tmp_path)
    assert again.number == 2  # versions are never overwritten


def test_operator_level_finds_the_ops_the_model_has(planted) -> None:
    trained, task, _, _, _ = planted
    ops = present_ops(trained.model, trained.tokenizer, task.items("test")[0].prompt,
                      kind="relative_gaussian")
    assert ops == ("linear", "attention_scores", "softmax", "attention_output", "silu",
                   "rms_norm")
    targets, notes = build_targets(_plan(levels=("operator",)), 4, ops)
    assert [t.target_id for t in targets] == [f"op:{op}" for op in ops]
    assert any("gelu" in n and "layer_norm" in n for n in notes)
    with pytest.raises(InputError, match="the model has no 'gelu' op"):
        build_targets(_plan(levels=("operator",), operators=("softmax", "gelu")), 4, ops)


def test_window_larger_than_the_model(planted) -> None:
    targets, notes = build_targets(_plan(window=5), 4, ("linear",))
    assert not [t for t in targets if t.level == "window"]
    assert any("window level skipped" in n for n in notes)
    with pytest.raises(InputError, match=r"`diagnose.window` \(5\) exceeds the model's 4"):
        build_targets(_plan(window=5, levels_requested=True), 4, ("linear",))
    stride = build_targets(_plan(window=2, stride=2), 4, ("linear",))[0]
    assert [t.target_id for t in stride if t.level == "window"] == ["window:0-1",
                                                                     "window:2-3"]


def test_operator_target_on_the_planted_model(planted) -> None:
    trained, task, _, _, _ = planted
    plan = _plan(levels=("operator",), operators=("linear", "softmax"), scale=0.01)
    probe = probe_model(trained, task, task.items("test")[:20], plan, seed=0)
    inj = probe.injections
    assert set(inj.loc[inj["target"] == "op:softmax", "op"]) == {"softmax"}
    # the whole model, every layer
    assert set(inj.loc[inj["target"] == "op:softmax", "layer"]) == {0, 1, 2, 3}
