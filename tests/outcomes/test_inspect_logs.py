"""Inspect AI logs as item outcomes, on logs real inspect-ai writes in the test.

The logs come from Inspect's own ``eval`` with its ``mockllm`` provider (no network): a
model whose answers the test decides per question, so every outcome is known. One
module-scoped fixture writes all of them (several epochs and scorers, ``.eval`` and
``.json``, a second model, another dataset, a cancelled run, a graded score); the tests
that need it are slow (inspect-ai's start-up and six evaluations take ~15 s on 2 cores).
The mapping-file checks that read no log are fast.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from robuststats.cli import main
from robuststats.errors import InputError
from robuststats.outcomes import (
    is_inspect_log,
    read_harness_runs,
    read_inspect_log,
    read_inspect_runs,
)

pytestmark = pytest.mark.filterwarnings(  # inspect-ai's own retry set-up
    "ignore:The 'initial' parameter is deprecated:DeprecationWarning")

N_ITEMS = 12
EPOCHS = 3
#: items each model gets wrong every time; the flaky item is wrong on its second call only
WRONG = {"mockllm/good": {1}, "mockllm/bad": {1, 2, 3, 5}}
FLAKY = {"mockllm/good": None, "mockllm/bad": 4}


def _dataset(name: str, offset: int = 0):
    from inspect_ai.dataset import MemoryDataset, Sample

    return MemoryDataset([Sample(input=f"What is {i + offset} plus {i + offset}?",
                                 target=str(2 * (i + offset)), id=f"q{i}")
                          for i in range(N_ITEMS)], name=name)


def _answerer(model: str):
    from inspect_ai.model import ModelOutput, ModelUsage

    calls: dict[int, int] = {}

    def answer(messages, tools, tool_choice, config):
        i = int(re.search(r"What is (\d+)", messages[-1].text).group(1))
        calls[i] = calls.get(i, 0) + 1
        wrong = i in WRONG[model] or (i == FLAKY[model] and calls[i] == 2)
        out = ModelOutput.from_content(model="mockllm", content=f"The answer is "
                                                               f"{2 * i + int(wrong)}")
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # no tokenizer
        return out

    return answer


def _closeness():
    """A graded scorer (1/(1 + |answer − target|)): not 0/1."""
    from inspect_ai.scorer import Score, accuracy, scorer

    @scorer(metrics=[accuracy()])
    def closeness():
        async def score(state, target):
            got = int(re.findall(r"-?\d+", state.output.completion)[-1])
            return Score(value=1.0 / (1.0 + abs(got - int(target.text))))
        return score

    return closeness()


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    pytest.importorskip("inspect_ai")
    import anyio
    from inspect_ai import Task, eval_async
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import includes, match
    from inspect_ai.solver import generate

    root = tmp_path_factory.mktemp("inspect")
    display = os.environ.get("INSPECT_DISPLAY")
    os.environ["INSPECT_DISPLAY"] = "none"  # eval_async takes no `display`

    def run(model, task, fmt, name):
        from inspect_ai import eval as inspect_eval

        (log,) = inspect_eval(task, model=get_model(model, custom_outputs=_answerer(model)),
                              log_dir=str(root / name), log_format=fmt, display="none")
        return Path(log.location)

    arith = Task(dataset=_dataset("arith"), solver=[generate()], scorer=[match(), includes()],
                 epochs=EPOCHS, name="arith")
    out = {"good": run("mockllm/good", arith, "eval", "good"),
           "bad": run("mockllm/bad", arith, "json", "bad")}
    other = Task(dataset=_dataset("arith_hard", offset=100), solver=[generate()],
                 scorer=[match(), includes()], epochs=EPOCHS, name="arith")
    out["other"] = run("mockllm/bad", other, "eval", "other")
    graded = Task(dataset=_dataset("arith"), solver=[generate()], scorer=[_closeness()],
                  name="arith")
    out["graded"] = run("mockllm/bad", graded, "eval", "graded")

    # a run stopped from outside after three samples (Ctrl-C): Inspect logs it `cancelled`
    async def cancelled():
        stuck = anyio.Event()
        calls = [0]

        async def answer(messages, tools, tool_choice, config):
            calls[0] += 1
            if calls[0] > 3:
                stuck.set()
                await anyio.sleep(600)
            reply = ModelOutput.from_content(model="mockllm", content="The answer is 0")
            reply.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
            return reply

        task = Task(dataset=_dataset("arith"), solver=[generate()], scorer=[match()],
                    name="arith")
        async with anyio.create_task_group() as tg:
            async def go():
                await eval_async(task, model=get_model("mockllm/good", custom_outputs=answer),
                                 log_dir=str(root / "cancelled"), max_samples=1)
            tg.start_soon(go)
            await stuck.wait()
            tg.cancel_scope.cancel()

    anyio.run(cancelled)
    (out["cancelled"],) = (root / "cancelled").glob("*.eval")
    yield out
    if display is None:
        os.environ.pop("INSPECT_DISPLAY", None)
    else:
        os.environ["INSPECT_DISPLAY"] = display


def _expected(model: str) -> dict[tuple[str, int], int]:
    """(item, epoch) -> correct, as the answerer decided (the flaky item's second call is
    its second epoch: one sample at a time, epochs in order)."""
    return {(f"q{i}", e): int(i not in WRONG[model] and not (i == FLAKY[model] and e == 2))
            for i in range(N_ITEMS) for e in range(1, EPOCHS + 1)}


@pytest.mark.slow
def test_one_log_epochs_scorers_and_inspects_own_accuracy(logs):
    from inspect_ai.log import read_eval_log

    assert is_inspect_log(logs["good"]) and is_inspect_log(logs["bad"])  # .eval and .json
    with pytest.raises(InputError, match=r"holds the scorers \['match', 'includes'\]: choose "
                                         r"one with `scorer` \(--scorer\)"):
        read_inspect_log(logs["good"])
    with pytest.raises(InputError, match=r"no scorer 'matches' \(did you mean 'match'\?\)"):
        read_inspect_log(logs["good"], scorer="matches")
    for name, model in (("good", "mockllm/good"), ("bad", "mockllm/bad")):
        df = read_inspect_log(logs[name], scorer="match")
        assert set(df["condition"]) == {model}  # the model names the condition by default
        assert len(df) == N_ITEMS * EPOCHS
        assert sorted(set(df["noise_seed"])) == list(range(EPOCHS))  # epoch e -> e - 1
        got = {(r.item_id, r.noise_seed + 1): r.correct for r in df.itertuples()}
        if name == "good":
            assert got == _expected(model)
        # Inspect's own headline accuracy of the scorer (mean over epochs and samples)
        log = read_eval_log(str(logs[name]))
        reported = {s.name: s.metrics["accuracy"].value for s in log.results.scores}
        assert df["correct"].mean() == pytest.approx(reported["match"])
        assert df.attrs["inspect"]["epochs"] == EPOCHS


@pytest.mark.slow
def test_mapping_file_pairs_models_and_analyze_reads_it(logs, tmp_path, capsys):
    runs = {"format": "inspect-logs", "scorer": "match",
            "conditions": {"mockllm/good": "base", "mockllm/bad": "small"},
            "runs": [{"path": str(logs["good"])}, {"path": str(logs["bad"])}]}
    mapping = tmp_path / "runs.yaml"
    mapping.write_text(yaml.safe_dump(runs))
    df = read_harness_runs(mapping)
    assert df.equals(read_inspect_runs(mapping))
    assert len(df) == 2 * N_ITEMS * EPOCHS
    assert df.attrs["harness"]["task"] == "arith"
    assert df.attrs["harness"]["n_items"] == N_ITEMS
    assert df.attrs["harness"]["options"] == {"dataset": "arith", "scorer": "match",
                                              "threshold": None}
    assert main(["analyze", str(mapping), "--format", "json", "--n-resamples", "200"]) == 0
    data = json.loads(capsys.readouterr().out)
    acc = {r["condition"]: r["accuracy"] for r in data["summary"]}
    assert acc["base"] == pytest.approx((N_ITEMS - 1) / N_ITEMS)
    # bad: 4 items always wrong, item 4 wrong in 1 epoch of 3
    assert acc["small"] == pytest.approx((N_ITEMS - 4 - 1 / 3) / N_ITEMS)
    # one log from the command line: condition by flag, scorer required
    assert main(["analyze", str(logs["good"]), "--scorer", "includes", "--condition", "base",
                 "--format", "json", "--n-resamples", "200"]) == 0
    single = json.loads(capsys.readouterr().out)
    assert single["summary"][0]["condition"] == "base"
    assert main(["analyze", str(logs["good"])]) == 2
    assert "choose one with `scorer` (--scorer)" in capsys.readouterr().err
    assert main(["analyze", str(mapping), "--filter", "strict-match"]) == 2
    assert "`filter` (--filter) does not apply to inspect-logs runs" in capsys.readouterr().err


@pytest.mark.slow
def test_an_inspect_baseline_gates_an_inspect_candidate(logs, tmp_path, capsys):
    """An analysis of Inspect logs records its protocol; the gate compares another model's
    log with it directly (clean accuracy, one model each: Tango's test)."""
    base = {"format": "inspect-logs", "scorer": "match",
            "conditions": {"mockllm/good": "base", "mockllm/bad": "small"}}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(
        {**base, "runs": [{"path": str(logs["good"])}]}))
    (tmp_path / "cand.yaml").write_text(yaml.safe_dump(
        {**base, "runs": [{"path": str(logs["bad"])}]}))
    assert main(["analyze", str(tmp_path / "base.yaml"), "--out", str(tmp_path / "results"),
                 "--format", "json", "--n-resamples", "200"]) == 0
    capsys.readouterr()
    (version,) = (tmp_path / "results" / "analysis").iterdir()
    args = ["gate", str(tmp_path / "cand.yaml"), "--baseline", str(version), "--metric",
            "accuracy", "--eval-noise", "0", "--margin-type", "absolute", "--no-progress",
            "--format", "json"]
    assert main([*args, "--max-degradation", "0.1"]) == 1  # 36 points worse: not within 0.1
    data = json.loads(capsys.readouterr().out)
    assert data["baseline_kind"] == "Inspect version"
    assert data["candidate_kind"] == "Inspect runs"
    assert data["levels"][0]["estimate"] == pytest.approx(-(3 + 1 / 3) / N_ITEMS)
    # another scorer is another protocol
    (tmp_path / "cand.yaml").write_text(yaml.safe_dump(
        {**base, "scorer": "includes", "runs": [{"path": str(logs["bad"])}]}))
    assert main([*args, "--max-degradation", "0.1"]) == 2
    assert "task.params.scorer \"match\" vs \"includes\"" in capsys.readouterr().err


