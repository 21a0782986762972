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
@pytest.mark.slow
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


@pytest.mark.skipif(importlib.util.find_spec("torchao") is None,
                    reason="torchao (the noisy dependency) is not installed")
@pytest.mark.slow
def test_importing_robuststats_first_keeps_the_python_api_quiet() -> None:
    """The README's engine snippet imports robuststats before transformers: nothing of
    torchao's or torch's import chatter reaches stderr, without any set-up by the user."""
    loud = _stderr(IMPORT)
    if not any(c in loud for c in CHATTER):
        pytest.skip("this torchao build loads quietly: nothing to silence")
    quiet = _stderr(f"import robuststats.engine; {IMPORT}")
    assert not any(c in quiet for c in CHATTER), quiet


def test_the_import_filter_drops_only_the_chatter(caplog) -> None:
    import robuststats  # noqa: F401  (its import adds the filters)

    torchao = logging.getLogger("torchao")
    pytree = logging.getLogger("torch.utils._pytree")
    levels = torchao.level, pytree.level
    torchao.setLevel(logging.NOTSET)  # as a library user's process has them (no command ran)
    pytree.setLevel(logging.NOTSET)
    with caplog.at_level(logging.WARNING):
        torchao.warning("Failed to load /x/torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so: "
                        "Could not load this library")
        pytree.warning("<enum 'KernelPreference'> is an Enum subclass and is now natively "
                       "supported by torch.compile as an opaque value type. Calling "
                       "register_constant() on Enum subclasses is deprecated and will be an "
                       "error in a future release.")
        torchao.warning("a quantized kernel fell back to float32")
        pytree.warning("another pytree message")
    assert [r.getMessage() for r in caplog.records] == [
        "a quantized kernel fell back to float32", "another pytree message"]
    assert torchao.level == pytree.level == logging.NOTSET  # levels are the user's to set
    torchao.setLevel(levels[0])
    pytree.setLevel(levels[1])
