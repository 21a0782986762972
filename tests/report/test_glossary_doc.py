"""docs/glossary.md must say what robuststats/glossary.py says."""

from __future__ import annotations

from pathlib import Path

import pytest

from robuststats.glossary import GLOSSARY, TABLE_COLUMNS

DOC = Path(__file__).resolve().parents[2] / "docs" / "glossary.md"


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


def test_every_column_of_every_table_is_in_the_glossary() -> None:
    for table, columns in TABLE_COLUMNS.items():
        assert len(set(columns)) == len(columns), table
        for col in columns:
            assert col in GLOSSARY, f"{table}.{col} has no glossary entry"


@pytest.mark.parametrize("name", sorted(GLOSSARY))
def test_every_glossary_entry_is_documented_with_its_meaning(doc: str, name: str) -> None:
    meaning = GLOSSARY[name].replace("|", "\\|")
    assert f"| `{name}` | {meaning} |" in doc.splitlines(), (
        f"docs/glossary.md lacks the row for {name!r} (or its meaning differs)")
    assert sum(line.startswith(f"| `{name}` |") for line in doc.splitlines()) == 1


@pytest.mark.parametrize("table", sorted(TABLE_COLUMNS))
def test_every_table_is_documented_with_its_column_order(doc: str, table: str) -> None:
    line = f"- **{table}**: " + ", ".join(f"`{c}`" for c in TABLE_COLUMNS[table])
    assert line in doc.splitlines()
