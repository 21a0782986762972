"""Helpers shared by the analysis tables: reproducible random streams, quiet statistics."""

from __future__ import annotations

import contextlib
import hashlib
import warnings
from collections.abc import Iterable, Iterator

import numpy as np

from robuststats.analysis._options import AnalysisOptions


def rng_for(opts: AnalysisOptions, *salt: object) -> np.random.Generator:
    """One independent, reproducible stream per quantity (order of computation irrelevant)."""
    return np.random.default_rng([opts.rng_seed, stable_hash(salt)])


def stable_hash(parts: Iterable[object]) -> int:
    text = "|".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little")


@contextlib.contextmanager
def quiet_degenerate() -> Iterator[None]:
    """Degenerate data (no discordant pairs, a zero clean accuracy) is explained in the
    tables' ``ci_method``/``reason`` columns; the warnings would only repeat it."""
    from robuststats.stats import DegenerateDataWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        yield


def squeeze(x: np.ndarray) -> np.ndarray:
    """One seed: the 1-D item vector the single-seed methods take."""
    return x if len(x) > 1 else x[0]
