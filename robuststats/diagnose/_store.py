"""Finished evaluations of a probe, one file each, so that a killed probe resumes.

Every evaluation of :func:`~robuststats.diagnose.probe_model` (the clean pass, and each
target under each noise seed) is one file under ``<runs>/<study>/diagnose/<key>/``:
``seed<S>/<target>.ns<K>.json`` with the item ids, the 0/1 outcomes, the engine's injection
statistics, the seconds it took and a SHA-256 of that payload. Files appear through an
atomic rename (:func:`robuststats._atomic.atomic_write_bytes`), so a kill leaves either
no file or a whole one.

``key`` is a digest of what decides an evaluation's outcomes: the run hash of the study
(task, model, trainer, seeds), the condition, the noise scale, error model and op preset,
the batch size and the ids of the items in order. Levels, window, stride, labels and the
statistics options are not part of it: they choose *which* evaluations run and how they are
read, not what one of them gives. A run of the probe with another scale or other items
therefore starts a new directory beside the old one, and ``robuststats study --fresh``
(which clears the run directory) clears them all.

A file that does not parse, whose digest does not match or whose items are not the planned
items is not used: the evaluation runs again and its new file replaces the damaged one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from robuststats._atomic import atomic_write_bytes
from robuststats.outcomes import plain

__all__ = ["ProbeStore", "probe_key"]

FORMAT = 1


def probe_key(*, run_hash: str, condition: str, scale: float, kind: str, ops: str,
              batch_size: int, item_ids: Sequence[str]) -> str:
    """The directory name of a probe's evaluations (24 hex digits of a SHA-256)."""
    payload = {"format": FORMAT, "run_hash": run_hash, "condition": condition,
               "scale": float(scale), "kind": kind, "ops": ops, "batch_size": int(batch_size),
               "items": hashlib.sha256("\n".join(map(str, item_ids)).encode()).hexdigest()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, allow_nan=True).encode()).hexdigest()


class ProbeStore:
    """Read and write the finished evaluations of one probe (see the module docstring)."""

    def __init__(self, root: str | Path, key: str) -> None:
        self.root = Path(root) / key
        #: evaluations read back from files, and damaged files found (set aside, recomputed)
        self.reused = 0
        self.damaged: list[str] = []

    def path(self, seed: int, target: str, noise_seed: int) -> Path:
        # target ids are file-name safe apart from ':' (op:softmax, layer:3, window:3-5)
        return self.root / f"seed{int(seed)}" / f"{target.replace(':', '_')}.ns{int(noise_seed)}.json"

    def get(self, seed: int, target: str, noise_seed: int,
            item_ids: Sequence[str]) -> pd.DataFrame | None:
        """The stored outcomes (``item_id``, ``correct``; ``attrs`` as :func:`evaluate`
        sets them), or ``None`` when absent or unusable."""
        path = self.path(seed, target, noise_seed)
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
            body = data["body"]
            ok = (data.get("sha256") == _digest(body) and body.get("format") == FORMAT
                  and body.get("target") == target and body.get("seed") == int(seed)
                  and body.get("noise_seed") == int(noise_seed)
                  and body.get("item_id") == [str(i) for i in item_ids]
                  and len(body.get("correct", ())) == len(item_ids))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            ok = False
        if not ok:
            self.damaged.append(str(path))
            return None
        df = pd.DataFrame({"item_id": body["item_id"],
                           "correct": [int(c) for c in body["correct"]]})
        df.attrs["injection_stats"] = body["injection_stats"]
        df.attrs["seconds"] = float(body["seconds"])
        df.attrs["reused"] = True
        self.reused += 1
        return df

    def put(self, seed: int, target: str, noise_seed: int, df: pd.DataFrame) -> None:
        stats = [{k: plain(v) for k, v in r.items()}
                 for r in (df.attrs.get("injection_stats") or [])]
        body = {"format": FORMAT, "target": target, "seed": int(seed),
                "noise_seed": int(noise_seed), "item_id": [str(i) for i in df["item_id"]],
                "correct": [int(c) for c in df["correct"]], "injection_stats": stats,
                "seconds": float(df.attrs.get("seconds", float("nan")))}
        data = {"sha256": _digest(body), "body": body}
        atomic_write_bytes(self.path(seed, target, noise_seed),
                           json.dumps(data, allow_nan=True).encode())

