"""Inspect AI evaluation logs as item outcomes.

Inspect (``inspect eval``) writes one log per task and model, ``.eval`` (a zip) or
``.json``, read here through ``inspect_ai.log.read_eval_log`` (the optional extra
``robuststats[inspect]``). A log becomes one cell per epoch:

* each sample's ``id`` is the item;
* epoch ``e`` of ``E > 1`` is a repeated evaluation of the same model: ``noise_seed e − 1``
  (the analysis averages an item over them, as over noise draws); a one-epoch log takes the
  run's ``noise_seed`` (default 0);
* the chosen scorer's value is ``correct``: Inspect's letters ``C`` (1), ``I`` and ``N``
  (no answer, 0), as its own ``value_to_float`` reads them, booleans, ``yes``/``no``,
  ``true``/``false`` and the numbers 0 and 1. Any other value (``P`` = 0.5, a 0–10 grade) is
  refused unless a ``threshold`` is given: then ``correct = value ≥ threshold``. ``score``
  keeps the number;
* the condition is the field ``condition_from`` names (:mod:`._condition_from`: the model by
  default, or ``metadata.<key>``, ``task_args.<key>``, ``tag:<prefix>``, ``file``,
  ``directory``), mapped through the mapping file's ``conditions`` unless the run names one;
* the header lists the samples the run planned (``eval.dataset.sample_ids``) and
  ``eval.config.epochs``: a planned (sample, epoch) without a record is a missing item of
  its cell (``attrs["expected_items"]``, read by :func:`robuststats.outcomes.complete` under
  the holes policy), never a silent drop; a record of a sample the header does not list, or
  an epoch without any record, is a damaged log and refused.

A mapping file lists the logs::

    # runs.yaml
    format: inspect-logs
    scorer: match                 # required when the logs hold several scorers
    threshold: 0.5                # only for scores other than 0/1
    condition_from: metadata.prompt   # default: model
    conditions: {openai/gpt-4o: base, openai/gpt-4o-mini: small}   # value -> condition
    runs:
      - {path: logs/*.eval}                        # every log, its field's condition
      - {path: logs/noisy.json, condition: base, eval_noise: 0.05}

Two logs that land in one cell are refused naming the field. A run that did not finish
(``status`` ``cancelled``, ``error`` or ``started``) is refused: its missing samples would
be missing items. Runs of other tasks or datasets, or a sample
id whose input and target differ between runs, are refused naming both runs, as lm-eval's
``doc_hash`` check does. Torch-free; ``inspect_ai`` is imported only to read a log.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats.errors import InputError, did_you_mean
from robuststats.outcomes._condition_from import check_condition_from, condition_value
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

__all__ = ["INSPECT_FORMAT", "is_inspect_log", "read_inspect_log", "read_inspect_runs"]

#: the ``format`` value of a mapping file
INSPECT_FORMAT = "inspect-logs"
_TOP_KEYS = ("format", "scorer", "threshold", "condition_from", "conditions", "runs")
#: Inspect's score letters and the words it reads as 0/1 (``inspect_ai.scorer.value_to_float``)
_WORDS = {"c": 1.0, "i": 0.0, "n": 0.0, "p": 0.5, "yes": 1.0, "no": 0.0, "true": 1.0,
          "false": 0.0}
_FINISHED = "success"


def is_inspect_log(path: str | Path) -> bool:
    """True for an ``.eval`` file, or a ``.json`` file whose top level holds an Inspect log's
    ``eval`` and ``status`` (and no ``runs``: not a mapping file)."""
    path = Path(path)
    if not path.is_file():
        return False
    suffix = path.suffix.lower()
    if suffix == ".eval":
        return True
    if suffix != ".json":
        return False
    try:
        with open(path, encoding="utf-8") as fh:
            head = fh.read(4096)
    except (OSError, UnicodeDecodeError):
        return False
    return '"eval"' in head and '"status"' in head and '"runs"' not in head


def _read_log(path: Path) -> Any:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise InputError(f"{path}: reading Inspect AI logs needs the package inspect-ai "
                         "(pip install 'robuststats[inspect]').") from None
    if not path.is_file():
        raise InputError(f"Inspect log {str(path)!r} does not exist.")
    try:
        return read_eval_log(str(path))
    except Exception as exc:  # any failure of the reader means "not a log"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: not a readable Inspect log ({first[:200]}).") from None


def _value(value: Any, where: str) -> float:
    """One score value as a number, or an error naming it."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in _WORDS:
        return _WORDS[value.strip().lower()]
    kind = (f"a {type(value).__name__} with keys {sorted(value)[:6]}"
            if isinstance(value, Mapping) else repr(value)[:80])
    raise InputError(f"{where}: the score is {kind}, not one number: choose a scorer with one "
                     "value per sample.")


