"""The Linux process table read from /proc: a process's state and parent, its children.

Shared by tests/study/test_processes.py and scripts/kill_harness.py (which puts this folder
on its path), so both count the processes a run leaves the same way.
"""

from __future__ import annotations

from pathlib import Path


def stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None when it does not exist."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    st = stat(pid)
    return st is not None and st[0] not in ("Z", "X")  # a zombie has exited


def children(pid: int, *, living: bool = False) -> set[int]:
    """The processes whose parent is ``pid``; with ``living``, zombies left out."""
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := stat(int(entry.name))) and st[1] == pid \
                and not (living and st[0] in ("Z", "X")):
            out.add(int(entry.name))
    return out
