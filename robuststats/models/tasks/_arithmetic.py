"""The generated ``arithmetic`` task: multi-step word problems with exact answers."""

from __future__ import annotations

import random
from collections.abc import Callable
from itertools import accumulate
from typing import Any, ClassVar

from robuststats.errors import InputError
from robuststats.models.tasks._base import (
    Item,
    Task,
    _boolean,
    _int_at_least,
    _operations,
    register_task,
)

_NAMES = ("Ann", "Ben", "Cal", "Dee", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jo")
_OBJECTS = ("apples", "books", "coins", "cards", "eggs", "pens", "shells", "stamps")
_VERBS = {"+": ("gets", "buys", "finds", "wins"), "-": ("gives", "loses", "sells", "eats")}

Problem = tuple[int, tuple[tuple[str, int], ...]]  # start value, ((op, operand), ...)
_ENUMERATE_MAX = 200_000
# Bounds (docs/studies.md, "Bounds and plain text"): the items are held in memory, and a
# tiny model does not learn numbers past a few digits; larger values are typos, not plans.
MAX_VALUE = 10_000
MAX_TEST_ITEMS = 100_000
MAX_TRAIN_ITEMS = 200_000


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
        "n_items": (_int_at_least(1, MAX_TEST_ITEMS), 500),
        "n_train": (_int_at_least(1, MAX_TRAIN_ITEMS), 2000),
        "n_steps": (_int_at_least(1), 2),
        "max_value": (_int_at_least(2, MAX_VALUE), 9),
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
    """Number of distinct problems (dynamic programme over the running value).

    ``counts[v]`` is the number of step sequences that reach the value ``v``; one step
    adds ``b`` (any ``b`` in ``[0, max_value]``) or takes it away (``b <= v``), so each new
    count is a window sum of the old ones: prefix sums make a step linear in the number
    of values (exact integers, ``O(n_steps² · max_value)`` in all).
    """
    counts = [1] * (max_value + 1)
    for _ in range(n_steps):
        n = len(counts)
        prefix = [0, *accumulate(counts)]  # prefix[i] = sum(counts[:i])
        nxt = [0] * (n + max_value if "+" in operations else n)
        if "+" in operations:  # w = v + b: v in [w - max_value, w]
            for w in range(len(nxt)):
                nxt[w] += prefix[min(w, n - 1) + 1] - prefix[max(0, w - max_value)]
        if "-" in operations:  # w = v - b: v in [w, w + max_value]
            for w in range(n):
                nxt[w] += prefix[min(w + max_value, n - 1) + 1] - prefix[w]
        counts = nxt
    return sum(counts)
