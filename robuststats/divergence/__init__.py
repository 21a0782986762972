"""Per-layer divergence between two runs of one model (seed 004's hardware migration check).

Run the same model on the same items under a reference and a candidate condition (two
dtypes, two devices, clean vs an engine error model such as NVFP4 weights, or two
checkpoints), compare every decoder layer's output and the modules inside it item by item,
and report MAPE, relative RMS error and cosine similarity with intervals over items, how the
divergence accumulates through depth, and the layers beyond a MAPE bound ordered by the
diagnostic probe's sensitivity.

```python
from robuststats.divergence import compare_runs
div = compare_runs(model, tokenizer, texts, reference="fp32", candidate="bf16")
div.modules    # per module: MAPE, rel RMS, cosine with intervals over items
div.depth      # the residual stream by layer: accumulated, local, predictions
div.fit        # GrowthFit: growth per layer and the accumulation verdict
```

Two machines: ``capture_run(model, tok, texts, "gpu.npz", condition="bf16+cuda")`` on one,
the same on the other, then ``compare_captures("gpu.npz", "npu.npz")`` anywhere.

See ``docs/divergence.md``. Names load on first use; conditions need no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robuststats._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "is_capture": "robuststats.divergence._capfile",
    "store_name": "robuststats.divergence._report",
    "summary": "robuststats.divergence._report",
    "verdict_text": "robuststats.divergence._report",
    "write_divergence": "robuststats.divergence._report",
    "check_device": "robuststats.divergence._runner",
    "check_source": "robuststats.divergence._sources",
    "load_source": "robuststats.divergence._sources",
    "read_texts": "robuststats.divergence._sources",
    "DTYPES": "robuststats.divergence._conditions",
    "Condition": "robuststats.divergence._conditions",
    "parse_condition": "robuststats.divergence._conditions",
    "DEFAULT_EPS": "robuststats.divergence._metrics",
    "METRICS": "robuststats.divergence._metrics",
    "RunningStats": "robuststats.divergence._metrics",
    "item_metrics": "robuststats.divergence._metrics",
    "Site": "robuststats.divergence._sites",
    "find_sites": "robuststats.divergence._sites",
    "Divergence": "robuststats.divergence._runner",
    "GrowthFit": "robuststats.divergence._fit",
    "compare_runs": "robuststats.divergence._runner",
    "CaptureInfo": "robuststats.divergence._capture",
    "capture_run": "robuststats.divergence._capture",
    "compare_captures": "robuststats.divergence._fromcaptures",
    "CaptureReader": "robuststats.divergence._capfile",
    "SketchParams": "robuststats.divergence._sketch",
    "depth_table": "robuststats.divergence._analysis",
    "exceeding_table": "robuststats.divergence._analysis",
    "growth_fit": "robuststats.divergence._analysis",
    "module_table": "robuststats.divergence._analysis",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # static analysers see the real names
    from robuststats.divergence._analysis import (  # noqa: F401
        depth_table,
        exceeding_table,
        growth_fit,
        module_table,
    )
    from robuststats.divergence._capfile import CaptureReader  # noqa: F401
    from robuststats.divergence._capture import CaptureInfo, capture_run  # noqa: F401
    from robuststats.divergence._conditions import DTYPES, Condition, parse_condition  # noqa: F401
    from robuststats.divergence._fit import GrowthFit  # noqa: F401
    from robuststats.divergence._fromcaptures import compare_captures  # noqa: F401
    from robuststats.divergence._metrics import (  # noqa: F401
        DEFAULT_EPS,
        METRICS,
        RunningStats,
        item_metrics,
    )
    from robuststats.divergence._runner import Divergence, compare_runs  # noqa: F401
    from robuststats.divergence._sites import Site, find_sites  # noqa: F401
    from robuststats.divergence._sketch import SketchParams  # noqa: F401


__getattr__, __dir__ = lazy_exports("robuststats.divergence", _EXPORTS, globals())
