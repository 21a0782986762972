"""The layout of ``robuststats.stats``: subpackages meet each other through their ``__init__``.

``power/``, ``dose/`` and ``resampling/`` may use the top-level modules of ``stats`` (the
shared core: result types, the paired tests, the seed-random t and its few-seed
reference), but a module outside a subpackage imports only what the subpackage's
``__init__`` exports, never one of its ``_private`` modules or names; and importing
``robuststats.stats`` stays free of heavy modules.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATS = ROOT / "robuststats" / "stats"
SUBPACKAGES = sorted(p.parent.name for p in STATS.glob("*/__init__.py"))


def _home(path: Path) -> str | None:
    """The subpackage ``path`` belongs to, or None for the top level of ``stats``."""
    rel = path.relative_to(STATS).parts
    return rel[0] if len(rel) > 1 else None


def _stats_imports(path: Path) -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "robuststats.stats."):
            found += [(node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names
                      if a.name.startswith("robuststats.stats.")]
    return found


def test_the_subpackages_exist() -> None:
    assert SUBPACKAGES == ["dose", "power", "resampling", "sequential"]


def test_no_module_reaches_into_another_subpackage() -> None:
    bad = []
    for path in sorted(STATS.rglob("*.py")):
        if path.name == "__init__.py" and path.parent == STATS:
            continue  # the public API maps every name to its implementing module
        home = _home(path)
        for module, name in _stats_imports(path):
            parts = module.split(".")[2:]  # after robuststats.stats
            target = parts[0] if parts[0] in SUBPACKAGES else None
            if target is None or target == home:
                continue
            if len(parts) > 1 or (name or "").startswith("_"):
                bad.append(f"{path.relative_to(ROOT)}: {module}.{name}")
    assert not bad, "import these through the subpackage's __init__:\n" + "\n".join(bad)


def test_subpackage_exports_resolve() -> None:
    import importlib

    for sub in SUBPACKAGES:
        pkg = importlib.import_module(f"robuststats.stats.{sub}")
        for name in getattr(pkg, "__all__", []):
            assert getattr(pkg, name) is not None, f"{sub}.{name}"


def test_importing_stats_stays_light() -> None:
    code = ("import sys, robuststats.stats, robuststats.stats.power, "
            "robuststats.stats.resampling, robuststats.stats.dose\n"
            "print(sorted(m for m in ('scipy', 'statsmodels', 'pandas', 'torch') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out.strip() == "[]"
