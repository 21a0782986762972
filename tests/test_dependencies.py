"""The dependency rule between robuststats' packages, as a ratchet.

Layers, from the bottom: the base modules (``errors``, ``glossary``, ``_validation``,
``_atomic``, ...); ``outcomes`` and ``engine``; ``stats``; ``config``; ``analysis``;
``results`` and ``integrations``; ``report``; ``models``; ``runs`` (the platform); the
features (``study``, ``diagnose``, ``search``, ``gate``, ``divergence``); ``cli``
(docs/architecture.md draws them). A module may import its own package and any lower
layer. Three kinds of edge break the rule: an import of a higher layer (upward), of a
package on the same layer (sideways: the features share a platform, not each other), and
of another package's ``_private`` module or name. Because every edge must point down,
there can be no cycle between packages; :func:`test_no_package_cycles` checks that
directly as well.

The import graph is read from the source with ``ast`` (lazy imports inside functions
included). Today's violations are listed in ``tests/dependency_baseline.txt``; the test fails
on any edge not in that list (a new violation) and on any listed edge that no longer exists
(remove it from the list: the ratchet only turns one way).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "robuststats"
BASELINE = Path(__file__).with_name("dependency_baseline.txt")

LAYERS: dict[str, int] = {
    "__base__": 0,
    "outcomes": 1, "engine": 1,
    "stats": 2,
    "config": 3,
    "analysis": 4,
    "results": 5, "integrations": 5,
    "report": 6,
    "models": 7,
    "runs": 8,
    "study": 9, "diagnose": 9, "search": 9, "gate": 9, "divergence": 9,
    "cli": 10,
}


def _package_of(module: str) -> str:
    """``robuststats.stats._seed_random`` -> ``stats``; top-level modules -> ``__base__``."""
    parts = module.split(".")
    if len(parts) < 2:
        return "__base__"
    name = parts[1]
    if name == "__main__":  # the entry point: ``python -m robuststats`` runs the CLI
        return "cli"
    return name if name in LAYERS else "__base__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, str | None]]:
    """``(module, imported name or None)`` for every robuststats import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = _module_name(path).split(".")
    is_package = path.name == "__init__.py"
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.startswith("robuststats")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here if is_package else here[:-1]
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.startswith("robuststats"):
                found += [(module, a.name) for a in node.names]
    return found


def _violations() -> set[str]:
    out: set[str] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _module_name(path)
        src_pkg = _package_of(source)
        for module, name in _imports(path):
            dst_pkg = _package_of(module)
            if dst_pkg == src_pkg:
                continue
            target = module if name is None else f"{module}.{name}"
            if LAYERS[dst_pkg] > LAYERS[src_pkg]:
                out.add(f"upward {source} -> {target}")
            elif LAYERS[dst_pkg] == LAYERS[src_pkg] and dst_pkg != "__base__":
                out.add(f"sideways {source} -> {target}")
            private = [p for p in module.split(".")[1:] if p.startswith("_")
                       and not p.startswith("__")]
            if dst_pkg != "__base__" and (private or (name or "").startswith("_")):
                out.add(f"private {source} -> {target}")
    return out


def _baseline() -> set[str]:
    lines = BASELINE.read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def test_no_new_dependency_violations() -> None:
    new = sorted(_violations() - _baseline())
    assert not new, ("imports that break the dependency rule (module docstring); move the "
                     "code down a layer or make the name public:\n" + "\n".join(new))


def test_the_baseline_only_shrinks() -> None:
    gone = sorted(_baseline() - _violations())
    assert not gone, ("these listed violations no longer exist; delete them from "
                      f"{BASELINE.name}:\n" + "\n".join(gone))


def _package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        src = _package_of(_module_name(path))
        for module, _ in _imports(path):
            dst = _package_of(module)
            if dst != src:
                graph.setdefault(src, set()).add(dst)
    return graph


def test_no_package_cycles() -> None:
    graph = _package_graph()

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph.get(start, ()))
        while todo:
            pkg = todo.pop()
            if pkg not in seen:
                seen.add(pkg)
                todo.extend(graph.get(pkg, ()))
        return seen

    cyclic = sorted(p for p in graph if p in reach(p))
    # today's known cycles come only from listed upward edges; none may be added
    allowed = {p for line in _baseline() if line.startswith("upward")
               for p in (_package_of(line.split()[1]), _package_of(line.split()[3]))}
    assert set(cyclic) <= allowed, f"packages in an import cycle: {cyclic}"


def test_the_graph_reader_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "robuststats" / "stats"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    mod = pkg / "_x.py"
    mod.write_text("def f():\n    from robuststats.cli import main\n"
                   "from ._y import z\nimport robuststats.gate._contrast\n")
    global ROOT
    saved = ROOT
    try:
        ROOT = tmp_path
        found = _imports(mod)
    finally:
        ROOT = saved
    assert ("robuststats.cli", "main") in found
    assert ("robuststats.stats._y", "z") in found
    assert ("robuststats.gate._contrast", None) in found


def test_no_public_name_is_shadowed_by_a_submodule() -> None:
    """``from robuststats.runs import plan`` must give the function even after the submodule
    ``robuststats.runs.plan`` was imported (which sets the package attribute ``plan`` to
    the module): a lazily exported name may not equal a submodule's name."""
    import importlib
    import pkgutil

    clashes = []
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        name = f"robuststats.{init.parent.name}"
        pkg = importlib.import_module(name)
        subs = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
        for export in sorted(subs & set(getattr(pkg, "__all__", []))):
            importlib.import_module(f"{name}.{export}")
            if type(getattr(pkg, export)).__name__ == "module":
                clashes.append(f"{name}.{export}")
    assert not clashes, f"exported names that resolve to a submodule: {clashes}"
