"""lm-evaluation-harness both ways, with the real harness (issue 12, item 3).

A tiny Qwen2 (trained a few steps on GSM8K-format data, saved with robuststats' layout) is
evaluated by lm-eval on a local task YAML over a local JSONL file (no hub): clean with
lm-eval's own ``hf`` model, and under noise with robuststats' ``robuststats-hf`` model,
from Python and from lm-eval's command line with ``ROBUSTSTATS_NOISE``. The samples files
are then read by ``robuststats analyze`` through a mapping file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

lm_eval = pytest.importorskip("lm_eval")

from robuststats.cli import main  # noqa: E402
from robuststats.errors import InputError  # noqa: E402
from robuststats.outcomes import read_lmeval_runs, read_lmeval_samples  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
N_DOCS = 12
TASK_YAML = """\
task: tiny_gsm8k
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}\\n"
doc_to_target: "{{{{answer.split('####')[-1].strip()}}}}"
generation_kwargs:
  until: ["\\n\\n"]
  do_sample: false
  max_gen_toks: 32
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: take_first
  - name: flexible-extract
    filter:
      - function: regex
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{{2,}})|(-?[0-9]+)"
      - function: take_first
metadata:
  version: 1.0
"""


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """A saved tiny model, task directories over the data file and an altered copy."""
    from robuststats.models.tasks import get_task
    from robuststats.models.trainer import TrainingCondition, get_trainer

    root = tmp_path_factory.mktemp("lmeval")
    source = get_task("arithmetic", n_items=N_DOCS, n_train=300, max_value=5, seed=2)
    rows = {split: [{"question": i.prompt.rstrip("\n"), "answer": source.target(i)}
                    for i in source.items(split)] for split in ("train", "test")}
    for split, records in rows.items():
        (root / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    altered = [dict(r) for r in rows["test"]]
    altered[3]["question"] = altered[3]["question"].replace("How many", "How much")
    (root / "altered.jsonl").write_text("".join(json.dumps(r) + "\n" for r in altered))
    for name, data in (("tasks", "test.jsonl"), ("tasks_altered", "altered.jsonl")):
        (root / name).mkdir()
        (root / name / "tiny_gsm8k.yaml").write_text(TASK_YAML.format(data=root / data))
    task = get_task("gsm8k", path=str(root / "test.jsonl"), train_path=str(root / "train.jsonl"),
                    prompt_template="{question}\n")
    trainer = get_trainer("builtin", steps=80, lr=5e-3, batch_size=32, train_eval_items=0,
                          model={"hidden_size": 32, "num_layers": 1, "intermediate_size": 64})
    trainer.train(task, TrainingCondition("base"), seed=0).save(root / "model")
    return root


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets"))
    monkeypatch.delenv("ROBUSTSTATS_NOISE", raising=False)


def _evaluate(model, tasks_dir, out):
    """lm-eval's own evaluation and samples writer (what `--log_samples` writes)."""
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    tracker = EvaluationTracker(output_path=str(out))
    results = lm_eval.simple_evaluate(model=model, tasks=["tiny_gsm8k"], log_samples=True,
                                      task_manager=TaskManager(include_path=str(tasks_dir)),
                                      evaluation_tracker=tracker)
    # as lm-eval's command line does after the evaluation
    tracker.save_results_aggregated(results=results, samples=results["samples"])
    tracker.save_results_samples(task_name="tiny_gsm8k",
                                 samples=results["samples"]["tiny_gsm8k"])
    (path,) = Path(out).rglob("samples_tiny_gsm8k_*.jsonl")
    return path, results


