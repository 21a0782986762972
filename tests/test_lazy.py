"""Lazy packages (:mod:`robuststats._lazy`): the ``if TYPE_CHECKING:`` re-exports are the
public names, importing a package imports nothing heavy, and every name resolves."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from robuststats._lazy import declared_exports, lazy_package

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("diagnose", "divergence", "engine", "gate", "search")


def test_importing_the_packages_imports_nothing_heavy() -> None:
    code = ("import sys\n"
            + "".join(f"import robuststats.{p}\n" for p in PACKAGES)
            + "print([m for m in ('torch', 'scipy', 'statsmodels', 'pandas', 'optuna') "
              "if m in sys.modules])\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("name", PACKAGES)
def test_every_declared_name_is_public_and_resolves(name: str) -> None:
    package = importlib.import_module(f"robuststats.{name}")
    source = Path(package.__file__).read_text(encoding="utf-8")
    exports = declared_exports(source, package.__name__)
    assert exports, "no re-exports under `if TYPE_CHECKING:`"
    assert package.__all__ == sorted(exports)
    assert set(exports) <= set(dir(package))
    for public, module in exports.items():
        assert getattr(package, public) is getattr(importlib.import_module(module), public)


def test_declared_exports_reads_only_re_exports_under_type_checking() -> None:
    source = """
import typing
from typing import TYPE_CHECKING
from pkg.sub._a import outside as outside
if TYPE_CHECKING:
    from pkg.sub._a import A as A
    from pkg.sub._a import helper
    from ._b import B as B
    from .. import C as C
    import pkg.sub._d as D
if typing.TYPE_CHECKING:
    from pkg.sub._e import E as E
    from pkg.sub._e import F as G
"""
    assert declared_exports(source, "pkg.sub") == {
        "A": "pkg.sub._a", "B": "pkg.sub._b", "C": "pkg", "E": "pkg.sub._e"}


def _package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    root = tmp_path / "lazypkg"
    root.mkdir()
    (root / "_impl.py").write_text("VALUE = 42\n\ndef helper():\n    return 'ok'\n")
    (root / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n\n"
        "from robuststats._lazy import lazy_package\n\n"
        "if TYPE_CHECKING:\n"
        "    from lazypkg._impl import VALUE as VALUE\n"
        "    from ._impl import helper as helper\n\n"
        "__getattr__, __dir__ = lazy_package(globals())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module("lazypkg")


def test_a_lazy_package_loads_on_first_use(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    package = _package(tmp_path, monkeypatch)
    try:
        assert "lazypkg._impl" not in sys.modules
        assert package.__all__ == ["VALUE", "helper"]
        assert "lazypkg._impl" not in sys.modules
        assert package.VALUE == 42 and package.helper() == "ok"
        namespace: dict[str, object] = {}
        exec("from lazypkg import *", namespace)
        assert namespace["VALUE"] == 42
        with pytest.raises(AttributeError, match="module 'lazypkg' has no attribute 'nope'"):
            package.nope  # noqa: B018
        assert {"VALUE", "helper"} <= set(dir(package))
    finally:
        for module in ("lazypkg", "lazypkg._impl"):
            sys.modules.pop(module, None)


def test_a_package_without_source_is_refused_by_name() -> None:
    loader = SimpleNamespace(get_source=lambda name: None)
    getattr_, _ = lazy_package({"__name__": "nosource", "__spec__": SimpleNamespace(
        name="nosource", loader=loader)})
    with pytest.raises(ImportError, match="nosource: its public names are read from its "
                                          "source"):
        getattr_("anything")
