"""The search's figures: structure, not pixels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from robuststats.search import SearchSpec
from tests.search.conftest import tiny, write


def _profile() -> pd.DataFrame:
    """A layer profile as ``search`` writes it (layer_profile.csv of a 4-layer search)."""
    rows = []
    for config, mult in (("chosen", [0.42, 2.9, 1.1, 3.8]), ("uniform", [1.0] * 4),
                         ("heuristic", [2.0] * 4)):
        for layer, m in enumerate(mult):
            rows.append({"config": config, "layer": layer, "module": f"model.layers.{layer}",
                         "param": f"layer_{layer}", "multiplier": m, "scale": 0.05 * m})
    return pd.DataFrame(rows)


def test_layer_profile_draws_markers_on_a_log_axis_with_the_absolute_scale(tmp_path) -> None:
    import matplotlib.pyplot as plt

    from robuststats.search._figures import _profile_figure

    spec = SearchSpec.from_file(write(tmp_path / "s.yaml", tiny()))
    profile = _profile()
    fig = _profile_figure(plt, spec, profile, 0.05)
    try:
        ax = fig.axes[0]
        assert not ax.patches  # no bars: they would start at an arbitrary floor on a log axis
        for config in ("chosen", "uniform", "heuristic"):
            (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == f"profile:{config}"]
            expected = profile.loc[profile["config"] == config, "multiplier"].to_numpy()
            assert np.allclose(line.get_ydata(), expected) and line.get_marker() != "None"
        assert ax.get_yscale() == "log"
        low, high = ax.get_ylim()
        assert low < 0.42 and high > 3.8  # every multiplier in view
        assert "1 = the uniform scale" in ax.get_ylabel()
        right = ax.child_axes  # the secondary axis
        assert right and right[0].get_ylabel() == "noise scale (multiplier × 0.05)"
    finally:
        plt.close(fig)


def test_write_figures_writes_the_profile_and_history(tmp_path: Path) -> None:
    from robuststats.search._figures import write_figures

    spec = SearchSpec.from_file(write(tmp_path / "s.yaml", tiny()))
    trials = pd.DataFrame({"number": [0, 1, 2], "state": ["COMPLETE"] * 3,
                           "baseline": ["uniform", "heuristic", None],
                           "budget": [0.05, 0.1, 0.07], "feasible": [True, True, True],
                           "value_0": [0.05, 0.1, 0.07]})
    written = write_figures(tmp_path / "figures", spec, trials, _profile(), 0.05)
    assert written == ["figures/history.png", "figures/layer_profile.png"]
    for name in written:
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
