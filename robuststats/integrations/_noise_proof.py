"""The proof of noise a training run leaves next to its checkpoints.

One JSON file per process (``noise-proof.rank<R>.json``), written by
:class:`~robuststats.integrations.transformers.NoiseCallback` into every checkpoint
directory and into the output directory at the end of training:

```json
{"format": 1, "rank": 0, "world_size": 2, "pid": 4711, "host": "...",
 "global_step": 40, "resumed_from_step": 20, "spec": {...}, "during": ["update"],
 "parts": {"update": {"phase_scales": {"forward": 0.05, "backward": 0.05},
                      "required_ops": ["linear"], "segments": 40, "forward_calls": 40,
                      "backward_ran": true,
                      "counts": [{"layer": 0, "op": "linear", "phase": "forward",
                                  "count": 280}, ...]}}}
```

:func:`verify_noise_proof` is what a study reading such a directory calls: every part the
spec names must have run on some process and injected every required op in every phase
with a positive scale that ran; a part the spec does not name must have no injection.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robuststats._atomic import atomic_write_bytes
from robuststats.errors import InputError, RobuststatsError

__all__ = ["PARTS", "NoiseProof", "NoiseProofError", "proof_file", "read_noise_proof",
           "verify_noise_proof", "write_noise_proof"]

#: where noise can go in a training run: the sampling of completions (``rollout``), the
#: gradient-free log-probability passes of the policy and the reference model
#: (``logprob``), the loss forward and its backward (``update``), and evaluation
PARTS = ("rollout", "logprob", "update", "evaluation")
PROOF_PREFIX = "noise-proof.rank"
FORMAT = 1


class NoiseProofError(RobuststatsError, RuntimeError):
    """A run's proof of noise is missing, or says that requested noise never ran."""


@dataclass(frozen=True)
class NoiseProof:
    """The proof files of one directory: one record per process, and the totals.

    ``counts`` maps ``(part, op, phase)`` to the injections summed over processes.
    """

    directory: Path
    records: tuple[dict[str, Any], ...]
    counts: dict[tuple[str, str, str], int]

    @property
    def during(self) -> tuple[str, ...]:
        return tuple(self.records[0].get("during", ())) if self.records else ()

    def total(self, part: str) -> int:
        return sum(n for (p, _, _), n in self.counts.items() if p == part)


def proof_file(directory: str | Path, rank: int) -> Path:
    return Path(directory) / f"{PROOF_PREFIX}{int(rank)}.json"


def write_noise_proof(directory: str | Path, record: dict[str, Any]) -> Path:
    """Write one process's record atomically (a crash never leaves half a file)."""
    path = proof_file(directory, record["rank"])
    path.parent.mkdir(parents=True, exist_ok=True)
    full = {"format": FORMAT, "pid": os.getpid(), "host": socket.gethostname(), **record}
    atomic_write_bytes(path, (json.dumps(full, indent=1, sort_keys=True) + "\n").encode())
    return path


def read_noise_proof(directory: str | Path) -> NoiseProof:
    """Read every ``noise-proof.rank<R>.json`` in ``directory``."""
    root = Path(directory)
    if not root.is_dir():
        raise InputError(f"`directory` must be a run or checkpoint directory, got {str(root)!r}.")
    records = []
    for path in sorted(root.glob(f"{PROOF_PREFIX}*.json")):
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
        except json.JSONDecodeError:
            raise NoiseProofError(f"proof of noise {str(path)!r} is not JSON.") from None
    counts: dict[tuple[str, str, str], int] = {}
    for rec in records:
        for part, entry in rec.get("parts", {}).items():
            for row in entry.get("counts", []):
                key = (part, str(row["op"]), str(row["phase"]))
                counts[key] = counts.get(key, 0) + int(row["count"])
    return NoiseProof(root, tuple(records), counts)


def verify_noise_proof(directory: str | Path, *, during: Iterable[str] | None = None,
                       world_size: int | None = None) -> NoiseProof:
    """Check the proof in ``directory``; returns it, or raises :class:`NoiseProofError`.

    Checked: a record from every process (``world_size``, default the records' own); in
    each record, every part in ``during`` (default: the record's own) that ran injected
    each required op in each phase with a positive scale that ran; every part of
    ``during`` ran on some process; no part outside ``during`` got an injection.
    """
    proof = read_noise_proof(directory)
    if not proof.records:
        raise NoiseProofError(
            f"no proof of noise in {str(proof.directory)!r}: the run was not trained with "
            "robuststats.integrations.transformers.NoiseCallback, or it wrote no checkpoint.")
    problems: list[str] = []
    wanted = set(during) if during is not None else set(proof.during)
    expected = world_size or int(proof.records[0].get("world_size", len(proof.records)))
    ranks = sorted(int(r.get("rank", -1)) for r in proof.records)
    if ranks != list(range(expected)):
        problems.append(f"records from ranks {ranks}, expected 0..{expected - 1}")
    ran_somewhere: set[str] = set()
    for rec in proof.records:
        who = f"rank {rec.get('rank')} (process {rec.get('pid')} on {rec.get('host')})"
        for part, entry in rec.get("parts", {}).items():
            total = sum(int(r["count"]) for r in entry.get("counts", []))
            if part not in wanted:
                if total:
                    problems.append(f"{who}: part {part!r} got {total} injections but the "
                                    f"spec puts noise only in {sorted(wanted)}")
                continue
            ran = {"forward": int(entry.get("forward_calls", 0)) > 0,
                   "backward": bool(entry.get("backward_ran"))}
            if ran["forward"]:
                ran_somewhere.add(part)
            got: dict[tuple[str, str], int] = {}
            for row in entry.get("counts", []):
                key = (str(row["op"]), str(row["phase"]))
                got[key] = got.get(key, 0) + int(row["count"])
            for phase, scale in entry.get("phase_scales", {}).items():
                if float(scale) <= 0 or not ran.get(phase):
                    continue
                for op in entry.get("required_ops", []):
                    if got.get((op, phase), 0) == 0:
                        problems.append(f"{who}: part {part!r} ran, but op {op!r} got no "
                                        f"injections in {phase}")
    for part in sorted(wanted - ran_somewhere):
        problems.append(f"part {part!r} never ran the model on any process")
    if problems:
        raise NoiseProofError(f"proof of noise in {str(proof.directory)!r} failed: "
                              + "; ".join(problems) + ".")
    return proof
