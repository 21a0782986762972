"""Options that several subcommands share, each defined once (flag, type, metavar, default
and help), and the one way a subcommand's parser is made.

A subcommand lists its options in the order ``--help`` shows them: its own as
:func:`option` (the arguments of ``add_argument``), the shared ones by name
(:data:`NO_PROGRESS`, :data:`FORMAT`) or as functions of what differs between commands
(:func:`runs`: the help; :func:`workers`: the help and the default).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from robuststats.cli._types import workers as _workers

__all__ = ["FORMAT", "FORMATS", "NO_PROGRESS", "Group", "Option", "add_command",
           "add_format_option", "add_options", "check", "check_output_dirs", "flag", "option",
           "out", "resumable", "runs", "spec_file", "workers"]

#: the output formats of ``--format`` (:func:`robuststats.cli._output.emit` prints them)
FORMATS = ("table", "json")

#: the positional arguments of ``add_argument`` and its keyword arguments
Option = tuple[tuple[str, ...], dict[str, Any]]


def option(*flags: str, **settings: Any) -> Option:
    """One option (or positional argument), as ``parser.add_argument(*flags, **settings)``
    will add it."""
    return flags, settings


@dataclass(frozen=True)
class Group:
    """Options that ``--help`` lists under a heading of their own."""

    title: str
    description: str
    options: Sequence[Option]


def flag(dest: str) -> str:
    """The option whose value lands in ``args.<dest>``: ``max_mape`` -> ``--max-mape``."""
    return "--" + dest.replace("_", "-")


def add_options(parser: Any, options: Sequence[Option | Group]) -> None:
    """Add ``options`` to ``parser`` (a parser or an argument group), in their order."""
    for item in options:
        if isinstance(item, Group):
            add_options(parser.add_argument_group(item.title, item.description), item.options)
        else:
            flags, settings = item
            parser.add_argument(*flags, **settings)


def add_command(subparsers: Any, name: str, run: Callable[[argparse.Namespace], int], *,
                options: Sequence[Option | Group], **settings: Any
                ) -> argparse.ArgumentParser:
    """The parser of subcommand ``name`` (``settings``: its help, description, epilog, ...)
    with ``options``; parsing it sets ``args.run`` to ``run``."""
    parser = subparsers.add_parser(name, **settings)
    add_options(parser, options)
    parser.set_defaults(run=run)
    return parser


#: ``--format {table,json}`` (default ``table``)
FORMAT = option("--format", choices=FORMATS, default="table",
                help="table: aligned text for people (default); json: one JSON document for "
                     "programs")


def add_format_option(parser: Any) -> None:
    """Add the one ``--format {table,json}`` option (default ``table``)."""
    add_options(parser, [FORMAT])


NO_PROGRESS = option("--no-progress", action="store_true", help="no progress bar (on stderr)")


def spec_file(kind: str, example: str) -> Option:
    """The positional YAML file a command runs (``study_file``, ``search_file``)."""
    return option(f"{kind}_file", metavar=f"{kind.upper()}_FILE",
                  help=f"YAML {kind} file, e.g. {example}")


def out(help: str = "result store root (default results/)", default: str | None = "results"
        ) -> Option:
    """``--out DIR``: where the result version is written."""
    return option("--out", default=default, metavar="DIR", help=help)


def runs(help: str, default: str | None = "runs") -> Option:
    """``--runs DIR``: the run directories (cached models, cells, evaluations)."""
    return option("--runs", default=default, metavar="DIR", help=help)


def workers(help: str, default: int = 1) -> Option:
    """``--workers N``: worker processes, 1 to :data:`~robuststats.cli._types.MAX_WORKERS`."""
    return option("--workers", type=_workers, default=default, metavar="N", help=help)


def check(kind: str, plan: str) -> Option:
    """``--check``/``--dry-run``: validate the ``kind`` file and print ``plan`` only."""
    return option("--check", "--dry-run", action="store_true",
                  help=f"validate the {kind} file, the flags, the task and the trainer, print "
                       f"{plan} and stop: nothing is trained or evaluated")


def resumable(kind: str, *, runs_help: str, fresh_help: str, plan: str) -> list[Option]:
    """The options a resumable run of a ``kind`` file (``study``, ``search``) ends with:
    --out, --runs, --fresh, --no-progress, --check (printing ``plan``) and --format."""
    return [out(), runs(runs_help), option("--fresh", action="store_true", help=fresh_help),
            NO_PROGRESS, check(kind, plan), FORMAT]


def check_output_dirs(args: argparse.Namespace, *names: str) -> None:
    """Refuse, before any compute, a directory option among ``names`` (``"out"``,
    ``"runs"``) that was given (or has a default) but cannot be written."""
    from robuststats.runs import check_output_dir

    for name in names:
        value = getattr(args, name)
        if value is not None:
            check_output_dir(value, flag(name))