def _content(sample: Any) -> str:
    """SHA-256 of what a sample asks: its input, target and choices."""
    def plain(value: Any) -> Any:
        if isinstance(value, list):
            return [plain(v) for v in value]
        dump = getattr(value, "model_dump", None)
        if dump is None:
            return value
        message = dump(exclude_none=True)
        return {"role": message.get("role"), "content": message.get("content")}

    text = json.dumps([plain(sample.input), plain(sample.target), plain(sample.choices)],
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _scorer(log: Any, chosen: str | None, where: str) -> str:
    names: list[str] = []
    for sample in log.samples or []:
        names += [k for k in (sample.scores or {}) if k not in names]
    if not names:
        raise InputError(f"{where}: the log holds no scored sample.")
    if chosen is None:
        if len(names) > 1:
            raise InputError(f"{where}: the log holds the scorers {names}: choose one with "
                             "`scorer` (--scorer).")
        return names[0]
    if chosen not in names:
        raise InputError(f"{where}: no scorer {chosen!r}{did_you_mean(chosen, names)}; the "
                         f"log holds {names}.")
    return chosen


def read_inspect_log(
    path: str | Path,
    *,
    condition: str | None = None,
    condition_from: str | None = None,
    seed: int = 0,
    eval_noise: float = 0.0,
    noise_seed: int | None = None,
    scorer: str | None = None,
    threshold: float | None = None,
) -> pd.DataFrame:
    """One Inspect log as outcome rows (one cell per epoch, module docstring).

    Returns columns ``condition`` (default: the value of ``condition_from``, default the
    log's model), ``seed``, ``eval_noise``,
    ``noise_seed``, ``item_id`` (the sample id), ``correct``, ``score`` (the scorer's value)
    and ``sample_hash`` (SHA-256 of the sample's input, target and choices);
    ``attrs["inspect"]`` holds the log's task, dataset, model, scorer, epochs and the value
    of ``condition_from``; ``attrs["expected_items"]`` the sample ids of its header.
    """
    import pandas as pd

    path = Path(path)
    where = str(path)
    field = check_condition_from(condition_from, "`condition_from` (--condition-from)") \
        or "model"
    log = _read_log(path)
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(
            threshold, (int, float)) or not math.isfinite(threshold)):
        raise InputError(f"`threshold` must be a number, got {threshold!r}.")
    samples = list(log.samples or [])
    epochs = int(getattr(log.eval.config, "epochs", None) or 1)
    if log.status != _FINISHED:
        planned = (log.eval.dataset.samples or 0) * epochs
        raise InputError(f"{where}: the run's status is {log.status!r} ({len(samples)} of "
                         f"{planned} samples scored): an unfinished run is not read, its "
                         "missing samples would be missing items; finish it (inspect "
                         "eval-retry) or leave it out.")
    name = _scorer(log, scorer, where)
    named = condition_value(log, path, field, where)
    if epochs > 1 and noise_seed is not None:
        raise InputError(f"{where}: `noise_seed` {noise_seed}: the log has {epochs} epochs, "
                         f"which are the noise seeds 0..{epochs - 1}.")
    rows, seen = [], {}
    for sample in samples:
        at = f"{where}: sample {sample.id!r}, epoch {sample.epoch}"
        score = (sample.scores or {}).get(name)
        if score is None:
            error = f" (error: {str(sample.error.message)[:120]})" if sample.error else ""
            raise InputError(f"{at}: no {name!r} score{error}.")
        value = _value(score.value, f"{at}, scorer {name!r}")
        if value in (0.0, 1.0):
            correct = int(value)
        elif threshold is None:
            raise InputError(f"{at}: scorer {name!r} gave {score.value!r} (= {value:g}), not 0 "
                             "or 1: give `threshold` (--threshold) to count a score at or "
                             "above it as correct.")
        else:
            correct = int(value >= threshold)
        key = (str(sample.id), int(sample.epoch))
        if key in seen:
            raise InputError(f"{at}: the sample appears twice in the log.")
        seen[key] = True
        rows.append({"condition": condition or named, "seed": seed,
                     "eval_noise": float(eval_noise),
                     "noise_seed": int(sample.epoch) - 1 if epochs > 1 else (noise_seed or 0),
                     "item_id": str(sample.id), "correct": correct, "score": value,
                     "sample_hash": _content(sample)})
    out = pd.DataFrame(rows)
    out.attrs["expected_items"] = _planned(log, seen, epochs, where)
    out.attrs["inspect"] = {"task": str(log.eval.task), "dataset": _dataset(log),
                            "model": str(log.eval.model), "scorer": name,
                            "threshold": threshold, "epochs": epochs,
                            "condition_from": field, "value": named}
    out.attrs["harness"] = harness_record(
        "inspect", str(log.eval.task),
        {"dataset": _dataset(log), "scorer": name, "threshold": threshold},
        zip(out["item_id"], out["sample_hash"]))
    return out


