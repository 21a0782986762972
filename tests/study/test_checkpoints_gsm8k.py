"""GSM8K-format prompts (template, chat template, few-shot), scoring and generation stops
(issue 12, items 1 and 4)."""

from __future__ import annotations

import json

import pytest

from robuststats.errors import InputError
from robuststats.models.answers import stop_after_answer
from robuststats.models.generation import generate_greedy
from robuststats.models.model import build_model, build_tokenizer
from robuststats.models.tasks import get_task

ROWS = [
    {"question": "Ann has 3 apples and buys 4. How many?", "answer": "3 + 4 = 7\n#### 7"},
    {"question": "Bo has 10 pens and loses 2. How many?", "answer": "10 - 2 = 8\n#### 8"},
    {"question": "A shirt costs $1,200. Two cost?", "answer": "2 * 1200 = 2400\n#### 2,400"},
]
SHOTS = [{"question": "What is 1 + 1?", "answer": "1 + 1 = 2\n#### 2"},
         {"question": "What is 2 + 2?", "answer": "2 + 2 = 4\n#### 4"}]
CHAT = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}")


@pytest.fixture
def files(tmp_path):
    def jsonl(name, rows):
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        return str(path)

    return {"test": jsonl("test.jsonl", ROWS), "shots": jsonl("shots.jsonl", SHOTS)}


@pytest.fixture(scope="module")
def tiny():
    tokenizer = build_tokenizer(["####", "apples", "How", "many"])
    tokenizer.chat_template = CHAT
    model = build_model(tokenizer, {"hidden_size": 32, "num_layers": 1,
                                    "intermediate_size": 64}, seed=5)
    return model, tokenizer


def test_template_prompt_with_few_shot(files):
    task = get_task("gsm8k", path=files["test"], fewshot_path=files["shots"], n_shot=2)
    item = task.items("test")[0]
    assert item.prompt == ("Question: What is 1 + 1?\nAnswer: 1 + 1 = 2\n#### 2\n\n"
                           "Question: What is 2 + 2?\nAnswer: 2 + 2 = 4\n#### 4\n\n"
                           "Question: Ann has 3 apples and buys 4. How many?\nAnswer: ")
    assert item.answer == "7" and task.items("test")[2].answer == "2400"
    options = task.generation_options()
    assert options["stop_strings"] == ["\nQuestion:"] and options["max_new_tokens"] == 512
    assert options["stop"] is stop_after_answer


def test_chat_prompt_uses_the_models_template(files, tiny):
    _, tokenizer = tiny
    task = get_task("gsm8k", path=files["test"], fewshot_path=files["shots"], n_shot=1,
                    prompt="chat", system_prompt="Reason step by step.")
    item = task.items("test")[1]
    assert item.prompt == "Bo has 10 pens and loses 2. How many?"
    assert task.render_prompt(item, tokenizer) == (
        "<|system|>Reason step by step.\n<|user|>What is 1 + 1?\n"
        "<|assistant|>1 + 1 = 2\n#### 2\n<|user|>Bo has 10 pens and loses 2. How many?\n"
        "<|assistant|>")
    assert task.generation_options()["stop_strings"] == []
    plain = build_tokenizer()
    with pytest.raises(InputError, match=r"`prompt` is 'chat' but the model's tokenizer has "
                                         r"no chat template"):
        task.render_prompt(item, plain)


@pytest.mark.parametrize(("mode", "completion", "correct"), [
    ("auto", "so 3 + 4 = 7. The answer is \\boxed{7}.", True),
    ("auto", "3 + 4 = 7", False),
    ("last", "3 + 4 = 7", True),
    ("strict", "The answer is 7.", False),
    ("strict", "#### 7", True),
])
def test_scoring_follows_answer_extraction(files, mode, completion, correct):
    task = get_task("gsm8k", path=files["test"], answer_extraction=mode)
    assert task.score(task.items("test")[0], completion) is correct


