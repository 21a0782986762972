"""``robuststats power --sequential``: the looks, the fixed design of equal power, errors."""

from __future__ import annotations

import json

import pytest

from robuststats.cli import main

BASE = ["power", "--effect", "0.03", "--n", "500", "--discordance", "0.2", "--seed-sd",
        "0.01"]


def test_json_has_looks_power_and_the_fixed_design(capsys) -> None:
    assert main([*BASE, "--sequential", "3,5,8", "--cost-per-seed", "40", "--format",
                 "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["design"] == "sequential"
    assert [r["n_seeds"] for r in out["looks"]] == [3, 5, 8]
    s = out["summary"]
    # rpact's two-sided asOF bounds at information rates 0.375, 0.625, 1 (alpha 0.05):
    # getDesignGroupSequential(informationRates = c(3, 5, 8)/8, alpha = 0.025, sided = 1,
    #   typeOfDesign = "asOF")$criticalValues  3.478597 2.612447 1.985409
    assert [r["efficacy_bound"] for r in out["looks"]] == pytest.approx(
        [3.478597, 2.612447, 1.985409], abs=1e-3)
    assert s["type1_error"] == pytest.approx(0.05, abs=1e-6)
    assert 3 < s["expected_seeds_effect"] <= s["expected_seeds_null"] <= 8
    assert s["fixed_power"] >= s["power"] - 1e-9
    assert s["expected_cost_effect"] == pytest.approx(40 * s["expected_seeds_effect"])
    assert s["saving"] == pytest.approx(1 - s["expected_seeds_effect"] / s["fixed_seeds"])


def test_futility_stops_more_under_the_null(capsys) -> None:
    assert main([*BASE, "--sequential", "3,5,8", "--futility", "non_binding", "--format",
                 "json"]) == 0
    s = json.loads(capsys.readouterr().out)["summary"]
    assert s["expected_seeds_null"] < 6
    assert s["type1_error"] < 0.05


def test_looks_sizes_the_design_to_the_target_power(capsys) -> None:
    plan = ["power", "--effect", "0.057", "--n", "300", "--discordance", "0.37", "--seed-sd",
            "0.035", "--icc", "0.016", "--power", "0.9"]
    assert main([*plan, "--looks", "4", "--spending", "hsd(-1)", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # the library's sizing (tests/stats/test_sequential.py): 3, 6, 9, 12 seeds, fixed 11
    assert [r["n_seeds"] for r in out["looks"]] == [3, 6, 9, 12]
    assert out["spending"] == "hsd(-1)"
    # rpact: getDesignGroupSequential(kMax = 4, alpha = 0.05, sided = 2, typeOfDesign =
    #   "asHSD", gammaA = -1)$criticalValues  2.641056 2.482682 2.318562 2.156008
    assert [r["efficacy_bound"] for r in out["looks"]] == pytest.approx(
        [2.641056, 2.482682, 2.318562, 2.156008], abs=1e-5)
    s = out["summary"]
    assert s["target_power"] == 0.9 and s["power"] >= 0.9
    assert s["fixed_seeds"] == 11 and s["max_seeds"] == 12
    assert s["saving"] == pytest.approx(1 - s["expected_seeds_effect"] / 11)
    assert main([*plan, "--looks", "3", "--first-look", "5"]) == 0
    text = capsys.readouterr().out
    assert "looks at 5, 8, 11 seeds" in text and "fixed design of the same target: 11" in text


@pytest.mark.parametrize(("extra", "match"), [
    (["--looks", "3", "--sequential", "3,5,8"], "either --sequential"),
    (["--sequential", "3,5,8", "--first-look", "4"], "`--first-look` goes with --looks"),
    (["--looks", "1"], "`--looks` must be an integer"),
    (["--looks", "3", "--first-look", "1"], "`--first-look` must be an integer"),
    (["--looks", "3", "--seeds", "8"], "`--seeds` cannot go with --looks"),
    (["--looks", "3", "--spending", "hsd(9)"], "--spending"),
    (["--sequential", "3,5", "--spending", "hsd"], "--spending"),
    (["--sequential", "3,x"], "--sequential"),
    (["--sequential", "3,2"], "`--sequential` must be at least 2 increasing"),
    (["--sequential", "3,5", "--seeds", "8"], "last look"),
    (["--sequential", "3,5", "--futility", "binding", "--futility-beta", "1.5"],
     "--futility-beta"),
    (["--looks", "3", "--power", "0.9", "--futility", "non_binding", "--futility-beta", "0.2"],
     "`--futility-beta` 0.2 spends more type II error than --power 0.9 leaves"),
])
def test_bad_flags_are_one_line(capsys, extra, match) -> None:
    try:
        code = main([*BASE, *extra])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 2
    message = capsys.readouterr().err.strip()
    assert match in message and "\n" not in message


def test_futility_prints_the_drift_a_study_takes(capsys) -> None:
    # the drift printed for the study file gives the study the plan's futility bounds; sized
    # to 90 % power, the futility bound spends β = 0.1 unless told otherwise
    assert main([*BASE, "--looks", "3", "--power", "0.9", "--futility", "non_binding",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    drift = out["summary"]["drift"]
    assert drift > 0
    from robuststats.stats.sequential import SequentialOptions, look_designs

    looks = [row["n_seeds"] for row in out["looks"]]
    opts = SequentialOptions(tuple(looks), futility="non_binding", beta=0.1, drift=drift)
    _, one = look_designs(opts, drift)
    fut = [row["futility_bound"] for row in out["looks"]]
    assert fut[:-1] == pytest.approx(list(one.lower[:-1]), abs=1e-9)
    assert fut[-2] < out["looks"][-2]["efficacy_bound"]  # the bounds meet only at the end
    assert main([*BASE, "--sequential", "3,5,8"]) == 0
    assert "drift" not in capsys.readouterr().out  # no futility, no drift
    # a study decides two-sided: a one-sided plan's bounds are not a study's, so no drift
    assert main([*BASE, "--sequential", "3,5,8", "--futility", "non_binding",
                 "--alternative", "greater"]) == 0
    assert "plan with --alternative two-sided" in capsys.readouterr().out


def test_looks_every_sizes_a_look_after_every_seed(capsys) -> None:
    from robuststats.stats.sequential import power_sequential, size_sequential

    plan = ["power", "--effect", "0.057", "--n", "300", "--discordance", "0.37", "--seed-sd",
            "0.035", "--icc", "0.016", "--power", "0.9"]
    assert main([*plan, "--looks", "every", "--first-look", "3", "--futility",
                 "non_binding", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    seeds = [r["n_seeds"] for r in out["looks"]]
    assert seeds == list(range(3, seeds[-1] + 1))  # every seed from the first look
    s = out["summary"]
    assert s["power"] >= 0.9 and s["fixed_seeds"] == 11
    # the fewest: one seed less falls short of the target
    kw = dict(discordance=0.37, seed_sd=0.035, icc=0.016, futility="non_binding", beta=0.1)
    assert power_sequential(0.057, tuple(range(3, seeds[-1])), 300, **kw).power < 0.9
    r = size_sequential(0.057, 300, 0.9, n_looks="every", first_look=3, **kw)
    assert r.looks == tuple(seeds) and r.saving == pytest.approx(s["saving"])
    with pytest.raises(SystemExit) as exc:  # argparse's own error
        main([*plan, "--looks", "several"])
    assert exc.value.code == 2 and "--looks" in capsys.readouterr().err
