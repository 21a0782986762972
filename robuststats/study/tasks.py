"""Evaluation tasks: items with exact-match final answers, GSM8K style.

A task hands out deterministic item lists per split and scores a model completion by
extracting its final answer (the number after the last ``####``, as in GSM8K's reference
solutions, Cobbe et al. 2021, arXiv:2110.14168) and comparing it exactly with the item's
answer.

Two tasks are registered:

- ``arithmetic``: generated one-step word problems (add or take away two numbers) that a
  tiny Qwen2 learns on a CPU in seconds. Deterministic per ``seed``; the train and test
  splits never share a problem; item ids are stable for a given seed.
- ``gsm8k``: GSM8K-format records (``question``, ``answer`` ending in ``#### N``) read from
  local JSONL, parquet or CSV files.

``get_task(name, **params)`` builds a task by name and validates its parameters.
"""

from __future__ import annotations

import difflib
import json
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, ClassVar

from robuststats.errors import InputError

__all__ = [
    "ArithmeticTask",
    "GSM8KTask",
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
    params_spec: ClassVar[dict[str, tuple[Callable[[str, Any], Any], Any]]] = {}

    def __init__(self, **params: Any) -> None:
        self.params: dict[str, Any] = _validate_params(type(self), params)
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

_REGISTRY: dict[str, type[Task]] = {}


def register_task(name: str) -> Callable[[type[Task]], type[Task]]:
    """Class decorator: make a :class:`Task` subclass available to :func:`get_task`."""

    def decorator(cls: type[Task]) -> type[Task]:
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return decorator


def available_tasks() -> list[str]:
    """Names accepted by :func:`get_task`."""
    return sorted(_REGISTRY)


def get_task(name: str, **params: Any) -> Task:
    """Build the task registered as ``name`` with validated ``params``.

    Unknown names and parameters raise :class:`InputError` with a "did you mean" hint.
    """
    if name not in _REGISTRY:
        raise InputError(f"unknown task {name!r}{_did_you_mean(name, _REGISTRY)}; "
                         f"available: {', '.join(available_tasks())}.")
    return _REGISTRY[name](**params)


def _did_you_mean(word: str, choices: Mapping[str, Any] | list[str]) -> str:
    close = difflib.get_close_matches(str(word), list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _validate_params(cls: type[Task], params: Mapping[str, Any]) -> dict[str, Any]:
    resolved: dict[str, Any] = {}
    for key in params:
        if key not in cls.params_spec:
            raise InputError(
                f"unknown parameter {key!r} for task {cls.name!r}"
                f"{_did_you_mean(key, cls.params_spec)}; "
                f"accepted: {', '.join(sorted(cls.params_spec))}."
            )
    for key, (check, default) in cls.params_spec.items():
        resolved[key] = check(key, params[key]) if key in params else default
    return resolved


def _jsonable(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


# Validators: (key, value) -> value, raising InputError that names the key.

def _int_at_least(low: int) -> Callable[[str, Any], int]:
    def check(key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InputError(f"`{key}` must be an integer >= {low}, got {value!r}.")
        return int(value)

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


# --------------------------------------------------------------------------- arithmetic

_NAMES = ("Ann", "Ben", "Cal", "Dee", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jo")
_OBJECTS = ("apples", "books", "coins", "cards", "eggs", "pens", "shells", "stamps")
_VERBS = {"+": ("gets", "buys", "finds", "wins"), "-": ("gives", "loses", "sells", "eats")}

Problem = tuple[int, tuple[tuple[str, int], ...]]  # start value, ((op, operand), ...)
_ENUMERATE_MAX = 200_000


@register_task("arithmetic")
class ArithmeticTask(Task):
    """Generated multi-step word problems with an exact numeric answer (GSM8K in miniature).

    ``"Ann has 7 pens, finds 5, loses 3. How many pens?\n"`` →
    ``"7+5=12\n12-3=9\n#### 9"``: one line of worked arithmetic per step, then the final
    answer after ``####`` as in GSM8K (``show_work=False`` keeps only the final line).
    Numbers are integers in ``[0, max_value]``; no intermediate result goes below zero.

    A problem is the start value with its ``(operation, operand)`` steps. Distinct problems
    are drawn with ``random.Random(seed)``; the first ``n_items`` form the test split and the
    next ``n_train`` the train split, so the splits never share a problem, and the test
    items (and their ids) do not change when ``n_train`` changes. Names, objects and verbs
    are surface variation from the same generator.

    Parameters: ``n_items`` (test size, default 500), ``n_train`` (default 2000),
    ``n_steps`` (operations per problem, default 2), ``max_value`` (default 9),
    ``operations`` (``"+-"``), ``show_work`` (default true), ``seed`` (default 0).
    """

    params_spec: ClassVar[dict[str, tuple[Callable[[str, Any], Any], Any]]] = {
        "n_items": (_int_at_least(1), 500),
        "n_train": (_int_at_least(1), 2000),
        "n_steps": (_int_at_least(1), 2),
        "max_value": (_int_at_least(2), 9),
        "operations": (_operations, "+-"),
        "show_work": (_boolean, True),
        "seed": (_int_at_least(0), 0),
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        p = self.params
        if p["n_steps"] > 6:
            raise InputError(f"`n_steps` must be at most 6, got {p['n_steps']}.")
        capacity = _count_problems(p["max_value"], p["n_steps"], p["operations"])
        if p["n_items"] + p["n_train"] > capacity:
            raise InputError(
                f"`n_items` + `n_train` must be at most {capacity} (distinct problems with "
                f"max_value={p['max_value']}, n_steps={p['n_steps']}, "
                f"operations={p['operations']!r}), got {p['n_items']} + {p['n_train']}."
            )
        self._problems: list[Problem] | None = None

    def _draw(self) -> list[Problem]:
        if self._problems is None:
            p = self.params
            rng = random.Random(p["seed"])
            wanted = p["n_items"] + p["n_train"]
            seen: set[Problem] = set()
            problems: list[Problem] = []
            # Small spaces are enumerated and shuffled, large ones sampled without repeats.
            # The choice depends on the space only (never on n_items or n_train), and both
            # ways yield a fixed sequence whose prefixes are the splits, so the test items
            # stay the same when n_train changes.
            if _count_problems(p["max_value"], p["n_steps"], p["operations"]) <= _ENUMERATE_MAX:
                pool = _enumerate(p["max_value"], p["n_steps"], p["operations"])
                rng.shuffle(pool)
                problems = pool[:wanted]
            else:
                while len(problems) < wanted:
                    problem = _random_problem(rng, p["max_value"], p["n_steps"], p["operations"])
                    if problem is not None and problem not in seen:
                        seen.add(problem)
                        problems.append(problem)
            self._problems = problems
        return self._problems

    def _build(self, split: str) -> list[Item]:
        p = self.params
        problems = self._draw()
        offset = 0 if split == "test" else p["n_items"]
        chosen = problems[offset : offset + (p["n_items"] if split == "test" else p["n_train"])]
        # Surface words come from their own generator keyed by seed and split, so they do
        # not depend on how many problems were drawn.
        surface = random.Random(f"{p['seed']}-{split}-surface")
        items = []
        for i, (start, steps) in enumerate(chosen):
            name, obj = surface.choice(_NAMES), surface.choice(_OBJECTS)
            clauses = [f"{surface.choice(_VERBS[op])} {b}" for op, b in steps]
            prompt = f"{name} has {start} {obj}, {', '.join(clauses)}. How many {obj}?\n"
            lines, value = [], start
            for op, b in steps:
                new = value + b if op == "+" else value - b
                lines.append(f"{value}{op}{b}={new}")
                value = new
            solution = "\n".join([*lines, f"#### {value}"]) if p["show_work"] \
                else f"#### {value}"
            items.append(Item(item_id=f"arith-{p['seed']}-{offset + i:05d}", prompt=prompt,
                              answer=str(value), solution=solution))
        return items

    def vocabulary(self) -> list[str]:
        words = {"####", "has", "How", "many"}
        words.update(_NAMES, _OBJECTS, *_VERBS.values())
        return sorted(words)


def _random_problem(rng: random.Random, max_value: int, n_steps: int,
                    operations: str) -> Problem | None:
    start = rng.randint(0, max_value)
    value, steps = start, []
    for _ in range(n_steps):
        op, b = rng.choice(operations), rng.randint(0, max_value)
        value = value + b if op == "+" else value - b
        if value < 0:
            return None
        steps.append((op, b))
    return start, tuple(steps)


def _enumerate(max_value: int, n_steps: int, operations: str) -> list[Problem]:
    frontier: list[tuple[int, int, tuple[tuple[str, int], ...]]] = [
        (a, a, ()) for a in range(max_value + 1)]
    for _ in range(n_steps):
        frontier = [(start, value + (b if op == "+" else -b), (*steps, (op, b)))
                    for start, value, steps in frontier
                    for op in operations for b in range(max_value + 1)
                    if op == "+" or b <= value]
    return [(start, steps) for start, _, steps in frontier]


def _count_problems(max_value: int, n_steps: int, operations: str) -> int:
    """Number of distinct problems (dynamic programme over the running value)."""
    counts = {a: 1 for a in range(max_value + 1)}
    for _ in range(n_steps):
        nxt: dict[int, int] = {}
        for value, c in counts.items():
            for op in operations:
                for b in range(max_value + 1):
                    if op == "-" and b > value:
                        continue
                    new = value + b if op == "+" else value - b
                    nxt[new] = nxt.get(new, 0) + c
        counts = nxt
    return sum(counts.values())


# --------------------------------------------------------------------------- gsm8k

@register_task("gsm8k")
class GSM8KTask(Task):
    """GSM8K-format records from local files (no downloads).

    Each record has ``question`` and ``answer``; the answer is a worked solution that ends
    in ``#### N`` (Cobbe et al. 2021). ``path`` is the test file, ``train_path`` the
    optional train file; JSONL (``.jsonl``/``.json``), parquet and CSV are read. Item ids
    come from ``id_column`` when given, else from row order (``gsm8k-<split>-<row>``).
    ``n_items`` keeps the first rows of the test split. Prompts follow ``prompt_template``
    with a ``{question}`` field.
    """

    params_spec: ClassVar[dict[str, tuple[Callable[[str, Any], Any], Any]]] = {
        "path": (_path, None),
        "train_path": (_optional(_path), None),
        "id_column": (_optional(_string), None),
        "n_items": (_optional(_int_at_least(1)), None),
        "prompt_template": (_string, "Question: {question}\nAnswer: "),
        "seed": (_int_at_least(0), 0),
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.params["path"] is None:
            raise InputError("task 'gsm8k' needs `path` (a JSONL, parquet or CSV file).")
        if "{question}" not in self.params["prompt_template"]:
            raise InputError("`prompt_template` must contain '{question}', got "
                             f"{self.params['prompt_template']!r}.")

    def _build(self, split: str) -> list[Item]:
        key = "path" if split == "test" else "train_path"
        path = self.params[key]
        if path is None:
            raise InputError(f"task 'gsm8k' has no {split} split: set `train_path`.")
        records = _read_records(path, key)
        if split == "test" and self.params["n_items"] is not None:
            records = records[: self.params["n_items"]]
        id_column = self.params["id_column"]
        items, seen = [], set()
        for row, record in enumerate(records):
            for field in ("question", "answer") + ((id_column,) if id_column else ()):
                if field not in record or record[field] is None:
                    raise InputError(f"`{key}` ({path}) row {row}: missing field {field!r}.")
            solution = str(record["answer"])
            answer = extract_answer(solution)
            if answer is None:
                raise InputError(f"`{key}` ({path}) row {row}: answer has no final "
                                 f"'#### <number>': {solution[-60:]!r}.")
            item_id = str(record[id_column]) if id_column else f"gsm8k-{split}-{row:05d}"
            if item_id in seen:
                raise InputError(f"`{key}` ({path}) row {row}: duplicate item id {item_id!r}.")
            seen.add(item_id)
            prompt = self.params["prompt_template"].format(question=str(record["question"]))
            items.append(Item(item_id=item_id, prompt=prompt, answer=answer, solution=solution))
        return items

    def vocabulary(self) -> list[str]:
        # Words of the train split's text (frequent ones first); falls back to "####".
        if self.params["train_path"] is None:
            return ["####"]
        counts: dict[str, int] = {}
        for item in self.items("train"):
            for word in re.findall(r"[A-Za-z]{3,}", item.prompt + " " + item.solution):
                counts[word] = counts.get(word, 0) + 1
        frequent = sorted(counts, key=lambda w: (-counts[w], w))[:2000]
        return ["####", *frequent]


def _read_records(path: Path, key: str) -> list[dict[str, Any]]:
    if not path.is_file():
        raise InputError(f"`{key}`: no such file {str(path)!r}.")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        text = path.read_text(encoding="utf-8")
        if suffix == ".json" and text.lstrip().startswith("["):
            return list(json.loads(text))
        records = []
        for line_no, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"`{key}` ({path}) line {line_no}: invalid JSON: {exc}.") from exc
        return records
    if suffix in (".parquet", ".csv"):
        import pandas as pd

        frame = pd.read_parquet(path) if suffix == ".parquet" else pd.read_csv(path)
        return frame.to_dict(orient="records")
    raise InputError(f"`{key}` must be a .jsonl, .json, .parquet or .csv file, got {str(path)!r}.")
