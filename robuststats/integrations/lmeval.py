"""lm-evaluation-harness under robuststats noise: the ``robuststats-hf`` model.

An lm-eval model that is lm-eval's own ``hf`` model (``HFLM``: the same loading, batching,
chat templates and generation) with every request run inside a verified
:func:`robuststats.engine.inject` session, so any lm-eval task can be evaluated under the
engine's noise and its injection counts kept as proof::

    python -m robuststats.integrations.lmeval --model robuststats-hf \\
        --model_args pretrained=ckpts/base/seed000,noise_scale=0.05,noise_seed=0,injections=inj.csv \\
        --tasks gsm8k --log_samples --output_path lmeval/base_s0_n05

``python -m robuststats.integrations.lmeval`` is lm-eval's command line with this model
registered (``lm_eval`` itself does not import robuststats). From Python:
``lm_eval.simple_evaluate(model=NoisyHFLM(pretrained=..., noise=spec))``.

The noise comes from ``noise`` (a :class:`~robuststats.engine.NoiseSpec`, or the path of a
YAML/JSON spec file), else from the ``noise_*`` arguments (``noise_scale``, ``noise_kind``,
``noise_ops``), else from the ``ROBUSTSTATS_NOISE`` environment variable (inline JSON or a
file, :mod:`robuststats.engine._env`); none of them: a clean run. Inference noise is
forward-only with ``seed = noise_seed``. Each lm-eval request type (``generate_until``,
``loglikelihood``, ``loglikelihood_rolling``) runs in one session that starts at the same
seed, so a run is reproducible; a requested op that received no injection fails the run
(``InjectionVerificationError``) instead of reporting clean scores as noisy ones.
``injections=PATH`` (``.csv`` or ``.parquet``) writes the accumulated counts per layer × op
× phase after each request type; :attr:`NoisyHFLM.injection_stats` holds them.

Pair the samples with ``robuststats analyze runs.yaml`` (docs/checkpoints.md).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats._fields import check_whole
from robuststats.errors import InputError

try:
    from lm_eval.api.registry import register_model
    from lm_eval.models.huggingface import HFLM
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("robuststats.integrations.lmeval needs lm-evaluation-harness 0.4: "
                      "pip install 'robuststats[lmeval]'.") from exc

if TYPE_CHECKING:
    import pandas as pd

    from robuststats.engine import NoiseSpec

__all__ = ["NoisyHFLM", "main", "noise_from_args"]

_STAT_KEY = ["layer", "op", "phase"]


def noise_from_args(noise: Any = None, *, noise_scale: float | None = None,
                    noise_kind: str | None = None, noise_ops: str | None = None,
                    noise_seed: int = 0) -> NoiseSpec | None:
    """The run's inference noise (forward only, ``seed = noise_seed``), or ``None``."""
    from robuststats.engine import NoiseSpec, spec_from_env

    check_whole(noise_seed, "noise_seed")
    given = {k: v for k, v in (("kind", noise_kind), ("ops", noise_ops)) if v is not None}
    if noise is not None:
        if noise_scale is not None or given:
            raise InputError("give the noise either as `noise` (a spec or spec file) or as "
                             "`noise_scale`/`noise_kind`/`noise_ops`, not both.")
        spec = noise if isinstance(noise, NoiseSpec) else NoiseSpec.from_file(str(noise))
    elif noise_scale is not None:
        spec = NoiseSpec(scale=noise_scale, **given)
    elif given:
        raise InputError(f"`noise_scale` is needed with {sorted('noise_' + k for k in given)}.")
    else:
        spec = spec_from_env()
    if spec is None or float(spec.scale) == 0.0:
        return None
    return spec.replace(seed=int(noise_seed), phases="forward")


@register_model("robuststats-hf")
class NoisyHFLM(HFLM):
    """lm-eval's ``hf`` model with robuststats noise around every request (module docs)."""

    def __init__(self, *args: Any, noise: Any = None, noise_scale: float | None = None,
                 noise_kind: str | None = None, noise_ops: str | None = None,
                 noise_seed: int = 0, injections: str | None = None, **kwargs: Any) -> None:
        self.noise = noise_from_args(noise, noise_scale=noise_scale, noise_kind=noise_kind,
                                     noise_ops=noise_ops, noise_seed=noise_seed)
        self.injections_path = Path(injections) if injections else None
        if self.injections_path is not None and \
                self.injections_path.suffix.lower() not in (".csv", ".parquet"):
            raise InputError(f"`injections` must end in .csv or .parquet, got {injections!r}.")
        self._stats: list[pd.DataFrame] = []
        super().__init__(*args, **kwargs)

    @property
    def injection_stats(self) -> pd.DataFrame:
        """Injection counts accumulated over the run: one row per layer × op × phase with
        ``count``, ``rms_noise_ratio`` (count-weighted mean) and ``target_scale``."""
        import pandas as pd

        if not self._stats:
            return pd.DataFrame(columns=[*_STAT_KEY, "count", "rms_noise_ratio",
                                         "target_scale"])
        frame = pd.concat(self._stats, ignore_index=True)
        frame["_weighted"] = frame["rms_noise_ratio"] * frame["count"]
        out = frame.groupby(_STAT_KEY, as_index=False, sort=True).agg(
            count=("count", "sum"), _weighted=("_weighted", "sum"),
            target_scale=("target_scale", "first"))
        out["rms_noise_ratio"] = out["_weighted"] / out["count"].where(out["count"] > 0)
        return out[[*_STAT_KEY, "count", "rms_noise_ratio", "target_scale"]]

    def _noisy(self, method: Any, requests: Any, **kwargs: Any) -> Any:
        if self.noise is None:
            return method(requests, **kwargs)
        from robuststats.engine import inject

        with inject(self.model, self.noise, verify=True) as session:
            result = method(requests, **kwargs)
        stats = session.stats
        if len(stats):
            self._stats.append(stats[[c for c in (*_STAT_KEY, "count", "rms_noise_ratio",
                                                  "target_scale") if c in stats.columns]])
        self._write()
        return result

    def _write(self) -> None:
        if self.injections_path is None:
            return
        frame = self.injection_stats
        self.injections_path.parent.mkdir(parents=True, exist_ok=True)
        if self.injections_path.suffix.lower() == ".csv":
            frame.to_csv(self.injections_path, index=False)
        else:
            frame.to_parquet(self.injections_path, index=False)

    def generate_until(self, requests: Any, *args: Any, **kwargs: Any) -> Any:
        return self._noisy(super().generate_until, requests, *args, **kwargs)

    def loglikelihood(self, requests: Any, *args: Any, **kwargs: Any) -> Any:
        return self._noisy(super().loglikelihood, requests, *args, **kwargs)

    def loglikelihood_rolling(self, requests: Any, *args: Any, **kwargs: Any) -> Any:
        return self._noisy(super().loglikelihood_rolling, requests, *args, **kwargs)


def main(argv: list[str] | None = None) -> None:
    """lm-eval's command line with ``robuststats-hf`` registered."""
    from lm_eval.__main__ import cli_evaluate

    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    cli_evaluate()


if __name__ == "__main__":
    main()
