"""Tasks: generated arithmetic problems, the GSM8K loader, the exact-match scorer."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from robuststats.errors import InputError
from robuststats.models.tasks import (
    Item,
    available_tasks,
    extract_answer,
    get_task,
    normalize_number,
)
from robuststats.models.tasks._arithmetic import _count_problems, _enumerate

# --------------------------------------------------------------------------- arithmetic


def _problem_of(item: Item) -> str:
    # With show_work the worked lines determine the problem (start value, ops, operands).
    return item.solution.rsplit("\n", 1)[0]


def test_registry_lists_both_tasks():
    assert {"arithmetic", "gsm8k"} <= set(available_tasks())


def test_arithmetic_is_deterministic_per_seed():
    a = get_task("arithmetic", n_items=50, n_train=200, seed=3)
    b = get_task("arithmetic", n_items=50, n_train=200, seed=3)
    for split in ("test", "train"):
        assert a.items(split) == b.items(split)
    c = get_task("arithmetic", n_items=50, n_train=200, seed=4)
    assert [i.prompt for i in c.items("test")] != [i.prompt for i in a.items("test")]


def test_arithmetic_splits_are_disjoint_and_ids_unique():
    task = get_task("arithmetic", n_items=300, n_train=1500, seed=0)
    test, train = task.items("test"), task.items("train")
    assert len(test) == 300 and len(train) == 1500
    assert not {_problem_of(i) for i in test} & {_problem_of(i) for i in train}
    ids = [i.item_id for i in test + train]
    assert len(set(ids)) == len(ids)
    # problems inside a split are distinct too
    assert len({_problem_of(i) for i in test}) == 300


def test_arithmetic_test_items_do_not_depend_on_train_size():
    small = get_task("arithmetic", n_items=40, n_train=100, seed=1).items("test")
    large = get_task("arithmetic", n_items=40, n_train=900, seed=1).items("test")
    assert small == large


def test_arithmetic_test_items_stable_in_the_sampled_regime():
    # max_value=99 has ~10^6 problems: items come from rejection sampling, not enumeration
    a = get_task("arithmetic", n_items=20, n_train=30, max_value=99, seed=2).items("test")
    b = get_task("arithmetic", n_items=20, n_train=5000, max_value=99, seed=2).items("test")
    assert a == b


def test_arithmetic_solutions_are_correct_arithmetic():
    task = get_task("arithmetic", n_items=200, n_train=10, n_steps=3, max_value=12, seed=5)
    for item in task.items("test"):
        numbers = [int(n) for n in re.findall(r"\d+", item.prompt)]
        lines = item.solution.split("\n")
        assert len(lines) == 4 and lines[-1] == f"#### {item.answer}"
        value = numbers[0]
        for line, operand in zip(lines[:-1], numbers[1:]):
            m = re.fullmatch(r"(\d+)([+-])(\d+)=(\d+)", line)
            assert m is not None, line
            a, op, b, c = int(m[1]), m[2], int(m[3]), int(m[4])
            assert a == value and b == operand and 0 <= b <= 12
            value = a + b if op == "+" else a - b
            assert c == value >= 0
        assert str(value) == item.answer
        assert task.score(item, item.solution)


def test_arithmetic_without_work_and_single_operation():
    task = get_task("arithmetic", n_items=10, n_train=10, n_steps=1, operations="+",
                    show_work=False)
    for item in task.items("test"):
        a, b = (int(n) for n in re.findall(r"\d+", item.prompt))
        assert item.solution == f"#### {a + b}" == task.target(item)


def test_problem_count_matches_enumeration():
    for max_value, n_steps, ops in [(3, 1, "+-"), (4, 2, "+-"), (5, 2, "-"), (2, 3, "+")]:
        problems = _enumerate(max_value, n_steps, ops)
        assert len(problems) == len(set(problems)) == _count_problems(max_value, n_steps, ops)
    # by hand: max 2, one step, "+-": 3 starts × 3 additions + (1 + 2 + 3) subtractions
    assert _count_problems(2, 1, "+-") == 15


def test_arithmetic_vocabulary_words_appear_in_prompts():
    task = get_task("arithmetic", n_items=100, n_train=10)
    text = " ".join(i.prompt for i in task.items("test"))
    assert "####" in task.vocabulary()
    assert sum(word in text for word in task.vocabulary()) >= 10


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"n_items": -3}, r"`n_items` must be an integer >= 1, got -3\."),
        ({"n_items": 2.5}, r"`n_items` must be an integer >= 1, got 2\.5\."),
        ({"seed": True}, r"`seed` must be an integer >= 0, got True\."),
        ({"operations": "*"}, r"`operations` must be a non-empty string of '\+' and '-'"),
        ({"show_work": "yes"}, r"`show_work` must be true or false, got 'yes'\."),
        ({"n_steps": 7}, r"`n_steps` must be at most 6, got 7\."),
        ({"n_item": 5}, r"unknown parameter 'n_item' for task 'arithmetic' "
                        r"\(did you mean 'n_items'\?\)"),
        ({"max_value": 2, "n_steps": 1}, r"`n_items` \+ `n_train` must be at most 15"),
    ],
)
def test_arithmetic_parameter_errors(params, message):
    with pytest.raises(InputError, match=message):
        get_task("arithmetic", **params)


def test_unknown_task_and_split():
    with pytest.raises(InputError, match=r"unknown task 'arithmetc' \(did you mean 'arithmetic'\?\)"):
        get_task("arithmetc")
    with pytest.raises(InputError, match=r"`split` must be one of \['train', 'test'\], got 'dev'"):
        get_task("arithmetic", n_items=5, n_train=5).items("dev")


# --------------------------------------------------------------------------- scorer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,234", "1234"), ("+5", "5"), ("-0", "0"), ("-17", "-17"), ("3.50", "3.5"),
        ("7.0", "7"), ("$12", "12"), ("0012", "12"), (".5", "0.5"), ("abc", None), ("", None),
    ],
)
def test_normalize_number(text, expected):
    assert normalize_number(text) == expected


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("2+3=5\n#### 5", "5"),
        ("#### 1,234", "1234"),
        ("#### -5", "-5"),
        ("####+5", "5"),
        ("#### $18", "18"),
        ("#### 72 apples", "72"),
        ("#### 4\n#### 9", "9"),   # the last final answer counts
        ("5.0 is it #### 5.0", "5"),
        ("the answer is 5", None),  # no "####": no final answer
        ("#### five", None),
        ("", None),
    ],
)
def test_extract_answer(completion, expected):
    assert extract_answer(completion) == expected


def test_score_is_exact_match_on_the_final_answer():
    task = get_task("arithmetic", n_items=5, n_train=5)
    item = Item("x", "p", answer="55")
    assert task.score(item, "#### 55")
    assert task.score(item, "50+5=55\n#### 55<pad>")
    assert not task.score(item, "#### 5")
    assert not task.score(item, "#### 555")
    assert not task.score(item, "55")  # the number must follow ####
    assert not task.score(Item("y", "p", answer="-3"), "#### 3")


# --------------------------------------------------------------------------- gsm8k

_RECORDS = [
    {"question": "Natalia sold clips to 48 friends, then half as many. How many?",
     "answer": "48/2 = <<48/2=24>>24\n48+24 = <<48+24=72>>72\n#### 72", "uid": "a7"},
    {"question": "Weng earns $12 an hour. How much for 50 minutes?",
     "answer": "12/60 = 0.2 per minute\n0.2*50 = 10\n#### 10", "uid": "b3"},
    {"question": "A shop sells 1,200 pens. How many remain after selling 1,250?",
     "answer": "1,200 - 1,250 = -50\n#### -50", "uid": "c1"},
    {"question": "Big numbers?", "answer": "#### 1,000,000", "uid": "d9"},
]


def _write(path, records):
    if path.suffix == ".jsonl":
        path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    elif path.suffix == ".parquet":
        pd.DataFrame(records).to_parquet(path)
    else:
        pd.DataFrame(records).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet", ".csv"])
def test_gsm8k_loads_each_format(tmp_path, suffix):
    path = _write(tmp_path / f"test{suffix}", _RECORDS)
    task = get_task("gsm8k", path=str(path))
    items = task.items("test")
    assert [i.item_id for i in items] == [f"gsm8k-test-{k:05d}" for k in range(4)]
    assert [i.answer for i in items] == ["72", "10", "-50", "1000000"]
    assert items[0].prompt == f"Question: {_RECORDS[0]['question']}\nAnswer: "
    assert items[0].solution == _RECORDS[0]["answer"] == task.target(items[0])
    assert task.score(items[2], "so -50 remain\n#### -50")
    assert task.score(items[3], "#### 1000000")
    assert not task.score(items[0], "#### 24")


def test_gsm8k_id_column_train_split_and_n_items(tmp_path):
    test = _write(tmp_path / "test.jsonl", _RECORDS)
    train = _write(tmp_path / "train.parquet", _RECORDS[:2])
    task = get_task("gsm8k", path=test, train_path=train, id_column="uid", n_items=3,
                    prompt_template="Q: {question}\nA:")
    assert [i.item_id for i in task.items("test")] == ["a7", "b3", "c1"]
    assert [i.item_id for i in task.items("train")] == ["a7", "b3"]
    assert task.items("test")[0].prompt.startswith("Q: Natalia")
    assert "Natalia" in task.vocabulary()


def test_gsm8k_errors(tmp_path):
    good = _write(tmp_path / "ok.jsonl", _RECORDS)
    with pytest.raises(InputError, match=r"task 'gsm8k' needs `path`"):
        get_task("gsm8k")
    with pytest.raises(InputError, match=r"`path`: no such file"):
        get_task("gsm8k", path=tmp_path / "missing.jsonl").items("test")
    with pytest.raises(InputError, match=r"has no train split: set `train_path`"):
        get_task("gsm8k", path=good).items("train")
    bad = _write(tmp_path / "bad.jsonl", [{"question": "q", "answer": "no final line"}])
    with pytest.raises(InputError, match=r"row 0: answer has no final '#### <number>'"):
        get_task("gsm8k", path=bad).items("test")
    missing = _write(tmp_path / "missing_field.jsonl", [{"question": "q"}])
    with pytest.raises(InputError, match=r"row 0: missing field 'answer'"):
        get_task("gsm8k", path=missing).items("test")
    dup = _write(tmp_path / "dup.csv", [_RECORDS[0], _RECORDS[0]])
    with pytest.raises(InputError, match=r"row 1: duplicate item id 'a7'"):
        get_task("gsm8k", path=dup, id_column="uid").items("test")
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(InputError, match=r"must be a .jsonl, .json, .parquet or .csv file"):
        get_task("gsm8k", path=tmp_path / "x.txt").items("test")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"question": "q", "answer": "#### 1"}\n{not json\n')
    with pytest.raises(InputError, match=r"line 2: invalid JSON"):
        get_task("gsm8k", path=broken).items("test")
    with pytest.raises(InputError, match=r"`prompt_template` must contain '\{question\}'"):
        get_task("gsm8k", path=good, prompt_template="Q:")
    with pytest.raises(InputError, match=r"unknown parameter 'id_col' .*did you mean 'id_column'"):
        get_task("gsm8k", path=good, id_col="uid")
