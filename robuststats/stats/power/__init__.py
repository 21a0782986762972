"""Power and sample size: McNemar's test, the seed-random t test and the robustness gate.

``_design`` resolves a design (π_D from the effect, baseline, correlation; repeats and
ICC; the item pool) and checks what every planner shares; ``_formulas`` and ``_exact``
hold the closed forms and exact sums of McNemar's test; ``_mcnemar`` and ``_table`` the
one-seed planners; ``_seeds_formulas``, ``_seeds`` and ``_seeds_table`` the planners for
several training seeds; ``_gate`` and ``_gate_components`` the planner of
``robuststats gate``. Formulas and sources: ``docs/power.md``.

The public names are exported by :mod:`robuststats.stats`; the names exported here are the
ones the rest of ``robuststats.stats`` builds on. They load on first use, so that
``robuststats power`` starts without scipy.stats or pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robuststats._lazy import lazy_package

if TYPE_CHECKING:  # the public names, read by static analysers and by lazy_package
    from robuststats.stats.power._formulas import z_upper as z_upper

__getattr__, __dir__ = lazy_package(globals())
