"""Inspect logs as their users write them: one model, the condition in the log's metadata,
task arguments or tags; a directory of such logs; and a log with records missing.

The logs come from Inspect's own ``eval`` with its ``mockllm`` provider (no network): one
model answers 8 questions over 2 epochs under two prompts, and the prompt is recorded in
``eval.metadata`` (``--metadata``), ``eval.task_args`` (``-T``) and ``eval.tags``
(``--tags``). The prompt ``cot`` gets items 1 and 2 wrong, ``direct`` items 1, 3, 4 and 5,
so every count is known. One module-scoped fixture writes them (slow: inspect-ai's start-up).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from robuststats.cli import main
from robuststats.errors import InputError
from robuststats.outcomes import complete, read_inspect_log, read_inspect_runs

pytestmark = pytest.mark.filterwarnings(  # inspect-ai's own retry set-up
    "ignore:The 'initial' parameter is deprecated:DeprecationWarning")

N_ITEMS = 8
EPOCHS = 2
WRONG = {"cot": {1, 2}, "direct": {1, 3, 4, 5}}


def _answerer(prompt: str):
    from inspect_ai.model import ModelOutput, ModelUsage

    def answer(messages, tools, tool_choice, config):
        i = int(re.search(r"What is (\d+)", messages[-1].text).group(1))
        out = ModelOutput.from_content(model="mockllm", content=f"The answer is "
                                                               f"{2 * i + int(i in WRONG[prompt])}")
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    return answer


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    pytest.importorskip("inspect_ai")
    from inspect_ai import Task, task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    @task
    def arith(prompt: str = "cot"):
        samples = [Sample(input=f"What is {i} plus {i}?", target=str(2 * i), id=f"q{i}")
                   for i in range(N_ITEMS)]
        return Task(dataset=MemoryDataset(samples, name="arith"), solver=[generate()],
                    scorer=[match()], epochs=EPOCHS)

    root = tmp_path_factory.mktemp("inspect_conditions")
    for prompt in WRONG:
        inspect_eval(arith(prompt=prompt), task_args={"prompt": prompt},
                     model=get_model("mockllm/model", custom_outputs=_answerer(prompt)),
                     metadata={"prompt": prompt, "owner": "lab"},
                     tags=[f"prompt={prompt}", "nightly"],
                     log_dir=str(root / "logs"), log_format="json", display="none")
    paths = sorted((root / "logs").glob("*.json"))
    assert len(paths) == 2
    by_prompt = {json.loads(p.read_text())["eval"]["metadata"]["prompt"]: p for p in paths}
    # a copy of the `direct` log with every record of sample q6 removed, status still success
    data = json.loads(by_prompt["direct"].read_text())
    data["samples"] = [s for s in data["samples"] if s["id"] != "q6"]
    (root / "damaged").mkdir()
    damaged = root / "damaged" / "direct_q6_removed.json"
    damaged.write_text(json.dumps(data))
    return {"dir": root / "logs", **by_prompt, "damaged": damaged, "root": root}


def _acc(prompt: str) -> float:
    return (N_ITEMS - len(WRONG[prompt])) / N_ITEMS


@pytest.mark.slow
@pytest.mark.parametrize("field", ["metadata.prompt", "task_args.prompt", "tag:prompt="])
def test_a_directory_of_logs_with_the_condition_in_a_field(logs, field, capsys):
    assert main(["analyze", str(logs["dir"]), "--condition-from", field, "--format", "json",
                 "--n-resamples", "200"]) == 0
    data = json.loads(capsys.readouterr().out)
    acc = {r["condition"]: r["accuracy"] for r in data["summary"]}
    assert acc == {"cot": pytest.approx(_acc("cot")), "direct": pytest.approx(_acc("direct"))}
    (test,) = data["tests"]
    # cot right where direct is wrong on q3, q4, q5 in both epochs; the reverse on q2
    assert (test["a"], test["b"]) == ("cot", "direct")
    assert (test["n_a_only"], test["n_b_only"]) == (3 * EPOCHS, 1 * EPOCHS)
    # the pooled test's two epochs, each with its own paired counts
    assert [(r["noise_seed"], r["n_a_only"], r["n_b_only"]) for r in data["strata"]] == [
        (0, 3, 1), (1, 3, 1)]


@pytest.mark.slow
def test_the_same_model_lands_in_one_cell_and_the_refusal_names_the_field(logs, capsys):
    # the default field, the model, is the same for both logs
    assert main(["analyze", str(logs["dir"])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "are both the cell condition mockllm/model, seed 0, eval_noise 0, noise_seed 0; " \
           "the field model does not tell these logs apart: name the one that does with " \
           "`condition_from` (--condition-from)" in err
    # a field both logs hold with one value
    runs = {"format": "inspect-logs", "condition_from": "metadata.owner",
            "runs": [{"path": str(logs["dir"] / "*.json")}]}
    with pytest.raises(InputError, match=r"the field metadata.owner does not tell"):
        read_inspect_runs(runs)
    # a key the logs do not hold, with the keys they do
    with pytest.raises(InputError, match=r"the log has no metadata key 'promt' \(did you "
                                         r"mean 'prompt'\?\); its metadata keys are "
                                         r"\['owner', 'prompt'\]"):
        read_inspect_runs({**runs, "condition_from": "metadata.promt"})
    with pytest.raises(InputError, match=r"needs one tag starting with 'seed=', and its tags "
                                         r"are \["):
        read_inspect_runs({**runs, "condition_from": "tag:seed="})
    # values mapped to condition names; a value the mapping misses is named
    mapped = read_inspect_runs({**runs, "condition_from": "task_args.prompt",
                                "conditions": {"cot": "E1", "direct": "E0"}})
    assert set(mapped["condition"]) == {"E0", "E1"}
    with pytest.raises(InputError, match=r"has task_args.prompt 'direct', which `conditions` "
                                         r"does not map"):
        read_inspect_runs({**runs, "condition_from": "task_args.prompt",
                           "conditions": {"cot": "E1"}})
    # the file name and the folder
    one = read_inspect_log(logs["damaged"], condition_from="directory")
    assert set(one["condition"]) == {"damaged"}
    one = read_inspect_log(logs["damaged"], condition_from="file")
    assert set(one["condition"]) == {"direct_q6_removed"}


@pytest.mark.parametrize("bad", ["metadata", "metadata.", "prompt", "models", 3])
def test_condition_from_is_checked_before_any_log_is_read(bad):
    runs = {"format": "inspect-logs", "condition_from": bad, "runs": [{"path": "x.eval"}]}
    with pytest.raises(InputError, match=r"`condition_from`: .* is not a field a condition can "
                                         r"come from"):
        read_inspect_runs(runs)


@pytest.mark.slow
def test_a_log_missing_a_sample_is_a_named_hole(logs, tmp_path, capsys):
    df = read_inspect_log(logs["damaged"], condition_from="metadata.prompt")
    assert df["item_id"].nunique() == N_ITEMS - 1
    assert len(df.attrs["expected_items"]) == N_ITEMS  # the header's 8 sample ids
    done = complete(df)
    assert sorted(set(done.dropped["item_id"])) == ["q6"]
    assert sorted(done.dropped["noise_seed"]) == [0, 1]  # one hole per epoch
    with pytest.raises(InputError, match=r"item 'q6' is missing under condition 'direct', "
                                         r"seed 0, eval_noise 0, noise_seed 0 \(2 missing "
                                         r"item row\(s\) in all\)"):
        complete(df, holes="raise")
    # read alone: the hole in `dropped`, and one warning line naming it (the command's own
    # output, seen in a process of its own: pytest records warnings instead of printing them)
    assert main(["analyze", str(logs["damaged"]), "--format", "json",
                 "--n-resamples", "200"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {r["item_id"] for r in data["dropped"]} == {"q6"}
    run = subprocess.run([sys.executable, "-m", "robuststats", "analyze", str(logs["damaged"]),
                          "--n-resamples", "50"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONWARNINGS": ""})
    assert run.returncode == 0, run.stderr
    assert run.stderr.startswith("robuststats analyze: warning: outcomes with holes: 1 item(s) "
                                 "missing from some cells were dropped from every table, "
                                 "first 'q6' under condition 'mockllm/model'"), run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
    assert main(["analyze", str(logs["damaged"]), "--holes", "raise"]) == 2
    assert "item 'q6' is missing" in capsys.readouterr().err
    # paired with the complete log of the other prompt: q6 dropped from every table, named
    runs = {"format": "inspect-logs", "condition_from": "metadata.prompt",
            "runs": [{"path": str(logs["cot"])}, {"path": str(logs["damaged"])}]}
    mapping = tmp_path / "runs.yaml"
    mapping.write_text(yaml.safe_dump(runs))
    assert main(["analyze", str(mapping), "--holes", "raise"]) == 2
    assert "item 'q6' is missing under condition 'direct'" in capsys.readouterr().err


@pytest.mark.slow
def test_a_record_outside_the_header_or_an_empty_epoch_is_refused(logs, tmp_path):
    data = json.loads(logs["direct"].read_text())
    stray = json.loads(json.dumps(data))
    stray["samples"][0]["id"] = "q99"
    (tmp_path / "stray.json").write_text(json.dumps(stray))
    with pytest.raises(InputError, match=r"sample 'q99', epoch 1 is not in the log's header "
                                         r"\(8 sample ids × 2 epoch\(s\)\)"):
        read_inspect_log(tmp_path / "stray.json")
    one_epoch = {**data, "samples": [s for s in data["samples"] if s["epoch"] == 1]}
    (tmp_path / "epoch.json").write_text(json.dumps(one_epoch))
    with pytest.raises(InputError, match=r"epoch 2 of 2 has no sample record"):
        read_inspect_log(tmp_path / "epoch.json")


def test_a_directory_without_logs_is_named(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("x")
    assert main(["analyze", str(tmp_path), "--scorer", "match"]) == 2
    err = capsys.readouterr().err
    assert "holds neither outcomes.parquet" in err and "Inspect logs" in err
    assert not err.split("error: ", 1)[1].startswith("--scorer")


@pytest.mark.slow
def test_a_gate_on_clean_logs_records_the_epochs_and_says_how(logs, tmp_path, capsys):
    """Harness logs of clean evaluations: the protocol's noise seeds are the epochs, and the
    gate's default (retention at the noisy levels) says which flags gate clean accuracy."""
    assert main(["analyze", str(logs["dir"]), "--condition-from", "metadata.prompt",
                 "--out", str(tmp_path / "results"), "--format", "json",
                 "--n-resamples", "200"]) == 0
    capsys.readouterr()
    (version,) = (tmp_path / "results" / "analysis").iterdir()
    manifest = json.loads((version / "manifest.json").read_text())
    assert manifest["protocols"]["cot"]["noise_seeds"] == [0, 1]  # 2 epochs
    cand = tmp_path / "cand.yaml"
    cand.write_text(yaml.safe_dump({"format": "inspect-logs", "condition_from": "metadata.prompt",
                                    "runs": [{"path": str(logs["cot"])}]}))
    args = ["gate", str(cand), "--baseline", str(version), "--baseline-condition", "direct",
            "--no-progress", "--max-degradation", "0.1", "--margin-type", "absolute"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "has no noisy level" in err and "pass --metric accuracy --eval-noise 0" in err
    # 8 items, one model each: +25 points but underpowered, so not shown within 0.1 (exit 1)
    assert main([*args, "--metric", "accuracy", "--eval-noise", "0"]) == 1
    out = capsys.readouterr().out
    assert "noise seeds 0, 1" in out
