"""Items, the ``Task`` base class, the registry and the GSM8K-style final-answer scorer."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, ClassVar

from robuststats._fields import check_whole
from robuststats.errors import InputError
from robuststats.models.registry import ParamsSpec, Registry, resolve_params

__all__ = [
    "SPLITS",
    "TASKS",
    "Item",
    "Task",
    "available_tasks",
    "extract_answer",
    "get_task",
    "normalize_number",
    "register_task",
]

SPLITS = ("train", "test")

# The final answer follows the last "####". Commas are thousands separators, "$" a unit.
_FINAL_ANSWER = re.compile(r"####\s*\$?\s*([-+]?\s*\$?[\d,]*\.?\d+)")


@dataclass(frozen=True)
class Item:
    """One evaluation item.

    ``answer`` is the normalized final answer compared by :meth:`Task.score`;
    ``solution`` is the reference completion a trainer learns from (it ends in
    ``#### <answer>``). ``item_id`` is identical across conditions (the paired design).
    """

    item_id: str
    prompt: str
    answer: str
    solution: str = ""


def normalize_number(text: str) -> str | None:
    """Canonical string of a number: no commas, signs or ``$``, no trailing zeros.

    ``"1,234"`` → ``"1234"``, ``"+5"`` → ``"5"``, ``"-0"`` → ``"0"``, ``"3.50"`` → ``"3.5"``,
    ``"7.0"`` → ``"7"``. Returns ``None`` when ``text`` is not a number.
    """
    cleaned = text.replace(",", "").replace("$", "").replace(" ", "")
    if not cleaned:
        return None
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def extract_answer(completion: str) -> str | None:
    """The normalized number after the last ``####`` in ``completion``, or ``None``."""
    matches = _FINAL_ANSWER.findall(completion)
    if not matches:
        return None
    return normalize_number(matches[-1])


class Task(ABC):
    """An item source with an exact-match scorer.

    Subclasses define :meth:`_build` (items of one split) and declare their parameters in
    ``params_spec`` (name → validator); :func:`get_task` checks parameters against it.
    """

    name: ClassVar[str] = ""
    #: parameter name → (validator, default); validators raise InputError naming the key.
    params_spec: ClassVar[ParamsSpec] = {}

    def __init__(self, **params: Any) -> None:
        self.params: dict[str, Any] = resolve_params("task", self.name, self.params_spec,
                                                     params)
        self._cache: dict[str, list[Item]] = {}

    def items(self, split: str) -> list[Item]:
        """The items of ``split`` (``"train"`` or ``"test"``), identical on every call."""
        if split not in SPLITS:
            raise InputError(f"`split` must be one of {list(SPLITS)}, got {split!r}.")
        if split not in self._cache:
            self._cache[split] = self._build(split)
        return list(self._cache[split])

    def score(self, item: Item, completion: str) -> bool:
        """True when the completion's final answer equals the item's answer exactly."""
        predicted = extract_answer(completion)
        return predicted is not None and predicted == item.answer

    def target(self, item: Item) -> str:
        """The completion a model is trained to produce for ``item``."""
        return item.solution or f"#### {item.answer}"

    def vocabulary(self) -> list[str]:
        """Whole words worth a token of their own in a tokenizer built for this task."""
        return ["####"]

    def render_prompt(self, item: Item, tokenizer: Any) -> str:
        """The text a model is given for ``item`` (its ``prompt``; a task may apply the
        tokenizer's chat template here)."""
        return item.prompt

    def generation_options(self) -> dict[str, Any]:
        """Keyword options of :func:`robuststats.models.generation.generate_greedy` for this
        task's completions (``stop``, ``stop_strings``, ``max_new_tokens``)."""
        return {}

    def describe(self) -> dict[str, Any]:
        """Name and resolved parameters (for manifests)."""
        return {"name": self.name, **{k: _jsonable(v) for k, v in self.params.items()}}

    @abstractmethod
    def _build(self, split: str) -> list[Item]:
        """Build the items of one split (called once per split)."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"


# --------------------------------------------------------------------------- registry

#: tasks by name (``register_task``/``get_task``), plus ``package.module:factory`` references
TASKS: Registry[Task] = Registry("task")


def register_task(name: str) -> Callable[[type[Task]], type[Task]]:
    """Class decorator: make a :class:`Task` subclass available to :func:`get_task`."""
    return TASKS.register(name)


def available_tasks() -> list[str]:
    """Names accepted by :func:`get_task`."""
    return TASKS.names()


def get_task(name: str, **params: Any) -> Task:
    """Build the task registered as ``name`` (or a ``package.module:factory`` reference)
    with validated ``params``.

    Unknown names and parameters raise :class:`InputError` with a "did you mean" hint.
    """
    return TASKS.build(name, **params)


def _jsonable(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


# Validators: (key, value) -> value, raising InputError that names the key.

def _int_at_least(low: int, high: int | None = None) -> Callable[[str, Any], int]:
    def check(key: str, value: Any) -> int:
        return check_whole(value, key, low=low, high=high, what=f"an integer >= {low}",
                           interval=True)

    return check


def _optional(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    def wrapped(key: str, value: Any) -> Any:
        return None if value is None else check(key, value)

    return wrapped


def _path(key: str, value: Any) -> Path:
    if not isinstance(value, (str, Path)) or not str(value):
        raise InputError(f"`{key}` must be a file path, got {value!r}.")
    return Path(value)


def _string(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InputError(f"`{key}` must be a string, got {value!r}.")
    return value


def _boolean(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"`{key}` must be true or false, got {value!r}.")
    return value


def _operations(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value or set(value) - {"+", "-"}:
        raise InputError(f"`{key}` must be a non-empty string of '+' and '-', got {value!r}.")
    return "".join(sorted(set(value)))
