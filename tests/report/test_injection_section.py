"""The injection section keeps error models apart (per-call noise, static noise, formats)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from robuststats.report._injections import error_model_label, injection_section

KEYS = ["condition", "seed", "eval_noise", "noise_seed"]
# condition → (engine kind, target, count per cell, realised ratio, target scale)
MODELS = {"gauss": ("relative_gaussian", "output", 40, 0.05, 0.05),
          "static": ("relative_gaussian", "weights", 20, 0.05, 0.05),
          "nvfp4": ("nvfp4", "weights", 20, 0.095, 1.0)}


def _write(tmp_path: Path, *, engine_columns: bool, silent: tuple = ()) -> None:
    cells = [(c, s, n, ns) for c in MODELS for s in (0, 1)
             for n, ns in ((0.0, 0), (0.05, 0), (0.05, 1))]
    pd.DataFrame([{"condition": c, "seed": s, "eval_noise": n, "noise_seed": ns,
                   "item_id": "i0", "correct": 1} for c, s, n, ns in cells]
                 ).to_parquet(tmp_path / "outcomes.parquet")
    rows = []
    for c, s, n, ns in cells:
        if n == 0 or (c, s, n, ns) in silent:
            continue
        kind, target, count, ratio, scale = MODELS[c]
        row = {"condition": c, "seed": s, "eval_noise": n, "noise_seed": ns, "layer": 0,
               "op": "linear", "phase": "forward", "count": count, "rms_noise_ratio": ratio,
               "target_scale": scale}
        if engine_columns:
            row.update(kind=kind, target=target)
        rows.append(row)
    pd.DataFrame(rows).to_parquet(tmp_path / "injections.parquet")


def _table(parts: list[str]) -> list[str]:
    return [line for line in parts[1].splitlines() if line.startswith("| ")][2:]


def test_each_error_model_has_its_own_row(tmp_path: Path) -> None:
    # the regression: seed002's report pooled Gaussian, static and NVFP4 cells into one
    # row at "5%", with a target scale of 0.163 that none of them had
    _write(tmp_path, engine_columns=True)
    rows = _table(injection_section(tmp_path))
    assert rows == [
        "| relative_gaussian on op results, drawn on every call | a noisy op result | 5% | 4 | "
        "4 | 160 | 0.05 | 0.05 |",
        "| static relative_gaussian weight noise, drawn once per noise seed | a product with "
        "the perturbed weight | 5% | 4 | 4 | 80 | 0.05 | 0.05 |",
        "| nvfp4 weights (weight-only quantization) | a product with quantized weights | 5% | "
        "4 | 4 | 80 | 0.095 | 1 |",
    ]


def test_error_models_from_the_spec_of_a_sealed_version(tmp_path: Path) -> None:
    _write(tmp_path, engine_columns=False, silent=(("nvfp4", 1, 0.05, 1),))
    spec = {"evaluation": {"kind": "relative_gaussian"},
            "conditions": {"gauss": {}, "static": {"eval_kind": "static_relative_gaussian"},
                           "nvfp4": {"eval_kind": "nvfp4_weights"}}}
    (tmp_path / "manifest.json").write_text(json.dumps({"spec": spec}))
    parts = injection_section(tmp_path)
    rows = _table(parts)
    assert [r.split(" | ")[0] for r in rows] == [
        "| relative_gaussian on op results, drawn on every call",
        "| static relative_gaussian weight noise, drawn once per noise seed",
        "| nvfp4 weights (weight-only quantization)"]
    assert rows[2].endswith("| 5% | 4 | 3 | 60 | 0.095 | 1 |")
    assert "nvfp4 seed 1 at 5% noise (noise seed 1)" in parts[2]


def test_without_a_record_of_the_error_model_it_says_so(tmp_path: Path) -> None:
    _write(tmp_path, engine_columns=False)
    rows = _table(injection_section(tmp_path))
    assert rows == ["| error model not recorded | - | 5% | 12 | 12 | 320 | 0.06125 | 0.2875 |"]


@pytest.mark.parametrize(("kind", "target", "label"), [
    ("fp8_e4m3", "inputs", "fp8_e4m3 weights and activations (input quantization)"),
    ("int8", "output", "int8 rounding of op results"),
    ("systematic_bias", "output", "systematic_bias on op results"),
    ("absolute_gaussian", None, "absolute_gaussian on op results, drawn on every call"),
    (None, None, "error model not recorded"),
])
def test_error_model_labels(kind, target, label) -> None:
    assert error_model_label(kind, target)[0] == label
