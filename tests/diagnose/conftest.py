"""Fixtures of the probe's tests (helpers in ``probe_models``)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # as in the study's worker processes; also keeps the suite fast on a shared 2-core box
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
