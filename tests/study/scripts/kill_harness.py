"""Start a pool parent, SIGKILL it at a chosen moment, and time how long its processes live.

``kill_harness.py MODE MOMENT DELAY``: runs ``pool_parent.py MODE 4`` and kills it DELAY
seconds after MOMENT: ``start`` (the parent started), ``spawn`` (its first worker exists),
``busy`` (its workers exist and have run for a while). The harness is a child subreaper
(Linux), so every process the parent left (workers, the resource tracker, anything they
started) becomes its child: none can escape the count. Prints one JSON line: the seconds
from the kill until the last of them was gone (``null`` if some lived 20 s), the processes
that were there at the kill, and whether the kill found the parent alive.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/study: proctable

from proctable import children  # noqa: E402


def _children(pid: int) -> set[int]:
    return children(pid, living=True)


def _what(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "?"
    return "tracker" if "resource_tracker" in cmd else "worker" if "fork" in cmd else cmd[:60]


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main() -> None:
    mode, moment, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    parent = subprocess.Popen([sys.executable, str(HERE / "pool_parent.py"), mode, "4"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    start = time.monotonic()
    if moment != "start":
        want = "busy" if moment == "busy" else "worker"
        while time.monotonic() - start < 120 and parent.poll() is None:
            if any(_what(c) == "worker" for c in _children(parent.pid)):
                break
            time.sleep(0.002)
        if want == "busy":
            time.sleep(5.0)
    time.sleep(delay)
    at_kill = {c: _what(c) for c in _children(parent.pid)}
    os.kill(parent.pid, signal.SIGKILL)
    killed = time.monotonic()
    code = parent.wait()
    left = None
    while time.monotonic() - killed < 20:
        _reap()
        if not _children(os.getpid()):
            left = time.monotonic() - killed
            break
        time.sleep(0.005)
    survivors = {c: _what(c) for c in _children(os.getpid())}
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    _reap()
    print(json.dumps({"mode": mode, "moment": moment, "delay": delay, "gone_after": left,
                      "killed": code == -signal.SIGKILL,
                      "at_kill": sorted(at_kill.values()),
                      "survivors": sorted(survivors.values())}))


if __name__ == "__main__":
    main()
