"""Sensitivity files: the formats the diagnostic probe and users write; the seeds' rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robuststats.errors import InputError
from robuststats.search import heuristic_multipliers, read_sensitivity


@pytest.mark.parametrize(("name", "text"), [
    ("map.json", '{"0": 0.2, "1": 0.05, "2": 0.01}'),
    ("map.yaml", "0: 0.2\n1: 0.05\n2: 0.01\n"),
    ("records.json", json.dumps([{"layer": 0, "sensitivity": 0.2, "ci_low": 0.1},
                                 {"layer": 1, "sensitivity": 0.05},
                                 {"layer": 2, "sensitivity": 0.01}])),
    ("nested.json", json.dumps({"provenance": {"tool": "probe"},
                                "layers": [{"layer": 2, "sensitivity_score": 0.01},
                                           {"layer": 0, "score": 0.2},
                                           {"layer": 1, "sensitivity": 0.05}]})),
    ("nested.yaml", "sensitivity:\n  0: 0.2\n  1: 0.05\n  2: 0.01\n"),
])
def test_accepted_formats(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text)
    assert read_sensitivity(tmp_path / name) == {0: 0.2, 1: 0.05, 2: 0.01}


@pytest.mark.parametrize(("text", "match"), [
    ('{"a": 0.1}', r"key 'a' must be a layer index"),
    ('{"0": "high"}', r"layer 0 must be a finite number, got 'high'"),
    ('{"0": NaN}', r"layer 0 must be a finite number"),
    ('[{"layer": 0}]', r"record 0 has no 'sensitivity' score"),
    ('[{"sensitivity": 0.1}]', r"record 0 must be a mapping with 'layer'"),
    ('[{"layer": 1, "sensitivity": 0.1}, {"layer": 1, "sensitivity": 0.2}]',
     r"layer 1 appears twice"),
    ('[{"layer": -1, "sensitivity": 0.1}]', r"record 0 'layer' must be a layer index"),
    ("{}", r"holds no layer"),
    ("3", r"must hold a mapping"),
    ("{", r"\(line 1\) is not valid JSON"),
])
def test_bad_files_are_one_line_errors(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(text)
    with pytest.raises(InputError, match=match):
        read_sensitivity(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"sensitivity file .* does not exist"):
        read_sensitivity(tmp_path / "none.json")


def test_heuristic_is_the_seeds_rule() -> None:
    # seed 003 §4.3: > 0.10 critical -> 0.5x, < 0.02 robust -> 2x, else 1x; unscored: 1x
    got = heuristic_multipliers({0: 0.25, 1: 0.10, 2: 0.019, 3: 0.02}, 5,
                                sensitive_above=0.10, robust_below=0.02,
                                sensitive_factor=0.5, robust_factor=2.0)
    assert got == {0: 0.5, 1: 1.0, 2: 2.0, 3: 1.0, 4: 1.0}
    # seed 004's thresholds
    got = heuristic_multipliers({0: 0.12, 1: 0.04}, 2, sensitive_above=0.15, robust_below=0.05,
                                sensitive_factor=0.5, robust_factor=2.0)
    assert got == {0: 1.0, 1: 2.0}
    with pytest.raises(InputError, match="names layer 7, but the model has 2 decoder layers"):
        heuristic_multipliers({7: 0.1}, 2, sensitive_above=0.1, robust_below=0.02,
                              sensitive_factor=0.5, robust_factor=2.0)