@pytest.mark.slow
def test_refusals_name_the_runs(logs, tmp_path):
    base = {"format": "inspect-logs", "scorer": "match",
            "conditions": {"mockllm/good": "base", "mockllm/bad": "small"}}
    # two runs over different datasets: refused, naming both
    runs = {**base, "runs": [{"path": str(logs["good"])}, {"path": str(logs["other"])}]}
    with pytest.raises(InputError, match=r"runs.1 \(.*\.eval: mockllm/bad as small\) is of "
                                         r"dataset 'arith_hard' and runs.0 \(.*\.eval: "
                                         r"mockllm/good as base\) of dataset 'arith'"):
        read_inspect_runs(runs)
    # a cancelled run is not read
    runs = {**base, "runs": [{"path": str(logs["good"])}, {"path": str(logs["cancelled"]),
                                                           "condition": "stopped"}]}
    with pytest.raises(InputError, match=r"runs.1: .*: the run's status is 'cancelled' \(\d+ "
                                         r"of 12 samples scored\): an unfinished run"):
        read_inspect_runs(runs)
    # the same cell twice
    runs = {**base, "runs": [{"path": str(logs["good"])}, {"path": str(logs["good"])}]}
    with pytest.raises(InputError, match=r"are both the cell condition base, seed 0, "
                                         r"eval_noise 0, noise_seed 0"):
        read_inspect_runs(runs)
    # a model the mapping does not name
    runs = {**base, "conditions": {"mockllm/god": "base"}, "runs": [{"path": str(logs["good"])}]}
    with pytest.raises(InputError, match=r"model 'mockllm/good', which `conditions` does not "
                                         r"map \(did you mean 'mockllm/god'\?\)"):
        read_inspect_runs(runs)
    # epochs are the noise seeds: a run cannot name one
    runs = {**base, "runs": [{"path": str(logs["good"]), "noise_seed": 2}]}
    with pytest.raises(InputError, match=r"the log has 3 epochs, which are the noise seeds"):
        read_inspect_runs(runs)


