"""Run ``robuststats`` in-process on one argument vector and judge how it ended.

The contract every input must keep (issue 10, "Inputs that cannot crash"):

* no exception other than ``SystemExit`` escapes :func:`robuststats.cli.main`;
* the exit code is 0, or 2 for an invalid input (1 only where a command documents it:
  ``results verify``/``diff`` report a difference, ``study`` a failed cell);
* an error is exactly one line on stderr, ``robuststats COMMAND: error: ...`` (a file with
  several problems: that line, then one indented ``  also: ...`` line per other problem);
* nothing hangs: each call runs under a wall-clock limit (:data:`CASE_SECONDS`).
"""

from __future__ import annotations

import contextlib
import io
import signal
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from robuststats.cli import main

#: wall-clock limit of one call: the slowest valid case (a tiny analysis) takes about a
#: second, or ten on a loaded machine with cold imports; a hang never ends
CASE_SECONDS = 60


class Hang(Exception):
    """A call ran past :data:`CASE_SECONDS`."""


@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def alarm(signum: int, frame: object) -> None:
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(argv: Sequence[str]) -> Outcome:
    """``main(argv)`` with stdout and stderr captured; any other exception propagates with
    the argument vector in its message (a traceback is a failure of the contract)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with time_limit(CASE_SECONDS), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except Hang:
        raise AssertionError(f"hang: {list(argv)!r} ran past {CASE_SECONDS} s") from None
    except Exception as exc:  # the contract's failure: show where
        where = "".join(traceback.format_exception(exc)[-3:])
        raise AssertionError(f"traceback from {list(argv)!r}:\n{where}") from None
    return Outcome(tuple(argv), int(code), out.getvalue(), err.getvalue())


def check_contract(outcome: Outcome, *, may_exit_1: bool = False) -> None:
    """Exit 0 or 2 (1 where documented), and an error is one line naming the command."""
    allowed = {0, 1, 2} if may_exit_1 else {0, 2}
    assert outcome.code in allowed, f"exit {outcome.code} from {list(outcome.argv)!r}: " \
                                    f"{outcome.stderr!r}"
    if outcome.code == 2:
        # one error line; a file with several problems lists the others below it, each on
        # an indented `  also: ` line, and says so on the error line
        lines = outcome.error_lines
        also = [line for line in lines[1:] if line.startswith("  also: ")]
        assert len(lines) == 1 + len(also), f"{list(outcome.argv)!r} wrote {len(lines)} " \
                                            f"error lines: {outcome.stderr!r}"
        assert not also or f"({len(also)} more problem(s), listed below)" in lines[0], lines
        assert lines[0].startswith("robuststats"), lines[0]
        assert ": error: " in lines[0], lines[0]


def assert_rejected(outcome: Outcome, *names: str) -> str:
    """The input was refused (exit 2, one line) and the line names one of ``names``."""
    check_contract(outcome)
    assert outcome.code == 2, f"accepted an invalid input {list(outcome.argv)!r} " \
                              f"(exit {outcome.code})"
    line = outcome.error_lines[0]
    if names:
        assert any(n in line for n in names), f"{line!r} names none of {names}"
    return line


def assert_accepted(outcome: Outcome) -> None:
    check_contract(outcome)
    assert outcome.code == 0, f"refused a valid input {list(outcome.argv)!r}: " \
                              f"{outcome.stderr!r}"
