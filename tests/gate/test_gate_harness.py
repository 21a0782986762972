"""A gate whose baseline is harness output only (issue 27, item 2).

`robuststats analyze runs.yaml --out results` over lm-eval samples writes a version with no
study spec; it records each condition's protocol (task, filter, metric, items digest, noise
levels and seeds), and `robuststats gate` compares a candidate's lm-eval runs with it
directly. The samples files are written by lm-eval's own samples writer
(``EvaluationTracker.save_results_samples``) with the ``doc_hash`` lm-eval computes, from
outcomes the test decides, so every number is known.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from robuststats.cli import main

lm_eval = pytest.importorskip("lm_eval")
pytestmark = pytest.mark.slow  # lm-eval's import, analyses and gates: ~20 s on 2 loaded cores

N = 200


def _correct(model: str, noisy: bool, i: int) -> int:
    """base: clean 80 %, noisy 60 % (retention 0.75); cand: clean as base, noisy loses
    items 2, 22, 42, ... (10 of them: retention 0.6875, 1/12 below base's)."""
    if not noisy:
        return int(i % 5 != 0)
    if model == "base":
        return int(i % 5 not in (0, 1))
    return int(i % 5 not in (0, 1) and i % 20 != 2)


def _write_samples(out: Path, model: str, noisy: bool, *, changed_doc: int | None = None
                   ) -> Path:
    """A samples file as `lm_eval --log_samples` writes it, through lm-eval's writer."""
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.utils import hash_string

    samples = []
    for i in range(N):
        doc = {"question": f"What is {i} plus {i}?", "answer": f"#### {2 * i}"}
        if i == changed_doc:
            doc["question"] = f"What is {i} and {i}?"
        correct = _correct(model, noisy, i)
        reply = f"#### {2 * i + 1 - correct}"
        samples.append({
            "doc_id": i, "doc": doc, "target": str(2 * i),
            "arguments": [(doc["question"] + "\n", {"until": ["\n\n"]})],
            "resps": [[reply]], "filtered_resps": [str(2 * i + 1 - correct)],
            "filter": "strict-match", "metrics": ["exact_match"],
            "doc_hash": hash_string(json.dumps(doc, indent=2, ensure_ascii=False)),
            "prompt_hash": hash_string(doc["question"] + "\n"),
            "target_hash": hash_string(str(2 * i)), "exact_match": float(correct)})
    out.mkdir(parents=True)
    tracker = EvaluationTracker(output_path=str(out / "results.json"))
    accuracy = sum(s["exact_match"] for s in samples) / N
    # as lm-eval's command line does after an evaluation: the aggregate, then the samples
    tracker.save_results_aggregated(
        results={"results": {"tiny_gsm8k": {"exact_match,strict-match": accuracy}}},
        samples={"tiny_gsm8k": samples})
    tracker.save_results_samples(task_name="tiny_gsm8k", samples=samples)
    (path,) = out.glob("samples_tiny_gsm8k_*.jsonl")
    return path


def _runs(path: Path, model: str, files: dict[str, Path]) -> Path:
    data = {"format": "lm-eval-samples", "filter": "strict-match", "runs": [
        {"path": str(files["clean"]), "condition": model},
        {"path": str(files["noisy"]), "condition": model, "eval_noise": 0.05}]}
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    root = tmp_path_factory.mktemp("harness")
    files = {m: {lv: _write_samples(root / m / lv, m, lv == "noisy")
                 for lv in ("clean", "noisy")} for m in ("base", "cand")}
    changed = {lv: _write_samples(root / "changed" / lv, "cand", lv == "noisy", changed_doc=7)
               for lv in ("clean", "noisy")}
    return {"base": _runs(root / "base.yaml", "base", files["base"]),
            "cand": _runs(root / "cand.yaml", "cand", files["cand"]),
            "changed": _runs(root / "changed.yaml", "cand", changed), "root": root}


def _gate(capsys, *args):
    code = main(["gate", *map(str, args), "--no-progress"])
    out, err = capsys.readouterr()
    return code, out, err


def test_an_lmeval_only_baseline_gates_lmeval_candidates(harness, tmp_path, capsys):
    results = tmp_path / "results"
    assert main(["analyze", str(harness["base"]), "--out", str(results), "--format", "json",
                 "--n-resamples", "200"]) == 0
    capsys.readouterr()
    (version,) = (results / "analysis").iterdir()
    manifest = json.loads((version / "manifest.json").read_text())
    protocol = manifest["protocols"]["base"]
    assert protocol["task"] == "tiny_gsm8k"  # from lm-eval's samples_<task>_<date>.jsonl
    assert protocol["task_params"]["filter"] == "strict-match"
    assert protocol["noise_levels"] == [0.0, 0.05] and protocol["n_items"] == N

    # the candidate's lm-eval runs, compared directly: retention 0.6875 vs 0.75
    code, out, err = _gate(capsys, harness["cand"], "--baseline", version,
                           "--max-degradation", "0.25", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    (level,) = data["levels"]
    assert level["candidate"] == pytest.approx(110 / 160)
    assert level["baseline"] == pytest.approx(120 / 160)
    assert level["estimate"] == pytest.approx(-1 / 12)
    assert data["baseline_kind"] == "lm-eval version" and data["candidate_kind"] == "lm-eval runs"
    assert any("error model" in n and "not recorded on both sides" in n for n in data["notes"])
    # the same comparison fails a margin it cannot show
    code, _, err = _gate(capsys, harness["cand"], "--baseline", version,
                         "--max-degradation", "0.05")
    assert code == 1 and "FAIL" in err

    # runs over other documents (doc 7 changed) are refused before any compute
    code, out, err = _gate(capsys, harness["changed"], "--baseline", version,
                           "--max-degradation", "0.25")
    assert code == 2 and out == ""
    assert "protocol mismatch" in err and "the items' documents differ" in err
    # a `task:` is the task the files hold, never an override of it: a mapping file that
    # calls tiny_gsm8k's samples gsm8k is refused before the protocols are compared
    other = yaml.safe_load(harness["cand"].read_text())
    other["metric"] = "exact_match"
    other["task"] = "gsm8k"
    path = tmp_path / "other.yaml"
    path.write_text(yaml.safe_dump(other))
    code, _, err = _gate(capsys, path, "--baseline", version, "--max-degradation", "0.25")
    assert code == 2 and "`task` is 'gsm8k', and the runs' file names name the task " \
                         "'tiny_gsm8k'" in err


def test_a_clean_only_gate_names_the_clean_metric_and_agrees_on_noise_seeds(harness, tmp_path,
                                                                          capsys):
    """Item 4: a CSV without noise_seed against an lm-eval baseline, clean accuracy only."""
    from robuststats.outcomes import read_lmeval_runs

    results = tmp_path / "results"
    assert main(["analyze", str(harness["base"]), "--out", str(results), "--format", "json",
                 "--n-resamples", "200"]) == 0
    capsys.readouterr()
    (version,) = (results / "analysis").iterdir()
    cand = read_lmeval_runs(harness["cand"])
    csv = tmp_path / "cand.csv"
    cand[cand["eval_noise"] == 0][["condition", "item_id", "correct"]].to_csv(csv, index=False)
    assert "noise_seed" not in pd.read_csv(csv).columns
    code, out, err = _gate(capsys, csv, "--baseline", version, "--metric", "accuracy",
                           "--eval-noise", "0", "--margin-type", "absolute",
                           "--max-degradation", "0.05")
    assert code == 0, err
    assert "is the candidate's clean accuracy non-inferior" in out
    assert "noisy accuracy" not in out and "noise seeds differ" not in out
    assert "protocol:  task tiny_gsm8k, error model not recorded, 200 items" in out
