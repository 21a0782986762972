"""``robuststats gate`` on result versions of simulated outcomes (no training): exit codes,
protocol checks before any compute, output formats, the versioned result and chaining."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from robuststats.cli import main
from robuststats.results import ResultVersion, verify
from robuststats.stats import simulate_outcomes


@pytest.fixture
def store(tmp_path, sim_outcomes, make_version):
    """results/sim/v1: A (more robust) and B, 3 seeds; results/worse/v1: W much less robust
    than B; results/other/v1: the same outcomes evaluated on all ops (another protocol)."""
    root = tmp_path / "results"
    make_version(root, sim_outcomes)
    worse = simulate_outcomes(3, 200, seed_effects="small", robustness_effect=-1.5,
                              eval_noise=(0.0, 0.05), rng=7)
    worse["condition"] = worse["condition"].map({"A": "W", "B": "B"})
    make_version(root, worse, name="worse", conditions={"W": {}, "B": {}})
    make_version(root, sim_outcomes, name="other", **{"evaluation.ops": "all_ops"})
    return root


def _gate(capsys, *argv):
    try:
        code = main(["gate", *map(str, argv)])
    except SystemExit as exc:  # argparse's own errors (one line, exit 2, as every command)
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_pass_fail_and_exit_codes(store, capsys):
    code, out, err = _gate(capsys, store / "sim/v1", "--baseline", store / "sim/v1",
                           "--baseline-condition", "B", "--candidate-condition", "A",
                           "--max-degradation", "0.25")
    assert code == 0 and out.startswith("robustness gate: PASS") and err == ""
    assert "seeds paired by label (0, 1, 2)" in out
    code, out, err = _gate(capsys, store / "worse/v1", "--baseline", store / "sim/v1",
                           "--baseline-condition", "B", "--candidate-condition", "W",
                           "--max-degradation", "0.15", "--seed-pairing", "independent")
    assert code == 1 and "robustness gate: FAIL" in out
    assert re.match(r"robuststats gate: FAIL \(exit 1\): eval_noise 0.05: lower bound ", err)


def test_json_and_markdown_shapes(store, capsys):
    args = [store / "sim/v1", "--baseline", "sim/v1", "--root", store,
            "--baseline-condition", "B", "--candidate-condition", "A",
            "--max-degradation", "0.05", "--margin-type", "absolute", "--metric", "accuracy"]
    code, out, _ = _gate(capsys, *args, "--format", "json")
    data = json.loads(out)
    assert code == data["exit_code"] and data["decision"] in ("PASS", "FAIL")
    assert {"decision", "passed", "metric", "margin_type", "max_degradation", "alpha",
            "protocol", "seeds_candidate", "seeds_baseline", "n_items", "levels",
            "notes"} <= set(data)
    level = data["levels"][0]
    assert level["eval_noise"] == 0.05 and level["metric"] == "accuracy"
    assert level["passed"] == (level["lower_bound"] > -0.05)
    assert {"estimate", "lower_bound", "pvalue", "detectable_degradation", "power_at_margin",
            "underpowered", "design", "n_items"} <= set(level)
    assert data["protocol"]["kind"] == "relative_gaussian" and data["n_items"] == 200
    code, out, _ = _gate(capsys, *args, "--format", "markdown")
    assert out.startswith("## Robustness gate: **")
    assert "| eval_noise | candidate | baseline | contrast | 95% lower bound |" in out


def test_out_writes_a_verifiable_version_usable_as_the_next_baseline(store, tmp_path,
                                                                     capsys):
    out_root = tmp_path / "gates"
    code, out, _ = _gate(capsys, store / "sim/v1", "--baseline", store / "sim/v1",
                         "--baseline-condition", "B", "--candidate-condition", "A",
                         "--max-degradation", "0.25", "--out", out_root)
    assert code == 0 and f"result: {out_root / 'sim.gate' / 'v1'}" in out
    version = ResultVersion.load(out_root / "sim.gate" / "v1")
    assert version.manifest["kind"] == "gate" and version.manifest["decision"] == "PASS"
    assert verify(version).ok
    table = pd.read_parquet(version.path / "gate.parquet")
    assert list(table["eval_noise"]) == [0.05] and bool(table["passed"].iloc[0])
    outcomes = pd.read_parquet(version.path / "outcomes.parquet")
    assert set(outcomes["condition"]) == {"candidate", "baseline"}
    # the passed candidate is the next reference: the same outcomes as candidate pass
    code, out, _ = _gate(capsys, store / "sim/v1", "--baseline", version.path,
                         "--candidate-condition", "A", "--max-degradation", "0.25")
    assert code == 0 and "gate result sim.gate/v1, condition candidate" in out
    code, out, _ = _gate(capsys, store / "sim/v1", "--baseline", "sim.gate", "--root",
                         out_root, "--candidate-condition", "A", "--max-degradation", "0.25",
                         "--out", out_root)
    assert code == 0 and (out_root / "sim.gate" / "v2" / "manifest.json").is_file()


@pytest.mark.parametrize(("argv", "match"), [
    # the margin flag is one of three (issue 27: --min-improvement, --equivalence)
    ([], r"the following arguments are required: --baseline \(see"),
    (["--baseline", "{sim}"], r"--max-degradation, --min-improvement, --equivalence: give "
                              r"one margin"),
    (["--baseline", "{sim}", "--max-degradation", "-1"],
     r"argument --max-degradation: must be a finite number >= 0, got '-1'"),
    (["--baseline", "{sim}", "--max-degradation", "0.1", "--alpha", "0.7"],
     r"argument --alpha: must be a number in \(0, 0.5\]"),
    (["--baseline", "{sim}", "--max-degradation", "0.1"],
     r"sim/v1 has 2 conditions \(A, B\): pass `--baseline-condition` to choose one"),
    (["--baseline", "{sim}", "--baseline-condition", "C", "--max-degradation", "0.1"],
     r"`--baseline-condition` 'C' is not a condition of sim/v1"),
    (["--baseline", "{sim}", "--baseline-condition", "B", "--candidate-condition", "A",
      "--max-degradation", "1"], r"`--max-degradation` must be a number in \[0, 1\), got 1.0"),
    (["--baseline", "{sim}", "--baseline-condition", "B", "--candidate-condition", "A",
      "--max-degradation", "0.1", "--eval-noise", "0.1"],
     r"`--eval-noise` 0.1 is not a level of the baseline sim/v1 \(levels: 0, 0.05\)"),
    (["--baseline", "{sim}", "--baseline-condition", "B", "--candidate-condition", "A",
      "--max-degradation", "0.1", "--eval-noise", "0"],
     r"`--eval-noise` 0: retention at the clean level is 1 by definition"),
    (["--baseline", "{sim}", "--baseline-condition", "B", "--candidate-condition", "A",
      "--max-degradation", "0.1", "--seeds", "0,7"], r"`--seeds` \[7\] not among"),
    (["--baseline", "{other}", "--baseline-condition", "B", "--candidate-condition", "A",
      "--max-degradation", "0.1"],
     r"protocol mismatch between the baseline \(study version other/v1, condition B\) and "
     r"the candidate \(study version sim/v1, condition A\): noise ops 'all_ops' vs "
     r"'matmul_only'"),
    (["--baseline", "{sim}", "--baseline-condition", "B", "--candidate-condition", "A",
      "--max-degradation", "0.1", "--out", "{file}"], r"--out '.*' is not a directory"),
    (["--baseline", "{sim}", "--baseline-condition", "B", "--max-degradation", "0.1",
      "--seeds", "2"], None),  # replaced below: a checkpoint template that names nothing
])
def test_bad_input_is_one_line_exit_2(store, tmp_path, capsys, argv, match):
    (tmp_path / "file").write_text("x")
    subst = {"{sim}": str(store / "sim/v1"), "{other}": str(store / "other/v1"),
             "{file}": str(tmp_path / "file")}
    candidate = store / "sim/v1"
    if match is None:
        candidate, match = tmp_path / "ckpts" / "s{seed}", (
            r"CANDIDATE '.*s\{seed\}' under the baseline's protocol: "
            r"conditions.candidate.checkpoint: `checkpoint` \(seed 0\): no such directory")
    code, out, err = _gate(capsys, candidate, *[subst.get(a, a) for a in argv])
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("robuststats gate: error: ") and re.search(match, err), err


def test_outcome_files_are_checked_for_items_and_levels(store, tmp_path, capsys):
    outcomes = pd.read_parquet(store / "sim/v1/outcomes.parquet")
    a = outcomes[outcomes["condition"] == "A"]
    fewer = tmp_path / "fewer.csv"
    a[a["item_id"] != "item000"].to_csv(fewer, index=False)
    code, _, err = _gate(capsys, fewer, "--baseline", store / "sim/v1",
                         "--baseline-condition", "B", "--max-degradation", "0.1")
    assert code == 2 and "other items than the baseline: 1 only in the baseline (e.g. " \
                         "'item000'), 0 only in the candidate" in err
    clean_only = tmp_path / "clean.csv"
    a[a["eval_noise"] == 0].to_csv(clean_only, index=False)
    code, _, err = _gate(capsys, clean_only, "--baseline", store / "sim/v1",
                         "--baseline-condition", "B", "--max-degradation", "0.1")
    assert code == 2 and "has no outcomes at eval_noise 0.05 (its levels: 0)" in err
    whole = tmp_path / "a.parquet"
    a.to_parquet(whole)
    code, out, _ = _gate(capsys, whole, "--baseline", store / "sim/v1",
                         "--baseline-condition", "B", "--max-degradation", "0.25")
    assert code == 0 and "is an outcomes file, which records no protocol" in out


def test_noise_seeds_of_an_outcomes_file_are_noted_and_a_missing_one_is_refused(store, tmp_path,
                                                                            capsys):
    outcomes = pd.read_parquet(store / "sim/v1/outcomes.parquet")
    a = outcomes[outcomes["condition"] == "A"]
    noisy = a[a["eval_noise"] > 0]
    two = pd.concat([a, noisy.assign(noise_seed=1)])
    path = tmp_path / "two.csv"
    two.to_csv(path, index=False)
    code, out, _ = _gate(capsys, path, "--baseline", store / "sim/v1", "--baseline-condition",
                         "B", "--max-degradation", "0.25")
    assert code == 0 and "noise seeds differ (baseline [0], candidate [0, 1])" in out
    # seed 0 lacks noise seed 1 that seeds 1 and 2 have: a missing cell, not a smaller mean
    holed = two[~((two["seed"] == 0) & (two["noise_seed"] == 1))]
    path = tmp_path / "holed.csv"
    holed.to_csv(path, index=False)
    code, out, err = _gate(capsys, path, "--baseline", store / "sim/v1", "--baseline-condition",
                           "B", "--max-degradation", "0.25")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "seed 0 has no outcomes for noise_seed 1 at eval_noise 0.05" in err


def test_a_baseline_edited_after_sealing_is_refused(store, tmp_path, capsys):
    import shutil

    copy = tmp_path / "copy" / "sim" / "v1"
    shutil.copytree(store / "sim/v1", copy)
    path = copy / "outcomes.parquet"
    path.chmod(0o644)
    rows = pd.read_parquet(path)
    rows.loc[(rows["condition"] == "B") & (rows["eval_noise"] > 0), "correct"] = 0
    rows.to_parquet(path, index=False)
    code, out, err = _gate(capsys, store / "sim/v1", "--baseline", copy, "--baseline-condition",
                           "B", "--candidate-condition", "A", "--max-degradation", "0.25")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "`--baseline` sim/v1 changed since it was sealed (outcomes.parquet" in err


def test_concurrent_gates_publish_distinct_complete_versions(store, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from robuststats.gate import run_gate, write_gate

    result = run_gate(str(store / "sim/v1"), str(store / "sim/v1"), baseline_condition="B",
                      candidate_condition="A", max_degradation=0.25)
    out = tmp_path / "gates"
    with ThreadPoolExecutor(4) as pool:
        versions = list(pool.map(lambda _: write_gate(result, out), range(4)))
    assert sorted(v.number for v in versions) == [1, 2, 3, 4]
    for v in versions:
        assert verify(v).ok
        assert (v.path / "report.md").read_text().startswith(f"# sim.gate v{v.number}\n")
    assert sorted(p.name for p in (out / "sim.gate").iterdir()) == ["v1", "v2", "v3", "v4"]


def test_an_absolute_margin_near_the_baseline_metric_is_noted(store, capsys):
    code, out, _ = _gate(capsys, store / "sim/v1", "--baseline", store / "sim/v1",
                         "--baseline-condition", "B", "--candidate-condition", "A",
                         "--max-degradation", "0.35", "--margin-type", "absolute",
                         "--metric", "accuracy", "--format", "json")
    data = json.loads(out)
    notes = data["notes"]
    assert code == data["exit_code"] in (0, 1)
    assert any("the absolute margin 0.35 leaves a candidate on the margin with accuracy 0.0"
               in n
               for n in notes), notes
