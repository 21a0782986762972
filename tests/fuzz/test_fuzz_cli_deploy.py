"""Fuzz the commands built on the spine: ``gate``, ``divergence``, ``diagnose``, ``search``.

Random argument vectors from each command's flags, nasty values and damaged or unsuitable
files, run in-process. They only promise the contract: no traceback, no hang, exit 0 or 2
(``gate`` may also exit 1: a failed gate), and an error is one line naming the command.
No vector here can start a real computation: the study files given to ``diagnose`` and
``search`` are damaged or not studies, ``divergence`` gets no model, and ``gate`` compares
a stored result version with itself (statistics on stored outcomes only).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fuzz_harness import assert_rejected, check_contract, run_cli
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
LONG = "/" + "a" * 5000
NASTY = ["", " ", "-", "--", "nan", "inf", "-inf", "-1", "0", "1", "0.5", "1e308", "x",
         "\x00", "a\nb", "é", "\x1b[2J", LONG, "../..", "/dev/null", "/", "{", "[1, 2]",
         "{checkpoint: /nonexistent}", "bf16+", "+", "nvfp4_weights", "cuda:99"]

FLAGS = {
    "gate": ["--baseline", "--max-degradation", "--margin-type", "--metric", "--alpha",
             "--eval-noise", "--baseline-condition", "--candidate-condition", "--seeds",
             "--seed-pairing", "--root", "--workers", "--format"],
    "divergence": ["--reference", "--candidate", "--items", "--texts", "--condition",
                   "--seed", "--modules", "--max-mape", "--sensitivity", "--eps",
                   "--batch-size", "--max-length", "--interval", "--confidence-level",
                   "--name", "--format", "--capture", "--subset-size", "--projection-dim",
                   "--sketch-seed"],
    "diagnose": ["--levels", "--window", "--stride", "--scale", "--condition", "--seeds",
                 "--noise-seeds", "--n-items", "--format"],
    "search": ["--trials", "--workers", "--storage", "--format"],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("deploy")
    store = root / "store"
    shutil.copytree(ROOT / "results" / "e8_matrix" / "v2", store / "e8_matrix" / "v2")
    bad = store / "bad" / "v1"
    shutil.copytree(store / "e8_matrix" / "v2", bad)
    (bad / "manifest.json").write_text("[1]")
    (root / "bad.yaml").write_text("name: [\n")
    (root / "notstudy.yaml").write_text("just: a mapping\n")
    (root / "garbage.parquet").write_bytes(b"\xff\x00garbage" * 10)
    (root / "empty.csv").write_text("")
    (root / "dir").mkdir()
    (root / "dir" / "config.json").write_text("{")
    return {"store": str(store), "version": str(store / "e8_matrix" / "v2"),
            "bad_version": str(bad), "bad.yaml": str(root / "bad.yaml"),
            "notstudy.yaml": str(root / "notstudy.yaml"),
            "garbage": str(root / "garbage.parquet"), "empty": str(root / "empty.csv"),
            "dir": str(root / "dir"), "out": str(root / "out"), "runs": str(root / "runs")}


def _base(command: str, f: dict[str, str], operand: str) -> list[str]:
    tail = ["--out", f["out"], "--runs", f["runs"], "--no-progress"]
    if command == "gate":
        return ["gate", operand, "--baseline", f["version"], "--baseline-condition", "E8a",
                "--candidate-condition", "E8c", "--max-degradation", "0.15", *tail]
    if command == "divergence":
        return ["divergence", operand, "--candidate", "bf16", *tail]
    return [command, operand, *tail]


@st.composite
def vectors(draw: st.DrawFn, files: dict[str, str]) -> list[str]:
    command = draw(st.sampled_from(sorted(FLAGS)))
    paths = [files["bad.yaml"], files["notstudy.yaml"], files["garbage"], files["empty"],
             files["dir"], files["bad_version"], "/nonexistent", LONG]
    operand = draw(st.sampled_from([*paths, "\x00", ""]))
    if command == "gate" and draw(st.booleans()):
        operand = files["version"]  # the baseline's study against itself: stored outcomes
    argv = _base(command, files, operand)
    flags = FLAGS[command] + ["--bogus", "-h"]
    values = st.one_of(st.sampled_from(NASTY), st.sampled_from(paths), st.text(max_size=10))
    for _ in range(draw(st.integers(0, 4))):
        argv.append(draw(st.sampled_from(flags)))
        if draw(st.integers(0, 5)):
            argv.append(draw(values))
    return argv


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_vectors_keep_the_contract(data: st.DataObject, files: dict[str, str]) -> None:
    argv = data.draw(vectors(files))
    outcome = run_cli(argv)
    event(f"{argv[0]} exit {outcome.code}")
    check_contract(outcome, may_exit_1=argv[0] == "gate")


@pytest.mark.parametrize("command", sorted(FLAGS))
@pytest.mark.parametrize("operand", ["bad.yaml", "garbage", "dir", "/nonexistent", "\x00"])
def test_unusable_operand_is_one_line_naming_it(command: str, operand: str,
                                                files: dict[str, str]) -> None:
    value = files.get(operand, operand)
    line = assert_rejected(run_cli(_base(command, files, value)))
    assert line.startswith(f"robuststats {command}: error: "), line
