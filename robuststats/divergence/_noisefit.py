"""Fit a per-layer (or per-op) relative Gaussian error model to a measured divergence.

The candidate device's divergence from the reference, measured per item and site (the
``items`` of a :class:`~robuststats.divergence.Divergence`: in process, from two captures or
from two msprobe tensor dumps), is matched with the divergence that relative Gaussian noise
``y·(1 + s_p·ε)`` on the matrix products of each *place* p (a decoder layer, or one module of
it) produces when the engine injects it into the reference model on the same items.

**Model.** For small independent zero-mean errors the squared error at a site is, to first
order, the sum of each place's contribution, and each contribution is proportional to s_p²
(a relative Gaussian of scale s has RMS s, and a linearised network carries it linearly):

    E[rel_rms²_{i,t}] ≈ Σ_p s_p² · g_{i,t,p}

for item i and site t, with ``g_{i,t,p}`` the response to unit noise at place p alone. The
responses are simulated: the reference model runs with noise at place p only, at a pilot
scale σ_p (g = rel_rms²/σ_p²). Then u_p = s_p² ≥ 0 solves the non-negative least-squares
problem (Lawson & Hanson 1974, ``scipy.optimize.nnls``) over every observed site inside the
decoder layers, each row divided by the measured mean so that the misfit is relative:

    min_u Σ_t ( (m_t − Σ_p G_{t,p} u_p) / m_t )²,   m_t = mean_i rel_rms²_{i,t},
    G_{t,p} = mean_i g_{i,t,p}.

Squares are used because they add (the sketch of a capture also estimates ‖d‖² without bias).
The pilot is refined once: a first pass with every layer at one scale sets σ so the simulated
residual stream has the measured size, the fit is solved, and the responses are simulated
again at σ_p = ŝ_p, which removes most of the linearisation's error.

**Intervals.** Measured and simulated values are paired by item, so the fit is a ratio-type
estimator; its sampling distribution comes from the percentile bootstrap over items
(resampling (measured, simulated) rows together; Efron & Tibshirani 1993, ch. 13; Davison &
Hinkley 1997, §3.2 for ratio estimators): each resample solves the problem again. What varies
between repetitions is the noise draw of the candidate and of the simulation on each item,
which is independent from item to item.

**Lack of fit.** A confirmation run injects the fitted spec and measures every site again.
Per site, measured / simulated rel RMS and measured / simulated WAPE (the shape of the error:
a relative Gaussian makes an op's error proportional to each element, a weight quantization
does not) are given with bootstrap intervals; a site whose interval lies entirely outside
[1/(1 + tolerance), 1 + tolerance] *misfits*, and the verdict is ``lack of fit`` when any site
does: the error is not a relative Gaussian on these places, and the spec is written with
that verdict rather than as a description of the device.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from robuststats.divergence._analysis import mean_interval
from robuststats.divergence._conditions import Condition, parse_condition
from robuststats.divergence._fitcheck import CHECKED, site_checks
from robuststats.divergence._sites import RESIDUAL
from robuststats.errors import InputError

__all__ = ["PLACES", "NoiseFit", "fit_device", "fit_noise"]

#: granularity of the fitted scales
PLACES = ("layer", "module")
#: noise seeds of the simulations start here, far from a planted or measured run's
_SIM_SEED = 1_000_003


@dataclass(frozen=True)
class NoiseFit:
    """A fitted relative Gaussian error model and how well it describes the measurement.

    ``spec``: the fitted :class:`~robuststats.engine.NoiseSpec` (``scale`` the largest
    place's scale, ``layer_scales`` each place's multiplier of it); ``scales``: one row per
    place (``place``, ``key``, ``layer``, ``scale`` with ``scale_ci_low``/``_high``,
    ``pilot``); ``sites``: per observed site the measured and simulated rel RMS and WAPE and
    their ratios with intervals, and ``misfit``; ``depth``: the residual stream, measured and
    simulated with intervals; ``verdict``: ``fits`` or ``lack of fit``.
    """

    spec: Any
    places: str
    scales: pd.DataFrame
    sites: pd.DataFrame
    depth: pd.DataFrame
    verdict: str
    tolerance: float
    confidence_level: float
    n_items: int
    n_resamples: int
    rms_log_ratio: float
    method: str
    notes: tuple[str, ...] = ()
    seconds: float = 0.0
    simulations: int = 0
    settings: dict[str, Any] = field(default_factory=dict)

    def provenance(self) -> dict[str, Any]:
        """The ``provenance`` mapping of the written spec (``NoiseSpec.from_file`` ignores
        it): method, verdict, per-place scales with intervals, the worst sites."""
        worst = self.sites.reindex(self.sites["abs_log_ratio"].sort_values(
            ascending=False).index).head(5)
        return {
            "fitted_by": "robuststats divergence --fit-noise", "method": self.method,
            "places": self.places, "verdict": self.verdict, "tolerance": self.tolerance,
            "confidence_level": self.confidence_level, "n_items": self.n_items,
            "n_resamples": self.n_resamples, "rms_log_ratio": _r(self.rms_log_ratio),
            "scales": [{"place": r.place, "key": r.key, "scale": _r(r.scale),
                        "ci": [_r(r.scale_ci_low), _r(r.scale_ci_high)]}
                       for r in self.scales.itertuples()],
            "worst_sites": [{"site": r.site, "metric": r.worst_metric,
                             "measured_over_simulated": _r(r.worst_ratio),
                             "misfit": bool(r.misfit)} for r in worst.itertuples()],
            "notes": list(self.notes), **self.settings}

    def to_yaml(self) -> str:
        import yaml

        data = {**self.spec.to_dict(), "provenance": self.provenance()}
        head = ("# A relative Gaussian error model fitted to a measured divergence "
                "(robuststats divergence --fit-noise).\n# NoiseSpec.from_file loads it; "
                "`provenance` is metadata. Verdict: " + self.verdict + "\n")
        return head + yaml.safe_dump(_plain(data), sort_keys=False, allow_unicode=True)


def _r(x: Any) -> float | None:
    x = float(x)
    return float(f"{x:.6g}") if math.isfinite(x) else None


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {(k if isinstance(k, (int, str)) else str(k)): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return x


@dataclass(frozen=True)
class _Place:
    name: str
    key: int | str
    layer: int
    #: layer_scales that leave noise at this place only (with ``layers=[layer]``)
    alone: dict[int | str, float]


def _places(model: Any, mm: Any, granularity: str) -> list[_Place]:
    """Layers, or per layer its linear modules and its functional products (the layer key)."""
    out: list[_Place] = []
    linears = {id(m) for m in mm.linears} | {id(m) for m in mm.product_modules}
    by_layer: dict[int, list[str]] = {}
    for path, module in model.named_modules():
        layer = mm.layer_of.get(id(module), -1)
        if layer >= 0 and id(module) in linears:
            by_layer.setdefault(layer, []).append(path)
    for layer in range(mm.n_layers):
        if granularity == "layer":
            out.append(_Place(f"layer {layer}", layer, layer, {}))
            continue
        mods = by_layer.get(layer, [])
        off = dict.fromkeys(mods, 0.0)
        out.append(_Place(f"{mm.layer_path(layer)} (products)", layer, layer, {**off, layer: 1.0}))
        # a module entry wins over the layer's index entry, which the functional products
        # (attention's) match: both are set so that only module m is perturbed
        out += [_Place(m, m, layer, {**off, layer: 0.0, m: 1.0}) for m in mods]
    return out


def fit_device(reference: Condition, device: str | None) -> str:
    """Where a fit's simulations run: ``device`` when given, else the device the reference
    ran on (a capture's or dump's recorded one; a dump records none: the CPU). The device
    must exist here: a reference captured on ``cuda`` is refused on a machine without one,
    in one line, before any compute, never quietly moved to the CPU."""
    from robuststats.runs.machine import DEVICE_PATTERN, check_torch_device

    recorded = reference.device if DEVICE_PATTERN.match(str(reference.device)) else "cpu"
    chosen = recorded if device is None else device
    try:  # a malformed --device is named as such; a missing one is named with the hint
        check_torch_device(chosen, "device")
    except InputError as exc:
        hint = "" if device is not None else \
            " (the reference ran there; pass --device cpu, or another device, to fit here)"
        raise InputError(str(exc).rstrip(".") + hint + ".") from None
    return chosen


def _fit_iv(granularity: Any, tolerance: Any, n_resamples: Any, confidence_level: Any,
            pilot_scale: Any) -> None:
    if granularity not in PLACES:
        raise InputError(f"`places` must be one of {', '.join(PLACES)}, got {granularity!r}.")
    for key, value, low, high in (("tolerance", tolerance, 0.0, 10.0),
                                  ("confidence_level", confidence_level, 0.0, 1.0),
                                  ("pilot_scale", pilot_scale, 0.0, 0.5)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not low < value < high:
            raise InputError(f"`{key}` must be a number in ({low:g}, {high:g}), got {value!r}.")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 100:
        raise InputError(f"`n_resamples` must be an integer of at least 100, got "
                         f"{n_resamples!r}.")


def _matrix(items: pd.DataFrame, sites: list[str], ids: list[str], metric: str) -> np.ndarray:
    """(n_items, n_sites) of ``metric`` in accumulated mode, NaN where absent."""
    acc = items[items["mode"] == "accumulated"]
    wide = acc.pivot_table(index="item_id", columns="site", values=metric, aggfunc="first")
    return wide.reindex(index=ids, columns=sites).to_numpy(dtype=float)


def _solve(m: np.ndarray, g: np.ndarray) -> np.ndarray:
    """u ≥ 0 minimising Σ_t ((m_t − G_t·u)/m_t)²; ``m`` (n_sites,), ``g`` (n_sites, n_places)."""
    from scipy.optimize import nnls

    ok = np.isfinite(m) & (m > 0) & np.isfinite(g).all(axis=1)
    if not ok.any():
        return np.zeros(g.shape[1])
    u, _ = nnls(g[ok] / m[ok, None], np.ones(int(ok.sum())), maxiter=50 * g.shape[1])
    return u


def fit_noise(model: Any, tokenizer: Any, texts: Sequence[str], measured: Any, *,
              item_ids: Sequence[Any] | None = None,
              reference: Condition | str | dict[str, Any] | None = None,
              places: str = "layer", ops: str = "matmul_only", pilot_scale: float = 0.01,
              tolerance: float = 0.1, confidence_level: float = 0.95,
              n_resamples: int = 1000, rng: int = 0, batch_size: int = 8,
              max_length: int | None = None, noise_seed: int = _SIM_SEED,
              device: str | None = None,
              progress: Callable[[str], None] | None = None) -> NoiseFit:
    """Fit relative Gaussian scales per place to ``measured`` (module docstring).

    ``model``, ``tokenizer``, ``texts`` (and ``item_ids``) are the reference model and the
    items ``measured`` was made on (its per-item rows are matched by item id).
    ``reference``: the simulation's clean run (default ``measured.reference`` on the CPU
    without its error model). ``places``: ``layer`` (one scale per decoder layer) or
    ``module`` (one per linear module of each layer, and one for the layer's other matrix
    products, e.g. attention's). ``ops``: the engine ops the noise is on. ``noise_seed``:
    first seed of the simulations' draws (keep it away from the measured run's).
    ``device``: where the simulations run (``cpu``, ``cuda``, ``cuda:N``, ``npu`` ...;
    default: the device the reference ran on, :func:`fit_device`); never a silent fallback.
    ``progress(what)`` is called after each noisy forward pass of a batch.
    """
    from robuststats.divergence._simulate import Simulator
    from robuststats.engine import NoiseSpec, build_model_map

    _fit_iv(places, tolerance, n_resamples, confidence_level, pilot_scale)
    t0 = time.perf_counter()
    texts = list(texts)
    ids = [f"item-{i:05d}" for i in range(len(texts))] if item_ids is None else \
        [str(i) for i in item_ids]
    acc = measured.items[(measured.items["mode"] == "accumulated")
                         & (measured.items["layer"] >= 0)]
    if acc.empty or not np.isfinite(acc["rel_rms"].to_numpy(float)).any():
        raise InputError("`measured` has no per-item rel RMS inside the decoder layers to fit "
                         "(a statistics-only dump cannot be fitted: dump tensors).")
    if not (acc["rel_rms"].to_numpy(float) > 0).any():
        raise InputError("`measured`: the two runs agree exactly at every site inside the "
                         "decoder layers: there is no divergence to fit (the same device, "
                         "dtype and kernels on both sides?).")
    measured_ids = list(dict.fromkeys(acc["item_id"]))
    missing = [i for i in measured_ids if i not in set(ids)]
    if missing:
        raise InputError(f"`texts`: the measured item {missing[0]!r} is not among the items "
                         "given to the simulation (use the items the divergence was measured "
                         "on).")
    keep = [k for k, i in enumerate(ids) if i in set(measured_ids)]
    texts, ids = [texts[k] for k in keep], [ids[k] for k in keep]
    sites = list(dict.fromkeys(acc["site"]))
    if reference is None:
        ref = replace(measured.reference, device=fit_device(measured.reference, device),
                      noise=None, noise_label=None, checkpoint=None,
                      name="reference (simulated)")
        if ref.dtype is None or ref.dtype not in ("float32", "float64", "bfloat16", "float16"):
            ref = replace(ref, dtype=None)
    else:
        ref = parse_condition(reference, name="reference")
        if device is not None:
            ref = replace(ref, device=fit_device(ref, device))
    mm = build_model_map(model)
    plist = _places(model, mm, places)
    notes: list[str] = []
    runs = 0
    sim = Simulator(model, tokenizer, texts, ids, sites, ref, batch_size=batch_size,
                    max_length=max_length)

    def simulate(specs: list[Any], what: str, metrics: tuple[str, ...] = ("rel_rms",)
                 ) -> list[dict[str, np.ndarray]]:
        nonlocal runs
        runs += len(specs)
        step = None if progress is None else (lambda _n: progress(what))
        return sim.run(specs, metrics, progress=step)

    def spec_of(scale: float, layers: Any, layer_scales: dict[int | str, float] | None,
                seed: int) -> Any:
        return NoiseSpec(scale=scale, kind="relative_gaussian", phases="forward", ops=ops,
                         layers=layers, layer_scales=layer_scales or None, seed=seed)

    meas_sq = _matrix(measured.items, sites, ids, "rel_rms") ** 2
    m = np.nanmean(meas_sq, axis=0)
    # pilot: every layer at one scale, rescaled so the residual stream has the measured size
    first = simulate([spec_of(pilot_scale, None, None, noise_seed)], "pilot, every layer")[0]
    sim_first = np.nanmean(first["rel_rms"] ** 2, axis=0)
    ok = np.isfinite(m) & np.isfinite(sim_first) & (sim_first > 0) & (m > 0)
    ratio = float(np.sqrt(np.median(m[ok] / sim_first[ok]))) if ok.any() else 1.0
    sigma = np.full(len(plist), float(np.clip(pilot_scale * ratio, 1e-6, 0.5)))
    u = np.zeros(len(plist))
    g = np.zeros((len(ids), len(sites), len(plist)))
    for rnd in range(2):
        specs = [spec_of(float(sigma[j]), [p.layer], p.alone,
                         noise_seed + 100_003 * (1 + rnd * len(plist) + j))
                 for j, p in enumerate(plist)]
        for j, resp in enumerate(simulate(specs, f"responses per place, round {rnd + 1}")):
            g[:, :, j] = resp["rel_rms"] ** 2 / sigma[j] ** 2
        u = _solve(m, np.nanmean(g, axis=0))
        if rnd == 0:  # the second round simulates each place at its fitted scale
            fitted = np.sqrt(u)
            sigma = np.where(fitted > 1e-6, np.clip(fitted, 1e-6, 0.5), sigma)
    scale_hat = np.sqrt(u)
    # bootstrap over items: (measured, simulated) rows together
    gen = np.random.default_rng(rng)
    n = len(ids)
    boot = np.empty((n_resamples, len(plist)))
    for b in range(n_resamples):
        idx = gen.integers(0, n, n)
        boot[b] = np.sqrt(_solve(np.nanmean(meas_sq[idx], axis=0),
                                 np.nanmean(g[idx], axis=0)))
    alpha = 1 - confidence_level
    lo = np.quantile(boot, alpha / 2, axis=0)
    hi = np.quantile(boot, 1 - alpha / 2, axis=0)
    top = float(scale_hat.max()) if scale_hat.size else 0.0
    layer_scales: dict[int | str, float] = {}
    for p, s in zip(plist, scale_hat, strict=True):
        layer_scales[p.key] = float(f"{s / top:.6g}") if top > 0 else 0.0
    spec = spec_of(float(f"{top:.6g}"), None, layer_scales, 0)
    scales = pd.DataFrame({
        "place": [p.name for p in plist], "key": [str(p.key) for p in plist],
        "layer": [p.layer for p in plist], "scale": scale_hat, "scale_ci_low": lo,
        "scale_ci_high": hi, "multiplier": [layer_scales[p.key] for p in plist],
        "pilot": sigma, "ci_level": confidence_level,
        "ci_method": "percentile bootstrap over items (paired)"})
    if any(s == 0 for s in scale_hat):
        notes.append("a place fitted to scale 0: the measured divergence needs no noise there "
                     "(non-negative least squares at its bound)")
    # confirmation: the fitted spec, simulated once more with its own draws
    check = simulate([spec.replace(seed=noise_seed + 7)], "confirmation, fitted spec",
                     CHECKED)[0]
    layer_of = acc.groupby("site", sort=False)["layer"].first()
    type_of = acc.groupby("site", sort=False)["module_type"].first()
    site_table, rms_log = site_checks(
        {m: _matrix(measured.items, sites, ids, m) for m in CHECKED},
        {m: check[m] for m in CHECKED},
        sites=sites, layers=[int(layer_of[t]) for t in sites],
        types=[str(type_of[t]) for t in sites], tolerance=tolerance,
        confidence_level=confidence_level, n_resamples=n_resamples, rng=rng)
    unreached = site_table[site_table["rel_rms_ratio"] == math.inf]
    if len(unreached):
        notes.append(f"{len(unreached)} site(s) diverge where relative Gaussian noise on "
                     f"{ops} puts no error (e.g. {unreached['site'].iloc[0]}): another op "
                     "(a norm, an activation, the embedding) differs on the candidate")
    verdict = "lack of fit" if bool(site_table["misfit"].any()) else "fits"
    if verdict == "lack of fit":
        bad = site_table[site_table["misfit"]]
        notes.append(f"lack of fit: {len(bad)} of {len(site_table)} sites differ from the "
                     f"fitted model by more than {tolerance:.0%} with their whole interval "
                     f"(worst {bad.iloc[bad['abs_log_ratio'].argmax()]['site']}); the "
                     "candidate's error is not a relative Gaussian on these places")
    res = [s for s in sites if type_of[s] == RESIDUAL]
    depth = site_table[site_table["site"].isin(res)].sort_values("layer")[[
        "layer", "site", "rel_rms_measured", "rel_rms_simulated", "rel_rms_ratio",
        "rel_rms_ratio_ci_low", "rel_rms_ratio_ci_high"]].reset_index(drop=True)
    col = {t: j for j, t in enumerate(sites)}
    for name, arr in (("measured", _matrix(measured.items, res, ids, "rel_rms")),
                      ("simulated", check["rel_rms"][:, [col[t] for t in res]])):
        bounds = [mean_interval(arr[:, j], confidence_level=confidence_level)
                  for j in range(arr.shape[1])]
        depth[f"rel_rms_{name}_ci_low"] = [b[1] for b in bounds]
        depth[f"rel_rms_{name}_ci_high"] = [b[2] for b in bounds]
    method = ("non-negative least squares of mean rel RMS² per site on simulated unit "
              "responses per place (pilot refined once); percentile bootstrap over items, "
              f"{n_resamples} resamples")
    settings = {"ops": ops if isinstance(ops, str) else list(ops), "pilot_scale": pilot_scale,
                "noise_seed": noise_seed, "reference": ref.to_dict(),
                "forward_passes": sim.forward_passes,
                "measured_candidate": measured.candidate.to_dict()}
    return NoiseFit(spec, places, scales, site_table, depth, verdict, tolerance,
                    confidence_level, n, n_resamples, rms_log, method, tuple(notes),
                    time.perf_counter() - t0, runs, settings)
