"""``robuststats search``: one-line errors (exit 2) before any compute, --check, JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robuststats.cli import main
from tests.search.conftest import tiny, write


def test_help(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["search", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--trials", "--workers", "--storage", "--out", "--fresh", "--check"):
        assert flag in out
    assert "optuna-dashboard" in out


@pytest.mark.parametrize(("argv", "match"), [
    (["--trials", "0"], "argument --trials: must be a positive integer, got '0'"),
    (["--workers", "x"], "argument --workers: must be a positive integer"),
    (["--storage", "x.txt"], "--storage 'x.txt' is neither a URL"),
    (["--storage", "sqlite:////proc/nope/s.db"], "--storage"),
])
def test_bad_flags_exit_2_with_one_line(tmp_path: Path, capsys, argv: list[str],
                                        match: str) -> None:
    path = write(tmp_path / "s.yaml", tiny())
    code = main(["search", str(path), "--out", str(tmp_path / "o"),
                 "--runs", str(tmp_path / "r"), *argv]) if argv[0] != "--trials" and \
        argv[0] != "--workers" else None
    if code is None:
        with pytest.raises(SystemExit) as info:
            main(["search", str(path), *argv])
        code = info.value.code
    err = capsys.readouterr().err
    assert code == 2
    assert match in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()  # nothing was built


def test_bad_search_file_names_key_and_line(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "s.yaml", tiny(**{"search.bound": 2}))
    assert main(["search", str(path), "--runs", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("robuststats search: error: ")
    assert "search.bound (line " in err and err.count("\n") == 1


def test_out_that_is_a_file_is_refused_before_compute(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "s.yaml", tiny())
    (tmp_path / "file").write_text("")
    assert main(["search", str(path), "--out", str(tmp_path / "file"),
                 "--runs", str(tmp_path / "r")]) == 2
    assert "--out" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_check_prints_the_plan_and_runs_nothing(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "s.yaml", tiny())
    assert main(["search", str(path), "--check", "--trials", "7", "--runs",
                 str(tmp_path / "r"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["valid"] and data["trials"] == 7 and data["search_items"] == 20
    assert data["holdout_items"] == 20 and data["reevaluation_noise_seeds"] == [1, 2]
    assert data["storage"] == f"sqlite:///{tmp_path / 'r'}/tiny_search/search.db"
    assert not (tmp_path / "r").exists()


def test_a_search_from_the_command_line(tmp_path: Path, capsys, seed_runs) -> None:
    runs = seed_runs()
    path = write(tmp_path / "s.yaml", tiny(**{"search.reevaluation.noise_seeds": 1}))
    code = main(["search", str(path), "--trials", "3", "--runs", str(runs), "--out",
                 str(tmp_path / "out"), "--no-progress", "--format", "json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["trials_finished"] == 3 and data["ok"]
    assert Path(data["path"], "noise_config.yaml").is_file()
    assert {r["config"] for r in data["reevaluation"]} >= {"chosen", "uniform"}
