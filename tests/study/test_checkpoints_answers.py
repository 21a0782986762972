"""Final-answer extraction on the formats real completions use (issue 12, item 1)."""

from __future__ import annotations

import pytest

from robuststats.errors import InputError
from robuststats.models.answers import extract_final_answer, stop_after_answer

# (completion, auto, strict): formats seen in GSM8K references, Qwen2.5-Instruct / Math,
# verl-trained GSM8K models, and lm-eval's 8-shot chain-of-thought prompts
FORMATS = [
    ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72", "72", "72"),
    ("#### 1,234", "1234", "1234"),
    ("She earns $10 an hour.\n#### $ 600", "600", "600"),
    ("#### -3", "-3", "-3"),
    ("#### 2.50", "2.5", "2.5"),
    ("#### 5.0\n", "5", "5"),
    ("#### 12 dollars", "12", "12"),
    ("first #### 3 then corrected #### 4", "4", "4"),
    ("The answer is 18.", "18", None),
    ("So the total is 3 + 15 = 18. The answer is $18.", "18", None),
    ("Therefore, the final answer is: $\\boxed{1,000}$", "1000", None),
    ("The final answer is \\boxed{18}.", "18", None),
    ("\\[\n\\boxed{42}\n\\]", "42", None),
    ("\\boxed{\\$18}", "18", None),
    ("\\boxed{18 \\text{ dollars}}", "18", None),
    ("\\boxed{1\\,234}", "1234", None),
    ("\\boxed{1{,}234}", "1234", None),
    ("\\boxed{-7}", "-7", None),
    ("\\boxed{−7}", "-7", None),  # U+2212 minus
    ("\\boxed{12.50}", "12.5", None),
    ("\\boxed{25\\%}", "25", None),
    ("\\boxed{\\frac{3}{4}}", "0.75", None),
    ("\\boxed{\\dfrac{1}{3}}", None, None),  # no exact decimal: not a GSM8K answer
    ("first \\boxed{3}, on reflection \\boxed{5}", "5", None),
    ("**Answer:** 36", "36", None),
    ("Final Answer: 7", "7", None),
    ("answer is -0.5", "-0.5", None),
    ("The answer is 1,234,567 apples.", "1234567", None),
    ("She has 5 apples and eats 2, leaving 3.", None, None),  # no marked answer
    ("\\boxed{18", None, None),  # cut inside the box: nothing
    ("", None, None),
    ("The answer is x.", None, None),
]


@pytest.mark.parametrize(("completion", "auto", "strict"), FORMATS)
def test_formats(completion, auto, strict):
    assert extract_final_answer(completion) == auto
    assert extract_final_answer(completion, mode="strict") == strict


def test_hash_answer_wins_over_box_and_phrase():
    text = "The answer is 3. \\boxed{4}\n#### 5"
    assert extract_final_answer(text) == "5"
    assert extract_final_answer("The answer is 3. \\boxed{4}") == "4"


@pytest.mark.parametrize(("completion", "expected"), [
    ("She has 5 apples and eats 2, leaving 3.", "3"),
    ("total: $1,200.00 per month", "1200"),
    ("no numbers here", None),
    ("The answer is 9, not 10", "9"),  # a marked answer wins over the last number
])
def test_last_number_mode(completion, expected):
    assert extract_final_answer(completion, mode="last") == expected


def test_bad_mode_is_named():
    with pytest.raises(InputError, match=r"`answer_extraction` must be one of 'strict', "
                                         r"'auto', 'last', got 'loose'\."):
        extract_final_answer("#### 1", mode="loose")


@pytest.mark.parametrize(("text", "end"), [
    ("18 = 18\n#### 18\n", 15),
    ("#### 1,234.\nQuestion", 10),
    ("#### 5 apples", 6),
    ("#### -3.5)", 9),
    ("#### 1", None),       # may continue: "#### 12"
    ("#### 1,", None),      # may continue: "#### 1,234"
    ("#### 1.", None),      # may continue: "#### 1.5"
    ("no answer yet", None),
])
def test_stop_after_answer(text, end):
    assert stop_after_answer(text) == end