@pytest.mark.slow  # several lm-eval runs of a tiny model: minutes on 2 cores
def test_lm_eval_both_ways(bench, tmp_path, capsys):
    from lm_eval.models.huggingface import HFLM

    from robuststats.engine import NoiseSpec
    from robuststats.integrations.lmeval import NoisyHFLM

    model_dir = str(bench / "model")
    tasks = bench / "tasks"
    clean, results = _evaluate(HFLM(pretrained=model_dir, batch_size=4, device="cpu"),
                               tasks, tmp_path / "clean")
    noisy_lm = NoisyHFLM(pretrained=model_dir, batch_size=4, device="cpu",
                         noise=NoiseSpec(scale=0.10, ops="matmul_only"), noise_seed=0,
                         injections=str(tmp_path / "inj.parquet"))
    noisy, _ = _evaluate(noisy_lm, tasks, tmp_path / "noisy")
    stats = noisy_lm.injection_stats
    assert stats["count"].sum() > 0 and set(stats["op"]) >= {"linear"}
    assert pd.read_parquet(tmp_path / "inj.parquet")["count"].sum() == stats["count"].sum()

    # lm-eval's command line, the noise from ROBUSTSTATS_NOISE in the lm-eval process
    env = {**os.environ, "ROBUSTSTATS_NOISE": json.dumps({"scale": 0.10, "ops": "matmul_only"}),
           "PYTHONPATH": str(ROOT)}
    cli = subprocess.run(
        [sys.executable, "-m", "robuststats.integrations.lmeval", "--model", "robuststats-hf",
         "--model_args", f"pretrained={model_dir},noise_seed=0,"
                         f"injections={tmp_path / 'cli_inj.csv'}",
         "--batch_size", "4", "--device", "cpu",
         "--include_path", str(tasks), "--tasks", "tiny_gsm8k", "--log_samples",
         "--output_path", str(tmp_path / "cli")],
        env=env, capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0, cli.stderr[-3000:]
    (cli_samples,) = (tmp_path / "cli").rglob("samples_tiny_gsm8k_*.jsonl")
    cli_counts = pd.read_csv(tmp_path / "cli_inj.csv")
    assert cli_counts["count"].sum() > 0 and (cli_counts["target_scale"] == 0.10).all()

    # one line per document per filter, as lm-eval writes them
    lines = [json.loads(line) for line in clean.read_text().splitlines()]
    assert len(lines) == 2 * N_DOCS
    assert {line["filter"] for line in lines} == {"strict-match", "flexible-extract"}
    strict = read_lmeval_samples(clean, condition="base", filter="strict-match")
    assert len(strict) == N_DOCS and strict["item_id"].tolist() == [str(i) for i in range(N_DOCS)]
    # the same accuracy lm-eval reports
    reported = results["results"]["tiny_gsm8k"]["exact_match,strict-match"]
    assert strict["correct"].mean() == pytest.approx(reported)

    runs = {"format": "lm-eval-samples", "filter": "strict-match", "runs": [
        {"path": str(clean), "condition": "base", "seed": 0},
        {"path": str(noisy), "condition": "base", "seed": 0, "eval_noise": 0.1},
        {"path": str(clean), "condition": "rl", "seed": 0},
        {"path": str(cli_samples), "condition": "rl", "seed": 0, "eval_noise": 0.1},
    ]}
    mapping = tmp_path / "runs.yaml"
    import yaml

    mapping.write_text(yaml.safe_dump(runs))
    outcomes = read_lmeval_runs(mapping)
    assert len(outcomes) == 4 * N_DOCS
    # the same model, noise spec and noise seed through Python and through the command line
    # with ROBUSTSTATS_NOISE: the same generations
    in_process = [json.loads(line)["resps"] for line in noisy.read_text().splitlines()]
    from_cli = [json.loads(line)["resps"] for line in cli_samples.read_text().splitlines()]
    assert in_process == from_cli
    assert outcomes.attrs["lmeval"] == {"filter": "strict-match", "metric": "exact_match",
                                        "runs": 4}
    assert main(["analyze", str(mapping), "--format", "json", "--n-resamples", "200"]) == 0
    data = json.loads(capsys.readouterr().out)
    summary = pd.DataFrame(data["summary"])
    assert set(summary["condition"]) == {"base", "rl"}
    assert sorted(set(summary["eval_noise"])) == [0.0, 0.1]
    assert len(data["tests"]) == 2  # base vs rl at each level
    # flags override the file: the other filter scores other outcomes or the same ones
    assert main(["analyze", str(mapping), "--filter", "flexible-extract", "--format",
                 "json", "--n-resamples", "200"]) == 0
    capsys.readouterr()

    # a single samples file with the cell given by flags
    assert main(["analyze", str(clean), "--filter", "strict-match", "--condition", "base",
                 "--format", "json", "--n-resamples", "200"]) == 0
    single = json.loads(capsys.readouterr().out)
    assert single["summary"][0]["accuracy"] == pytest.approx(reported)

    # errors: the filter must be chosen; the cell of a single file must be named
    assert main(["analyze", str(clean), "--condition", "base"]) == 2
    assert re.search(r"holds the filters \['flexible-extract', 'strict-match'\]: choose one "
                     r"with `filter` \(--filter\)", capsys.readouterr().err)
    assert main(["analyze", str(clean), "--filter", "strict-match"]) == 2
    assert "--condition: " in capsys.readouterr().err
    assert main(["analyze", str(mapping), "--seed", "3"]) == 2
    assert "--seed: a mapping file gives each run its cell" in capsys.readouterr().err

    # a run over another data file: doc 3 is another document, and pairing is refused
    altered, _ = _evaluate(HFLM(pretrained=model_dir, batch_size=4, device="cpu"),
                           bench / "tasks_altered", tmp_path / "altered")
    runs["runs"][2]["path"] = str(altered)
    with pytest.raises(InputError, match=r"doc_id 3 is a different document in runs.2 "
                                         r"\(samples_tiny_gsm8k_.*: rl, seed 0, eval_noise 0, "
                                         r"noise_seed 0\) than in runs.0 .* cannot be paired"):
        read_lmeval_runs(runs)


@pytest.mark.parametrize(("change", "message"), [
    ({"format": "csv"}, r"`format` must be 'lm-eval-samples'"),
    ({"filters": "x"}, r"unknown key 'filters' \(did you mean 'filter'\?\)"),
    ({"runs": []}, r"`runs` must be a non-empty list"),
    ({"runs": [{"path": "x.jsonl"}]}, r"runs.0: missing `condition`"),
    ({"runs": [{"path": "x.jsonl", "condition": "a", "sede": 1}]},
     r"runs.0.sede: unknown key \(did you mean 'seed'\?\)"),
    ({"runs": [{"path": "x.jsonl", "condition": "a", "seed": -1}]},
     r"runs.0.seed: must be an integer >= 0"),
    ({"runs": [{"path": "x.jsonl", "condition": "a", "eval_noise": "5%"}]},
     r"runs.0.eval_noise: must be a number >= 0"),
    ({"runs": [{"path": "nowhere/*.jsonl", "condition": "a"}]},
     r"runs.0.path: 'nowhere/\*.jsonl' must match exactly one file, matches 0"),
    ({"runs": [{"path": "missing.jsonl", "condition": "a"}]},
     r"runs.0: lm-eval samples file .* does not exist"),
])
def test_mapping_errors_name_the_key(tmp_path, change, message):
    data = {"format": "lm-eval-samples", "runs": [{"path": "x.jsonl", "condition": "a"}],
            **change}
    with pytest.raises(InputError, match=message):
        read_lmeval_runs(data)


def test_sample_errors_name_file_and_line(tmp_path):
    path = tmp_path / "samples.jsonl"

    def write(*records):
        path.write_text("".join(json.dumps(r) + "\n" for r in records))

    good = {"doc_id": 0, "doc_hash": "ab", "filter": "none", "exact_match": 1.0}
    write(good, {**good, "doc_id": 1, "exact_match": 0.5})
    with pytest.raises(InputError, match=r"samples.jsonl:2: `exact_match` must be 0 or 1"):
        read_lmeval_samples(path, condition="a")
    write(good, good)
    with pytest.raises(InputError, match=r"samples.jsonl:2: doc_id 0 appears twice for "
                                         r"filter 'none' \(first on line 1\)"):
        read_lmeval_samples(path, condition="a")
    write(good)
    with pytest.raises(InputError, match=r"samples.jsonl:1: no key 'exact_mach' \(did you "
                                         r"mean 'exact_match'\?\)"):
        read_lmeval_samples(path, condition="a", metric="exact_mach")
    with pytest.raises(InputError, match=r"no line has filter 'strict'; the file holds "
                                         r"\['none'\]"):
        read_lmeval_samples(path, condition="a", filter="strict")


def _lmeval_run(folder: Path, task: str, correct: dict[int, int], *, planned: int | None = None,
                date: str = "2026-01-02T03-04-05.678901") -> Path:
    """A samples file as lm-eval 0.4 names and writes it, with the results file it writes
    beside it (``n-samples``: the documents the evaluation planned)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"samples_{task}_{date}.jsonl"
    path.write_text("".join(json.dumps({"doc_id": i, "doc_hash": f"h{i}", "filter": "none",
                                        "exact_match": float(c)}) + "\n"
                            for i, c in correct.items()))
    if planned is not None:
        (folder / f"results_{date}.json").write_text(json.dumps(
            {"results": {task: {}}, "n-samples": {task: {"original": 1319,
                                                          "effective": planned}}}))
    return path


def test_a_document_the_results_file_counts_but_the_samples_lack_is_a_named_hole(tmp_path):
    full = _lmeval_run(tmp_path / "a", "gsm8k", {i: i % 2 for i in range(6)}, planned=6)
    short = _lmeval_run(tmp_path / "b", "gsm8k", {i: 1 for i in range(6) if i != 4}, planned=6)
    alone = read_lmeval_samples(short, condition="b")
    assert alone.attrs["expected_items"] == [str(i) for i in range(6)]
    from robuststats.outcomes import complete

    assert complete(alone).dropped["item_id"].tolist() == ["4"]
    runs = {"format": "lm-eval-samples", "runs": [{"path": str(full), "condition": "a"},
                                                  {"path": str(short), "condition": "b"}]}
    with pytest.raises(InputError, match=r"item '4' is missing under condition 'b'"):
        complete(read_lmeval_runs(runs), holes="raise")
    # doc_ids that are not 0..n-1 cannot name what is missing: refused with the counts
    odd = _lmeval_run(tmp_path / "c", "gsm8k", {10: 1, 11: 0}, planned=3)
    with pytest.raises(InputError, match=r"results_.*\.json records 3 documents of task "
                                         r"'gsm8k', the file holds 2"):
        read_lmeval_samples(odd, condition="c")
    # as many lines as documents, under ids of the task's own: complete
    whole = _lmeval_run(tmp_path / "e", "gsm8k", {10: 1, 11: 0}, planned=2)
    assert read_lmeval_samples(whole, condition="e").attrs["expected_items"] == ["10", "11"]
    # without a results file the samples are the plan
    bare = _lmeval_run(tmp_path / "d", "gsm8k", {0: 1, 2: 1})
    assert read_lmeval_samples(bare, condition="d").attrs["expected_items"] == ["0", "2"]


def test_task_must_be_the_one_the_file_names_name(tmp_path):
    gsm = _lmeval_run(tmp_path / "a", "gsm8k", {0: 1, 1: 0})
    arc = _lmeval_run(tmp_path / "b", "arc_easy", {0: 1, 1: 0})
    runs = {"format": "lm-eval-samples", "runs": [{"path": str(gsm), "condition": "a"}]}
    with pytest.raises(InputError, match=r"`task` is 'arc_easy', and the runs' file names name "
                                         r"the task 'gsm8k'"):
        read_lmeval_runs({**runs, "task": "arc_easy"})
    assert read_lmeval_runs({**runs, "task": "gsm8k"}).attrs["harness"]["task"] == "gsm8k"
    two = {"format": "lm-eval-samples", "task": "gsm8k",
           "runs": [{"path": str(gsm), "condition": "a"}, {"path": str(arc), "condition": "b"}]}
    with pytest.raises(InputError, match=r"the runs are of different tasks: 'gsm8k' in runs.0"):
        read_lmeval_runs(two)
