from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from robuststats.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _outcomes_csv(path: Path) -> Path:
    # 40 items: 20 both right, 9 only A right (n_a_only), 3 only B right (n_b_only), 8 both wrong
    a = [1] * 20 + [1] * 9 + [0] * 3 + [0] * 8
    b = [1] * 20 + [0] * 9 + [1] * 3 + [0] * 8
    rows = [{"condition": c, "item_id": f"q{i}", "correct": v}
            for c, vals in (("A", a), ("B", b)) for i, v in enumerate(vals)]
    pd.DataFrame(rows).to_csv(path, index=False)  # no seed / eval_noise / noise_seed columns
    return path


def test_help(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["analyze", "--help"])
    assert exc.value.code == 0
    assert "--study" in capsys.readouterr().out


def test_analyze_hand_built_file_json(tmp_path: Path, capsys) -> None:
    src = _outcomes_csv(tmp_path / "o.csv")
    assert main(["analyze", str(src), "--format", "json", "--n-resamples", "200"]) == 0
    tables = json.loads(capsys.readouterr().out)
    t = tables["tests"][0]
    assert (t["n_a_only"], t["n_b_only"], t["n_items"]) == (9, 3, 40)
    # R: binom.test(9, 12, 0.5)$p.value  ->  0.1459961
    assert t["pvalue"] == pytest.approx(0.1459961, abs=1e-7)
    acc = {r["condition"]: r["accuracy"] for r in tables["summary"]}
    assert acc == {"A": pytest.approx(29 / 40), "B": pytest.approx(23 / 40)}
    # the JSON alone reproduces the numbers: it carries every setting
    assert tables["settings"] == {"alpha": 0.05, "confidence_level": 0.95,
                                  "n_resamples": 200, "multiplicity": "holm",
                                  "reference": None, "mcnemar": "clustered", "rng_seed": 0,
                                  "holes": "drop"}
    assert tables["source"] == str(src)


