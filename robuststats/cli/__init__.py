"""Command-line interface: one module per subcommand.

Each subcommand module exposes ``add_parser(subparsers)`` and ``run(args) -> int`` and
imports nothing heavy at module level, so ``robuststats --help`` starts instantly. The CLI
parses and prints; the library computes. The options several commands share and the value
types are defined once (:mod:`._options`, :mod:`._types`); every command prints through
:mod:`._output`. Tests call :func:`main` with an argv list.

Every invalid input ends the same way: exit code 2 and one line on stderr,
``robuststats COMMAND: error: <what is wrong, naming the flag or key>``. That holds for
argparse's own errors (no usage block), the library's :class:`InputError` and a path the
system refuses (:class:`OSError`: too long, not readable, not a directory). A file with
several problems says so on that line and lists the others below it, one indented
``  also: <key> (line N): <what is wrong>`` line each. A warning of the package's own
(:class:`~robuststats.errors.RobuststatsWarning`: holes dropped, an item order that trends)
prints as one line too, ``robuststats COMMAND: warning: <what happened, what to do>``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from robuststats._quiet import quiet_dependencies
from robuststats._version import __version__
from robuststats.errors import InputError, RobuststatsWarning, did_you_mean

__all__ = ["COMMANDS", "main", "one_line"]

#: subcommand name -> module implementing it (kept in the order shown by --help)
COMMANDS: dict[str, str] = {
    "power": "robuststats.cli.power",
    "study": "robuststats.cli.study",
    "analyze": "robuststats.cli.analyze",
    "results": "robuststats.cli.results",
    "diagnose": "robuststats.cli.diagnose",
    "search": "robuststats.cli.search",
    "gate": "robuststats.cli.gate",
    "divergence": "robuststats.cli.divergence",
}


def one_line(text: str, width: int = 2000) -> str:
    """``text`` as one line of at most ``width`` characters: line breaks become spaces and
    any other unprintable character its escape (``\\x0c``), so a value a user typed cannot
    break the line or the terminal."""
    if not text.isprintable():
        text = re.sub(r"\s*[\r\n]+\s*", " ", text).replace("\t", " ")
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                       for c in text)
    return text if len(text) <= width else text[: width - 3] + "..."


class _Parser(argparse.ArgumentParser):
    """argparse with the package's error form: one line, exit code 2, a pointer to --help;
    and no abbreviations: ``--seed 2`` is an unknown flag, never ``--seeds 2``. Subcommand
    parsers are of this class too (argparse makes them with the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        # argparse's "invalid choice" (a misspelt command or value): name the nearest choice
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice is not None and "did you mean" not in message:
            options = re.findall(r"'([^']*)'", choice.group(2))
            message += did_you_mean(choice.group(1), options)
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="robuststats",
        description=(
            "Statistically sound noise-robustness experiments: power analysis, multi-seed "
            "study matrices with paired tests and bootstrap CIs, and versioned result tables."
        ),
        epilog="Run 'robuststats COMMAND --help' for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"robuststats {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMANDS.values():
        module = importlib.import_module(module_name)
        module.add_parser(sub)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, but an unknown argument is reported by the (sub)command it was
    given to, with the nearest flag of that command
    (``robuststats study: error: unrecognized arguments: --seed 2 (did you mean '--seeds'?)``)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        owner = _owner(parser, args)
        owner.error(f"unrecognized arguments: {' '.join(extra)}{_flag_hint(owner, extra)}")
    return args


def _owner(parser: argparse.ArgumentParser, args: argparse.Namespace
           ) -> argparse.ArgumentParser:
    """The innermost (sub)command parser that ``args`` went through (``results diff``)."""
    while True:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, subparsers[0].dest, None) if subparsers else None
        if chosen is None or chosen not in subparsers[0].choices:
            return parser
        parser = subparsers[0].choices[chosen]


def _flag_hint(parser: argparse.ArgumentParser, extra: list[str]) -> str:
    """`` (did you mean '--seeds'?)`` for the first unknown flag in ``extra``, or ``""``."""
    flags = [s for a in parser._actions for s in a.option_strings if s.startswith("--")]
    for token in extra:
        if token.startswith("--") and len(token) > 2:
            return did_you_mean(token.split("=", 1)[0], flags)
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``robuststats``; returns the process exit code."""
    quiet_dependencies()
    parser = build_parser()
    args = _parse(parser, list(argv) if argv is not None else None)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        with _own_warnings(args.command):
            return int(args.run(args) or 0)
    except InputError as exc:
        print(f"robuststats {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        for detail in exc.details:  # the other problems of the same file, one line each
            print(f"  also: {one_line(detail)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"robuststats {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # output piped into e.g. `head`: stop quietly, as Unix tools do
        _silence_stdout()
        return 141
    except OSError as exc:
        # a path the system refuses (too long, unreadable, not a directory): the user's
        # input, answered like any other bad input
        print(f"robuststats {args.command}: error: {_os_message(exc)}", file=sys.stderr)
        return 2


@contextlib.contextmanager
def _own_warnings(command: str) -> Iterator[None]:
    """Print the package's own warnings as one line each,
    ``robuststats COMMAND: warning: <what happened and what to do>``, not as Python's
    two-line ``path:line: Category: ...`` with the source line below it. Only the printed
    form changes: a warning is still a warning (filters and recorders see it as before)."""
    original = warnings.formatwarning

    def form(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             line: str | None = None) -> str:
        if issubclass(category, RobuststatsWarning):
            return f"robuststats {command}: warning: {one_line(str(message))}\n"
        return original(message, category, filename, lineno, line)

    warnings.formatwarning = form
    try:
        yield
    finally:
        warnings.formatwarning = original


def _os_message(exc: OSError) -> str:
    """``'path': reason.`` for an OSError, the path shortened and escaped."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename is None:
        return one_line(f"{reason}.")
    name = repr(str(exc.filename))
    if len(name) > 120:
        name = f"{name[:60]}...{name[-60:]}"
    return one_line(f"{name}: {reason}.")


def _silence_stdout() -> None:
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
