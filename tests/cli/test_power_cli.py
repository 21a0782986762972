"""Tests of ``robuststats power`` through ``robuststats.cli.main``."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import robuststats.cli as cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def main(monkeypatch: pytest.MonkeyPatch):
    """``cli.main`` with only the power subcommand registered (the others are not needed)."""
    monkeypatch.setattr(cli, "COMMANDS", {"power": "robuststats.cli.power"})
    return cli.main


def _run(main, capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["power", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_effect_alone_prints_table_over_discordance(main, capsys) -> None:
    code, out, _ = _run(main, capsys, "--effect", "0.03")
    assert code == 0
    assert "π_D unknown" in out and "exact McNemar test" in out
    # exact McNemar test by default (docs/power.md table: 1800 at π_D = .20; Connor 1742)
    table = {
        line.split()[0]: line.split()[1]
        for line in out.splitlines()
        if line.strip() and line.split()[0].replace(".", "").isdigit()
    }
    assert table["0.2"] == "1800"
    assert set(table) >= {"0.03", "0.05", "0.1", "0.15", "0.2", "0.3"}
    assert "--seeds K --seed-sd S" in out  # the way to plan several training seeds
    assert "unpaired design for comparison" in out
    assert "4360 items per condition" in out  # pooled z-test at accuracies .485/.515
    assert "--discordance" in out and "--pilot" in out
    assert "exceeds the pool of 1319 items" in out


def test_json_has_n_when_solving_for_sample_size(main, capsys) -> None:
    code, out, err = _run(main, capsys, "--effect", "0.03", "--discordance", "0.2", "--format", "json")
    assert code == 0
    payload = json.loads(out)
    assert payload["n"] == 1800 and payload["method"] == "exact"
    assert payload["solved_for"] == "n"
    assert payload["unpaired"]["design"] == "unpaired"
    assert "exceeds the item pool of 1319" in err  # the default pool is GSM8K's test split


def test_json_table_mode_keeps_n_key(main, capsys) -> None:
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--format", "json", "--pool-size", "0")
    payload = json.loads(out)
    assert code == 0 and "n" in payload and payload["n"] is None
    assert [row["n"] for row in payload["table"]][:2] == [263, 463]
    assert not any(row["exceeds_pool"] for row in payload["table"])


def test_power_and_minimum_detectable_effect(main, capsys) -> None:
    code, out, _ = _run(
        main, capsys, "--effect", "0.03", "--n", "1800", "--discordance", "0.2", "--format", "json"
    )
    assert code == 0 and json.loads(out)["power"] == pytest.approx(0.8, abs=1e-3)
    code, out, _ = _run(main, capsys, "--n", "1319", "--discordance", "0.15")
    assert code == 0
    assert "minimum detectable effect δ = 0.03048" in out
    code, out, _ = _run(main, capsys, "--n", "1319", "--discordance", "0.15", "--method", "connor")
    assert code == 0
    assert "minimum detectable effect δ = 0.02985" in out


def test_exact_method_and_repeats(main, capsys) -> None:
    code, out, _ = _run(
        main, capsys, "--effect", "0.03", "--discordance", "0.2", "--method", "connor", "--format", "json"
    )
    assert code == 0 and json.loads(out)["n"] == 1742
    code, out, _ = _run(
        main, capsys, "--effect", "0.03", "--discordance", "0.2", "--repeats", "3", "--icc", "0.3"
    )
    assert code == 0
    # exact n 1800 · deff 1.6 / 3 = 960 items
    assert "960 items (pairs) × 3 repeats = 2880 evaluations" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--effect", "-0.03"], "`--effect` must be > 0"),
        (["--effect", "0"], "`--effect` must be > 0"),
        (["--effect", "0.03", "--discordance", "0.02"], "impossible: π_D must be ≥ |δ|"),
        (["--effect", "0.03", "--discordance", "1.5"], "`--discordance` must be a number in (0, 1), got 1.5"),
        (
            ["--effect", "0.03", "--discordance", "0.1", "--alpha", "0"],
            "`--alpha` must be a number in (0, 1), got 0.0",
        ),
        (
            ["--effect", "0.03", "--discordance", "0.1", "--power", "1.2"],
            "`--power` must be a number in (0, 1), got 1.2",
        ),
        (["--effect", "0.03", "--baseline", "1.2"], "`--baseline` must be a number in (0, 1), got 1.2"),
        (
            ["--effect", "0.03", "--discordance", "0.1", "--baseline", "0.99"],
            "impossible: `--baseline` + `--effect`",
        ),
        (["--effect", "0.03", "--correlation", "0.5"], "`--correlation` needs `--baseline`"),
        (["--effect", "0.03", "--discordance", "0.1", "--correlation", "0.5"], "pass only one of"),
        (["--discordance", "0.1"], "pass --effect (to get n) or --n"),
        (["--n", "500"], "needs π_D"),
        (["--effect", "0.03", "--pool-size", "-1"], "`--pool-size` must be ≥ 0"),
        (["--effect", "0.03", "--repeats", "0"], "`--repeats` must be a positive integer"),
        (["--effect", "0.03", "--pilot", "/nonexistent/pilot.csv"], "does not exist"),
        (["--effect", "1"], "`--effect` must be a number in (0, 1), got 1.0"),
        (["--effect", "1", "--discordance", "0.5"], "`--effect` must be a number in (0, 1), got 1.0"),
        (["--effect", "1e-320"], "is too small to detect: it needs more than 1e+12 items"),
        (["--effect", "0.03", "--confidence-level", "3"], "`--confidence-level` applies to pilot"),
        (["--effect", "0.03", "--eval-noise", "0.1"], "`--eval-noise` applies to pilot outcomes"),
        (["--effect", "0.03", "--holes", "raise"], "`--holes` applies to pilot outcomes"),
        (["--effect", "0.03", "--conditions", "A", "B"], "`--conditions` applies to pilot"),
        (["--effect", "0.03", "--seeds", "0"], "`--seeds` must be a positive integer, got 0"),
        (["--effect", "0.03", "--seeds", "1", "--seed-sd", "0.01"], "`--seed-sd` needs --seeds"),
        (["--effect", "0.03", "--discordance", "0.2", "--seed-sd", "-0.01"],
         "`--seed-sd` must be a number ≥ 0"),
        (["--effect", "0.03", "--discordance", "0.2", "--seed-sd", "nan"],
         "`--seed-sd` must be a finite number"),
        (["--effect", "0.03", "--discordance", "0.2", "--seed-sd", "0.5"],
         "impossible: `--seed-sd` = 0.5 needs a seed variance"),
        (["--effect", "0.03", "--discordance", "0.2", "--seeds", "20000"],
         "`--seeds` must be at most 10000"),
        (["--effect", "0.03", "--seed-sd", "0.01"], "planning seeds needs π_D"),
        (["--n", "300", "--discordance", "0.2", "--seed-sd", "0.01"],
         "`--n` without --effect gives the minimum detectable effect"),
        (["--effect", "0.03", "--discordance", "0.2", "--seeds", "5", "--repeats", "2"],
         "`--repeats` applies to one-seed designs"),
        (["--effect", "0.03", "--discordance", "0.2", "--seeds", "5", "--method", "exact"],
         "`--method` exact does not apply to a design with several seeds"),
        (["--effect", "0.03", "--discordance", "0.2", "--method", "seed-random"],
         "`--method` seed-random does not apply to a design with one seed"),
        (["--effect", "0.03", "--discordance", "0.2", "--seeds", "5", "--icc", "1.5"],
         "`--icc` must be a number in [0, 1]"),
        (["--effect", "0.03", "--discordance", "0.2", "--seeds", "5", "--plot", "p.txt"],
         "`--plot` must name a figure file ending in"),
        (["--effect", "1e-320", "--discordance", "0.2"], "is too small to detect"),
        (["--effect", "nan"], "`--effect` must be a finite number, got nan"),
        (["--effect", "inf", "--discordance", "0.2"], "`--effect` must be a finite number"),
        (["--effect", "0.03", "--plot", "x.txt"], "`--plot` must name a figure file ending in"),
        (["--effect", "0.03", "--plot", "curve"], "got 'curve'"),
        (["--effect", "0.03", "--icc", "nan"], "`--icc` must be a finite number, got nan"),
        (["--effect", "0.03", "--alpha", "1e-320", "--power", "1e-330"],
         "`--power` must be a number in (0, 1), got 0.0"),
        (["--effect", "1e-05", "--discordance", "0.5", "--method", "exact"],
         "more than the exact computation handles"),
        (["--effect", "0.03", "--n", "100000000", "--discordance", "0.2", "--method", "midp"],
         "more than the exact computation handles"),
        (["--effect", "0.03", "--confidence-level", "1", "--pilot", "/nonexistent.csv"],
         "does not exist"),
        (["--n", "0", "--discordance", "0.2"], "`--n` must be a positive integer, got 0"),
        (["--effect", "0.03", "--n", "-5"], "`--n` must be a positive integer, got -5"),
    ],
)
def test_bad_values_exit_2_with_one_line(main, capsys, argv: list[str], message: str) -> None:
    code, out, err = _run(main, capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("robuststats power: error: ")
    assert message in err


def test_argparse_type_errors_exit_2(main, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["power", "--effect", "three"])
    assert info.value.code == 2
    assert "not a number: 'three'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["power", "--effect", "0.03", "--method", "fast"])
    assert info.value.code == 2


def _pilot_table() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    base = rng.random(400) < 0.65
    flip = rng.random(400) < 0.12
    rows = [
        {"condition": c, "item_id": f"q{i}", "correct": int(v)}
        for c, arr in (("E8b", base), ("E8c", base ^ flip))
        for i, v in enumerate(arr)
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_pilot_file(main, capsys, tmp_path: Path, suffix: str) -> None:
    table = _pilot_table()
    path = tmp_path / f"pilot{suffix}"
    table.to_csv(path, index=False) if suffix == ".csv" else table.to_parquet(path)
    x = table[table.condition == "E8b"]["correct"].to_numpy()
    y = table[table.condition == "E8c"]["correct"].to_numpy()
    pi_d = float(np.mean(x != y))
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--pilot", str(path), "--format", "json")
    assert code == 0
    payload = json.loads(out)
    assert payload["pilot"]["discordance"] == pytest.approx(pi_d)
    assert payload["discordance"] == pytest.approx(pi_d)
    low, high = payload["n_range"]["low"], payload["n_range"]["high"]
    assert low < payload["n"] < high
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--pilot", str(path))
    assert "pilot E8b vs E8c: 400 pairs" in out and "Wilson" in out


def test_pilot_conditions_option(main, capsys, tmp_path: Path) -> None:
    table = pd.concat(
        [_pilot_table(), _pilot_table().query("condition == 'E8c'").assign(condition="E8d")]
    )
    path = tmp_path / "pilot.csv"
    table.to_csv(path, index=False)
    code, _, err = _run(main, capsys, "--effect", "0.03", "--pilot", str(path))
    assert code == 2 and "choose two with --conditions A B" in err
    # E8d copies E8c: no discordant pairs, so the design is impossible for δ = .03
    code, _, err = _run(
        main, capsys, "--effect", "0.03", "--pilot", str(path), "--conditions", "E8c", "E8d"
    )
    assert code == 2 and "has no discordant pair among 400" in err
    assert "--discordance 0.00951" in err  # Wilson upper bound z²/(n + z²) at 0/400
    code, out, _ = _run(
        main, capsys, "--effect", "0.03", "--pilot", str(path), "--conditions", "E8b", "E8d"
    )
    assert code == 0 and "pilot E8b vs E8d" in out


def test_plot_writes_png(main, capsys, tmp_path: Path) -> None:
    png = tmp_path / "curve.png"
    code, out, _ = _run(
        main, capsys, "--effect", "0.03", "--discordance", "0.1", "--plot", str(png)
    )
    assert code == 0 and f"power curve written to {png}" in out
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    png2 = tmp_path / "table.png"
    assert main(["power", "--effect", "0.05", "--plot", str(png2)]) == 0
    assert png2.read_bytes()[:4] == b"\x89PNG"


def test_help_has_examples(main, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["power", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text and "--pilot" in text and "80% power" in text


def test_import_is_light() -> None:
    # the subcommand module must not pull numpy/scipy/pandas/torch at import time
    code = (
        "import sys, robuststats.cli.power; "
        "print(sorted(m for m in ('numpy', 'scipy', 'pandas', 'torch') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout
    assert out.strip() == "[]"


def test_real_dispatcher_when_all_subcommands_exist(capsys) -> None:
    for module in cli.COMMANDS.values():
        try:
            importlib.import_module(module)
        except ImportError:
            pytest.skip(f"{module} is not available yet")
    assert cli.main(["power", "--effect", "0.03", "--discordance", "0.06", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 562  # exact; Connor's 521 falls short


def test_pilot_with_repeated_items_reports_icc(main, capsys, tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    rows = []
    for i in range(200):
        hard = rng.random() < 0.3
        for seed in range(3):
            a = int(rng.random() < (0.3 if hard else 0.9))
            b = a if rng.random() > (0.4 if hard else 0.05) else 1 - a
            rows += [
                {"condition": "clean", "seed": seed, "item_id": f"q{i}", "correct": a},
                {"condition": "noisy", "seed": seed, "item_id": f"q{i}", "correct": b},
            ]
    path = tmp_path / "pilot.parquet"
    pd.DataFrame(rows).to_parquet(path)
    # --seeds 1: one trained model per condition, the 3 seeds as repeats of each item
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--pilot", str(path), "--seeds", "1",
                        "--format", "json")
    assert code == 0
    pilot = json.loads(out)["pilot"]
    assert pilot["evaluations_per_item"] == 3.0
    assert 0.0 < pilot["difference_icc"] < 1.0
    assert pilot["design_effect"] > 1.0  # discordance clusters on the hard items
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--pilot", str(path), "--seeds", "1")
    assert "for repeated items" in out and "--repeats M --icc" in out


def test_tiny_alpha_is_legal(main, capsys) -> None:
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--alpha", "1e-300",
                        "--format", "json")
    assert code == 0 and json.loads(out)["table"][0]["n"] > 260


def test_json_carries_the_inputs(main, capsys) -> None:
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--discordance", "0.2",
                        "--method", "exact", "--alternative", "greater", "--format", "json")
    assert code == 0
    payload = json.loads(out)
    inputs = payload["inputs"]
    assert inputs["effect"] == 0.03 and inputs["discordance"] == 0.2
    assert inputs["method"] == "exact" and inputs["alternative"] == "greater"
    assert inputs["alpha"] == 0.05 and inputs["power"] == 0.8
    assert inputs["pool_size"] == 1319 and "robuststats_version" in inputs
    # the inputs alone reproduce the result
    from robuststats.stats import PoolSizeWarning, power_mcnemar

    with pytest.warns(PoolSizeWarning, match=r"exceeds the item pool of 1319"):
            again = power_mcnemar(inputs["effect"], inputs["n"], inputs["power"],
                              discordance=inputs["discordance"], baseline=inputs["baseline"],
                              alpha=inputs["alpha"], alternative=inputs["alternative"],
                              method=inputs["method"], repeats=inputs["repeats"],
                              icc=inputs["icc"], pool_size=inputs["pool_size"])
    assert again.n == payload["n"] == 1433


def test_table_json_is_power_table(main, capsys) -> None:
    from robuststats.stats import power_table

    code, out, _ = _run(main, capsys, "--effect", "0.03", "--format", "json")
    assert code == 0
    rows = json.loads(out)["table"]
    expected = power_table(0.03, power=0.8, pool_size=1319, as_frame=False)
    assert [r["n"] for r in rows] == [r["n"] for r in expected]
    assert [r["design"] for r in rows][-1] == "unpaired"


def test_pool_size_defaults_to_the_pilot_items(main, capsys, tmp_path: Path) -> None:
    path = tmp_path / "pilot.csv"
    _pilot_table().to_csv(path, index=False)
    code, out, err = _run(main, capsys, "--effect", "0.03", "--pilot", str(path),
                          "--format", "json")
    payload = json.loads(out)
    assert code == 0 and payload["inputs"]["pool_size"] == 400 and payload["pool_size"] == 400
    assert payload["exceeds_pool"] and "exceeds the item pool of 400" in err
    code, out, err = _run(main, capsys, "--effect", "0.03", "--pilot", str(path),
                          "--pool-size", "0", "--format", "json")
    assert code == 0 and json.loads(out)["pool_size"] is None and "item pool" not in err
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--format", "json")
    assert json.loads(out)["inputs"]["pool_size"] == 1319  # no pilot: GSM8K's test split


def test_pilot_sign_and_wording_first_minus_second(main, capsys, tmp_path: Path) -> None:
    table = _pilot_table()
    path = tmp_path / "pilot.csv"
    table.to_csv(path, index=False)
    acc = table.groupby("condition")["correct"].mean()
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--pilot", str(path),
                        "--conditions", "E8c", "E8b", "--alternative", "greater",
                        "--format", "json")
    payload = json.loads(out)
    assert code == 0
    assert payload["pilot"]["effect"] == pytest.approx(acc["E8c"] - acc["E8b"])
    assert payload["baseline"] == pytest.approx(acc["E8b"])  # the second is the baseline
    assert payload["inputs"]["pilot"]["conditions"] == ["E8c", "E8b"]
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--pilot", str(path),
                        "--conditions", "E8c", "E8b", "--alternative", "greater")
    assert "one-sided: E8c more accurate than E8b, acc(E8c) − acc(E8b) = +δ" in out
    assert "observed acc(E8c) − acc(E8b) = " in out and "baseline E8b" in out


def test_pilot_holes_are_dropped_and_reported_or_raised(main, capsys, tmp_path: Path) -> None:
    table = _pilot_table()
    table = table[~((table.condition == "E8c") & (table.item_id == "q7"))]
    path = tmp_path / "pilot.csv"
    table.to_csv(path, index=False)
    code, out, err = _run(main, capsys, "--effect", "0.03", "--pilot", str(path),
                          "--format", "json")
    assert code == 0 and json.loads(out)["pilot"]["n"] == 399
    assert json.loads(out)["inputs"]["pool_size"] == 400  # the dropped item is in the pool
    assert "1 pilot hole(s) (1 missing item(s), 0 missing evaluation(s)) were dropped" in err
    code, out, err = _run(main, capsys, "--effect", "0.03", "--pilot", str(path),
                          "--holes", "raise")
    assert code == 2 and "item 'q7' is missing for condition 'E8c'" in err


def test_power_path_imports_no_heavy_module() -> None:
    # the plain `--effect` path needs neither scipy.stats (0.6 s), pandas (0.25 s),
    # statsmodels, matplotlib nor torch: only the power subcommand, in a fresh process
    code = (
        "import sys, io, contextlib\n"
        "import robuststats.cli as cli\n"
        "cli.COMMANDS = {'power': 'robuststats.cli.power'}\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert cli.main(['power', '--effect', '0.03']) == 0\n"
        "    assert cli.main(['power', '--effect', '0.03', '--discordance', '0.1',"
        " '--format', 'json']) == 0\n"
        "heavy = ('scipy.stats', 'pandas', 'statsmodels', 'matplotlib', 'torch')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout
    assert out.strip() == "[]"


def test_real_dispatcher_power_path_skips_scipy_stats_and_torch() -> None:
    # through every subcommand's parser, as `robuststats power --effect 0.03` runs
    code = (
        "import sys, io, contextlib\n"
        "import robuststats.cli as cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert cli.main(['power', '--effect', '0.03']) == 0\n"
        "print(sorted(m for m in ('scipy.stats', 'statsmodels', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout
    assert out.strip() == "[]"


def test_cli_imports_only_public_names() -> None:
    # the CLI parses, calls the public library and prints: no robuststats.stats._* module;
    # power.py dispatches to the plans, which share _power_common and never import power.py
    # or each other's private names
    import ast

    modules: dict[str, set[str]] = {}
    private: list[str] = []
    for name in ("power.py", "_power_common.py", "_power_modes.py", "_power_gate.py"):
        tree = ast.parse((ROOT / "robuststats" / "cli" / name).read_text(encoding="utf-8"))
        found = {node.module for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
        found |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                  for a in node.names}
        modules[name] = {m for m in found if m.split(".")[0] == "robuststats"}
        private += [f"{name}: {node.module}.{a.name}" for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module
                    and node.module.startswith("robuststats") for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")]
    assert not private
    assert set().union(*modules.values()) == {
        "robuststats", "robuststats.errors", "robuststats.stats", "robuststats.cli._output",
        "robuststats.cli._power_common", "robuststats.cli._power_modes",
        "robuststats.cli._power_gate", "robuststats.cli._power_sequential",
        "robuststats.report.power"}
    assert not any("robuststats.cli.power" in found for found in modules.values())
    for name in ("_power_common.py", "_power_modes.py", "_power_gate.py"):
        assert not modules[name] & {"robuststats.cli._power_modes", "robuststats.cli._power_gate"}


def test_library_errors_reach_the_user_naming_flags(main, capsys) -> None:
    # the library's ParameterError names its parameters apart from the wording; the CLI
    # spells them as flags, with no rewriting of the message
    from robuststats.errors import InputError
    from robuststats.stats import ParameterError, power_mcnemar

    with pytest.raises(ParameterError) as info:
        power_mcnemar(0.03, power=0.8, discordance=0.02)
    assert isinstance(info.value, InputError)
    assert str(info.value).startswith("impossible: π_D must be ≥ |δ|: `discordance` = 0.02 "
                                      "is below `effect` = 0.03")
    code, _, err = _run(main, capsys, "--effect", "0.03", "--discordance", "0.02")
    assert code == 2
    assert err == ("robuststats power: error: "
                   + info.value.spelled({"discordance": "--discordance", "effect": "--effect"})
                   + "\n")


def test_json_inputs_reproduce_the_power_mode(main, capsys) -> None:
    from robuststats.stats import power_mcnemar

    code, out, _ = _run(main, capsys, "--effect", "0.03", "--n", "800", "--discordance",
                        "0.15", "--method", "midp", "--format", "json")
    payload = json.loads(out)
    inputs = payload["inputs"]
    assert code == 0 and inputs["power"] is None and inputs["n"] == 800
    again = power_mcnemar(inputs["effect"], inputs["n"], inputs["power"],
                          discordance=inputs["discordance"], method=inputs["method"])
    assert again.power == pytest.approx(payload["power"])


# ------------------------------------------------------------------ several training seeds


def test_seeds_solve_items_and_print_the_seed_table(main, capsys) -> None:
    from robuststats.stats import power_seeds, power_seeds_table

    code, out, _ = _run(main, capsys, "--effect", "0.03", "--discordance", "0.2", "--seeds",
                        "5", "--seed-sd", "0.01")
    assert code == 0
    expected = power_seeds(0.03, None, 5, 0.8, discordance=0.2, seed_sd=0.01)
    assert f"5 seeds × {expected.n_items} items per condition" in out
    assert "seed-random t test over training seeds and items" in out
    assert "3 seeds or fewer never reach power 0.8: more items cannot make up for too few " \
           "seeds" in out
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--discordance", "0.2", "--seeds",
                        "5", "--seed-sd", "0.01", "--format", "json")
    payload = json.loads(out)
    assert payload["design"] == "seeds" and payload["n_items"] == expected.n_items
    table = power_seeds_table(0.03, discordance=0.2, seed_sd=0.01, pool_size=1319,
                              as_frame=False)
    assert [r["n_items"] for r in payload["table"]] == [r["n_items"] for r in table]
    assert payload["inputs"]["seeds"] == 5 and payload["inputs"]["seed_sd"] == 0.01


def test_seeds_too_few_says_so_and_names_the_fewest(main, capsys) -> None:
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--discordance", "0.2", "--seeds",
                        "3", "--seed-sd", "0.02", "--format", "json")
    assert code == 0
    payload = json.loads(out)
    assert payload["n_items"] is None
    assert "3 seeds reach at most power 0.316 however many items" in payload["error"]
    assert "`--seed-sd`" in payload["error"] and "at least 6 seeds" in payload["error"]


def test_seeds_power_minimum_effect_and_fewest_seeds(main, capsys) -> None:
    from robuststats.stats import power_seeds

    code, out, _ = _run(main, capsys, "--effect", "0.03", "--n", "500", "--discordance", "0.2",
                        "--seeds", "5", "--seed-sd", "0.01", "--format", "json")
    assert code == 0
    assert json.loads(out)["power"] == pytest.approx(
        power_seeds(0.03, 500, 5, None, discordance=0.2, seed_sd=0.01).power)
    code, out, _ = _run(main, capsys, "--n", "500", "--discordance", "0.2", "--seeds", "5",
                        "--seed-sd", "0.01")
    # 0.0374 before V took MS_seed at no less than MS_resid (docs/statistics.md §9)
    assert code == 0 and "minimum detectable effect δ = 0.03868" in out
    # no --seeds: the fewest seeds with --n items (or with the whole pool)
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--n", "500", "--discordance", "0.2",
                        "--seed-sd", "0.01")
    assert code == 0 and "fewest seeds with 500 items: 7 seeds × 500 items" in out
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--discordance", "0.2", "--seed-sd",
                        "0.01")
    assert code == 0 and "fewest seeds with 1319 items: 5 seeds" in out
    # seeds without a seed SD: planned as 0, and said so
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--discordance", "0.2", "--seeds", "4")
    assert code == 0 and "assuming seeds shift A and B alike (--seed-sd 0)" in out


def test_the_readme_pilot_estimates_the_seed_component(main, capsys) -> None:
    # README tour: robuststats power --effect 0.03 --pilot examples/pilot_outcomes.csv
    #   --conditions E8c E8b
    pilot = ROOT / "examples" / "pilot_outcomes.csv"
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--pilot", str(pilot),
                        "--conditions", "E8c", "E8b")
    assert code == 0
    assert "pilot seeds: 5 per condition; seed SD of acc(E8c) − acc(E8b) = " in out
    assert "(χ² on 4 df)" in out and "across the seed-SD interval" in out
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--pilot", str(pilot), "--conditions",
                        "E8c", "E8b", "--seeds", "10", "--format", "json")
    payload = json.loads(out)
    from robuststats.stats import estimate_seed_components, read_pilot

    pairs = read_pilot(pilot, conditions=["E8c", "E8b"])
    comps = estimate_seed_components(pairs.x, pairs.y, seeds=[s for s, _ in pairs.strata])
    assert payload["seed_sd"] == pytest.approx(comps.seed_sd)
    assert payload["pilot"]["n_seeds"] == 5
    assert payload["seed_sd_range"]["seed_sd_high"] == pytest.approx(
        comps.confidence_interval.high)
    low, high = payload["seed_sd_range"]["low"], payload["seed_sd_range"]["high"]
    assert low is not None and low <= payload["n_items"]
    assert high is None or high >= payload["n_items"]  # more seed variance, more items
    # an explicit --seed-sd overrides the pilot's estimate: no range from its interval
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--pilot", str(pilot), "--conditions",
                        "E8c", "E8b", "--seeds", "10", "--seed-sd", "0.005", "--format", "json")
    payload = json.loads(out)
    assert code == 0 and payload["seed_sd"] == 0.005 and "seed_sd_range" not in payload
    # --seeds 1 plans the McNemar comparison of two trained models instead
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--pilot", str(pilot), "--conditions",
                        "E8c", "E8b", "--seeds", "1")
    assert code == 0 and "McNemar power analysis" in out


def test_the_pilot_example_is_reproducible(tmp_path: Path, monkeypatch) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_pilot", ROOT / "examples" / "make_pilot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    monkeypatch.setattr(module, "OUT", tmp_path / "pilot.csv")
    module.main()
    assert (tmp_path / "pilot.csv").read_bytes() == (
        ROOT / "examples" / "pilot_outcomes.csv").read_bytes()


def test_seeds_plot_writes_png(main, capsys, tmp_path: Path) -> None:
    png = tmp_path / "seeds.png"
    code, out, _ = _run(main, capsys, "--effect", "0.03", "--discordance", "0.2", "--seeds",
                        "5", "--seed-sd", "0.01", "--plot", str(png))
    assert code == 0 and f"power curve written to {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, err = _run(main, capsys, "--effect", "0.03", "--discordance", "0.2", "--plot",
                        str(tmp_path / "missing" / "dir" / "x.png"))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("robuststats power: error: `--plot` cannot write")


# ------------------------------------------------------------------------------ fuzzing
_NUMBERS = ["0", "-1", "1", "0.5", "0.03", "0.2", "0.9", "1e-320", "1e308", "nan", "inf",
            "-inf", "3", "abc", "", "1319"]
_INTEGERS = ["0", "-5", "1", "2", "5", "300", "1319", "99999999999", "abc", "1.5"]
_FLAGS = {
    "--effect": _NUMBERS, "--n": _INTEGERS, "--power": _NUMBERS, "--discordance": _NUMBERS,
    "--correlation": _NUMBERS, "--baseline": _NUMBERS, "--alpha": _NUMBERS,
    "--icc": _NUMBERS, "--repeats": _INTEGERS, "--pool-size": _INTEGERS,
    "--seeds": _INTEGERS, "--seed-sd": ["0", "0.01", "-0.01", "0.5", "nan", "1e-320"],
    "--confidence-level": _NUMBERS, "--eval-noise": _NUMBERS, "--holes": ["drop", "raise"],
    "--alternative": ["two-sided", "greater", "less", "both"],
    "--method": ["exact", "connor", "midp", "seed-random", "noncentral-t", "fast"],
    "--plot": ["x.txt", "curve", "/nonexistent/dir/p.png"], "--format": ["json", "yaml"],
}


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(sorted(_FLAGS)), min_size=1, max_size=5, unique=True),
       st.data())
def test_fuzzed_argument_vectors_never_give_a_traceback(main, capsys, flags, data) -> None:
    argv: list[str] = []
    for flag in flags:
        argv += [flag, data.draw(st.sampled_from(_FLAGS[flag]), label=flag)]
    try:
        code = main(["power", *argv])
    except SystemExit as exc:  # argparse: a value of the wrong type or an unknown choice
        assert exc.code == 2
        capsys.readouterr()
        return
    out, err = capsys.readouterr()
    assert code in (0, 2), (argv, code)
    if code == 2:
        assert out == "" and err.count("\n") == 1, (argv, err)
        assert err.startswith("robuststats power: error: ") and "--" in err, (argv, err)
    elif "--format" in argv and argv[argv.index("--format") + 1] == "json":
        json.loads(out)


def test_plot_labels_its_target_line(tmp_path: Path, monkeypatch) -> None:
    import matplotlib.pyplot as plt
    import pandas as pd

    from robuststats.report.power import power_figure

    kept = []
    monkeypatch.setattr(plt, "close", kept.append)  # keep the figure to look at it
    curve = pd.DataFrame({"n": [10, 100, 1000] * 2, "power": [0.1, 0.5, 0.9, 0.05, 0.3, 0.7],
                          "discordance": [0.1] * 3 + [0.2] * 3})
    power_figure(curve, tmp_path / "p.png", x="n", hue="discordance", hue_title="π_D",
                 target=0.8, in_use=0.2)
    (fig,) = kept
    try:
        ax = fig.axes[0]
        (note,) = [t for t in ax.texts if t.get_gid() == "target"]
        assert note.get_text() == "target power 0.8"
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["0.1", "0.2 (in use)"]
        assert len(ax.get_lines()) >= 3  # two curves and the target
    finally:
        monkeypatch.undo()
        plt.close(fig)


def test_pilot_bound_plans_with_the_seed_sd_upper_bound(main, capsys) -> None:
    from robuststats.stats import estimate_seed_components, read_pilot

    args = ("--effect", "0.05", "--pilot", "examples/pilot_outcomes.csv", "--power", "0.8",
            "--n", "300")
    pairs = read_pilot("examples/pilot_outcomes.csv")
    comps = estimate_seed_components(pairs.x, pairs.y)
    bound = comps.upper_seed_sd(0.8)
    # the one-sided 0.8 bound is the top of the two-sided 60 % interval, above the estimate
    assert bound == pytest.approx(estimate_seed_components(
        pairs.x, pairs.y, confidence_level=0.6).confidence_interval.high)
    assert comps.seed_sd < bound < comps.upper_seed_sd(0.95)
    code, out, _ = _run(main, capsys, *args, "--format", "json")
    assert code == 0 and json.loads(out)["seed_sd"] == pytest.approx(comps.seed_sd)
    code, out, _ = _run(main, capsys, *args, "--pilot-bound", "0.8", "--format", "json")
    bounded = json.loads(out)
    assert code == 0 and bounded["seed_sd"] == pytest.approx(bound)
    assert bounded["n_seeds"] > json.loads(_run(main, capsys, *args, "--format", "json")[1])[
        "n_seeds"]
    code, out, _ = _run(main, capsys, *args, "--pilot-bound", "0.8")
    assert "one-sided 0.8 upper confidence bound" in out
    for extra, match in ((("--pilot-bound", "0.3"), "`--pilot-bound` must be in"),
                         (("--pilot-bound", "0.8", "--seed-sd", "0.02"), "--pilot-bound")):
        code, _, err = _run(main, capsys, *args, *extra)
        assert code == 2 and match in err
    code, _, err = _run(main, capsys, "--effect", "0.05", "--discordance", "0.3",
                        "--pilot-bound", "0.8")
    assert code == 2 and "applies to pilot outcomes" in err
