"""The peers' side of benchmarks/peers.py: evalsig's and evalstats' tests on the same studies.

Runs in the peers' own virtual environment (benchmarks/peers.sh), never in the project's:
it imports numpy, pandas, evalsig and evalstats, and nothing of robuststats. Input is an
.npz written by benchmarks/peers.py with ``x`` and ``y`` (uint8, ``(reps, k, n)``: condition
A and B, training seed, item; 0/1 outcomes at the noisy level), ``methods`` and
``slow_reps``. Output is an .npz with, per method, ``<method>:estimate``, ``:pvalue``,
``:ci_low``, ``:ci_high`` (NaN past the replications the method ran) and ``:label`` (what
the package reported it ran). Every difference is A − B.

    python benchmarks/peers_runner.py IN.npz OUT.npz

Methods, each through the package's public entry point with its defaults unless named:

* ``evalsig-pooled``: ``evalsig.compare(baseline=B, candidate=A)`` with every (item, seed)
  as its own item; the automatic choice for 0/1 scores is McNemar's test (exact binomial
  up to 25 discordant pairs, else χ² with continuity correction) and a Wald interval.
* ``evalsig-cluster``: the same rows with ``cluster_id`` = the item and
  ``compare(..., cluster="item", n_resamples=R)``: the cluster bootstrap, items resampled
  with all their seeds, percentile interval, p-value from the re-centred resamples.
* ``evalstats-auto``: ``evalstats.compare(evalstats.load_from(df), factors="model")`` on
  the long table (model, item, seed, score); ``seed`` is read as the runs axis.
* ``evalstats-bootstrap``: the same with ``method="bootstrap", n_bootstrap=R``: with 3 or
  more runs the nested bootstrap (items, then runs within each item).
"""

from __future__ import annotations

import sys
import warnings

EXIT_MISSING = 3  # the peers' packages are not importable here
FAST = ("evalsig-pooled", "evalstats-auto")
SLOW = ("evalsig-cluster", "evalstats-bootstrap")
METHODS = FAST + SLOW


def _frames(x, y, cluster):
    from evalsig.types import ItemResult, RunFrame

    k, n = x.shape
    out = []
    for name, arr in (("B", y), ("A", x)):
        items = [ItemResult(item_id=f"i{i}@s{s}", score=float(arr[s, i]),
                            cluster_id=f"i{i}" if cluster else None)
                 for s in range(k) for i in range(n)]
        out.append(RunFrame(run_id=name, model_id=name, task_id="sim", metric_name="accuracy",
                            items=items))
    return out


def run_evalsig(x, y, *, cluster: bool, n_resamples: int, seed: int):
    from evalsig import compare

    base, cand = _frames(x, y, cluster)
    if cluster:
        r = compare(base, cand, cluster="item", n_resamples=n_resamples, rng=seed)
    else:
        r = compare(base, cand, rng=seed)
    return r.delta, r.p_value, r.ci[0], r.ci[1], r.method


def run_evalstats(x, y, *, method: str | None, n_bootstrap: int, seed: int):
    import evalstats
    import numpy as np
    import pandas as pd

    k, n = x.shape
    df = pd.DataFrame({
        "model": np.repeat(["A", "B"], k * n),
        "item": np.tile(np.arange(n).astype(str), 2 * k),
        "seed": np.tile(np.repeat(np.arange(k).astype(str), n), 2),
        "score": np.concatenate([x.ravel(), y.ravel()]).astype(float),
    })
    options = {} if method is None else {"method": method, "n_bootstrap": n_bootstrap}
    res = evalstats.compare(evalstats.load_from(df), factors="model", rng=seed, **options)
    r = res.pairwise.get("A", "B")
    info = res.methods()
    label = (f"{info['pairwise_ci']['name']}; p: {info['p_values']['test']['name']}"
             f"{'; runs averaged' if info['design'].get('runs_averaged') else ''}")
    return r.point_diff, r.p_value, r.ci_low, r.ci_high, label


def main(argv: list[str]) -> int:
    try:
        import evalsig  # noqa: F401
        import evalstats  # noqa: F401
        import numpy as np
    except ImportError as exc:
        print(f"peers_runner: {exc.name} is not importable by {sys.executable}; create the "
              "peers' environment with benchmarks/peers.sh and run this script with its "
              "python (benchmarks/.venv-peers/bin/python).", file=sys.stderr)
        return EXIT_MISSING
    if len(argv) != 2:
        print("usage: peers_runner.py IN.npz OUT.npz", file=sys.stderr)
        return 2
    data = np.load(argv[0])
    x, y = data["x"], data["y"]
    methods = [str(m) for m in data["methods"]]
    slow_reps = int(data["slow_reps"])
    n_resamples = int(data["n_resamples"])
    seeds = data["seeds"]
    reps = x.shape[0]
    out: dict[str, object] = {}
    for method in methods:
        if method not in METHODS:
            print(f"peers_runner: unknown method {method!r}; known: {METHODS}", file=sys.stderr)
            return 2
        todo = min(reps, slow_reps) if method in SLOW else reps
        res = np.full((4, reps), np.nan)
        labels = set()
        for r in range(todo):
            xr, yr, seed = x[r].astype(float), y[r].astype(float), int(seeds[r])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if method.startswith("evalsig"):
                    *vals, label = run_evalsig(xr, yr, cluster=method == "evalsig-cluster",
                                               n_resamples=n_resamples, seed=seed)
                else:
                    *vals, label = run_evalstats(
                        xr, yr, method=None if method == "evalstats-auto" else "bootstrap",
                        n_bootstrap=n_resamples, seed=seed)
            res[:, r] = vals
            labels.add(label)
        for j, key in enumerate(("estimate", "pvalue", "ci_low", "ci_high")):
            out[f"{method}:{key}"] = res[j]
        out[f"{method}:label"] = np.array(sorted(labels))
    np.savez(argv[1], **out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
