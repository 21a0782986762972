"""Final answers of free-form math completions: ``#### N``, ``\\boxed{N}``, "The answer is N".

GSM8K's reference solutions end in ``#### N`` (Cobbe et al. 2021, arXiv:2110.14168);
instruction-tuned and RL-trained models (Qwen2.5, verl's GSM8K reward) write
``\\boxed{N}`` or "The answer is N"; lm-evaluation-harness' ``gsm8k`` task reads "The answer
is N" (``strict-match``) or the last number (``flexible-extract``). One function reads
them all, with an explicit rule for which wins:

============  ===============================================================================
``strict``    the number after the last ``####`` (GSM8K's own format; the default of the
              generated tasks)
``auto``      the last ``####``; else the last ``\\boxed{...}``; else the last "answer is N"
              ("The answer is", "final answer:", "Answer:"); else nothing
``last``      as ``auto``, and else the last number of the completion (lm-eval's
              ``flexible-extract``; generous: a stray number counts)
============  ===============================================================================

Numbers are normalized by :func:`robuststats.models.tasks.normalize_number`: thousands
separators (``1,234``), currency and units (``$18``, ``18 dollars``, ``5%``, ``\\$``),
signs (``-3``, ``−3`` with U+2212), decimals (``2.50`` = ``2.5``, ``5.0`` = ``5``), and a
simple LaTeX fraction in a box (``\\frac{3}{4}`` = ``0.75``, when exact) all compare equal
to GSM8K's integer answers. Torch-free.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from robuststats.errors import InputError

__all__ = ["EXTRACTION_MODES", "extract_final_answer", "stop_after_answer"]

#: accepted ``answer_extraction`` values, strictest first
EXTRACTION_MODES = ("strict", "auto", "last")

# a number as written in answers: sign, currency, thousands separators, decimals
_NUMBER = r"[-+−]?\s*\\?\$?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+−]?\.\d+"
_NUMBER_RE = re.compile(_NUMBER)
_HASH = re.compile(r"####\s*(?:\\?\$\s*)?(" + _NUMBER + ")")
_PHRASE = re.compile(
    r"(?:the\s+(?:final\s+)?answer\s+is|final\s+answer\s*(?:is)?|answer\s*(?:is)?)\s*[:=]?\s*"
    r"(?:\*\*|\$|\\\(|\\\[|\s)*(?:\\boxed\{)?\s*(" + _NUMBER + ")",
    re.IGNORECASE)
_FRACTION = re.compile(r"^\\[dt]?frac\{\s*(-?\d+)\s*\}\{\s*(\d+)\s*\}$")
#: a finished "#### N": the number is followed by something that cannot continue it
_ANSWER_END = re.compile(r"####[ \t]*(?:\\?\$[ \t]*)?[-+−]?[\d,]*\.?\d+(?=[^\d,.]|[,.][^\d])")


def extract_final_answer(completion: str, *, mode: str = "auto") -> str | None:
    """The normalized final answer of ``completion``, or ``None`` when it has none.

    ``mode`` is ``"strict"``, ``"auto"`` or ``"last"`` (module docstring). The result is a
    canonical number string (``"1234"``, ``"-3"``, ``"2.5"``) to compare exactly.
    """
    if mode not in EXTRACTION_MODES:
        raise InputError(f"`answer_extraction` must be one of {', '.join(map(repr, EXTRACTION_MODES))}, "
                         f"got {mode!r}.")
    if not isinstance(completion, str):
        raise InputError(f"`completion` must be a string, got {type(completion).__name__}.")
    found = _last(_HASH, completion)
    if found is not None or mode == "strict":
        return _number(found)
    boxed = _last_boxed(completion)
    if boxed is not None:
        value = _boxed_number(boxed)
        if value is not None:
            return value
    found = _last(_PHRASE, completion)
    if found is not None:
        return _number(found)
    if mode == "last":
        matches = _NUMBER_RE.findall(completion)
        for candidate in reversed(matches):
            value = _number(candidate)
            if value is not None:
                return value
    return None


def stop_after_answer(text: str) -> int | None:
    """Where a completion's ``#### N`` answer ends (an index into ``text``), or ``None``.

    Generation stops a row there: the number is complete once a character follows it that
    cannot continue it (``"#### 12\\n"``, ``"#### 12."`` + space; not ``"#### 1"``, which
    may become ``"#### 12"``).
    """
    match = _ANSWER_END.search(text)
    return None if match is None else match.end()


def _last(pattern: re.Pattern[str], text: str) -> str | None:
    matches = pattern.findall(text)
    return matches[-1] if matches else None


def normalize_number(text: str) -> str | None:
    # the tasks' normalization (imported here: the tasks package imports this module)
    from robuststats.models.tasks._base import normalize_number as normalize

    return normalize(text)


def _number(text: str | None) -> str | None:
    if text is None:
        return None
    cleaned = text.replace("−", "-").replace("\\$", "").replace("$", "")
    return normalize_number(re.sub(r"\s+", "", cleaned))


def _last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), braces balanced."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth, begin = 1, i
    while i < len(text):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[begin:i]
        i += 1
    return None  # unbalanced: the completion was cut inside the box


def _boxed_number(content: str) -> str | None:
    content = content.strip()
    content = re.sub(r"\\(?:text|mathrm|textbf)\{[^{}]*\}", "", content)  # units
    content = re.sub(r"\\[,!;: ]|~", "", content)  # LaTeX spacing (1\,234)
    content = content.replace("{,}", ",").replace("\\%", "").replace("%", "").strip()
    fraction = _FRACTION.match(content)
    if fraction:
        num, den = int(fraction.group(1)), int(fraction.group(2))
        if den == 0:
            return None
        try:
            return normalize_number(str(Decimal(num) / Decimal(den))) \
                if _terminates(den) else None
        except InvalidOperation:
            return None
    match = _NUMBER_RE.search(content)
    return _number(match.group(0)) if match else None


def _terminates(den: int) -> bool:
    """A fraction with this denominator has a finite decimal expansion."""
    for p in (2, 5):
        while den % p == 0:
            den //= p
    return den == 1
