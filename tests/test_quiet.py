"""No dependency chatter in a command's output (torchao's extension loads, torch's
register_constant deprecation), in the command's process and in its workers."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys

import pytest

from robuststats._quiet import NOISY_LOGGERS

CHATTER = ("Failed to load", "register_constant")
IMPORT = "import transformers.quantizers.auto"


def _stderr(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=True).stderr


@pytest.mark.skipif(importlib.util.find_spec("torchao") is None,
                    reason="torchao (the noisy dependency) is not installed")
def test_transformers_import_is_quiet_after_quiet_dependencies() -> None:
    loud = _stderr(IMPORT)
    quiet = _stderr("from robuststats._quiet import quiet_dependencies; "
                    f"quiet_dependencies(); {IMPORT}")
    if not any(c in loud for c in CHATTER):
        pytest.skip("this torchao build loads quietly: nothing to silence")
    assert not any(c in quiet for c in CHATTER), quiet


def _levels() -> list[int]:
    return [logging.getLogger(name).level for name in NOISY_LOGGERS]


def test_the_cli_and_every_worker_raise_the_noisy_loggers() -> None:
    from robuststats.cli import main
    from robuststats.runs import run_pool

    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)
    assert main(["power", "--n", "100", "--discordance", "0.2", "--effect", "0.1"]) == 0
    assert _levels() == [logging.ERROR] * len(NOISY_LOGGERS)
    found: list[list[int]] = []
    run_pool(_levels, [(), ()], 2, on_result=lambda i, v: found.append(v),
             on_error=lambda i, exc: found.append([]))
    assert found == [[logging.ERROR] * len(NOISY_LOGGERS)] * 2
