"""Workers die with a killed parent at any moment, their start-up included (issue 23, item 6).

``scripts/kill_harness.py`` starts a parent holding two workers (the pool of the study and
the probe, or the search's own processes), SIGKILLs it at a chosen moment, and, as a child
subreaper, times how long anything the parent left behind (workers, the resource tracker,
their children) lives on. Before, a spawned worker set its parent-death signal only in the
pool initializer, after importing its parent's main module (torch: seconds on a busy
machine): killed in that window, the workers and the resource tracker lived 6 to 12 s on a
loaded 2-core machine (``busy`` too: the workers were still starting 5 s after spawning).
Now the first line a worker runs asks for it, and everything is gone within a fraction of
a second (measured 0.05 to 0.25 s).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).resolve().parent / "scripts" / "kill_harness.py"
#: seconds within which every process a killed parent left must be gone
LIMIT = 1.5

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/proc/self/stat").exists(),
    reason="PR_SET_PDEATHSIG and the process table of /proc are Linux's")


def _kill(mode: str, moment: str, delay: float) -> dict:
    env = {**os.environ, "ROBUSTSTATS_ROOT": str(ROOT)}
    done = subprocess.run([sys.executable, str(HARNESS), mode, moment, f"{delay:.3f}"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(result)
    return result


def _check(result: dict) -> None:
    assert result["killed"], "the parent had exited before the kill"
    assert result["gone_after"] is not None, f"still alive 20 s later: {result['survivors']}"
    assert result["gone_after"] < LIMIT, result


@pytest.mark.parametrize("mode,moment,delay", [
    ("pool", "spawn", 0.0),     # the first worker has just been forked
    ("pool", "spawn", 0.3),     # both are importing
    ("pool", "busy", 0.0),
    ("search", "spawn", 0.0),
])
def test_workers_and_tracker_die_with_a_killed_parent(mode, moment, delay):
    _check(_kill(mode, moment, delay))


@pytest.mark.slow
def test_kills_at_random_moments_leave_nothing_behind():
    rng = random.Random(23)
    draws = [("pool", "start", rng.uniform(0.0, 3.0))]
    draws += [(rng.choice(["pool", "search"]), "spawn", rng.uniform(0.0, 2.5))
              for _ in range(8)]
    results = [_kill(*draw) for draw in draws]
    for result in results:
        _check(result)
