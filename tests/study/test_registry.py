"""One registry for tasks and trainers: names, module:attr references, did-you-mean."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from robuststats.errors import InputError
from robuststats.models.registry import Registry, is_reference
from robuststats.models.tasks import TASKS, ArithmeticTask, get_task
from robuststats.models.trainer import TRAINERS, BuiltinTrainer, get_trainer

PACKAGE = Path(__file__).resolve().parents[2] / "robuststats"
MODELS = PACKAGE / "models"


def test_registered_names_and_did_you_mean() -> None:
    reg: Registry[object] = Registry("widget")

    @reg.register("spinner")
    class Spinner:
        def __init__(self, speed: int = 1) -> None:
            self.speed = speed

    assert Spinner.name == "spinner" and reg.names() == ["spinner"] and "spinner" in reg
    assert reg.build("spinner", speed=3).speed == 3
    with pytest.raises(InputError, match=r"unknown widget 'spiner' \(did you mean 'spinner'\?\); "
                                         r"available: spinner, or a 'package.module:factory' "
                                         r"reference\."):
        reg.build("spiner")
    with pytest.raises(InputError, match=r"widget 'spinner' is already registered"):
        reg.register("spinner")(type("Other", (), {}))
    with pytest.raises(InputError, match=r"`widget` name must be a non-empty string, got ''"):
        reg.factory("")


def test_module_attr_references(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_ext.py").write_text(
        "class Task:\n    def __init__(self, n=1):\n        self.n = n\n"
        "def make_task(**params):\n    return Task(**params)\n"
        "CONSTANT = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert is_reference("my_ext:make_task") and not is_reference("arithmetic")
    # the same reference works for both registries
    assert get_task("my_ext:make_task", n=4).n == 4
    assert get_trainer("my_ext:Task", n=5).n == 5
    with pytest.raises(InputError, match=r"cannot load 'my_ext:make_tsk': module 'my_ext' has no "
                                         r"attribute 'make_tsk' \(did you mean "
                                         r"'my_ext:make_task'\?\)\."):
        TASKS.build("my_ext:make_tsk")
    with pytest.raises(InputError, match=r"cannot load 'my_ext:CONSTANT': 'CONSTANT' is not a "
                                         r"class or function, got int\."):
        TRAINERS.build("my_ext:CONSTANT")
    with pytest.raises(InputError, match=r"cannot load 'no_such_module_x:f': No module named"):
        TASKS.build("no_such_module_x:f")
    with pytest.raises(InputError, match=r"a reference looks like 'package.module:factory'"):
        TASKS.build("my_ext:")


def test_tasks_and_trainers_share_the_registry() -> None:
    assert isinstance(TASKS, Registry) and isinstance(TRAINERS, Registry)
    assert TASKS.factory("arithmetic") is ArithmeticTask
    assert TRAINERS.factory("builtin") is BuiltinTrainer
    with pytest.raises(InputError, match=r"unknown task 'gsm8' \(did you mean 'gsm8k'\?\)"):
        get_task("gsm8")
    with pytest.raises(InputError, match=r"unknown trainer 'checkpiont' \(did you mean "
                                         r"'checkpoint'\?\)"):
        get_trainer("checkpiont")


def _study_imports() -> dict[str, set[str]]:
    """Module -> ``robuststats.models`` modules it imports, lazily or not (``TYPE_CHECKING`` blocks aside)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(MODELS.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(node.test)
                       for n in ast.walk(node)}
        deps = set()
        for node in ast.walk(tree):
            if id(node) in typing_only or not isinstance(node, ast.ImportFrom):
                continue
            if node.module and node.module.startswith("robuststats.models"):
                deps.add(node.module)
        graph[name] = deps
    return graph


def test_no_import_cycle_among_model_modules() -> None:
    graph = _study_imports()
    assert "robuststats.models.evaluate" not in graph["robuststats.models.trainer"]
    assert "robuststats.models.evaluate" not in graph["robuststats.models.training"]
    assert "robuststats.models.trainer" not in graph["robuststats.models.evaluate"]
    assert "robuststats.models.generation" in graph["robuststats.models.evaluate"]
    assert "robuststats.models.generation" in graph["robuststats.models.training"]

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [d for d in graph.get(start, ()) if d != "robuststats.models"]
        while todo:
            mod = todo.pop()
            if mod not in seen:
                seen.add(mod)
                todo.extend(d for d in graph.get(mod, ()) if d != "robuststats.models")
        return seen

    # the package __init__ re-exports lazily; every other module is in no cycle
    cyclic = [m for m in graph if m != "robuststats.models" and m in reach(m)]
    assert cyclic == []


def test_only_the_ledger_builds_paths_inside_the_run_directory() -> None:
    for name in ("runs/executor.py", "study/runner.py"):
        text = (PACKAGE / name).read_text()
        for fragment in ('/ "cells"', '/ "failures"', '/ "models"', '/ "injections"',
                         '/ "model"', '/ "work"', 'f"{cell.key}'):
            assert fragment not in text, (name, fragment)
