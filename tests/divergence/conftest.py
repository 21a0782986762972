"""Fixtures of the divergence tests: one torch thread."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # keeps the suite fast on a shared 2-core machine
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)

