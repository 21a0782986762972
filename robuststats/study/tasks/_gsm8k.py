"""The ``gsm8k`` task: GSM8K-format records from local JSONL, parquet or CSV files."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from robuststats.errors import InputError
from robuststats.study.tasks._base import (
    Item,
    Task,
    _int_at_least,
    _optional,
    _path,
    _string,
    extract_answer,
    register_task,
)


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
        # the files are read in the workers; a missing one must stop the study before them
        for key in ("path", "train_path"):
            path = self.params[key]
            if path is not None and not _is_file(path):
                raise InputError(f"`{key}`: no such file {str(path)!r}.")
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


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte
        return False


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
