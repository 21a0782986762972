"""The ``gsm8k`` task: GSM8K-format records from local JSONL, parquet or CSV files."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from robuststats.errors import InputError, did_you_mean
from robuststats.models.answers import EXTRACTION_MODES, extract_final_answer, stop_after_answer
from robuststats.models.tasks._base import (
    Item,
    Task,
    _int_at_least,
    _optional,
    _path,
    _string,
    extract_answer,
    register_task,
)

#: ``prompt``: a formatted template, or the model's chat template
PROMPT_FORMS = ("template", "chat")
DEFAULT_TEMPLATE = "Question: {question}\nAnswer: "
#: bounds: more shots than this do not fit a context; more tokens than this is a typo
MAX_SHOTS = 64
MAX_NEW_TOKENS = 32_768


def _choice(choices: tuple[str, ...]) -> Callable[[str, Any], str]:
    def check(key: str, value: Any) -> str:
        if value not in choices:
            raise InputError(f"`{key}` must be one of {', '.join(map(repr, choices))}, got "
                             f"{value!r}{did_you_mean(str(value), choices)}.")
        return value

    return check


def _strings(key: str, value: Any) -> list[str]:
    if isinstance(value, str) or not isinstance(value, list) \
            or not all(isinstance(v, str) and v for v in value):
        raise InputError(f"`{key}` must be a list of non-empty strings, got {value!r}.")
    return list(value)


@register_task("gsm8k")
class GSM8KTask(Task):
    """GSM8K-format records from local files (no downloads).

    Each record has ``question`` and ``answer``; the answer is a worked solution that ends
    in ``#### N`` (Cobbe et al. 2021). ``path`` is the test file, ``train_path`` the
    optional train file; JSONL (``.jsonl``/``.json``), parquet and CSV are read. Item ids
    come from ``id_column`` when given, else from row order (``gsm8k-<split>-<row>``).
    ``n_items`` keeps the first rows of the test split.

    Prompts: ``prompt: template`` (default) formats ``prompt_template`` (a ``{question}``
    field; default ``"Question: {question}\nAnswer: "``); ``prompt: chat`` applies the
    model's own chat template to the user message ``prompt_template`` (default
    ``"{question}"``), after ``system_prompt`` when given. ``n_shot`` worked examples come
    first (the first rows of ``fewshot_path``, else of ``train_path``): in template form
    as prompt + solution blocks separated by a blank line, in chat form as user/assistant
    turns.

    Scoring: ``answer_extraction`` (:mod:`robuststats.models.answers`: ``strict``,
    ``auto``, ``last``; default ``auto``: ``#### N``, else ``\\boxed{N}``, else "the answer
    is N") compared exactly with the reference's ``#### N``. Generation stops at the end of
    a ``#### N`` answer, at ``stop_strings`` (default: the start of a next question,
    ``"\nQuestion:"``, in template form) or after ``max_new_tokens`` (default 512).
    """

    params_spec: ClassVar[dict[str, tuple[Callable[[str, Any], Any], Any]]] = {
        "path": (_path, None),
        "train_path": (_optional(_path), None),
        "id_column": (_optional(_string), None),
        "n_items": (_optional(_int_at_least(1)), None),
        "prompt": (_choice(PROMPT_FORMS), "template"),
        "prompt_template": (_optional(_string), None),
        "system_prompt": (_optional(_string), None),
        "n_shot": (_int_at_least(0, MAX_SHOTS), 0),
        "fewshot_path": (_optional(_path), None),
        "answer_extraction": (_choice(EXTRACTION_MODES), "auto"),
        "stop_strings": (_optional(_strings), None),
        "max_new_tokens": (_int_at_least(1, MAX_NEW_TOKENS), 512),
        "seed": (_int_at_least(0), 0),
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.params["path"] is None:
            raise InputError("task 'gsm8k' needs `path` (a JSONL, parquet or CSV file).")
        # the files are read in the workers; a missing one must stop the study before them
        for key in ("path", "train_path", "fewshot_path"):
            path = self.params[key]
            if path is not None and not _is_file(path):
                raise InputError(f"`{key}`: no such file {str(path)!r}.")
        chat = self.params["prompt"] == "chat"
        if self.params["prompt_template"] is None:
            self.params["prompt_template"] = "{question}" if chat else DEFAULT_TEMPLATE
        template = self.params["prompt_template"]
        if "{question}" not in template:
            raise InputError(f"`prompt_template` must contain '{{question}}', got {template!r}.")
        try:
            template.format(question="")
        except (KeyError, IndexError, ValueError) as exc:
            raise InputError(f"`prompt_template` {template!r} may only use the field "
                             f"{{question}} (write a literal brace as '{{{{'), got {exc}.") \
                from None
        if self.params["system_prompt"] is not None and not chat:
            raise InputError("`system_prompt` needs `prompt: chat` (a template prompt has "
                             "no system turn; put the text into `prompt_template`).")
        if self.params["n_shot"] and self.params["fewshot_path"] is None \
                and self.params["train_path"] is None:
            raise InputError(f"`n_shot` is {self.params['n_shot']} but there is no source of "
                             "examples: set `fewshot_path` or `train_path`.")
        if self.params["stop_strings"] is None:
            self.params["stop_strings"] = [] if chat else ["\nQuestion:"]
        shot_file = self.params["fewshot_path"]
        if shot_file is not None and self.params["n_shot"] \
                and Path(shot_file).resolve() == Path(self.params["path"]).resolve():
            raise InputError("`fewshot_path` is the test file `path`: worked examples must not "
                             "be test items.")
        self._shots: list[dict[str, str]] | None = None
        self._questions: dict[Item, str] = {}

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
            question = str(record["question"])
            prompt = self._template_prompt(question) if split == "test" else \
                self.params["prompt_template"].format(question=question)
            item = Item(item_id=item_id, prompt=prompt, answer=answer, solution=solution)
            items.append(item)
            self._questions[item] = question
        return items

    # ------------------------------------------------------------------ prompts
    def shots(self) -> list[dict[str, str]]:
        """The ``n_shot`` worked examples (question, solution), first rows of their file."""
        if self._shots is None:
            n = self.params["n_shot"]
            key = "fewshot_path" if self.params["fewshot_path"] is not None else "train_path"
            records = _read_records(self.params[key], key)[:n] if n else []
            if len(records) < n:
                raise InputError(f"`n_shot` is {n} but `{key}` ({self.params[key]}) has "
                                 f"{len(records)} rows.")
            shots = []
            for row, record in enumerate(records):
                for field in ("question", "answer"):
                    if field not in record or record[field] is None:
                        raise InputError(f"`{key}` ({self.params[key]}) row {row}: missing "
                                         f"field {field!r}.")
                shots.append({"question": str(record["question"]),
                              "solution": str(record["answer"])})
            self._shots = shots
        return list(self._shots)

    def _template_prompt(self, question: str) -> str:
        template = self.params["prompt_template"]
        if self.params["prompt"] == "chat":
            return template.format(question=question)
        blocks = [template.format(question=s["question"]) + s["solution"]
                  for s in self.shots()]
        return "\n\n".join([*blocks, template.format(question=question)])

    def render_prompt(self, item: Item, tokenizer: Any) -> str:
        """Template form: ``item.prompt``. Chat form: the tokenizer's chat template over the
        system prompt, the few-shot turns and the question, with the generation prompt."""
        if self.params["prompt"] != "chat":
            return item.prompt
        if not getattr(tokenizer, "chat_template", None):
            raise InputError("`prompt` is 'chat' but the model's tokenizer has no chat "
                             "template; use `prompt: template`.")
        template = self.params["prompt_template"]
        messages = []
        if self.params["system_prompt"] is not None:
            messages.append({"role": "system", "content": self.params["system_prompt"]})
        for shot in self.shots():
            messages += [{"role": "user", "content": template.format(question=shot["question"])},
                         {"role": "assistant", "content": shot["solution"]}]
        if not self._questions:
            self.items("test")
        question = self._questions.get(item)
        if question is None:
            raise InputError(f"item {item.item_id!r} is not an item of this task.")
        messages.append({"role": "user", "content": template.format(question=question)})
        return tokenizer.apply_chat_template(messages, tokenize=False,
                                             add_generation_prompt=True)

    def generation_options(self) -> dict[str, Any]:
        return {"stop": stop_after_answer, "stop_strings": list(self.params["stop_strings"]),
                "max_new_tokens": self.params["max_new_tokens"]}

    def score(self, item: Item, completion: str) -> bool:
        predicted = extract_final_answer(completion, mode=self.params["answer_extraction"])
        return predicted is not None and predicted == item.answer

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
