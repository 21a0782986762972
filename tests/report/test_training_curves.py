"""The reward-curve figure of a GRPO study (issue 35, item 3)."""

from __future__ import annotations

import pandas as pd
import pytest

from robuststats.errors import InputError
from robuststats.report.training_curves import reward_curves_figure


def test_reward_curves_figure_writes_a_png_and_checks_its_table(tmp_path):
    curves = pd.DataFrame([{"condition": c, "train_seed": s, "step": t, "reward": 0.1 * t + s}
                           for c in ("E8a", "E8b") for s in (0, 1) for t in (1, 2, 3)])
    out = reward_curves_figure(curves, tmp_path / "curves.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(InputError, match=r"lacks columns \['reward'\]"):
        reward_curves_figure(curves.drop(columns="reward"), tmp_path / "x.png")
    with pytest.raises(InputError, match="no rows"):
        reward_curves_figure(curves.iloc[:0], tmp_path / "x.png")
