"""The README works as written: its Python snippet runs, and its commands parse."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def test_the_engine_snippet_runs_as_written() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    (snippet,) = _blocks("python")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(snippet, "README.md", "exec"), {"__name__": "readme"})
    printed = out.getvalue()
    # the stats table it prints: noise reached the matmuls of both layers at the asked scale
    assert "attention_scores" in printed and "linear" in printed
    rows = [line.split() for line in printed.splitlines()[1:] if line.strip()]
    layers = {int(r[1]) for r in rows}
    assert {0, 1} <= layers
    ratios = [float(r[-2]) for r in rows]
    assert all(0.03 < r < 0.07 for r in ratios), ratios


def test_every_command_of_the_tour_parses() -> None:
    from robuststats.cli import build_parser

    commands = []
    for block in _blocks("bash"):
        for line in block.splitlines():
            line = line.split("#", 1)[0].split("|", 1)[0].strip()
            if line.startswith("robuststats "):
                commands.append(shlex.split(line)[1:])
    assert len(commands) >= 8
    parser = build_parser()
    for argv in commands:
        args = parser.parse_args(argv)  # an unknown flag exits 2 here
        assert args.command == argv[0]


def test_the_demo_section_matches_the_makefile() -> None:
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    demo = re.search(r"^demo:.*\n\t(.+)$", makefile, flags=re.MULTILINE).group(1)
    assert "robuststats study studies/e8_matrix.yaml --seeds $(SEEDS)" in demo
    assert re.search(r"^SEEDS \?= 5$", makefile, flags=re.MULTILINE)
    assert "`robuststats study studies/e8_matrix.yaml --seeds 5`" in README
    assert "`make demo SEEDS=1`" in README  # the variable is documented where users look
    assert "-c requirements/constraints-cpu.txt torch" in makefile  # the pin, everywhere


def test_the_sample_output_is_what_the_command_prints(capsys) -> None:
    """The README's ``results show`` lines are the command's own output, verbatim."""
    from robuststats.cli import main

    text = README.split("`robuststats results show e8_matrix/v2`", 1)[1]
    sample = text.split("```", 2)[1].strip("\n").splitlines()
    root = Path(__file__).resolve().parents[1] / "results"
    assert main(["results", "--root", str(root), "show", "e8_matrix/v2"]) == 0
    printed = capsys.readouterr().out.splitlines()
    lines = [line for line in sample if line != "..."]
    assert len(lines) >= 2
    for line in lines:
        assert line in printed, line


def _committed_versions(study: str) -> list[int]:
    """The versions of ``results/<study>/`` the repository holds: those git tracks, so a
    ``make demo`` run before the tests (the README's order) does not count its own new
    version as a committed one; every version on disk outside a git checkout."""
    root = Path(__file__).resolve().parents[1]
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", f"results/{study}"],
                                capture_output=True, text=True, timeout=60, check=True)
        names = {Path(line).parts[2] for line in listed.stdout.splitlines()
                 if len(Path(line).parts) > 3}
    except (OSError, subprocess.SubprocessError):
        names = {p.name for p in (root / "results" / study).glob("v*")}
    return sorted(int(n[1:]) for n in names if n.startswith("v") and n[1:].isdigit())


def test_the_demo_writes_the_next_version_after_the_committed_ones() -> None:
    committed = _committed_versions("e8_matrix")
    nxt = f"results/e8_matrix/v{committed[-1] + 1}/"
    assert f"`{nxt}` on a fresh clone" in README
    assert f"e8_matrix/v{committed[-1]} e8_matrix/v{committed[-1] + 1}" in README