@pytest.mark.parametrize(("params", "message"), [
    ({"prompt": "chatml"}, r"`prompt` must be one of 'template', 'chat', got 'chatml' "
                           r"\(did you mean 'chat'\?\)"),
    ({"n_shot": 2}, r"`n_shot` is 2 but there is no source of examples"),
    ({"n_shot": 65, "train_path": "TEST"}, r"`n_shot` must be an integer in \[0, 64\]"),
    ({"system_prompt": "x"}, r"`system_prompt` needs `prompt: chat`"),
    ({"prompt_template": "Q: {question} {answer}"}, r"may only use the field \{question\}"),
    ({"prompt_template": "Q:"}, r"`prompt_template` must contain '\{question\}'"),
    ({"answer_extraction": "loose"}, r"`answer_extraction` must be one of 'strict', 'auto', "
                                     r"'last'"),
    ({"stop_strings": "\n"}, r"`stop_strings` must be a list of non-empty strings"),
    ({"max_new_tokens": 0}, r"`max_new_tokens` must be an integer >= 1"),
    ({"fewshot_path": "TEST", "n_shot": 1}, r"`fewshot_path` is the test file"),
])
def test_gsm8k_parameter_errors(files, params, message):
    params = {k: files["test"] if v == "TEST" else v for k, v in params.items()}
    with pytest.raises(InputError, match=message):
        get_task("gsm8k", path=files["test"], **params)


def test_too_few_shots_is_named(files):
    task = get_task("gsm8k", path=files["test"], fewshot_path=files["shots"], n_shot=3)
    with pytest.raises(InputError, match=r"`n_shot` is 3 but `fewshot_path` .* has 2 rows"):
        task.items("test")


PROMPTS = ["Ann has 3 apples", "Question: 2 + 2?\nAnswer:", "x", "How many apples? " * 3,
           "#### ", "Bo", "12 + 30 =", "The end."]


def test_stop_strings_cut_exactly_where_the_full_completion_would(tiny):
    model, tokenizer = tiny
    full = generate_greedy(model, tokenizer, PROMPTS, max_new_tokens=24, batch_size=3)
    # a stop string that occurs in some completions (an untrained model writes noise)
    stop = next(c[3:5] for c in full if len(c) >= 5 and c[3:5].strip())
    cut = generate_greedy(model, tokenizer, PROMPTS, max_new_tokens=24, batch_size=3,
                          stop_strings=[stop])
    assert cut == [c[: c.index(stop)] if stop in c else c for c in full]
    assert any(stop in c for c in full)

    def first_digit(text):
        return next((i + 1 for i, ch in enumerate(text) if ch.isdigit()), None)

    by_rule = generate_greedy(model, tokenizer, PROMPTS, max_new_tokens=24, batch_size=3,
                              stop=first_digit)
    assert by_rule == [c[: first_digit(c)] if first_digit(c) else c for c in full]


def test_rows_leave_the_batch_without_changing_completions(tiny):
    model, tokenizer = tiny
    one = generate_greedy(model, tokenizer, PROMPTS, max_new_tokens=16, batch_size=1)
    first = tokenizer(one[0], add_special_tokens=False)["input_ids"][0]
    saved = model.generation_config.eos_token_id
    try:
        # a second end-of-sequence id (as instruct models have): row 0 ends at once, others
        # stop wherever they produce it, and the remaining rows run on in a smaller batch
        model.generation_config.eos_token_id = [tokenizer.eos_token_id, first]
        alone = generate_greedy(model, tokenizer, PROMPTS, max_new_tokens=16, batch_size=1)
        batched = generate_greedy(model, tokenizer, PROMPTS, max_new_tokens=16, batch_size=8)
        unsorted = generate_greedy(model, tokenizer, PROMPTS, max_new_tokens=16, batch_size=3,
                                   sort_by_length=False)
    finally:
        model.generation_config.eos_token_id = saved
    assert alone[0] == "" and alone == batched == unsorted
    token = tokenizer.decode([first])
    assert all(a == (o[: o.index(token)] if token in o else o) for a, o in zip(alone, one))
