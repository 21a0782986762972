"""A newcomer's first hour, as the README orders it: a clone, `make demo`, `make test`, then
the tour's commands. Fails on any traceback, any foreign warning line and any test failure.

The clone is made with git from this checkout (what a user gets: the committed files only).
The set-up `make` does on a fresh machine (a new `.venv/`) is what CI's own set-up has just
done, so the clone's `make` reuses this interpreter's environment (``VENV``, the install
stamp marked as up to date with ``-o``) and imports the clone's package (``PYTHONPATH``).
To stay within minutes on 2 cores:

* the demo runs with one training seed per condition, through the documented Makefile
  variable (`make demo SEEDS=1`: 4 models);
* `make test` runs the README's own tests (``PYTEST_ARGS``), the ones a demo's new version
  used to break; the whole fast suite runs in CI's own step;
* the tour's commands run as written, except those that need files the tour does not
  make (`new.parquet`, `evals/live.csv`, `inspect_runs.yaml`, `gpu.npz`), the five-seed
  study (the demo ran the study), the shell lines (`source`, a pipe into `jq`), which
  `tests/test_readme.py` parses instead.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

#: lines that are not robuststats' own: Python's warnings (`path.py:12: SomeWarning: ...`
#: and the source line under it), torch's glog-style warnings (`W1128 18:10:47.39 ...`),
#: torchao's failed extension loads, and any traceback
FOREIGN = re.compile(r"Traceback \(most recent call last\)|^\S+\.py:\d+: \w*Warning: |"
                     r"^\s+warnings\.warn\(|^[WE]\d{4} \d\d:\d\d:\d\d|Failed to load .*\.so|"
                     r"register_constant", re.MULTILINE)
#: tour commands left out here (module docstring), by a word of the line
SKIPPED = ("new.parquet", "evals/live.csv", "inspect_runs.yaml", "gpu.npz", "--workers")


def _tour() -> list[list[str]]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tour = readme.split("## A short tour", 1)[1]
    block = re.search(r"```bash\n(.*?)```", tour, flags=re.DOTALL).group(1)
    commands = []
    for line in block.splitlines():
        if "|" in line:
            continue
        line = line.split("#", 1)[0].strip()
        if line.startswith("robuststats ") and not any(s in line for s in SKIPPED):
            commands.append(shlex.split(line))
    return commands


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: int, *,
         codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    foreign = FOREIGN.search(done.stdout + "\n" + done.stderr)
    assert foreign is None, (f"{' '.join(argv)}: a foreign line ({foreign.group(0)!r}):\n"
                             f"{done.stderr[-3000:]}")
    assert done.returncode in codes, f"{' '.join(argv)} exited {done.returncode}:\n" \
                                 f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def test_the_readme_in_its_order_on_a_clone(tmp_path: Path) -> None:
    if shutil.which("git") is None or shutil.which("make") is None:
        pytest.skip("needs git and make")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    clone = tmp_path / "robuststats"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True,
                   timeout=300)
    venv = Path(sys.prefix)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COV"))},
           "PYTHONPATH": str(clone), "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    make = ["make", f"VENV={venv}", "-o", str(venv / ".robuststats-installed")]
    if not (venv / "bin" / "robuststats").exists():
        pytest.skip("the environment has no robuststats command to run the demo with")

    # 1. make demo (one seed per condition), then 2. make test: the README's order
    demo = _run([*make, "demo", "SEEDS=1"], clone, env, timeout=1500)
    assert "e8_matrix/v3" in demo.stdout + demo.stderr  # the next version after v1, v2
    assert (clone / "results" / "e8_matrix" / "v3" / "manifest.json").is_file()
    tests = _run([*make, "test", "PYTEST_ARGS=tests/test_readme.py -n 0 -p no:cacheprovider"],
                 clone, env, timeout=900)
    assert re.search(r"\b\d+ passed\b", tests.stdout) and " failed" not in tests.stdout

    # 3. the tour's lines, as written, in the clone with the demo's version in place
    commands = _tour()
    assert len(commands) >= 12
    for argv in commands:
        # `results diff` exits 1 when the versions differ, as diff(1) does: a one-seed demo
        # differs from the committed five-seed run
        codes = (0, 1) if argv[1:3] == ["results", "diff"] else (0,)
        _run([str(venv / "bin" / "robuststats"), *argv[1:]], clone, env, timeout=600,
             codes=codes)
