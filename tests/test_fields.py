"""The shared spec loader (robuststats._fields) and data-file parser (robuststats._datafile)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from robuststats._datafile import DataSyntaxError, parse_data
from robuststats._fields import check_whole, field_names, from_mapping
from robuststats.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("value", "kwargs", "message"), [
    (-1, {}, "`k` must be a non-negative integer, got -1."),
    (True, {"low": 1}, "`k` must be a positive integer, got True."),
    (1.0, {"low": 1}, "`k` must be a positive integer, got 1.0."),
    ("3", {}, "`k` must be a non-negative integer, got '3'."),
    (1, {"low": 2}, "`k` must be an integer >= 2, got 1."),
    (1, {"low": 2, "what": "an integer ≥ 2"}, "`k` must be an integer ≥ 2, got 1."),
    (10**7, {"low": 1, "high": 10**6}, "`k` must be at most 1,000,000, got 10000000."),
    (0, {"low": 1, "high": 5000, "interval": True}, "`k` must be an integer in [1, 5,000], got 0."),
    (5001, {"low": 1, "high": 5000, "interval": True},
     "`k` must be an integer in [1, 5,000], got 5001."),
    (-1, {"high": 8, "what": "an integer >= 0", "interval": True},
     "`k` must be an integer >= 0, got -1."),
])
def test_check_whole_words_each_bound_once(value, kwargs, message) -> None:
    with pytest.raises(InputError) as info:
        check_whole(value, "k", **kwargs)
    assert str(info.value) == message


def test_check_whole_returns_the_value() -> None:
    assert check_whole(0, "k") == 0
    assert check_whole(7, "k", low=1, high=7) == 7
    # a numpy integer is not what a YAML or JSON file gives: refused like a float
    np = pytest.importorskip("numpy")
    with pytest.raises(InputError, match="non-negative integer"):
        check_whole(np.int64(3), "k")


@dataclass(frozen=True)
class _Spec:
    size: int
    name: str = "x"

    def __post_init__(self) -> None:
        check_whole(self.size, "size", low=1)


def test_from_mapping_checks_keys_then_values() -> None:
    assert field_names(_Spec) == ["size", "name"]
    assert from_mapping(_Spec, {"size": 2}, "spec") == _Spec(2)
    with pytest.raises(InputError) as info:
        from_mapping(_Spec, {"size": 2, "nme": "y"}, "spec")
    assert str(info.value) == ("spec: unknown key 'nme' (did you mean 'name'?); allowed keys: "
                               "'size', 'name'.")
    with pytest.raises(InputError, match=r"spec: missing required key\(s\) \['size'\]"):
        from_mapping(_Spec, {}, "spec", required=("size",))
    with pytest.raises(InputError, match="spec must be a mapping, got list"):
        from_mapping(_Spec, [], "spec")
    with pytest.raises(InputError, match="`size` must be a positive integer, got 0"):
        from_mapping(_Spec, {"size": 0}, "spec")


def test_parse_data_by_suffix() -> None:
    assert parse_data("a: 1", ".YML") == {"a": 1}
    assert parse_data('{"a": 1}', ".json") == {"a": 1}
    assert parse_data('{"a": 1}', "") == {"a": 1}  # anything but YAML is JSON
    with pytest.raises(DataSyntaxError) as info:
        parse_data('{"a": 1,\n', ".json")
    assert (info.value.format, info.value.line) == ("JSON", 2)
    with pytest.raises(DataSyntaxError) as info:
        parse_data("a: [1,\n  b", ".yaml")
    assert info.value.format == "YAML" and info.value.line == 2
    assert "expected ',' or ']'" in info.value.reason


def test_base_modules_stay_light() -> None:
    # the command line's bounds use check_whole: it must not pull numpy or yaml in
    code = ("import sys, robuststats._fields, robuststats._datafile, robuststats.config.bounds; "
            "print(sorted(m for m in ('numpy', 'yaml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out.strip() == "[]"
