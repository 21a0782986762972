"""The glossary's table registry is the one list of table names; every consumer is a view.

Each list of table names that a module keeps must equal the registry's view of it (and,
pinned here, the order its users have always seen), and no module that lists tables may
write two or more table names as a literal tuple, list or set of its own.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from robuststats.glossary import (
    GLOSSARY,
    ORDERS,
    REGISTRY,
    TABLE_COLUMNS,
    table_names,
)

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "glossary.md"

#: modules that list tables: they take every list from the registry
CONSUMERS = ("robuststats/analysis/_run.py", "robuststats/analysis/_dose.py",
             "robuststats/results/_tables.py", "robuststats/cli/analyze.py",
             "robuststats/cli/results.py", "robuststats/report/markdown.py")

KINDS = {"analysis", "dose", "sequential", "gate", "power"}


def test_every_table_is_declared_once_with_known_fields() -> None:
    names = [t.name for t in REGISTRY]
    assert len(names) == len(set(names))
    for t in REGISTRY:
        assert t.kind in KINDS, t
        assert t.levels in ("", "analysis", "adjusted"), t
        assert len(set(t.columns)) == len(t.columns), t
        assert all(c in GLOSSARY for c in t.columns), t
    assert dict(TABLE_COLUMNS) == {t.name: t.columns for t in REGISTRY}


def test_the_two_orders() -> None:
    assert ORDERS == ("file", "reading")
    assert table_names() == tuple(t.name for t in REGISTRY)
    first = tuple(t.name for t in REGISTRY if t.read_first)
    rest = tuple(t.name for t in REGISTRY if not t.read_first)
    assert table_names(order="reading") == first + rest
    with pytest.raises(ValueError, match="order"):
        table_names(order="alphabetical")


def test_the_analysis_tables_are_the_fields_of_an_analysis() -> None:
    from robuststats.analysis import Analysis

    fields = [f.name for f in dataclasses.fields(Analysis)]
    assert tuple(fields[:len(table_names("analysis"))]) == table_names("analysis")


def test_each_consumer_list_is_the_registry_view_in_the_order_users_see() -> None:
    from robuststats.analysis import _dose, _run
    from robuststats.cli import analyze, results
    from robuststats.results import TABLES

    assert _run.TABLES == table_names("analysis") == (
        "summary", "retention", "seeds", "omnibus", "tests", "strata", "hypotheses",
        "missing", "dropped")
    assert TABLES == table_names("analysis", order="reading") == (
        "hypotheses", "summary", "retention", "seeds", "omnibus", "tests", "strata",
        "missing", "dropped")
    assert _dose.DOSE_TABLES == table_names("dose") == (
        "thresholds", "dose_fits", "dose_models", "dose_curves")
    assert analyze.SHOWN == table_names("analysis", analyze=True) == (
        "summary", "retention", "omnibus", "tests", "strata", "hypotheses", "missing",
        "dropped")
    assert set(analyze._OPTIONAL) == {"omnibus", "strata", "missing", "dropped"}
    assert results._SHOWN == table_names("analysis", order="reading", show=True) == (
        "hypotheses", "summary", "retention", "omnibus", "missing", "dropped")
    assert table_names(levels="analysis") == ("summary", "retention", "tests")
    assert table_names(levels="adjusted") == ("hypotheses",)


def literal_lists(source: str) -> list[tuple[int, list[str]]]:
    """``(line, names)`` of every tuple, list or set literal holding two or more table
    names (string constants) in ``source``."""
    registered = set(table_names())
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            names = [e.value for e in node.elts if isinstance(e, ast.Constant)
                     and isinstance(e.value, str) and e.value in registered]
            if len(names) >= 2:
                found.append((node.lineno, names))
    return found


@pytest.mark.parametrize("module", CONSUMERS)
def test_no_consumer_writes_its_own_list_of_table_names(module: str) -> None:
    found = literal_lists((ROOT / module).read_text(encoding="utf-8"))
    assert not found, (f"{module} lists table names itself; take the list from "
                       f"robuststats.glossary.table_names: {found}")


def test_the_check_finds_a_literal_list() -> None:
    assert literal_lists('SHOWN = ("summary", "retention")\nx = span(["tests", "seeds"])\n'
                         'y = ("retention", "accuracy")\n') == [
        (1, ["summary", "retention"]), (2, ["tests", "seeds"])]


def test_the_doc_lists_every_table_of_the_registry() -> None:
    lines = DOC.read_text(encoding="utf-8").splitlines()

    def yes(flag: bool) -> str:
        return "yes" if flag else "-"

    for t in REGISTRY:
        row = (f"| **{t.name}** | {t.kind} | {yes(t.stored)} | {yes(t.analyze)} | "
               f"{yes(t.show)} | {yes(t.optional)} | {t.levels or '-'} | "
               f"{yes(t.read_first)} |")
        assert row in lines, f"docs/glossary.md lacks the registry row of {t.name!r}"
    listed = [line.split("**")[1] for line in lines if line.startswith("- **")
              and line.split("**")[1] in TABLE_COLUMNS]
    assert listed == list(table_names()), "column orders not listed in file order"
