"""Write ``examples/pilot_outcomes.csv``: a small simulated pilot for ``robuststats power``.

Two training procedures, E8c (condition a of the simulator, 0.15 logits more accurate) and
E8b, with 5 training seeds each, evaluated clean on the same 300 items; seeds shift the two
procedures differently ("small" seed effects of
:func:`robuststats.stats.simulate_outcomes`). Columns ``condition, seed, eval_noise,
noise_seed, item_id, correct``, one row per evaluated item.

    python examples/make_pilot.py            # rewrites examples/pilot_outcomes.csv
    robuststats power --effect 0.03 --pilot examples/pilot_outcomes.csv --conditions E8c E8b
"""

from __future__ import annotations

from pathlib import Path

from robuststats.stats import simulate_outcomes

OUT = Path(__file__).resolve().with_name("pilot_outcomes.csv")


def main() -> None:
    table = simulate_outcomes(5, 300, seed_effects="small", accuracy_effect=0.15,
                              rng=20_251)
    clean = table[table["eval_noise"] == 0.0]
    clean = clean.assign(condition=clean["condition"].map({"A": "E8c", "B": "E8b"}))
    clean.to_csv(OUT, index=False)
    print(f"wrote {len(clean)} rows to {OUT}")


if __name__ == "__main__":
    main()
