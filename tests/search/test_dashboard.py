"""optuna-dashboard opens a search's storage (issue 27, item 6; the optional extra
``dashboard``, skipped without it).

A real tiny search writes its SQLite storage; the test starts ``optuna-dashboard`` on a
free loopback port against it, reads the study and its trials through the dashboard's HTTP
API (``/api/studies``, ``/api/studies/<id>``), the manifest's settings beside them, and
stops the server.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from robuststats.search import SearchSpec, run_search
from tests.search.conftest import tiny

pytest.importorskip("optuna_dashboard")
optuna = pytest.importorskip("optuna")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.loads(reply.read())


@pytest.mark.slow  # a tiny search (4 trials) and a server start: ~20 s on 2 loaded cores
def test_the_dashboard_reads_a_search_storage(tmp_path: Path, seed_runs) -> None:
    spec = SearchSpec.from_dict(tiny())
    run = run_search(spec, out=tmp_path / "results", runs=seed_runs(), progress=False)
    assert run.storage.startswith("sqlite:///")
    executable = shutil.which("optuna-dashboard") or str(
        Path(sys.executable).with_name("optuna-dashboard"))
    port = _free_port()
    server = subprocess.Popen([executable, run.storage, "--host", "127.0.0.1", "--port",
                               str(port), "--quiet"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                studies = _get(f"{base}/api/studies")["study_summaries"]
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("optuna-dashboard did not start: "
                                         + server.stderr.read().decode()[-2000:]) from None
                time.sleep(0.3)
        (summary,) = [s for s in studies if s["study_name"] == "tiny_search"]
        detail = _get(f"{base}/api/studies/{summary['study_id']}")
        study = optuna.load_study(study_name="tiny_search", storage=run.storage)
        assert [t["number"] for t in detail["trials"]] == [t.number for t in study.trials]
        assert [t["state"] for t in detail["trials"]] == ["Complete"] * 4
        # the values and the package's trial attributes, as the dashboard shows them
        assert [t["values"][0] for t in detail["trials"]] == pytest.approx(
            [t.value for t in study.trials])
        attrs = {a["key"] for a in detail["trials"][0]["user_attrs"]}
        assert {"baseline", "budget", "drop"} <= attrs
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert server.returncode is not None
    # the version's manifest names the sampler and Optuna's version the trials ran under
    manifest = json.loads((run.version.path / "manifest.json").read_text())
    assert manifest["optuna_version"] == optuna.__version__
    assert manifest["sampler"]["name"] == "tpe" and manifest["sampler"]["multivariate"] is True
    assert manifest["pruner"] == {"name": "none"}