def test_analyze_with_study_file_and_out(tmp_path: Path, capsys) -> None:
    src = _outcomes_csv(tmp_path / "o.csv")
    study = tmp_path / "s.yaml"
    study.write_text(textwrap.dedent("""\
        name: handmade
        version: 1
        task: {name: arithmetic}
        conditions: {A: {}, B: {}}
        evaluation: {noise_levels: [0]}
        hypotheses:
          - {id: H1, metric: accuracy, a: A, b: B, eval_noise: 0, relation: greater,
             margin: 0}
        analysis: {n_resamples: 300}
        """))
    assert main(["analyze", str(src), "--study", str(study), "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "== hypotheses ==" in out and "H1" in out
    hyp = pd.read_csv(tmp_path / "r" / "handmade" / "v1" / "hypotheses.csv")
    assert hyp.loc[0, "estimate"] == pytest.approx(0.15)


def test_bad_inputs_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["analyze", str(tmp_path / "missing.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"condition": ["A"], "item": ["x"], "correct": [1]}).to_csv(bad, index=False)
    assert main(["analyze", str(bad)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "missing required column(s) ['item_id']" in err
    src = _outcomes_csv(tmp_path / "o.csv")
    assert main(["analyze", str(src), "--reference", "Z"]) == 2
    assert "`reference` condition 'Z' is not in the outcomes" in capsys.readouterr().err


def test_analyze_never_imports_torch(tmp_path: Path) -> None:
    src = _outcomes_csv(tmp_path / "o.csv")
    code = ("import sys; from robuststats.cli import main; "
            f"rc = main(['analyze', {str(src)!r}, '--n-resamples', '100']); "
            "assert rc == 0, rc; "
            "bad = [m for m in ('torch', 'transformers') if m in sys.modules]; "
            "assert not bad, bad")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_analyze_a_partial_version_gives_inconclusive(tmp_path: Path, capsys) -> None:
    """A version written after a cell failed: the needed hypothesis is INCONCLUSIVE."""
    rows = []
    # a large effect: with 2 seeds the calibrated seed-random t needs t ≳ 6.3 (one-sided)
    for cond, p in (("A", 0.9), ("B", 0.1)):
        for seed in (0, 1):
            for level in (0.0, 0.1):
                if (cond, seed, level) == ("B", 1, 0.1):
                    continue  # the failed cell
                rows += [{"condition": cond, "seed": seed, "eval_noise": level,
                          "noise_seed": 0, "item_id": f"q{i}", "correct": int(i % 10 < 10 * p)}
                         for i in range(30)]
    version = tmp_path / "v1"
    version.mkdir()
    pd.DataFrame(rows).to_parquet(version / "outcomes.parquet")
    spec = {"name": "partial", "version": 1, "task": {"name": "arithmetic"},
            "conditions": {"A": {}, "B": {}}, "seeds": 2,
            "evaluation": {"noise_levels": [0, 0.1]},
            "hypotheses": [{"id": "H1", "metric": "retention", "a": "A", "b": "B",
                            "eval_noise": 0.1, "relation": "greater", "margin": 0},
                           {"id": "H2", "metric": "accuracy", "a": "A", "b": "B",
                            "eval_noise": 0, "relation": "greater", "margin": 0}],
            "analysis": {"n_resamples": 200}}
    (version / "manifest.json").write_text(json.dumps({"spec": spec}))
    assert main(["analyze", str(version), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    verdicts = {h["id"]: h for h in out["hypotheses"]}
    assert verdicts["H1"]["verdict"] == "INCONCLUSIVE"
    assert "missing" in verdicts["H1"]["reason"]
    assert verdicts["H2"]["verdict"] == "VERIFIED"
    assert out["missing"] == [{"condition": "B", "seed": 1, "eval_noise": 0.1,
                               "noise_seed": 0}]


def test_holes_flag_raise_names_the_hole(tmp_path: Path, capsys) -> None:
    src = _outcomes_csv(tmp_path / "o.csv")
    df = pd.read_csv(src)
    df.iloc[1:].to_csv(src, index=False)  # item q0 of A is gone
    assert main(["analyze", str(src), "--holes", "raise"]) == 2
    err = capsys.readouterr().err
    assert "item 'q0' is missing under condition 'A', seed 0" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["analyze", str(src), "--format", "json", "--n-resamples", "50"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dropped"][0]["item_id"] == "q0" and out["tests"][0]["n_items"] == 39


def test_bad_option_values_name_the_flag(tmp_path: Path, capsys) -> None:
    src = _outcomes_csv(tmp_path / "o.csv")
    assert main(["analyze", str(src), "--confidence-level", "1.5"]) == 2
    assert "--confidence-level" in capsys.readouterr().err
    assert main(["analyze", str(src), "--multiplicity", "holmes"]) == 2
    assert "--multiplicity" in capsys.readouterr().err


@pytest.mark.parametrize(("manifest", "message"), [
    ('{"spec": "x"}', r"manifest.json: `spec` must be a JSON object \(the resolved study\), "
                      r"got str\."),
    ("[1, 2]", r"manifest.json: a manifest must hold a JSON object, got list\."),
    ("[" * 100_000 + "]" * 100_000, r"manifest.json: not a readable JSON manifest "
                                    r"\(maximum recursion depth exceeded"),
    ('{"spec": {"name": "x\\ny"}}', r"study name 'x\\ny' must be letters"),
])
def test_damaged_manifest_is_one_line(tmp_path: Path, capsys, manifest: str,
                                      message: str) -> None:
    version = tmp_path / "store" / "s" / "v1"
    version.mkdir(parents=True)
    _outcomes_csv(tmp_path / "o.csv")
    pd.read_csv(tmp_path / "o.csv").to_parquet(version / "outcomes.parquet")
    (version / "manifest.json").write_text(manifest)
    assert main(["analyze", str(version), "--n-resamples", "20"]) == 2
    err = capsys.readouterr().err
    import re

    # one error line; a stored spec with several problems lists the others below it
    first, *also = err.splitlines()
    assert all(line.startswith("  also: ") for line in also), err
    assert not also or f"({len(also)} more problem(s), listed below)" in first, err
    assert re.search(message, first), err


def test_argument_errors_are_one_line_without_usage(tmp_path: Path, capsys) -> None:
    src = _outcomes_csv(tmp_path / "o.csv")
    for argv in (["analyze", str(src), "--n-resamples", "x"],
                 ["analyze", str(src), "--holes", "keep"],
                 ["analyze", str(src), "--bogus"], ["analyze"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "usage:" not in err, err
        assert err.startswith("robuststats analyze: error: ") and err.rstrip().endswith(
            "(see 'robuststats analyze --help')")
    assert main(["analyze", str(src), "--n-resamples", "1000000000000"]) == 2
    assert "--n-resamples: Input should be less than or equal to 100000000" in \
        capsys.readouterr().err
    assert main(["analyze", "/" + "a" * 5000]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 400, err


def test_control_characters_typed_by_the_user_are_escaped(tmp_path: Path, capsys) -> None:
    assert main(["analyze", str(tmp_path / "a\x0cb\x1b[2J\nc.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err.splitlines()) == 1, err
    assert "\\x0c" in err and "\\x1b[2J" in err and "\x1b" not in err
    with pytest.raises(SystemExit):
        main(["analyze", "x.csv", "\x0b"])
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "unrecognized arguments: \\x0b" in err, err


@pytest.mark.slow
def test_analyze_of_a_sweep_refits_its_dose_response_tables(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A sweep's version re-analysed gives the thresholds and fits the study published."""
    import numpy as np

    version = ROOT / "results" / "dose_response" / "v1"
    assert main(["analyze", str(version), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for name in ("thresholds", "dose_fits"):
        got = pd.DataFrame(data[name])
        stored = pd.read_parquet(version / f"{name}.parquet")
        assert list(got.columns) == list(stored.columns), name
        assert len(got) == len(stored) > 0, name
        for col in stored.columns:
            if stored[col].dtype.kind == "f":
                assert np.allclose(got[col].astype(float), stored[col], rtol=1e-9,
                                   equal_nan=True), (name, col)
            else:
                assert got[col].astype(str).tolist() == stored[col].astype(str).tolist(), \
                    (name, col)


def test_every_kind_of_committed_version_is_analysed_or_named(capsys):
    """A gate version's outcomes (conditions candidate and baseline) are analysed without
    the hypotheses of the study its models came from; a version without item outcomes is
    refused naming its kind and the command that re-runs it."""
    results = ROOT / "results"
    assert main(["analyze", str(results / "e8_migration.gate" / "v1"), "--format", "json",
                 "--n-resamples", "100"]) == 0
    captured = capsys.readouterr()
    assert "is a gate version: its item outcomes are analysed without the hypotheses" \
        in captured.err and "`robuststats gate` re-runs it" in captured.err
    data = json.loads(captured.out)
    assert {r["condition"] for r in data["summary"]} == {"baseline", "candidate"}
    assert data["hypotheses"] == []
    assert main(["analyze", str(results / "migration_npu.divergence" / "v1")]) == 2
    err = capsys.readouterr().err
    assert "is a divergence version: it holds no item outcomes to analyse; `robuststats " \
           "results show` prints it and `robuststats divergence` re-runs it." in err
    assert err.count("\n") == 1


def test_the_strata_table_shows_each_noise_seed_beside_the_pooled_test(tmp_path, capsys):
    """Two noise seeds (two epochs of a harness, two noise draws of a study): the pooled
    stratified McNemar test decides, and `strata` shows each evaluation's paired counts
    with its own exact McNemar test (descriptive, unadjusted)."""
    # noise seed 0: 9 items only A right, 3 only B right; noise seed 1: 2 and 5
    counts = {0: (20, 9, 3, 8), 1: (22, 2, 5, 11)}
    rows = []
    for ns, (both, a_only, b_only, neither) in counts.items():
        a = [1] * both + [1] * a_only + [0] * b_only + [0] * neither
        b = [1] * both + [0] * a_only + [1] * b_only + [0] * neither
        rows += [{"condition": c, "noise_seed": ns, "item_id": f"q{i}", "correct": v}
                 for c, vals in (("A", a), ("B", b)) for i, v in enumerate(vals)]
    path = tmp_path / "o.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    assert main(["analyze", str(path), "--format", "json", "--n-resamples", "100"]) == 0
    data = json.loads(capsys.readouterr().out)
    (test,) = data["tests"]
    assert test["n_strata"] == 2 and (test["n_a_only"], test["n_b_only"]) == (11, 8)
    strata = pd.DataFrame(data["strata"])
    assert strata[["noise_seed", "n_items", "n_a_only", "n_b_only"]].values.tolist() == [
        [0, 40, 9, 3], [1, 40, 2, 5]]
    assert strata["estimate"].tolist() == pytest.approx([6 / 40, -3 / 40])
    # R: binom.test(9, 12)$p.value = 0.1459961; binom.test(2, 7)$p.value = 0.453125
    assert strata["pvalue"].tolist() == pytest.approx([0.1459961, 0.453125], abs=1e-7)
    assert main(["analyze", str(path), "--n-resamples", "100"]) == 0
    assert "== strata ==" in capsys.readouterr().out
    # one noise seed: the tests row is that evaluation's test, and no strata table is printed
    one = pd.DataFrame(rows)
    one[one["noise_seed"] == 0].to_csv(path, index=False)
    assert main(["analyze", str(path), "--n-resamples", "100"]) == 0
    assert "== strata ==" not in capsys.readouterr().out
