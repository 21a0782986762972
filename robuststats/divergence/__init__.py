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

from robuststats._lazy import lazy_package

if TYPE_CHECKING:  # the public names, read by static analysers and by lazy_package
    from robuststats.divergence._analysis import depth_table as depth_table
    from robuststats.divergence._analysis import exceeding_table as exceeding_table
    from robuststats.divergence._analysis import growth_fit as growth_fit
    from robuststats.divergence._analysis import module_table as module_table
    from robuststats.divergence._capfile import CaptureReader as CaptureReader
    from robuststats.divergence._capfile import is_capture as is_capture
    from robuststats.divergence._capture import CaptureInfo as CaptureInfo
    from robuststats.divergence._capture import capture_run as capture_run
    from robuststats.divergence._conditions import DTYPES as DTYPES
    from robuststats.divergence._conditions import Condition as Condition
    from robuststats.divergence._conditions import parse_condition as parse_condition
    from robuststats.divergence._fit import GrowthFit as GrowthFit
    from robuststats.divergence._fitreport import fit_figure as fit_figure
    from robuststats.divergence._fitreport import fit_summary as fit_summary
    from robuststats.divergence._fromcaptures import compare_captures as compare_captures
    from robuststats.divergence._fromcaptures import condition_from_dict as condition_from_dict
    from robuststats.divergence._metrics import DEFAULT_EPS as DEFAULT_EPS
    from robuststats.divergence._metrics import METRICS as METRICS
    from robuststats.divergence._metrics import RunningStats as RunningStats
    from robuststats.divergence._metrics import item_metrics as item_metrics
    from robuststats.divergence._msprobe import STAT_METRICS as STAT_METRICS
    from robuststats.divergence._msprobe import compare_dumps as compare_dumps
    from robuststats.divergence._msprobe import is_dump as is_dump
    from robuststats.divergence._msprobe import read_dump as read_dump
    from robuststats.divergence._noisefit import NoiseFit as NoiseFit
    from robuststats.divergence._noisefit import fit_device as fit_device
    from robuststats.divergence._noisefit import fit_noise as fit_noise
    from robuststats.divergence._relocate import FitInputs as FitInputs
    from robuststats.divergence._relocate import check_loaded as check_loaded
    from robuststats.divergence._relocate import fit_inputs as fit_inputs
    from robuststats.divergence._relocate import result_identity as result_identity
    from robuststats.divergence._relocate import source_identity as source_identity
    from robuststats.divergence._report import store_name as store_name
    from robuststats.divergence._report import summary as summary
    from robuststats.divergence._report import verdict_text as verdict_text
    from robuststats.divergence._report import write_divergence as write_divergence
    from robuststats.divergence._runner import Divergence as Divergence
    from robuststats.divergence._runner import check_device as check_device
    from robuststats.divergence._runner import compare_runs as compare_runs
    from robuststats.divergence._sites import Site as Site
    from robuststats.divergence._sites import find_sites as find_sites
    from robuststats.divergence._sketch import SketchParams as SketchParams
    from robuststats.divergence._sources import Source as Source
    from robuststats.divergence._sources import check_source as check_source
    from robuststats.divergence._sources import load_source as load_source
    from robuststats.divergence._sources import read_texts as read_texts

__getattr__, __dir__ = lazy_package(globals())
