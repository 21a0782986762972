"""Mapping files of harness runs: the pieces every harness reader shares.

A mapping file (``.yaml``/``.yml``/``.json``, or a mapping) has a ``format`` naming the
harness, the harness's own options and ``runs``: one entry per run with its ``path`` and
the cell it evaluated (``condition``, ``seed``, ``eval_noise``, ``noise_seed``). Relative
paths are relative to the mapping file. The cell never comes from a file name.
"""

from __future__ import annotations

import glob
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats.errors import InputError, did_you_mean

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CELL_FIELDS",
    "RUN_KEYS",
    "UNRECORDED",
    "check_keys",
    "harness_record",
    "mapping_file",
    "outcomes_protocol",
    "pairing_conflict",
    "read_harness_runs",
    "run_cell",
    "run_files",
    "text_value",
]

#: a run's cell, as a mapping file names it
CELL_FIELDS = ("condition", "seed", "eval_noise", "noise_seed")
#: the keys of one run entry
RUN_KEYS = ("path", *CELL_FIELDS)


def mapping_file(source: str | Path | Mapping[str, Any], what: str
                 ) -> tuple[dict[str, Any], Path, str]:
    """``(data, base directory, name)`` of a mapping file or mapping; ``what`` names the
    file in errors (``"lm-eval runs file"``)."""
    if isinstance(source, Mapping):
        return dict(source), Path.cwd(), what.removesuffix(" file")
    path = Path(source)
    if not path.is_file():
        raise InputError(f"{what} {str(path)!r} does not exist.")
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


def check_keys(data: Mapping[str, Any], allowed: tuple[str, ...], where: str,
               fmt: str) -> list[Any]:
    """The top-level keys are ``allowed``, ``format`` is ``fmt``, and ``runs`` is a
    non-empty list (returned)."""
    unknown = [k for k in data if k not in allowed]
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], allowed)}"
                         f"; allowed: {', '.join(allowed)}.")
    if data.get("format") != fmt:
        raise InputError(f"{where}: `format` must be {fmt!r}, got {data.get('format')!r}.")
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        raise InputError(f"{where}: `runs` must be a non-empty list of runs, got {runs!r}.")
    return runs


def run_cell(run: Any, keys: tuple[str, ...], where: str, *, need_condition: bool = True
             ) -> dict[str, Any]:
    """A run entry checked: only ``keys``, a ``path``, and its cell fields with their
    defaults (``condition`` None when absent and not ``need_condition``)."""
    if not isinstance(run, Mapping):
        raise InputError(f"{where}: a run must be a mapping with {', '.join(keys)}, got "
                         f"{run!r}.")
    for key in run:
        if key not in keys:
            raise InputError(f"{where}.{key}: unknown key{did_you_mean(str(key), keys)}; "
                             f"allowed: {', '.join(keys)}.")
    for key in ("path", *(("condition",) if need_condition else ())):
        if key not in run:
            raise InputError(f"{where}: missing `{key}`.")
    condition = text_value(run.get("condition"), "condition", where, not need_condition)
    eval_noise = run.get("eval_noise", 0.0)
    if isinstance(eval_noise, bool) or not isinstance(eval_noise, (int, float)) \
            or not math.isfinite(eval_noise) or eval_noise < 0:
        raise InputError(f"{where}.eval_noise: must be a number >= 0, got {eval_noise!r}.")
    return {**dict(run), "condition": condition, "seed": _integer(run.get("seed", 0), "seed", where),
            "eval_noise": float(eval_noise),
            "noise_seed": _integer(run.get("noise_seed", 0), "noise_seed", where)}


def run_files(value: Any, base: Path, where: str, *, several: bool = False) -> list[Path]:
    """The file(s) of a run's ``path``: a path, or a glob matching exactly one file (any
    number ≥ 1 when ``several``)."""
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}: must be a file path or glob, got {value!r}.")
    pattern = value if Path(value).is_absolute() else str(base / value)
    if set("*?[") & set(value):
        matches = sorted(glob.glob(pattern))
        if not matches or (len(matches) != 1 and not several):
            want = "at least one file" if several else "exactly one file"
            raise InputError(f"{where}: {value!r} must match {want}, matches "
                             f"{len(matches)}{': ' + ', '.join(matches[:3]) if matches else ''}.")
        return [Path(m) for m in matches]
    return [Path(pattern)]


def text_value(value: Any, key: str, where: str, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}: `{key}` must be a non-empty string, got {value!r}.")
    return value


