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
    filter: strict-match          # required when a file holds several filters
    metric: exact_match           # default
    runs:
      - {path: lmeval/base_s0/samples_gsm8k.jsonl, condition: base, seed: 0}
      - {path: lmeval/base_s0_n05/samples_gsm8k.jsonl, condition: base, seed: 0,
         eval_noise: 0.05, noise_seed: 0}

Relative paths are relative to the mapping file; a glob must match exactly one file.
``doc_hash`` proves pairing: a ``doc_id`` whose documents differ between runs (another data
file, another task version) is an error that names both runs, not a silent comparison of
different items. Torch-free.
"""

from __future__ import annotations

import glob
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats.errors import InputError, did_you_mean
from robuststats.outcomes._read import jsonl_objects

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LMEVAL_FORMAT", "is_lmeval_samples", "read_lmeval_runs", "read_lmeval_samples"]

#: the ``format`` value of a mapping file
LMEVAL_FORMAT = "lm-eval-samples"
_RUN_KEYS = ("path", "condition", "seed", "eval_noise", "noise_seed")
_TOP_KEYS = ("format", "filter", "metric", "runs")


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
    return pd.DataFrame(rows)


#: keys of an lm-eval sample that are not metrics (for "did you mean" on the metric)
_SAMPLE_FIELDS = frozenset({"doc_id", "doc", "target", "arguments", "resps", "filtered_resps",
                            "filter", "metrics", "doc_hash", "prompt_hash", "target_hash"})


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
    and keeps ``doc_hash``.
    """
    import pandas as pd

    from robuststats.outcomes._read import validate_outcomes

    data, base, name = _mapping(source)
    unknown = [k for k in data if k not in _TOP_KEYS]
    if unknown:
        raise InputError(f"{name}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], _TOP_KEYS)}"
                         f"; allowed: {', '.join(_TOP_KEYS)}.")
    if data.get("format") != LMEVAL_FORMAT:
        raise InputError(f"{name}: `format` must be {LMEVAL_FORMAT!r}, got "
                         f"{data.get('format')!r}.")
    filter = filter if filter is not None else _text(data.get("filter"), "filter", name, True)
    metric = metric if metric is not None else \
        (_text(data.get("metric"), "metric", name, True) or "exact_match")
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        raise InputError(f"{name}: `runs` must be a non-empty list of runs, got {runs!r}.")
    frames, origin = [], []
    for i, run in enumerate(runs):
        where = f"{name}: runs.{i}"
        if not isinstance(run, Mapping):
            raise InputError(f"{where}: a run must be a mapping with {', '.join(_RUN_KEYS)}, "
                             f"got {run!r}.")
        for key in run:
            if key not in _RUN_KEYS:
                raise InputError(f"{where}.{key}: unknown key{did_you_mean(str(key), _RUN_KEYS)}; "
                                 f"allowed: {', '.join(_RUN_KEYS)}.")
        for key in ("path", "condition"):
            if key not in run:
                raise InputError(f"{where}: missing `{key}`.")
        condition = _text(run["condition"], "condition", where, False)
        seed = _integer(run.get("seed", 0), "seed", where)
        noise_seed = _integer(run.get("noise_seed", 0), "noise_seed", where)
        eval_noise = run.get("eval_noise", 0.0)
        if isinstance(eval_noise, bool) or not isinstance(eval_noise, (int, float)) \
                or not math.isfinite(eval_noise) or eval_noise < 0:
            raise InputError(f"{where}.eval_noise: must be a number >= 0, got {eval_noise!r}.")
        path = _one_file(run["path"], base, f"{where}.path")
        try:
            frame = read_lmeval_samples(path, condition=condition, seed=seed,
                                        eval_noise=float(eval_noise), noise_seed=noise_seed,
                                        filter=filter, metric=metric)
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        frames.append(frame)
        origin.append(f"runs.{i} ({path.name}: {condition}, seed {seed}, eval_noise "
                      f"{float(eval_noise):g}, noise_seed {noise_seed})")
    _check_pairing(frames, origin, name)
    out = validate_outcomes(pd.concat(frames, ignore_index=True), source=name)
    out.attrs["lmeval"] = {"filter": filter, "metric": metric, "runs": len(frames)}
    return out


def _check_pairing(frames: Sequence[pd.DataFrame], origin: Sequence[str], name: str) -> None:
    """Every doc_id names the same document (doc_hash) in every run."""
    first: dict[str, tuple[str, int]] = {}
    for k, frame in enumerate(frames):
        for item, digest in zip(frame["item_id"], frame["doc_hash"]):
            seen = first.setdefault(item, (digest, k))
            if seen[0] != digest:
                raise InputError(
                    f"{name}: doc_id {item} is a different document in {origin[k]} than in "
                    f"{origin[seen[1]]} (doc_hash {digest[:12]}… vs {seen[0][:12]}…): the runs "
                    "did not evaluate the same items (another data file or task version), so "
                    "they cannot be paired.")


def _mapping(source: str | Path | Mapping[str, Any]) -> tuple[dict[str, Any], Path, str]:
    if isinstance(source, Mapping):
        return dict(source), Path.cwd(), "lm-eval runs"
    path = Path(source)
    if not path.is_file():
        raise InputError(f"lm-eval runs file {str(path)!r} does not exist.")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except (ValueError, Exception) as exc:  # yaml.YAMLError has no common base with ValueError
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: not a readable mapping file ({first}).") from None
    if not isinstance(data, Mapping):
        raise InputError(f"{path}: the top level must be a mapping with `runs`, got "
                         f"{type(data).__name__}.")
    return dict(data), path.parent, str(path)


def _one_file(value: Any, base: Path, where: str) -> Path:
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}: must be a file path or glob, got {value!r}.")
    pattern = value if Path(value).is_absolute() else str(base / value)
    if set("*?[") & set(value):
        matches = sorted(glob.glob(pattern))
        if len(matches) != 1:
            raise InputError(f"{where}: {value!r} must match exactly one file, matches "
                             f"{len(matches)}{': ' + ', '.join(matches[:3]) if matches else ''}.")
        return Path(matches[0])
    return Path(pattern)


def _text(value: Any, key: str, where: str, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}: `{key}` must be a non-empty string, got {value!r}.")
    return value


def _integer(value: Any, key: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{where}.{key}: must be an integer >= 0, got {value!r}.")
    return value
