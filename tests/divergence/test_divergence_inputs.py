"""Conditions, the sensitivity file and the order of the exceedance table (no model)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from robuststats.config.sensitivity import read_layer_sensitivity
from robuststats.divergence import exceeding_table, parse_condition
from robuststats.errors import InputError


def test_condition_strings_and_mappings(tmp_path):
    c = parse_condition("bf16+nvfp4-weights", name="--candidate")
    assert (c.dtype, c.device, c.noise.kind, c.noise.target) == ("bfloat16", "cpu", "nvfp4",
                                                                 "weights")
    assert c.noise.layer_scales == {"lm_head": 0.0} and c.noise_label == "nvfp4_weights"
    g = parse_condition("relative_gaussian@0.05+cuda:1")
    assert (g.noise.scale, g.noise.kind, g.device) == (0.05, "relative_gaussian", "cuda:1")
    assert parse_condition("fp32").noise is None
    m = parse_condition("{name: planted, noise: {scale: 0.1, kind: relative_gaussian, "
                        "layers: 2}, noise_seed: 3}")
    assert (m.name, m.noise.seed, m.noise.layer_indices) == ("planted", 3, (2,))
    path = tmp_path / "npu.yaml"
    path.write_text("dtype: fp16\ncheckpoint: ckpts/npu\n")
    f = parse_condition(str(path))
    assert (f.name, f.dtype, f.checkpoint) == ("npu", "float16", "ckpts/npu")


@pytest.mark.parametrize("value, message", [
    ("bf16+fp16", r"`c`: two dtypes in 'bf16\+fp16'"),
    ("nvfp4_weight", r"`c`: 'nvfp4_weight' is not a dtype, a device or an error model "
                     r"\(did you mean 'nvfp4_weights'\?\)"),
    ("relative_gaussian@x", r"`c`: level 'x' is not a number"),
    ("relative_gaussian@-1", r"the level of 'relative_gaussian' must be a positive number"),
    ("{device: tpu}", r"`c.device` must be cpu, cuda, cuda:N, npu, npu:N, xpu, xpu:N or mps, got 'tpu'"),
    ("{noise: {scale: -1}}", r"`c.noise`: `scale` must be a non-negative number"),
    ("{noise_seed: -2}", r"`c.noise_seed` must be a non-negative integer"),
    ("[1, 2]", r"`c`: .* is not a dtype"),
    ("x.yaml", r"`c`: condition file 'x.yaml' does not exist"),
])
def test_bad_conditions_name_the_flag(value, message):
    with pytest.raises(InputError, match=message):
        parse_condition(value, name="c")


def test_sensitivity_files(tmp_path):
    diag = tmp_path / "s.json"
    diag.write_text(json.dumps({"format": "robuststats.sensitivity", "format_version": 1,
                                "layers": {"0": {"sensitivity": 2.0, "estimate": 0.1,
                                                 "significant": True},
                                           "1": {"sensitivity": -0.5, "estimate": -0.02,
                                                 "significant": True},
                                           "2": {"sensitivity": None, "estimate": None}}}))
    s = read_layer_sensitivity(diag)
    assert s[0]["sensitive"] is True
    assert s[1]["sensitive"] is False  # significant, but noise helped: not sensitive
    assert s[2] == {"sensitivity": None, "sensitive": False, "significant": None,
                    "estimate": None, "rank": None}
    plain = tmp_path / "plain.yaml"
    plain.write_text("0: 0.3\n1: 0.1\n")
    assert read_layer_sensitivity(plain) == {0: {"sensitivity": 0.3, "sensitive": False,
                                                 "significant": None},
                                             1: {"sensitivity": 0.1, "sensitive": False,
                                                 "significant": None}}
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "robuststats.sensitivity", "format_version": 1}')
    with pytest.raises(InputError, match=r"`sensitivity`: .* has no 'layers' mapping"):
        read_layer_sensitivity(bad)
    bad.write_text("{not json")
    with pytest.raises(InputError, match=r"`sensitivity`: .* \(line 1\) is not valid JSON"):
        read_layer_sensitivity(bad)


def _modules(rows):
    return pd.DataFrame([{"mode": "accumulated", "site": s, "layer": layer,
                          "module_type": "t", "n_items": 10, "mape": m, "mape_ci_low": lo,
                          "mape_ci_high": hi, "rel_rms": m / 3, "cosine": 0.99,
                          "ci_level": 0.95, "ci_method": "t over items"}
                         for s, layer, m, lo, hi in rows])


def test_exceedance_verdicts_and_order():
    t = _modules([("a", 0, 0.20, 0.15, 0.25), ("b", 1, 0.06, 0.04, 0.08),
                  ("c", 2, 0.04, 0.03, 0.05), ("d", 3, 0.10, 0.07, 0.13)])
    plain = exceeding_table(t, 0.05)
    assert plain["site"].tolist() == ["a", "d", "b"]  # c's interval ends at the bound
    assert plain["verdict"].tolist() == ["exceeds", "exceeds", "inconclusive"]
    sens = {1: {"sensitivity": 5.0, "sensitive": True}, 3: {"sensitivity": 1.0,
                                                            "sensitive": False},
            0: {"sensitivity": 0.1, "sensitive": False}}
    ordered = exceeding_table(t, 0.05, sensitivity=sens)
    # the sensitive layer first, then predicted harm: d (1.0 × 0.10) before a (0.1 × 0.20)
    assert ordered["site"].tolist() == ["b", "d", "a"]
    assert ordered["priority"].tolist() == pytest.approx([0.3, 0.1, 0.02])
    assert ordered["rank"].tolist() == [1, 2, 3]
    assert math.isnan(exceeding_table(t, 0.05, sensitivity={1: {"sensitivity": None,
                                                                "sensitive": False}})
                      ["sensitivity"].iloc[-1])
