"""The reward curves of a study trained with the ``grpo`` trainer, per condition and seed.

    python examples/reward_curves.py runs/e8_grpo results/e8_grpo/v1-reward-curves.png

Reads ``models/<condition>__s<seed>/model/training_info.json`` of the run directory (the
trainer's ``reward_curve``: the mean reward of each step's completions) and writes the figure
with :func:`robuststats.report.training_curves.reward_curves_figure`, plus the curves as CSV
beside it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pandas as pd

from robuststats.report.training_curves import reward_curves_figure


def curves(run_dir: Path) -> pd.DataFrame:
    rows = []
    for info_file in sorted(run_dir.glob("models/*/model/training_info.json")):
        match = re.fullmatch(r"(.+)__s(\d+)", info_file.parents[1].name)
        info = json.loads(info_file.read_text(encoding="utf-8"))
        if match is None or "reward_curve" not in info:
            continue
        rows += [{"condition": match[1], "train_seed": int(match[2]), "step": step,
                  "reward": reward} for step, reward in enumerate(info["reward_curve"], 1)]
    return pd.DataFrame(rows)


def main(argv: list[str]) -> None:
    run_dir, out = Path(argv[0]), Path(argv[1])
    table = curves(run_dir)
    reward_curves_figure(table, out, title=f"{run_dir.name}: GRPO reward per step")
    table.to_csv(out.with_suffix(".csv"), index=False)
    print(f"{out} ({table['condition'].nunique()} conditions, "
          f"{table.groupby('condition')['train_seed'].nunique().min()}+ seeds)")


if __name__ == "__main__":
    main(sys.argv[1:])
