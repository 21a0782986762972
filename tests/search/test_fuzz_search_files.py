"""Fuzz the ``search:`` section through ``robuststats search --check``: any value of any
key (or a stray key) ends in exit 0, or exit 2 with one line naming a key of the file; never
a traceback. Nothing is trained: --check stops before the first model."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robuststats.cli import main
from tests.search.conftest import tiny, write

KEYS = ["objective", "metric", "bound", "space", "scale_range", "trials", "multi_objective",
        "sampler", "sampler_seed", "pruner", "reports", "train_noise", "sensitivity",
        "heuristic", "stale_after", "reevaluation", "bogus"]
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10**7), st.floats(allow_nan=True),
    st.text(max_size=12), st.sampled_from(["tolerance", "training", "tpe", "nsga2",
                                           "median", "block", "retention"]),
    st.lists(st.floats(-5, 50), max_size=3),
    st.dictionaries(st.sampled_from(["scale", "noise_seeds", "holdout_items", "seeds",
                                     "sensitive_above", "phases", "x"]),
                    st.one_of(st.integers(-3, 100), st.floats(-1, 2), st.text(max_size=5)),
                    max_size=3),
)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(st.sampled_from(KEYS), VALUES, min_size=1, max_size=3))
def test_check_contract(tmp_path: Path, changes: dict) -> None:
    path = write(tmp_path / "s.yaml", tiny(**{f"search.{k}": v for k, v in changes.items()}))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["search", str(path), "--check", "--runs", str(tmp_path / "r")])
    text = err.getvalue()
    assert code in (0, 2), text
    if code == 2:
        # one error line; the file's other problems, counted there, one `  also:` line each
        first, *also = text.splitlines()
        assert first.startswith("robuststats search: error: "), text
        assert all(line.startswith("  also: ") for line in also), text
        assert not also or f"({len(also)} more problem(s), listed below)" in first, text
        assert "search" in first and "(line " in first, text
    else:
        assert text == ""
