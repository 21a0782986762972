from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from robuststats.cli import main
from robuststats.results import ResultStore


def _version(root: Path, acc: float) -> None:
    def writer(path: Path) -> None:
        pd.DataFrame({"id": ["H1"], "verdict": ["VERIFIED"], "estimate": [acc],
                      "ci_low": [0.01], "ci_high": [0.2], "test": ["x"], "reason": [""]}
                     ).to_parquet(path / "hypotheses.parquet")
        pd.DataFrame({"condition": ["A"], "eval_noise": [0.0], "accuracy": [acc]}).to_parquet(
            path / "summary.parquet")
    ResultStore(root).write("demo", writer, {"spec_hash": "f" * 64, "cells_planned": 4,
                                              "cells_finished": 4})


@pytest.mark.parametrize("argv", [["results", "--help"], ["results", "verify", "--help"],
                                  ["results", "diff", "--help"]])
def test_help(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_list_show_verify_diff(tmp_path: Path, capsys) -> None:
    root = ["results", "--root", str(tmp_path)]
    assert main([*root, "list"]) == 0
    assert "no result versions" in capsys.readouterr().out
    _version(tmp_path, 0.8)
    _version(tmp_path, 0.9)
    assert main([*root, "list"]) == 0
    out = capsys.readouterr().out
    assert "demo/v1" in out and "demo/v2" in out and "4/4 cells" in out
    assert main([*root, "show", "demo"]) == 0
    out = capsys.readouterr().out
    assert "demo/v2" in out and "VERIFIED" in out
    assert main([*root, "verify", "demo/v1", "demo/v2"]) == 0
    assert capsys.readouterr().out.count(": OK") == 2
    assert main([*root, "verify", "demo", "v1"]) == 0  # the spelling in results/README.md
    assert capsys.readouterr().out.startswith("demo/v1: OK")
    assert main([*root, "diff", "demo/v1", "demo/v1"]) == 0
    assert "tables identical" in capsys.readouterr().out
    assert main([*root, "diff", "demo/v1", "demo/v2"]) == 1
    out = capsys.readouterr().out
    assert "summary" in out and "accuracy" in out and "hypotheses" in out


def test_verify_detects_modified_file(tmp_path: Path, capsys) -> None:
    _version(tmp_path, 0.8)
    target = tmp_path / "demo" / "v1" / "summary.parquet"
    target.chmod(0o644)
    pd.DataFrame({"condition": ["A"], "eval_noise": [0.0], "accuracy": [0.99]}).to_parquet(target)
    assert main(["results", "--root", str(tmp_path), "verify", "demo"]) == 1
    assert "demo/v1: changed: summary.parquet" in capsys.readouterr().out


def test_unknown_version_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    _version(tmp_path, 0.8)
    assert main(["results", "--root", str(tmp_path), "show", "demo/v9"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "robuststats results: error: demo/v9 does not exist; versions: v1."
