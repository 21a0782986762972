"""What a divergence run compares: a model and the texts it reads.

- a **study file**: the model of one condition and training seed, loaded as the study and the
  diagnostic probe load it (a condition's ``checkpoint``, or the model cached in
  ``<runs>/<study>/models/``, trained there first when missing), and the study's evaluation
  items, each as its prompt followed by its reference solution (teacher-forced: both runs
  read the same tokens, nothing is generated);
- a **model directory** (``save_pretrained``, with its tokenizer): the texts of a file
  (``--texts``: one text per line, or JSONL records with ``text``, or ``prompt`` and an
  optional ``solution``/``answer``), else the test items of the embedded arithmetic task.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robuststats.errors import InputError

__all__ = ["Source", "check_source", "load_source", "read_texts"]

_MAX_TEXTS_BYTES = 256 << 20


@dataclass
class Source:
    """A loaded model, its tokenizer, the texts and their ids, and where they came from."""

    model: Any
    tokenizer: Any
    texts: list[str]
    item_ids: list[str]
    name: str
    info: dict[str, Any] = field(default_factory=dict)


def check_source(source: str, *, name: str = "SOURCE") -> str:
    """``"study"`` or ``"model"`` for ``source``, checked without loading anything."""
    p = Path(source)
    if p.is_file() and p.suffix.lower() in (".yaml", ".yml"):
        return "study"
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise InputError(f"`{name}`: {source!r} is a directory without config.json (not a "
                             "saved model).")
        from robuststats.models.model import check_saved_model

        check_saved_model(p, key=name)  # tokenizer files and weights the loader accepts
        return "model"
    if p.exists():
        raise InputError(f"`{name}` must be a study file (.yaml) or a model directory, got "
                         f"{source!r}.")
    raise InputError(f"`{name}`: {source!r} does not exist.")


def read_texts(path: str | Path, *, name: str = "texts") -> tuple[list[str], list[str]]:
    """Texts and ids from a text file (one per non-empty line) or JSONL records."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"`{name}`: {str(path)!r} does not exist.")
    if p.stat().st_size > _MAX_TEXTS_BYTES:
        raise InputError(f"`{name}`: {str(path)!r} is larger than 256 MiB.")
    lines = p.read_text(encoding="utf-8").splitlines()
    texts, ids = [], []
    if p.suffix.lower() == ".jsonl":
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"`{name}`: {str(path)!r} line {n} is not JSON: "
                                 f"{exc.msg}.") from None
            if not isinstance(rec, dict):
                raise InputError(f"`{name}`: {str(path)!r} line {n} must be a JSON object.")
            text = rec.get("text")
            if text is None and isinstance(rec.get("prompt"), str):
                text = rec["prompt"] + str(rec.get("solution", rec.get("answer", "")) or "")
            if not isinstance(text, str) or not text:
                raise InputError(f"`{name}`: {str(path)!r} line {n} has no 'text' or "
                                 "'prompt'.")
            texts.append(text)
            ids.append(str(rec.get("id", rec.get("item_id", f"line-{n:05d}"))))
    else:
        for n, line in enumerate(lines, start=1):
            if line.strip():
                texts.append(line.replace("\\n", "\n"))
                ids.append(f"line-{n:05d}")
    if not texts:
        raise InputError(f"`{name}`: {str(path)!r} holds no text.")
    if len(set(ids)) != len(ids):
        raise InputError(f"`{name}`: {str(path)!r} repeats an id.")
    return texts, ids


def load_source(source: str, *, n_items: int | None = None, texts: str | None = None,
                condition: str | None = None, seed: int | None = None,
                runs: str | Path = "runs") -> Source:
    """Load the model and the texts of ``source`` (module docstring); ``n_items`` is
    bounded as a study's ``evaluation.n_items`` is."""
    if n_items is not None:
        from robuststats.config.bounds import MAX_ITEMS, check_count

        check_count(n_items, "--items", MAX_ITEMS)
    kind = check_source(source)
    if kind == "model":
        if condition is not None or seed is not None:
            raise InputError("`--condition` and `--seed` choose a study's model; SOURCE is a "
                             "model directory.")
        from robuststats.models.model import load_pretrained

        model, tokenizer = load_pretrained(source, key="SOURCE")
        if texts is not None:
            all_texts, ids = read_texts(texts, name="--texts")
        else:
            from robuststats.models.tasks import get_task

            items = get_task("arithmetic").items("test")
            all_texts = [it.prompt + it.solution for it in items]
            ids = [it.item_id for it in items]
        n = len(all_texts) if n_items is None else n_items
        return Source(model, tokenizer, all_texts[:n], ids[:n], Path(source).resolve().name,
                      {"kind": "model", "path": str(source), "texts": texts or
                       "arithmetic task, test split"})
    return _study_source(source, n_items=n_items, texts=texts, condition=condition, seed=seed,
                         runs=runs)


def _study_source(path: str, *, n_items: int | None, texts: str | None, condition: str | None,
                  seed: int | None, runs: str | Path) -> Source:
    from robuststats.runs import planned_items, preflight
    from robuststats.runs.spec import StudySpec

    spec = StudySpec.from_file(path)
    names = list(spec.conditions)
    if condition is None:
        condition = names[0]
    elif condition not in names:
        from robuststats.errors import did_you_mean

        raise InputError(f"`--condition` must be a condition of {spec.name} "
                         f"({', '.join(names)}), got {condition!r}{did_you_mean(condition, names)}.")
    seeds = spec.seed_list()
    if seed is None:
        seed = seeds[0]
    elif seed not in seeds:
        raise InputError(f"`--seed` must be a training seed of {spec.name} "
                         f"({', '.join(map(str, seeds))}), got {seed}.")
    task = preflight(spec)
    if texts is not None:
        all_texts, ids = read_texts(texts, name="--texts")
    else:
        items = planned_items(spec, task)
        all_texts = [it.prompt + (it.solution or "") for it in items]
        ids = [it.item_id for it in items]
    trained, model_dir = _trained(spec, condition, seed, runs, task)
    if not (hasattr(trained, "model") and hasattr(trained, "tokenizer")):
        raise InputError(f"`trainer`: divergence needs a torch model and its tokenizer; "
                         f"trainer {spec.trainer.name!r} returned a {type(trained).__name__}.")
    n = len(all_texts) if n_items is None else n_items
    return Source(trained.model, trained.tokenizer, all_texts[:n], ids[:n], spec.name,
                  {"kind": "study", "path": str(path), "study": spec.name,
                   "spec_hash": spec.spec_hash(), "condition": condition, "seed": seed,
                   "model_dir": str(model_dir),
                   "texts": texts or f"{spec.evaluation.split} split: prompt + solution"})


def _trained(spec: Any, condition: str, seed: int, runs: str | Path,
             task: Any) -> tuple[Any, Path]:
    """The condition's model of ``seed`` (its checkpoint, the run directory's cached model,
    or trained and cached there, as ``robuststats study`` would) and the directory it was
    loaded from."""
    from robuststats.runs.executor import load_or_train
    from robuststats.runs.ledger import RunLedger
    from robuststats.runs.plan import TrainJob

    job = TrainJob(condition, seed)
    with RunLedger.open(Path(runs) / spec.name, spec) as ledger:
        model, _ = load_or_train(ledger, spec, job, task=task, by="divergence")
        pattern = spec.conditions[condition].checkpoint
        if pattern is not None:
            from robuststats.models.checkpoints import resolve_checkpoint

            return model, resolve_checkpoint(pattern, condition=condition, seed=seed).path
        return model, ledger.model_path(job).resolve()