@pytest.mark.slow
def test_a_graded_score_needs_a_threshold(logs):
    with pytest.raises(InputError, match=r"scorer 'closeness' gave 0\.5 \(= 0\.5\), not 0 or 1: "
                                         r"give `threshold` \(--threshold\)"):
        read_inspect_log(logs["graded"])
    df = read_inspect_log(logs["graded"], threshold=0.9)
    # bad answers 2i + 1 on items 1, 2, 3, 5 (closeness 1/2), and the flaky item 4 is right
    # in this one-epoch run's only call
    assert df.set_index("item_id")["correct"].to_dict() == {
        f"q{i}": int(i not in WRONG["mockllm/bad"]) for i in range(N_ITEMS)}
    assert sorted(set(df["score"])) == [0.5, 1.0]


@pytest.mark.parametrize(("change", "message"), [
    ({"format": "inspect"}, r"`format` must be 'inspect-logs'"),
    ({"scorers": "x"}, r"unknown key 'scorers' \(did you mean 'scorer'\?\)"),
    ({"conditions": ["a"]}, r"`conditions` must map values of model to condition names"),
    ({"runs": [{"path": "x.eval", "modle": "a"}]}, r"runs.0.modle: unknown key"),
    ({"runs": [{"path": "nowhere/*.eval"}]},
     r"runs.0.path: 'nowhere/\*.eval' must match at least one file, matches 0"),
])
def test_mapping_file_errors(change, message):
    runs = {"format": "inspect-logs", "runs": [{"path": "x.eval"}], **change}
    with pytest.raises(InputError, match=message):
        read_inspect_runs(runs)


def test_harness_format_dispatch(tmp_path):
    mapping = tmp_path / "runs.yaml"
    mapping.write_text("format: inspect-log\nruns: [{path: x.eval}]\n")
    with pytest.raises(InputError, match=r"`format` must be one of 'lm-eval-samples', "
                                         r"'inspect-logs', got 'inspect-log' \(did you mean "
                                         r"'inspect-logs'\?\)"):
        read_harness_runs(mapping)
    assert not is_inspect_log(mapping)
    log = tmp_path / "log.json"
    log.write_text(json.dumps({"format": "inspect-logs", "runs": []}))
    assert not is_inspect_log(log)  # a mapping file, not a log