def _integer(value: Any, key: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{where}.{key}: must be an integer >= 0, got {value!r}.")
    return value


def harness_record(harness: str, task: str | None, options: Mapping[str, Any],
                   items: Iterable[tuple[Any, Any]]) -> dict[str, Any]:
    """What a harness's runs were: ``harness``, ``task`` (None when nothing names it), the
    reader's ``options`` (filter, metric, scorer, threshold), ``n_items`` and
    ``items_sha256``, the SHA-256 of the sorted ``item_id<TAB>content hash`` lines, so two
    sets of runs share a digest exactly when they scored the same documents."""
    pairs = sorted({(str(item), str(content)) for item, content in items})
    digest = hashlib.sha256("".join(f"{a}\t{b}\n" for a, b in pairs).encode()).hexdigest()
    return {"harness": harness, "task": task, "options": dict(options),
            "n_items": len({a for a, _ in pairs}), "items_sha256": digest}


def pairing_conflict(frames: Sequence[pd.DataFrame], column: str
                     ) -> tuple[str, int, int, str, str] | None:
    """The first item whose content hash (``column``) differs between two runs, as
    ``(item, run, earlier run, its hash, the earlier hash)``; None when every item is the
    same document in every run."""
    first: dict[str, tuple[str, int]] = {}
    for k, frame in enumerate(frames):
        for item, digest in zip(frame["item_id"], frame[column]):
            seen = first.setdefault(item, (digest, k))
            if seen[0] != digest:
                return item, k, seen[1], digest, seen[0]
    return None


def read_harness_runs(source: str | Path, **options: Any) -> pd.DataFrame:
    """The outcomes of a mapping file of any harness, by its ``format``
    (``lm-eval-samples``: :func:`~robuststats.outcomes.read_lmeval_runs`, ``inspect-logs``:
    :func:`~robuststats.outcomes.read_inspect_runs`). ``options`` are that reader's
    overrides (``filter``/``metric``, ``scorer``/``threshold``/``condition_from``); one the
    format does not
    take is an error naming it."""
    from robuststats.outcomes._inspect import INSPECT_FORMAT, read_inspect_runs
    from robuststats.outcomes._lmeval import LMEVAL_FORMAT, read_lmeval_runs

    readers = {LMEVAL_FORMAT: (read_lmeval_runs, ("filter", "metric")),
               INSPECT_FORMAT: (read_inspect_runs, ("scorer", "threshold", "condition_from"))}
    data, _, name = mapping_file(source, "runs file")
    fmt = data.get("format")
    if fmt not in readers:
        raise InputError(f"{name}: `format` must be one of {', '.join(map(repr, readers))}, "
                         f"got {fmt!r}{did_you_mean(str(fmt), list(readers))}.")
    reader, takes = readers[fmt]
    given = {k: v for k, v in options.items() if v is not None}
    for key in given:
        if key not in takes:
            raise InputError(f"`{key}` (--{key.replace('_', '-')}) does not apply to {fmt} "
                             f"runs ({name}); "
                             f"they take {' and '.join(f'`{t}`' for t in takes)}.")
    return reader(source, **given)


#: a protocol field the outcomes' source did not record (a harness records no error model)
UNRECORDED = "unrecorded"


def outcomes_protocol(outcomes: pd.DataFrame, condition: str) -> dict[str, Any]:
    """The evaluation protocol of one condition of an outcomes table, as far as its source
    recorded it, in the form a gate compares (``robuststats.gate.Protocol.to_dict``).

    The task, the harness options (filter, metric, scorer, threshold, dataset) and the items'
    digest come from ``outcomes.attrs["harness"]`` (:func:`harness_record`, set by the
    harness readers); a plain file leaves the task ``"unrecorded"`` and digests its item
    ids. The noise levels and the noise seeds of the noisy levels are those present (with
    no noisy level, those of the clean one: an Inspect log's epochs are its noise seeds);
    ``n_items`` counts the condition's items. Split, error model and op scope are
    ``"unrecorded"``: a harness run does not say how noise was injected.
    """
    rows = outcomes[outcomes["condition"] == condition]
    if rows.empty:
        raise InputError(f"no condition {condition!r} in the outcomes.")
    harness = outcomes.attrs.get("harness")
    if isinstance(harness, Mapping):
        task = harness.get("task") or UNRECORDED
        params = {"harness": harness.get("harness"), **dict(harness.get("options") or {}),
                  "items_sha256": harness.get("items_sha256")}
    else:
        task = UNRECORDED
        params = {"items_sha256": harness_record("-", None, {}, (
            (item, "") for item in rows["item_id"]))["items_sha256"]}
    noisy = rows[rows["eval_noise"] > 0]
    drawn = noisy if len(noisy) else rows  # clean only: the repeated evaluations (epochs)
    return {"task": task, "task_params": params, "split": UNRECORDED, "kind": UNRECORDED,
            "ops": UNRECORDED,
            "noise_levels": sorted({float(v) for v in rows["eval_noise"]}),
            "noise_seeds": sorted({int(v) for v in drawn["noise_seed"]}),
            "n_items": int(rows["item_id"].nunique()), "batch_size": None}