def _planned(log: Any, seen: Mapping[tuple[str, int], bool], epochs: int, where: str
             ) -> list[str]:
    """The sample ids the header lists (every one of them is an item of every epoch's
    cell); a record the header does not plan, or an epoch with no record, is refused."""
    ids = getattr(log.eval.dataset, "sample_ids", None)
    if ids is None:  # a log from before Inspect listed them: the records are the plan
        return sorted({item for item, _ in seen})
    planned = [str(i) for i in ids]
    known = set(planned)
    for item, epoch in seen:
        if item not in known or not 1 <= epoch <= epochs:
            raise InputError(f"{where}: sample {item!r}, epoch {epoch} is not in the log's "
                             f"header ({len(planned)} sample ids × {epochs} epoch(s)): the "
                             "log was edited or damaged; read the log Inspect wrote.")
    empty = sorted(set(range(1, epochs + 1)) - {epoch for _, epoch in seen})
    if empty:
        raise InputError(f"{where}: epoch {empty[0]} of {epochs} has no sample record (the "
                         f"header lists {len(planned)} sample ids × {epochs} epochs): the log "
                         "was edited or damaged; read the log Inspect wrote.")
    return planned


def _dataset(log: Any) -> str:
    ds = log.eval.dataset
    return str(ds.name or ds.location or "-")


