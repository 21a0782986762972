"""Command-line interface: one module per subcommand.

Each subcommand module exposes ``add_parser(subparsers)`` and ``run(args) -> int`` and
imports nothing heavy at module level, so ``robuststats --help`` starts instantly. The CLI
parses and prints; the library computes. Tests call :func:`main` with an argv list.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from robuststats._version import __version__
from robuststats.errors import InputError

__all__ = ["COMMANDS", "main"]

#: subcommand name -> module implementing it (kept in the order shown by --help)
COMMANDS: dict[str, str] = {
    "power": "robuststats.cli.power",
    "study": "robuststats.cli.study",
    "analyze": "robuststats.cli.analyze",
    "results": "robuststats.cli.results",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``robuststats``; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(args.run(args) or 0)
    except InputError as exc:
        print(f"robuststats {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"robuststats {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # output piped into e.g. `head`: stop quietly, as Unix tools do
        _silence_stdout()
        return 141


def _silence_stdout() -> None:
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
