"""Reading the two sides of a gate: the baseline report and the candidate.

The baseline is a result version: a study's (one condition of it) or an earlier gate's
(its candidate, which then becomes the reference). The candidate is a Hugging Face
checkpoint directory (or a template with ``{seed}``/a glob, one directory per seed),
evaluated under the baseline's protocol; or outcomes that already exist: a study's result
version, a run directory, an outcomes file (csv, tsv, jsonl, parquet), or a harness's
output (a mapping file of lm-eval samples or Inspect logs, or one Inspect log), whose
protocol is what the harness recorded (task, options, items, noise levels and seeds).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats.errors import InputError
from robuststats.gate._protocol import Protocol

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GATE_CONDITIONS", "Baseline", "Checkpoint", "Side", "is_checkpoint",
           "load_baseline", "load_candidate"]

#: condition names of the two sides in a gate version's outcomes
GATE_CONDITIONS = ("candidate", "baseline")
_GLOB = set("*?[")


@dataclass(frozen=True)
class Side:
    """One side of the gate, with its outcomes (read, or evaluated from a checkpoint).

    ``outcomes`` holds this side's rows only (its own condition name in ``condition``);
    ``protocol`` is None for a bare outcomes file (nothing records how it was made);
    ``spec`` is the resolved study spec when there is one.
    """

    role: str
    kind: str
    label: str
    condition: str
    outcomes: pd.DataFrame
    protocol: Protocol | None
    spec: dict[str, Any] | None
    #: the condition's name in ``spec`` (a gate result stores its baseline's)
    spec_condition: str | None = None
    #: SHA-256 of each checkpoint this side's outcomes were evaluated from, by job
    #: (``candidate__s0``), as its version recorded them (empty when none did)
    models: dict[str, str] = field(default_factory=dict)

    @property
    def seeds(self) -> list[Any]:
        return sorted(set(self.outcomes["seed"]))

    def describe(self) -> str:
        cond = f", condition {self.condition}" if self.condition else ""
        return f"{self.kind} {self.label}{cond}"


@dataclass(frozen=True)
class Baseline(Side):
    """The baseline: a side whose protocol is known (a study's or a gate's result version),
    the protocol the candidate is held to."""

    protocol: Protocol


@dataclass(frozen=True)
class Checkpoint:
    """A candidate still to be evaluated: a checkpoint directory, or a ``{seed}`` template or
    glob naming one directory per seed (``pattern``)."""

    pattern: str


def is_checkpoint(text: str) -> bool:
    """A checkpoint directory (``config.json`` inside), or a pattern naming them."""
    path = Path(text)
    if path.is_dir():
        return (path / "config.json").is_file()
    return not path.exists() and ("{seed" in text or bool(_GLOB & set(text)))


def _plain_spec(spec: Any, where: str) -> dict[str, Any] | None:
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise InputError(f"{where}: `spec` must be a JSON object (the resolved study), got "
                         f"{type(spec).__name__}.")
    return {k: v for k, v in spec.items() if k != "spec_format"}


def _pick(conditions: list[str], chosen: str | None, flag: str, where: str) -> str:
    if chosen is not None:
        if chosen not in conditions:
            from robuststats.errors import did_you_mean

            raise InputError(f"`{flag}` {chosen!r} is not a condition of {where}"
                             f"{did_you_mean(chosen, conditions)}; conditions: "
                             f"{', '.join(conditions)}.")
        return chosen
    if len(conditions) == 1:
        return conditions[0]
    raise InputError(f"{where} has {len(conditions)} conditions ({', '.join(conditions)}): "
                     f"pass `{flag}` to choose one.")


def _observed(protocol: Protocol, outcomes: pd.DataFrame) -> Protocol:
    """The protocol with the levels and noise seeds actually present in ``outcomes``."""
    levels = tuple(sorted({float(v) for v in outcomes["eval_noise"]}))
    noisy = outcomes[outcomes["eval_noise"] > 0]
    drawn = noisy if len(noisy) else outcomes  # clean only: the repeated evaluations (epochs)
    seeds = tuple(sorted({int(v) for v in drawn["noise_seed"]})) or protocol.noise_seeds
    return replace(protocol, noise_levels=levels, noise_seeds=seeds)


def _check_sealed(version: Any, role: str) -> None:
    """Refuse a version whose files or cells changed since it was sealed: a gate must not
    decide on outcomes edited after publication (``robuststats results verify``)."""
    from robuststats.results import verify

    report = verify(version, trace_run=False)
    bad = (report.changed + report.missing + report.cells_changed + report.cells_missing
           + report.cells_extra + (["manifest.json"] if report.manifest_changed
                                   or report.index == "differs" else [])
           + (["the stored spec"] if report.spec_hash_changed else []))
    if bad:
        shown = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise InputError(f"{role} {version.label} changed since it was sealed ({shown}): "
                         "`robuststats results verify` lists every difference; a gate does "
                         "not decide on edited outcomes.")


def _version_side(version: Any, role: str, condition: str | None, flag: str) -> Side:
    from robuststats.outcomes import read_outcomes

    manifest, where = version.manifest, version.label
    _check_sealed(version, "`--baseline`" if role == "baseline" else "CANDIDATE")
    outcomes = read_outcomes(version.path)
    if manifest.get("kind") == "gate":
        gate = manifest.get("gate") if isinstance(manifest.get("gate"), dict) else {}
        recorded = Protocol.from_dict(gate.get("protocol"), where=where)
        if condition not in (None, "candidate"):
            raise InputError(f"`{flag}`: {where} is a gate result; its reference is its "
                             "candidate (omit the flag).")
        rows = outcomes[outcomes["condition"] == "candidate"]
        if rows.empty:
            raise InputError(f"{where}: the gate result holds no candidate outcomes.")
        evaluation = gate.get("evaluation") if isinstance(gate.get("evaluation"), dict) \
            else {}
        models = evaluation.get("checkpoint_sha256")
        return Side(role, "gate result", where, "candidate", rows.reset_index(drop=True),
                    _observed(recorded, rows), _plain_spec(manifest.get("spec"), where),
                    spec_condition=gate.get("spec_condition"),
                    models=dict(models) if isinstance(models, dict) else {})
    spec = _plain_spec(manifest.get("spec"), where)
    chosen = _pick(sorted(set(outcomes["condition"])), condition, flag, where)
    rows = outcomes[outcomes["condition"] == chosen].reset_index(drop=True)
    if spec is not None:
        protocol = _observed(Protocol.from_spec(spec, chosen, where=where), rows)
        recorded = manifest.get("checkpoints") if isinstance(manifest.get("checkpoints"),
                                                             dict) else {}
        models = {k: v["sha256"] for k, v in recorded.items() if isinstance(v, dict)
                  and k.rpartition("__s")[0] == chosen and isinstance(v.get("sha256"), str)}
        return Side(role, "study version", where, chosen, rows, protocol, spec,
                    spec_condition=chosen, models=models)
    recorded = manifest.get("protocols")
    if isinstance(recorded, dict) and chosen in recorded:
        # an analysis of harness output (or any outcomes): the protocol its source recorded
        protocol = _observed(Protocol.from_dict(recorded[chosen], where=where), rows)
        harness = protocol.task_params.get("harness")
        kind = f"{_HARNESS_NAMES.get(harness, 'outcomes')} version"
        return Side(role, kind, where, chosen, rows, protocol, None, spec_condition=chosen)
    return Side(role, "result version", where, chosen, rows, None, None,
                spec_condition=chosen)


#: a harness record's name -> how the gate's report names its outputs
_HARNESS_NAMES = {"lm-eval": "lm-eval", "inspect": "Inspect"}


def load_baseline(ref: str, *, condition: str | None = None,
                  root: str | Path = "results") -> Baseline:
    """The baseline: a study's result version (one condition) or an earlier gate's result.

    ``ref`` is a version directory, or ``STUDY``/``STUDY/vN`` under ``root``.
    """
    from robuststats.results import ResultStore

    version = ResultStore(root).get(ref)
    side = _version_side(version, "baseline", condition, "--baseline-condition")
    if side.protocol is None:
        raise InputError(f"`--baseline` {version.label} records neither a study spec nor "
                         "the protocol of its outcomes (a version written before protocols "
                         "were recorded): run `robuststats analyze SOURCE --out DIR` again "
                         "on its outcomes' source.")
    return Baseline(side.role, side.kind, side.label, side.condition, side.outcomes,
                    side.protocol, side.spec, side.spec_condition, side.models)


def load_candidate(source: str, *, condition: str | None = None,
                   root: str | Path = "results",
                   order_column: str | None = None) -> Side | Checkpoint:
    """The candidate: a checkpoint (pattern), a result version, a run directory or a file;
    a checkpoint comes back as a :class:`Checkpoint`, to be evaluated under the baseline's
    protocol. ``order_column``: keep each outcome row's position in its source
    (``read_outcomes``) for a run directory or an outcomes file."""
    from robuststats.outcomes import read_outcomes
    from robuststats.results import MANIFEST, ResultVersion

    text = str(source)
    if is_checkpoint(text):
        if condition is not None:
            raise InputError("`--candidate-condition` applies to outcomes, not to a "
                             "checkpoint.")
        return Checkpoint(text)
    path = Path(text)
    if not path.exists():
        raise InputError(f"CANDIDATE {text!r} does not exist (a checkpoint directory, a "
                         "result version, a run directory or an outcomes file).")
    if path.is_dir() and (path / MANIFEST).is_file():
        return _version_side(ResultVersion.load(path), "candidate", condition,
                             "--candidate-condition")
    if path.is_dir() and (path / "spec.json").is_file():
        try:
            spec = _plain_spec(json.loads((path / "spec.json").read_text()).get("spec"),
                               text)
        except (OSError, ValueError, AttributeError) as exc:
            raise InputError(f"CANDIDATE {text!r}: unreadable spec.json ({exc}).") from None
        outcomes = read_outcomes(path, order_column=order_column)
        chosen = _pick(sorted(set(outcomes["condition"])), condition,
                       "--candidate-condition", text)
        rows = outcomes[outcomes["condition"] == chosen].reset_index(drop=True)
        protocol = None if spec is None else _observed(
            Protocol.from_spec(spec, chosen, where=text), rows)
        return Side("candidate", "run directory", text, chosen, rows, protocol, spec)
    harness = _harness_outcomes(path)
    outcomes = read_outcomes(path, order_column=order_column) if harness is None else harness
    chosen = _pick(sorted(set(outcomes["condition"])), condition, "--candidate-condition",
                   text)
    rows = outcomes[outcomes["condition"] == chosen].reset_index(drop=True)
    if harness is None:
        return Side("candidate", "outcomes file", text, chosen, rows, None, None)
    from robuststats.outcomes import outcomes_protocol

    protocol = Protocol.from_dict(outcomes_protocol(outcomes, chosen), where=text)
    name = _HARNESS_NAMES.get(protocol.task_params.get("harness"), "harness")
    return Side("candidate", f"{name} runs", text, chosen, rows, protocol, None)


def _harness_outcomes(path: Path) -> pd.DataFrame | None:
    """A harness's output read as outcomes (a mapping file of lm-eval or Inspect runs, or
    one Inspect log), validated and carrying its record; None for an outcomes file."""
    from robuststats.outcomes import (
        is_inspect_log,
        read_harness_runs,
        read_inspect_log,
        validate_outcomes,
    )

    if is_inspect_log(path):
        return validate_outcomes(read_inspect_log(path), source=str(path))
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        return read_harness_runs(path)
    return None
