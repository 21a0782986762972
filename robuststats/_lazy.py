"""Lazy public names for a package: import the implementing module on first attribute use.

Keeps ``robuststats --help``, ``robuststats power`` and study-file validation free of
heavy imports (torch, statsmodels, pandas) until a name that needs them is used.

A package can state its public names once, as re-exports in an ``if TYPE_CHECKING:``
block of its ``__init__``::

    if TYPE_CHECKING:
        from robuststats.engine._spec import NoiseSpec as NoiseSpec

    __getattr__, __dir__ = lazy_package(globals())

Static analysers read the imports (``X as X`` marks an explicit re-export); at run time
they never execute, and :func:`lazy_package` reads the same block from the package's
source the first time a name is looked up. :func:`lazy_exports` takes the name -> module
map directly.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["declared_exports", "lazy_exports", "lazy_package"]


def lazy_exports(package: str, exports: Mapping[str, str], namespace: dict[str, Any]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module-level ``__getattr__`` and ``__dir__`` for ``package``.

    ``exports`` maps a public name to the module defining it; a resolved name is cached
    in ``namespace`` (the package's ``globals()``) so later lookups cost nothing.
    """

    def __getattr__(name: str) -> Any:
        try:
            module_name = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module_name), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


def lazy_package(namespace: dict[str, Any]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module-level ``__getattr__`` and ``__dir__`` for the package whose ``globals()`` is
    ``namespace``, its public names being the re-exports of its ``if TYPE_CHECKING:``
    block (:func:`declared_exports`); ``__all__`` lists them, sorted."""
    exports = _DeclaredExports(namespace)
    lookup, listing = lazy_exports(namespace["__name__"], exports, namespace)

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            namespace["__all__"] = sorted(exports)
            return namespace["__all__"]
        return lookup(name)

    return __getattr__, listing


def declared_exports(source: str, package: str) -> dict[str, str]:
    """Public name -> defining module, from the ``from M import X as X`` statements under
    ``if TYPE_CHECKING:`` at the top level of ``source``, the ``__init__`` of ``package``
    (relative imports are resolved against it). Imports without the ``as X`` re-export
    and anything outside those blocks are not public names."""
    import ast

    exports: dict[str, str] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and _names_type_checking(node.test)):
            continue
        for statement in node.body:
            if not isinstance(statement, ast.ImportFrom):
                continue
            module = statement.module or ""
            if statement.level:
                base = package.split(".")[: len(package.split(".")) - statement.level + 1]
                module = ".".join([*base, module] if module else base)
            for alias in statement.names:
                if alias.asname == alias.name:
                    exports[alias.name] = module
    return exports


def _names_type_checking(test: Any) -> bool:
    import ast

    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _DeclaredExports(Mapping[str, str]):
    """The :func:`declared_exports` of a package, read from its source on first use."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self._namespace = namespace
        self._exports: dict[str, str] | None = None

    def _read(self) -> dict[str, str]:
        if self._exports is None:
            package = self._namespace["__name__"]
            spec = self._namespace.get("__spec__")
            loader = getattr(spec, "loader", None)
            source = loader.get_source(package) if hasattr(loader, "get_source") else None
            if source is None:
                raise ImportError(f"{package}: its public names are read from its source "
                                  "(the imports under `if TYPE_CHECKING:`), which its loader "
                                  "does not provide", name=package)
            self._exports = declared_exports(source, package)
        return self._exports

    def __getitem__(self, name: str) -> str:
        return self._read()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())
