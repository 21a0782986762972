"""The growth fit of a divergence: how the residual stream's divergence grows through depth,
and whether the layers' own errors add up, amplify or damp (:func:`._analysis.growth_fit`;
the predictions are those of the :mod:`._analysis` module docstring).

:meth:`GrowthFit.to_dict` is the plain record that the JSON output and ``report.json`` hold
as ``fit``: the keys of the parts that were computed, always in the same order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Accumulation", "GrowthFit", "LayerGrowth"]


@dataclass(frozen=True)
class LayerGrowth:
    """The residual stream's measured divergence from the first to the last compared layer.

    Attributes
    ----------
    n_items_fit : int
        Items that diverge in two or more layers: those the slope is fitted on.
    growth_per_layer, growth_per_layer_ci_low, growth_per_layer_ci_high : float
        ``exp(slope) − 1`` and its interval (NaN where the slope's bound is).
    first_layer, last_layer : int
        The first and the last compared decoder layer.
    first_rel_rms : float
        Mean rel RMS over items at the first layer.
    last_rel_rms, last_rel_rms_ci_low, last_rel_rms_ci_high : float
        Mean rel RMS over items at the last layer, with its t interval over items.
    """

    n_items_fit: int
    growth_per_layer: float
    growth_per_layer_ci_low: float
    growth_per_layer_ci_high: float
    first_layer: int
    last_layer: int
    first_rel_rms: float
    last_rel_rms: float
    last_rel_rms_ci_low: float
    last_rel_rms_ci_high: float


@dataclass(frozen=True)
class Accumulation:
    """The last layer's measured divergence against the predictions from the layers' own
    errors (needs the local pass).

    Attributes
    ----------
    local_last, additive_last, quadrature_last, seed004_last, compounding_last : float
        Means over items at the last layer: its local relative error and the additive,
        quadrature, seed 004 and compounding predictions.
    mean_local_per_layer : float
        Mean local relative error over items and layers.
    amplification, amplification_ci_low, amplification_ci_high : float
        Measured / additive at the last layer, with its t interval over items.
    vs_quadrature, vs_quadrature_ci_low, vs_quadrature_ci_high : float
        Measured / quadrature at the last layer, with its t interval over items.
    """

    local_last: float
    additive_last: float
    quadrature_last: float
    seed004_last: float
    compounding_last: float
    mean_local_per_layer: float
    amplification: float
    amplification_ci_low: float
    amplification_ci_high: float
    vs_quadrature: float
    vs_quadrature_ci_low: float
    vs_quadrature_ci_high: float


@dataclass(frozen=True)
class GrowthFit:
    """Per-layer growth of the residual stream's divergence and the accumulation verdict.

    Attributes
    ----------
    n_layers : int
        Decoder layers of the model.
    confidence_level : float
        Of every interval.
    slope, slope_ci_low, slope_ci_high : float
        Mean over items of each item's OLS slope of log(rel RMS) on the layer index, with a
        t interval over items; NaN below two compared layers.
    growth : LayerGrowth or None
        The measured growth; None below two compared layers.
    accumulation : Accumulation or None
        Measured against predicted at the last layer; None without the local pass.
    verdict : str or None
        ``amplifying``, ``additive``, ``sub-additive``, ``independent`` or ``damped``
        (:func:`._analysis.growth_fit`); None when not assessed.
    verdict_note : str or None
        Why there is no verdict, where the caller knows (a comparison of captures).
    notes : tuple of str
        What the fit left out. Not part of :meth:`to_dict`: a
        :class:`~robuststats.divergence.Divergence` lists them among its own notes.
    """

    n_layers: int
    confidence_level: float
    slope: float
    slope_ci_low: float
    slope_ci_high: float
    growth: LayerGrowth | None = None
    accumulation: Accumulation | None = None
    verdict: str | None = None
    verdict_note: str | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain record (``fit`` in the JSON output and ``report.json``): ``n_layers``,
        ``confidence_level``, (``n_items_fit``,) the slope, (the growth's keys,) (the
        accumulation's keys,) ``verdict`` and, when there is one, ``verdict_note``."""
        out: dict[str, Any] = {"n_layers": self.n_layers,
                               "confidence_level": self.confidence_level}
        slope = {"slope": self.slope, "slope_ci_low": self.slope_ci_low,
                 "slope_ci_high": self.slope_ci_high}
        if self.growth is None:
            out.update(slope)
        else:
            growth = asdict(self.growth)
            out.update({"n_items_fit": growth.pop("n_items_fit"), **slope, **growth})
        if self.accumulation is not None:
            out.update(asdict(self.accumulation))
        out["verdict"] = self.verdict
        if self.verdict_note is not None:
            out["verdict_note"] = self.verdict_note
        return out
