"""lm-evaluation-harness ``--log_samples`` files as item outcomes.

lm-eval (0.4.x) writes ``samples_<task>_<date>.jsonl`` with one line per document *per
filter*: ``doc_id`` (the document's index in the task's split), ``doc_hash`` (SHA-256 of
the document), ``filter`` (e.g. ``strict-match``, ``flexible-extract`` for ``gsm8k``) and
one key per metric (``exact_match``: 0.0 or 1.0). Because one file scores every document
once per filter, the filter is chosen explicitly whenever a file holds more than one.

A run (one samples file) is one cell: its condition, training seed, noise level and noise
seed come from a mapping file or from command-line flags, never from file names::

    # runs.yaml
    format: lm-eval-samples
    task: gsm8k                   # default: from the samples_<task>_<date>.jsonl names
    filter: strict-match          # required when a file holds several filters
    metric: exact_match           # default
    runs:
      - {path: lmeval/base_s0/samples_gsm8k.jsonl, condition: base, seed: 0}
      - {path: lmeval/base_s0_n05/samples_gsm8k.jsonl, condition: base, seed: 0,
         eval_noise: 0.05, noise_seed: 0}

Relative paths are relative to the mapping file; a glob must match exactly one file. A
``task`` in the mapping file must be the task the file names name (``samples_<task>_<date>``):
runs of two tasks, or a ``task`` that the file names contradict, are refused.

Completeness: lm-eval writes ``results_<date>.json`` beside the samples of one evaluation,
whose ``n-samples`` records, per task, how many documents it evaluated (``effective``, the
``--limit`` applied: documents 0..effective − 1). When that file is there, a document of
that range without a line in the samples file is a missing item of the run's cell
(``attrs["expected_items"]``, under the holes policy), never a silent drop; a count the
document ids cannot name is refused.
``doc_hash`` proves pairing: a ``doc_id`` whose documents differ between runs (another data
file, another task version) is an error that names both runs, not a silent comparison of
different items. Torch-free.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats.errors import InputError, did_you_mean
from robuststats.outcomes._read import jsonl_objects
from robuststats.outcomes._runsfile import (
    RUN_KEYS,
    check_keys,
    harness_record,
    mapping_file,
    pairing_conflict,
    run_cell,
    run_files,
    text_value,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LMEVAL_FORMAT", "is_lmeval_samples", "read_lmeval_runs", "read_lmeval_samples"]

#: the ``format`` value of a mapping file
LMEVAL_FORMAT = "lm-eval-samples"
_TOP_KEYS = ("format", "task", "filter", "metric", "runs")


def is_lmeval_samples(path: str | Path) -> bool:
    """True when ``path`` is a JSONL file whose first record looks like an lm-eval sample
    (``doc_id``, ``doc_hash`` and ``filter``, and no ``correct`` column)."""
    path = Path(path)
    if path.suffix.lower() not in (".jsonl", ".ndjson") or not path.is_file():
        return False
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    first = json.loads(line)
                    break
            else:
                return False
    except (ValueError, OSError, UnicodeDecodeError):
        return False
    return isinstance(first, dict) and {"doc_id", "doc_hash", "filter"} <= set(first) \
        and "correct" not in first


def read_lmeval_samples(
    path: str | Path,
    *,
    condition: str,
    seed: int = 0,
    eval_noise: float = 0.0,
    noise_seed: int = 0,
    filter: str | None = None,
    metric: str = "exact_match",
) -> pd.DataFrame:
    """One lm-eval samples file as outcome rows of one cell.

    Returns columns ``condition``, ``seed``, ``eval_noise``, ``noise_seed``, ``item_id``
    (the ``doc_id``), ``correct`` (the 0/1 ``metric``), ``score`` (the metric value) and
    ``doc_hash``. ``filter`` may be omitted only when the file holds one filter.
    """
    import pandas as pd

    path = Path(path)
    records = _records(path)
    filters = sorted({str(r.get("filter")) for r in records.values()})
    if filter is None:
        if len(filters) > 1:
            raise InputError(f"{path}: holds the filters {filters}: choose one with `filter` "
                             "(--filter); each scores every document once.")
        filter = filters[0]
    elif filter not in filters:
        raise InputError(f"{path}: no line has filter {filter!r}{did_you_mean(filter, filters)}"
                         f"; the file holds {filters}.")
    rows, seen = [], {}
    for number, record in records.items():
        if record.get("filter") != filter:
            continue
        for key in ("doc_id", "doc_hash", metric):
            if key not in record:
                close = did_you_mean(metric, [k for k in record if k not in _SAMPLE_FIELDS]) \
                    if key == metric else ""
                raise InputError(f"{path}:{number}: no key {key!r}{close}; an lm-eval sample "
                                 "has doc_id, doc_hash, filter and one key per metric.")
        value = record[metric]
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, (int, float)) or value not in (0, 1):
            raise InputError(f"{path}:{number}: `{metric}` must be 0 or 1 for a paired test of "
                             f"outcomes, got {value!r}.")
        doc_id = record["doc_id"]
        if isinstance(doc_id, bool) or not isinstance(doc_id, (int, str)):
            raise InputError(f"{path}:{number}: `doc_id` must be an integer or a string, got "
                             f"{doc_id!r}.")
        item = str(doc_id)
        if item in seen:
            raise InputError(f"{path}:{number}: doc_id {doc_id!r} appears twice for filter "
                             f"{filter!r} (first on line {seen[item]}).")
        seen[item] = number
        rows.append({"condition": condition, "seed": seed, "eval_noise": float(eval_noise),
                     "noise_seed": noise_seed, "item_id": item, "correct": int(value),
                     "score": float(value), "doc_hash": str(record["doc_hash"])})
    out = pd.DataFrame(rows)
    out.attrs["expected_items"] = _planned(path, sorted(seen), filter)
    out.attrs["harness"] = harness_record("lm-eval", _task_of(path),
                                          {"filter": filter, "metric": metric},
                                          zip(out["item_id"], out["doc_hash"]))
    return out


#: keys of an lm-eval sample that are not metrics (for "did you mean" on the metric)
_SAMPLE_FIELDS = frozenset({"doc_id", "doc", "target", "arguments", "resps", "filtered_resps",
                            "filter", "metrics", "doc_hash", "prompt_hash", "target_hash"})


#: lm-eval's aggregated results beside the samples: results_<date id>.json
_RESULTS_NAME = "results_{date}.json"


def _planned(path: Path, items: list[str], filter: str) -> list[str]:
    """The documents the evaluation planned, from ``n-samples`` of the ``results_<date>.json``
    written with the samples file (module docstring); the items present when there is none."""
    match = _SAMPLES_NAME.match(path.name)
    results = path.with_name(_RESULTS_NAME.format(date=match.group(2))) if match else None
    if results is None or not results.is_file():
        return items
    try:
        count = json.loads(results.read_text(encoding="utf-8"))["n-samples"][match.group(1)]
        planned = count["effective"]
    except (ValueError, KeyError, TypeError, OSError):
        return items  # an older lm-eval that did not record it
    if isinstance(planned, bool) or not isinstance(planned, int) or planned < len(items):
        return items
    expected = [str(i) for i in range(planned)]
    if set(items) <= set(expected):
        return expected
    if planned == len(items):  # every document is there, under ids of the task's own
        return items
    raise InputError(f"{path}: {results.name} records {planned} documents of task "
                     f"{match.group(1)!r}, the file holds {len(items)} for filter {filter!r}, "
                     f"and its doc_ids are not 0..{planned - 1}: the samples file is "
                     "incomplete and its missing documents cannot be named.")


def _records(path: Path) -> dict[int, dict[str, Any]]:
    if not path.is_file():
        raise InputError(f"lm-eval samples file {str(path)!r} does not exist.")
    records = dict(jsonl_objects(path, row="an lm-eval sample"))
    if not records:
        raise InputError(f"{path}: the samples file has no lines.")
    return records


def read_lmeval_runs(
    source: str | Path | Mapping[str, Any],
    *,
    filter: str | None = None,
    metric: str | None = None,
) -> pd.DataFrame:
    """The outcomes of every run a mapping file lists, checked for shared items.

    ``source`` is the mapping (a ``.yaml``/``.yml``/``.json`` file or a mapping, format in
    the module docstring). ``filter`` and ``metric`` override the file's (flag > file >
    default). The result is validated as an outcomes table (duplicate cells are errors)
    and keeps ``doc_hash``; ``attrs["harness"]`` records what the runs were
    (:func:`~robuststats.outcomes.harness_record`: the task, the filter and metric, and a
    digest of the items).
    """
    import pandas as pd

    from robuststats.outcomes._read import validate_outcomes

    data, base, name = mapping_file(source, "lm-eval runs file")
    runs = check_keys(data, _TOP_KEYS, name, LMEVAL_FORMAT)
    filter = filter if filter is not None else text_value(data.get("filter"), "filter", name,
                                                          True)
    metric = metric if metric is not None else \
        (text_value(data.get("metric"), "metric", name, True) or "exact_match")
    task = text_value(data.get("task"), "task", name, True)
    frames, origin, tasks, planned = [], [], {}, set()
    for i, entry in enumerate(runs):
        where = f"{name}: runs.{i}"
        cell = run_cell(entry, RUN_KEYS, where)
        (path,) = run_files(cell["path"], base, f"{where}.path")
        try:
            frame = read_lmeval_samples(path, condition=cell["condition"], seed=cell["seed"],
                                        eval_noise=cell["eval_noise"],
                                        noise_seed=cell["noise_seed"], filter=filter,
                                        metric=metric)
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        frames.append(frame)
        planned |= set(frame.attrs["expected_items"])
        origin.append(f"runs.{i} ({path.name}: {cell['condition']}, seed {cell['seed']}, "
                      f"eval_noise {cell['eval_noise']:g}, noise_seed {cell['noise_seed']})")
        tasks[origin[-1]] = _task_of(path)
    _check_pairing(frames, origin, name)
    named = _one_task(tasks, name)
    if task is not None and named is not None and task != named:
        where = next(w for w, t in tasks.items() if t == named)
        raise InputError(f"{name}: `task` is {task!r}, and the runs' file names name the task "
                         f"{named!r} ({where}): name the task they hold, or leave `task` out.")
    task = task or named
    out = validate_outcomes(pd.concat(frames, ignore_index=True), source=name)
    out.attrs["expected_items"] = sorted(planned)
    out.attrs["lmeval"] = {"filter": filter, "metric": metric, "runs": len(frames)}
    out.attrs["harness"] = harness_record(
        "lm-eval", task, {"filter": filter, "metric": metric},
        zip(out["item_id"], out["doc_hash"]))
    return out


#: lm-eval's samples file name: samples_<task>_<date id>.jsonl
_SAMPLES_NAME = re.compile(r"^samples_(.+)_(\d{4}-\d{2}-\d{2}T[0-9.\-:]+)\.jsonl$")


def _one_task(tasks: dict[str, str | None], name: str) -> str | None:
    """The task the runs' file names name (those that say), None when none says; runs of
    two tasks are refused, naming a run of each."""
    first: dict[str, str] = {}
    for where, task in tasks.items():
        if task is not None:
            first.setdefault(task, where)
    if len(first) > 1:
        (ta, a), (tb, b) = list(first.items())[:2]
        raise InputError(f"{name}: the runs are of different tasks: {ta!r} in {a} and {tb!r} "
                         f"in {b} (lm-eval's samples_<task>_<date>.jsonl names); list the runs "
                         "of one task.")
    return next(iter(first), None)


def _task_of(path: Path) -> str | None:
    """The task lm-eval named in a samples file's name, or None for another name."""
    match = _SAMPLES_NAME.match(path.name)
    return match.group(1) if match else None


def _check_pairing(frames: Sequence[pd.DataFrame], origin: Sequence[str], name: str) -> None:
    """Every doc_id names the same document (doc_hash) in every run."""
    conflict = pairing_conflict(frames, "doc_hash")
    if conflict is not None:
        item, k, k0, digest, earlier = conflict
        raise InputError(
            f"{name}: doc_id {item} is a different document in {origin[k]} than in "
            f"{origin[k0]} (doc_hash {digest[:12]}… vs {earlier[:12]}…): the runs "
            "did not evaluate the same items (another data file or task version), so "
            "they cannot be paired.")
