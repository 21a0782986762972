"""A cached model that changed after it was published is not reused.

The run directory's cells are sealed by their records (SHA-256 of the rows); its cached
models were trusted on a ``COMPLETE`` marker alone. A model altered in place (its weights
replaced, a file edited) was then used for every cell still to run, mixing two models in
one condition and seed without a word. Now publishing records the size and SHA-256 of
every file of the model, a model whose files differ is set aside (``corrupt/``, a warning,
an event) and trained again, and a marker from before (a plain time) is adopted.
"""

from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest
from study_doubles import fake_study

from robuststats.runs.ledger import CellIntegrityWarning
from robuststats.runs.spec import StudySpec
from robuststats.study import RunLedger, run_study


def _run(spec, tmp_path):
    return run_study(spec, out=tmp_path / "res", runs=tmp_path / "runs", workers=1,
                     progress=False)


@pytest.mark.slow  # about 12 s: trains the tiny model twice
def test_an_altered_cached_model_is_trained_again_not_reused(tmp_path):
    spec = StudySpec.from_dict(fake_study(n=8, noise_seeds=1))
    first = _run(spec, tmp_path)
    ledger = RunLedger(tmp_path / "runs" / "fake")
    cell = "A__s0__n0.1__ns0"
    before = pd.read_parquet(ledger.cells_dir / f"{cell}.parquet")
    # the cached model of A seed 0 is replaced in place, and one of its cells must rerun
    saved = tmp_path / "runs" / "fake" / "models" / "A__s0" / "model" / "fake.json"
    data = json.loads(saved.read_text())
    saved.write_text(json.dumps({**data, "seed": 7}))
    (ledger.cells_dir / f"{cell}.parquet").unlink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        second = _run(spec, tmp_path)
    assert any(issubclass(w.category, CellIntegrityWarning) and "model A__s0" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    assert second.models_trained == 1 and second.cells_run == 1
    after = pd.read_parquet(ledger.cells_dir / f"{cell}.parquet")
    assert after.equals(before)  # computed from the retrained model, not the altered one
    assert any(e["event"] == "model_set_aside" for e in ledger.events())
    assert list((tmp_path / "runs" / "fake" / "corrupt").glob("models-A__s0*"))
    assert first.ok and second.ok


@pytest.mark.slow
def test_a_marker_from_before_digests_is_adopted(tmp_path):
    spec = StudySpec.from_dict(fake_study(n=8, noise_seeds=1))
    _run(spec, tmp_path)
    ledger = RunLedger(tmp_path / "runs" / "fake")
    marker = tmp_path / "runs" / "fake" / "models" / "A__s0" / "COMPLETE"
    marker.write_text("2026-01-01T00:00:00Z")
    (ledger.cells_dir / "A__s0__n0__ns0.parquet").unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CellIntegrityWarning)
        again = _run(spec, tmp_path)
    assert again.models_trained == 0 and again.cells_run == 1