def read_inspect_runs(
    source: str | Path | Mapping[str, Any],
    *,
    scorer: str | None = None,
    threshold: float | None = None,
    condition_from: str | None = None,
) -> pd.DataFrame:
    """The outcomes of every log a mapping file lists (module docstring), checked to be one
    task over one dataset with the same samples; ``scorer``, ``threshold`` and
    ``condition_from`` override the file's. Validated as an outcomes table;
    ``attrs["harness"]`` records the task, scorer, threshold and items
    (:func:`~robuststats.outcomes.harness_record`), ``attrs["expected_items"]`` the sample
    ids the logs' headers list."""
    import pandas as pd

    from robuststats.outcomes._read import validate_outcomes

    data, base, name = mapping_file(source, "Inspect runs file")
    runs = check_keys(data, _TOP_KEYS, name, INSPECT_FORMAT)
    scorer = scorer if scorer is not None else text_value(data.get("scorer"), "scorer", name,
                                                          True)
    if threshold is None:
        threshold = data.get("threshold")
    field = (check_condition_from(condition_from, "--condition-from")
             or check_condition_from(data.get("condition_from"), f"{name}: `condition_from`")
             or "model")
    conditions = data.get("conditions") or {}
    if not isinstance(conditions, Mapping) or not all(
            isinstance(v, str) and v for v in conditions.values()):
        raise InputError(f"{name}: `conditions` must map values of {field} to condition "
                         f"names, got {conditions!r}.")
    frames, origin, first = [], [], None
    cells: dict[tuple[Any, ...], str] = {}
    for i, entry in enumerate(runs):
        where = f"{name}: runs.{i}"
        cell = run_cell(entry, RUN_KEYS, where, need_condition=False)
        for path in run_files(cell["path"], base, f"{where}.path", several=True):
            try:
                frame = read_inspect_log(path, condition="-", condition_from=field,
                                         seed=cell["seed"], eval_noise=cell["eval_noise"],
                                         noise_seed=entry.get("noise_seed"), scorer=scorer,
                                         threshold=threshold)
            except InputError as exc:
                raise InputError(f"{where}: {exc}") from None
            info = frame.attrs["inspect"]
            value = info["value"]
            condition = cell["condition"] or (conditions.get(value) if conditions else value)
            if condition is None:
                raise InputError(f"{where}: {path.name} has {field} {value!r}, which "
                                 "`conditions` does not map"
                                 f"{did_you_mean(value, list(conditions))}; give the run a "
                                 f"`condition` or map the value.")
            frame["condition"] = condition
            source_of = "" if cell["condition"] or field == "model" else \
                f" from {field} {value!r}"
            label = f"runs.{i} ({path.name}: {info['model']} as {condition}{source_of})"
            first = first or (info, label)
            for key in ("task", "dataset"):
                if info[key] != first[0][key]:
                    raise InputError(f"{name}: {label} is of {key} {info[key]!r} and "
                                     f"{first[1]} of {key} {first[0][key]!r}: runs over "
                                     "different tasks or datasets cannot be paired.")
            for noise in sorted(set(frame["noise_seed"])):
                key = (condition, cell["seed"], cell["eval_noise"], int(noise))
                if key in cells:
                    hint = ("" if cell["condition"] else
                            f"; the field {field} does not tell these logs apart: name the "
                            "one that does with `condition_from` (--condition-from), or give "
                            "each run its `condition`")
                    raise InputError(f"{name}: {label} and {cells[key]} are both the cell "
                                     f"condition {condition}, seed {cell['seed']}, eval_noise "
                                     f"{cell['eval_noise']:g}, noise_seed {noise}{hint}.")
                cells[key] = label
            frames.append(frame)
            origin.append(label)
    _check_samples(frames, origin, name)
    out = validate_outcomes(pd.concat(frames, ignore_index=True), source=name)
    out.attrs["expected_items"] = sorted({i for f in frames for i in f.attrs["expected_items"]})
    info = frames[0].attrs["inspect"]
    out.attrs["inspect"] = {"task": info["task"], "dataset": info["dataset"],
                            "scorer": info["scorer"], "threshold": threshold,
                            "runs": len(frames)}
    out.attrs["harness"] = harness_record(
        "inspect", info["task"],
        {"dataset": info["dataset"], "scorer": info["scorer"], "threshold": threshold},
        zip(out["item_id"], out["sample_hash"]))
    return out


def _check_samples(frames: list[pd.DataFrame], origin: list[str], name: str) -> None:
    """Every sample id asks the same question in every run."""
    conflict = pairing_conflict(frames, "sample_hash")
    if conflict is not None:
        item, k, k0 = conflict[:3]
        raise InputError(
            f"{name}: sample {item!r} has another input or target in {origin[k]} than in "
            f"{origin[k0]}: the runs did not evaluate the same items, so they cannot be "
            "paired.")
