"""Suite-wide settings.

Property and fuzz tests draw their examples from a fixed seed (``derandomize``), so CI runs
the same examples every time: a failure is reproducible, never a roll of the dice. Run
``pytest --hypothesis-seed=N`` (or the ``explore`` profile) to search new examples.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
