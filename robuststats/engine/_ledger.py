"""The injection ledger of one session: per layer × op × phase, the number of injections and
the squared norms of exact results and errors.

Hot-path rules: no ``.item()`` and no host sync while the session is open. Counts are
Python integers (they are facts the host already knows); squared norms are accumulated as
device tensors and reduced once, when the table is built.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import TYPE_CHECKING

import torch

from robuststats._validation import check_choice, check_int
from robuststats.engine._spec import ALL_OPS, PHASES

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LOW_PRECISION", "STATS_COLUMNS", "InjectionLedger"]

#: Output dtypes whose noise is computed in fp32 and rounded once (see
#: ``NoiseSession._low_precision``).
LOW_PRECISION = frozenset({torch.float16, torch.bfloat16})

STATS_COLUMNS = ["layer", "op", "phase", "count", "rms_noise_ratio", "target_scale", "kind",
                 "target"]


class InjectionLedger:
    """Counts and accumulated ``(‖y‖², ‖e‖²)`` per ``(layer, op, phase)``; thread-safe (a
    backward may run on autograd's threads while the forward thread books)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[int, str, str], int] = defaultdict(int)
        self._acc: dict[tuple[int, str, str], torch.Tensor] = {}

    def record(
        self,
        layer: int,
        op: str,
        phase: str,
        y: torch.Tensor,
        e: torch.Tensor,
        alpha: float,
        *,
        count: bool = True,
    ) -> None:
        """Book the injection ``y + alpha·e``."""
        # norms in at least fp32: an fp16 norm overflows past 65504 (→ inf/inf = NaN)
        dtype = torch.float32 if y.dtype in LOW_PRECISION else None
        norms = torch.stack((torch.linalg.vector_norm(y, dtype=dtype),
                             torch.linalg.vector_norm(e, dtype=dtype) * alpha))
        self.book(layer, op, phase, norms.double().square_(), count=count)

    def book(self, layer: int, op: str, phase: str, norms: torch.Tensor, *,
             count: bool = True) -> None:
        """Count one injection with squared norms ``(‖y‖², ‖e‖²)`` (a float64 device tensor);
        ``count=False`` adds the norms of a later block of an injection already counted."""
        key = (layer, op, phase)
        with self._lock:
            if count:
                self._counts[key] += 1
            acc = self._acc.get(key)
            if acc is None:
                # a normal tensor even under torch.inference_mode(), so that a session used
                # for a rollout can keep accumulating in a training step afterwards
                with torch.inference_mode(False):
                    self._acc[key] = norms.clone()  # callers may pass a cached tensor
            else:
                acc.add_(norms)

    def count(self, *, op: str | None = None, phase: str | None = None,
              layer: int | None = None) -> int:
        """Number of injections matching the given filters."""
        if op is not None:
            check_choice(op, "op", ALL_OPS)
        if phase is not None:
            check_choice(phase, "phase", PHASES)
        if layer is not None:
            check_int(layer, "layer")
        with self._lock:
            return sum(
                c
                for (ly, o, ph), c in self._counts.items()
                if (op is None or o == op) and (phase is None or ph == phase)
                and (layer is None or ly == layer)
            )

    def frame(self, phase_scales: dict[str, float], kind: str, target: str) -> pd.DataFrame:
        """One row per layer × op × phase with at least one injection, in layer, op
        (:data:`ALL_OPS`) and phase order: ``count`` and the realised ``rms_noise_ratio``
        = sqrt(Σ‖e‖² / Σ‖y‖²) over all its injections (NaN when Σ‖y‖² = 0)."""
        import pandas as pd

        rows = []
        with self._lock:
            items = sorted(self._counts.items(), key=lambda kv: (kv[0][0], ALL_OPS.index(kv[0][1]), kv[0][2]))
            accs = {k: v.cpu() for k, v in self._acc.items()}  # one sync, here, not on the hot path
        for (layer, op, phase), count in items:
            sig, err = accs[(layer, op, phase)].tolist()
            ratio = (err / sig) ** 0.5 if sig > 0 else float("nan")
            rows.append((layer, op, phase, count, ratio, phase_scales[phase], kind, target))
        return pd.DataFrame(rows, columns=STATS_COLUMNS).astype(
            {"layer": "int64", "count": "int64", "rms_noise_ratio": "float64"}
        )
