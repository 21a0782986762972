"""Fuzz study files: mutations of the shipped E8 studies through ``robuststats study --check``.

Each generated file carries its verdict by construction: a mutation either keeps the study
valid (it must pass ``--check``, exit 0) or breaks one key (it must be refused with exit 2
and one line that names the key and its line), or it is a byte-level accident whose only
promise is the contract (no traceback, no hang, one-line error). ``--check`` validates the
file, the task and the trainer exactly as a run does before its first cell, and trains
nothing, so every case is fast.

The verdicts are written from the documentation (docs/studies.md, "Keys" and "Bounds"),
not from the code under test.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzz_harness import assert_accepted, assert_rejected, check_contract, run_cli
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from robuststats.engine import ALL_OPS, OP_PRESETS
from robuststats.engine import KINDS as ENGINE_KINDS
from robuststats.models.tasks import SPLITS
from robuststats.runs.spec import MULTIPLICITY_CHOICES

ROOT = Path(__file__).resolve().parents[2]
BASES = {name: (ROOT / "studies" / f"{name}.yaml").read_bytes()
         for name in ("e8_matrix", "e8_smoke")}
DOCS = {name: yaml.safe_load(text) for name, text in BASES.items()}

# the registries the documentation points to: the engine's error models and ops, the
# multiplicity methods, the tasks' splits
KINDS = tuple(ENGINE_KINDS)
OPS = (*OP_PRESETS, *ALL_OPS)
MULTIPLICITY = tuple(MULTIPLICITY_CHOICES)
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])


@dataclass(frozen=True)
class Case:
    text: bytes
    verdict: str  # "valid", "invalid" or "any"
    names: tuple[str, ...] = ()  # for "invalid": the error line names one of these
    why: str = ""
    has_line: bool = True  # False: the key is missing at the top level, it has no line


# ---------------------------------------------------------------------- values
# text a study may hold, and text with one control character (docs/studies.md: none but
# tab and line breaks)
printable = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")),
                    max_size=30)
with_control = st.builds(lambda a, c, b: a + c + b, printable,
                         st.sampled_from([chr(i) for i in (*range(0, 9), 11, 12,
                                                           *range(14, 32), 127, 0x85, 0x9B)]),
                         printable)
non_finite = st.sampled_from([math.nan, math.inf, -math.inf])
not_a_number = st.one_of(non_finite, st.just("x"), st.just([1]), st.just({"a": 1}))
not_an_int = st.one_of(non_finite, st.just("3"), st.just(2.5), st.just(True), st.just([1]),
                       st.just({"a": 1}))
not_a_str = st.one_of(st.integers(), non_finite, st.just([1]), st.just({"a": 1}),
                      st.just(True))


def ints(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


def out_of(low: int, high: int) -> st.SearchStrategy[Any]:
    """Integers outside ``[low, high]`` (far outside too) and non-integers."""
    return st.one_of(st.integers(max_value=low - 1).map(lambda v: max(v, -10**30)),
                     st.integers(min_value=high + 1, max_value=10**30), not_an_int)


def other_text(choices: tuple[str, ...]) -> st.SearchStrategy[Any]:
    return st.one_of(printable.filter(lambda s: s not in choices), not_a_str)


def seed_field(max_count: int) -> tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]:
    valid = st.one_of(ints(1, max_count),
                      st.lists(ints(0, 2**32 - 1), min_size=1, max_size=8, unique=True))
    # (a list of seeds is valid here, so not out_of's non-integers)
    invalid = st.one_of(st.integers(max_value=0), st.integers(max_count + 1, 10**30),
                        non_finite, st.sampled_from(["3", 2.5, True, {"a": 1}, [], [3, 3],
                                                     [-1], [2**32], [1, "x"], [True]]))
    return valid, invalid


def unit_open() -> st.SearchStrategy[float]:
    return st.floats(0, 1, exclude_min=True, exclude_max=True)


def extra_levels(doc: dict) -> st.SearchStrategy[list[float]]:
    base = list(doc["evaluation"]["noise_levels"])
    extra = st.lists(st.floats(0, 1, exclude_max=True).filter(lambda x: x not in base),
                     max_size=10, unique=True)
    return extra.flatmap(lambda e: st.permutations(base + e))


# ---------------------------------------------------------------------- slots
# path -> function(doc) returning (valid values, invalid values); "*" in a path is filled
# with a hypothesis index or a noisy condition.
Slot = Callable[[dict], tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]]


def _capacity(doc: dict) -> int:
    from robuststats.models.tasks._arithmetic import _count_problems

    p = doc["task"]["params"]
    return _count_problems(p.get("max_value", 9), p.get("n_steps", 2), "+-")


SLOTS: dict[tuple[str, ...], Slot] = {
    ("name",): lambda d: (st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,40}", fullmatch=True),
                          st.one_of(printable.filter(lambda s: not NAME.fullmatch(s)),
                                    st.just("a" * 101), with_control, not_a_str)),
    ("version",): lambda d: (ints(1, 10**6), out_of(1, 10**6)),
    ("description",): lambda d: (st.one_of(printable, st.just("two\nlines\n")),
                                 st.one_of(with_control, not_a_str)),
    ("seeds",): lambda d: seed_field(1000),
    ("evaluation", "noise_seeds"): lambda d: seed_field(1000),
    ("evaluation", "noise_levels"): lambda d: (
        extra_levels(d),
        st.one_of(st.just([]), st.just([0, 0.05, 0.1, 0.05]),
                  st.sampled_from([math.nan, math.inf, 1.0, 1.5, -0.01, "x"]).map(
                      lambda bad: [0, 0.05, 0.1, bad]), st.just("x"))),
    ("evaluation", "kind"): lambda d: (st.sampled_from(KINDS), other_text(KINDS)),
    ("evaluation", "ops"): lambda d: (st.sampled_from(OPS), other_text(OPS)),
    ("evaluation", "split"): lambda d: (st.sampled_from(SPLITS), other_text(SPLITS)),
    ("evaluation", "n_items"): lambda d: (st.one_of(st.none(), ints(1, 10**6)),
                                         out_of(1, 10**6)),
    ("evaluation", "batch_size"): lambda d: (ints(1, 10**5), out_of(1, 10**5)),
    ("analysis", "alpha"): lambda d: (unit_open(), st.one_of(
        st.sampled_from([0.0, 1.0, -0.5, 2.0]), not_a_number)),
    ("analysis", "confidence_level"): lambda d: (unit_open(), st.one_of(
        st.sampled_from([0.0, 1.0, 1.5]), not_a_number)),
    ("analysis", "n_resamples"): lambda d: (ints(1, 10**8), out_of(1, 10**8)),
    ("analysis", "multiplicity"): lambda d: (st.sampled_from(MULTIPLICITY),
                                             other_text(MULTIPLICITY)),
    ("analysis", "reference"): lambda d: (st.one_of(st.none(), st.sampled_from(
        list(d["conditions"]))), other_text(tuple(d["conditions"]))),
    ("analysis", "mcnemar"): lambda d: (st.sampled_from(["clustered", "mantel-haenszel"]),
                                        other_text(("clustered", "mantel-haenszel"))),
    ("analysis", "rng_seed"): lambda d: (ints(0, 2**32 - 1), out_of(0, 2**32 - 1)),
    ("hypotheses", "*", "margin"): lambda d: (st.floats(0.001, 1e6),
                                              st.one_of(st.floats(max_value=-1e-9),
                                                        not_a_number)),
    ("hypotheses", "*", "id"): lambda d: (
        st.from_regex(r"[A-Za-z][A-Za-z0-9 _\-]{0,20}", fullmatch=True).filter(
            lambda s: s not in {h["id"] for h in d["hypotheses"]}),
        st.one_of(st.just(""), with_control, not_a_str, st.just("a" * 101),
                  st.sampled_from([h["id"] for h in d["hypotheses"]]))),
    ("hypotheses", "*", "metric"): lambda d: (st.nothing(),
                                              other_text(("accuracy", "retention"))),
    ("hypotheses", "*", "relation"): lambda d: (
        st.sampled_from(["greater", "less"]), other_text(("greater", "less", "equivalent"))),
    ("hypotheses", "*", "a"): lambda d: (st.nothing(), other_text(tuple(d["conditions"]))),
    ("hypotheses", "*", "eval_noise"): lambda d: (st.nothing(), st.one_of(
        st.floats(0.2, 0.9),  # none of the shipped levels (0, 0.05, 0.1)
        not_a_number)),
    ("hypotheses", "*", "statement"): lambda d: (printable, st.one_of(with_control,
                                                                      not_a_str)),
    ("conditions", "*", "train_noise", "scale"): lambda d: (
        st.floats(0, 10), st.one_of(st.floats(max_value=-1e-9), not_a_number)),
    ("conditions", "*", "train_noise", "kind"): lambda d: (st.sampled_from(KINDS),
                                                           other_text(KINDS)),
    ("conditions", "*", "train_noise", "phases"): lambda d: (
        st.sampled_from(["forward", "backward", "both"]),
        other_text(("forward", "backward", "both"))),
    ("conditions", "*", "train_noise", "ops"): lambda d: (st.sampled_from(OPS),
                                                          other_text(OPS)),
    ("conditions", "*", "train_noise", "layers"): lambda d: (
        st.one_of(ints(0, 1), st.just("0-1"), st.just([0, 1]), st.just({"window": 2})),
        st.one_of(st.just("0-1000000000"), st.just(-1), st.just({"window": 10**9}),
                  st.just("x"), st.just(10**6), non_finite)),
    ("conditions", "*", "aqn"): lambda d: (
        st.builds(lambda n: {"sigma_start": 0.02, "sigma_end": 0.001, "num_stages": n},
                  ints(2, 10_000)),
        st.one_of(st.builds(lambda n: {"num_stages": n}, out_of(2, 10_000)),
                  st.just({"sigma_start": math.nan}), st.just({"zz_stages": 3}))),
    ("task", "name"): lambda d: (st.just("arithmetic"), st.one_of(
        st.text("abcxyz_", min_size=1).filter(lambda s: s != "arithmetic"), not_a_str)),
    ("task", "params", "max_value"): lambda d: (ints(9, 10_000), out_of(2, 10_000)),
    ("task", "params", "n_items"): lambda d: (
        ints(1, _capacity(d) - d["task"]["params"]["n_train"]), out_of(1, 100_000)),
    ("task", "params", "seed"): lambda d: (ints(0, 2**40), st.one_of(
        st.integers(max_value=-1), not_an_int)),
    ("trainer", "params", "steps"): lambda d: (ints(1, 10**7), out_of(1, 10**7)),
    ("model", "hidden_size"): lambda d: (st.sampled_from([16, 32, 64, 128]),
                                         st.one_of(out_of(1, 16_384), st.just(60))),
    ("model", "num_layers"): lambda d: (ints(1, 8), out_of(1, 256)),
}


def _fill(doc: dict, path: tuple[str, ...], data: st.DataObject) -> tuple[Any, ...]:
    out: list[Any] = []
    for part in path:
        if part == "*" and out == ["hypotheses"]:
            out.append(data.draw(st.integers(0, len(doc["hypotheses"]) - 1)))
        elif part == "*":  # a condition with training noise
            noisy = [c for c, v in doc["conditions"].items() if v.get("train_noise")]
            out.append(data.draw(st.sampled_from(noisy)))
        else:
            out.append(part)
    return tuple(out)


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        if isinstance(doc, dict) and part not in doc:
            doc[part] = {}
        doc = doc[part]
    doc[path[-1]] = value


def _dump(doc: dict) -> bytes:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml when present: faster
    return yaml.dump(doc, Dumper=dumper, allow_unicode=True, sort_keys=False).encode("utf-8")


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


# ---------------------------------------------------------------------- mutations
@st.composite
def slot_cases(draw: st.DrawFn) -> Case:
    """One key set to a documented-valid or a documented-invalid value."""
    data = draw(st.data())
    base = draw(st.sampled_from(sorted(DOCS)))
    doc = copy.deepcopy(DOCS[base])
    slot = draw(st.sampled_from(sorted(SLOTS, key=str)))
    path = _fill(doc, slot, data)
    valid_values, invalid_values = SLOTS[slot](doc)
    want_valid = draw(st.booleans())
    if want_valid and valid_values.is_empty:
        want_valid = False
    value = draw(valid_values if want_valid else invalid_values)
    _set(doc, path, value)
    if want_valid and slot == ("model", "hidden_size"):
        doc["model"]["num_heads"], doc["model"]["num_kv_heads"] = 4, 2
    names = tuple(str(p) for p in path if isinstance(p, str))
    return Case(_dump(doc), "valid" if want_valid else "invalid", names,
                f"{base}: {'.'.join(map(str, path))} = {value!r}")


@st.composite
def structural_cases(draw: st.DrawFn) -> Case:
    """Anywhere in the document: a non-finite number, a control character, a mapping with
    an unknown key, an unknown key added, a required key removed, or an optional one."""
    base = draw(st.sampled_from(sorted(DOCS)))
    doc = copy.deepcopy(DOCS[base])
    path = draw(st.sampled_from(_paths(doc)))
    kind = draw(st.sampled_from(["non_finite", "control", "bogus_mapping", "unknown_key",
                                 "bad_condition_name", "drop_required", "drop_optional"]))
    names = tuple(str(p) for p in path if isinstance(p, str)) or ("<top level>",)
    if kind == "non_finite":
        _set(doc, path, draw(non_finite))
    elif kind == "control":
        _set(doc, path, draw(with_control))
    elif kind == "bogus_mapping":
        _set(doc, path, {"zz_bogus": 1})
        names += ("zz_bogus",)
    elif kind == "bad_condition_name":
        name = draw(st.one_of(with_control, printable.filter(lambda s: not NAME.fullmatch(s)),
                              st.just("E" * 101)))
        doc["conditions"][name] = {"description": "added", "train_noise": None}
        names = ("conditions",)
    elif kind == "unknown_key":
        holders = [p for p in [(), *_paths(doc)] if isinstance(_get(doc, p), dict)]
        holder = draw(st.sampled_from(holders))
        key = "zz_" + draw(st.from_regex(r"[a-z]{1,8}", fullmatch=True))
        _get(doc, holder)[key] = 1
        names = (key,)
    else:
        required = [("name",), ("version",), ("task",), ("conditions",), ("evaluation",),
                    ("evaluation", "noise_levels"), ("task", "name"),
                    *[("hypotheses", i, k) for i in range(len(doc["hypotheses"]))
                      for k in ("id", "metric", "a", "b", "eval_noise", "relation",
                                "margin")]]
        optional = [("description",), ("seeds",), ("analysis",), ("model",), ("trainer",),
                    ("hypotheses",), ("evaluation", "kind"), ("evaluation", "split"),
                    ("evaluation", "n_items"), ("analysis", "reference"),
                    *[("conditions", c, "description") for c in doc["conditions"]],
                    *[("hypotheses", i, "statement") for i in range(len(doc["hypotheses"]))]]
        path = draw(st.sampled_from(required if kind == "drop_required" else optional))
        parent = _get(doc, path[:-1])
        del parent[path[-1]]
        names = tuple(str(p) for p in path if isinstance(p, str))
        return Case(_dump(doc), "invalid" if kind == "drop_required" else "valid", names,
                    f"{base}: {kind} {path}", has_line=len(path) > 1)
    return Case(_dump(doc), "invalid", names, f"{base}: {kind} at {path}")


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


@st.composite
def byte_cases(draw: st.DrawFn) -> Case:
    """Byte-level damage to the file as written: NUL and control bytes, non-UTF-8 bytes,
    alias bombs, deep nesting, duplicate keys; truncation and flips only promise the
    contract."""
    base = draw(st.sampled_from(sorted(BASES)))
    text = BASES[base]
    kind = draw(st.sampled_from(["control", "non_utf8", "bomb", "deep", "duplicate",
                                 "truncate", "flip", "bom_crlf"]))
    at = draw(st.integers(0, len(text)))
    if kind == "control":
        byte = draw(st.sampled_from([*range(0, 9), 11, 12, *range(14, 32), 127]))
        return Case(text[:at] + bytes([byte]) + text[at:], "invalid", ("line",), kind)
    if kind == "non_utf8":
        bad = draw(st.sampled_from([b"\xff", b"\xfe", b"\xc3", b"\x80", b"\xed\xa0\x80"]))
        return Case(text[:at] + bad + text[at:], "invalid", ("not UTF-8",), kind)
    if kind == "bomb":
        fan, depth = draw(st.integers(2, 12)), draw(st.integers(1, 12))
        rows = [f"zz_a0: &a0 [{', '.join(['x'] * fan)}]"]
        rows += [f"zz_a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]"
                 for i in range(1, depth)]
        return Case(("\n".join(rows) + "\n").encode() + text, "invalid", ("line",), kind)
    if kind == "deep":
        k = draw(st.integers(33, 20_000))
        nested = ("[" * k + "]" * k).encode()
        return Case(text.replace(b"model: {}", b"model: " + nested), "invalid",
                    ("nested more than",), kind)
    if kind == "duplicate":
        lines = text.split(b"\n")
        keyed = [i for i, ln in enumerate(lines)
                 if re.match(rb"^\s*[A-Za-z_]\w*:(\s|$)", ln) and not ln.strip().startswith(b"-")
                 and not ln.rstrip().endswith(b":") and not ln.rstrip().endswith(b">")]
        i = draw(st.sampled_from(keyed))
        lines.insert(i + 1, lines[i])
        return Case(b"\n".join(lines), "invalid", ("duplicate key",), kind)
    if kind == "truncate":
        return Case(text[:at], "any", (), kind)
    if kind == "bom_crlf":
        return Case(b"\xef\xbb\xbf" + text.replace(b"\n", b"\r\n"), "valid", (), kind)
    if not text:
        return Case(text, "any", (), kind)
    i = min(at, len(text) - 1)
    return Case(text[:i] + bytes([draw(st.integers(0, 255))]) + text[i + 1:], "any", (), kind)


# ---------------------------------------------------------------------- the tests
@pytest.fixture(scope="module")
def study_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "study.yaml"


def _judge(case: Case, path: Path) -> None:
    path.write_bytes(case.text)
    outcome = run_cli(["study", str(path), "--check"])
    if case.verdict == "valid":
        assert_accepted(outcome)
    elif case.verdict == "invalid":
        line = assert_rejected(outcome, *case.names)
        assert not case.has_line or re.search(r"\(line \d+\)", line), f"no line number in {line!r} ({case.why})"
    else:
        check_contract(outcome)


@SETTINGS
@given(case=slot_cases())
def test_one_key_valid_or_invalid(case: Case, study_path: Path) -> None:
    event(case.verdict)
    _judge(case, study_path)


@SETTINGS
@given(case=structural_cases())
def test_structural_mutations(case: Case, study_path: Path) -> None:
    event(case.verdict)
    _judge(case, study_path)


@settings(SETTINGS, max_examples=60)
@given(case=byte_cases())
def test_byte_level_damage(case: Case, study_path: Path) -> None:
    event(case.verdict)
    _judge(case, study_path)


def test_the_shipped_studies_pass_the_check(study_path: Path) -> None:
    for text in BASES.values():
        _judge(Case(text, "valid"), study_path)


def test_the_judge_can_fail() -> None:
    """The oracle is not vacuous: an accepted file judged invalid fails the judge."""
    path = Path(__import__("tempfile").mkdtemp()) / "study.yaml"
    with pytest.raises(AssertionError, match="accepted an invalid input"):
        _judge(Case(BASES["e8_smoke"], "invalid", ("seeds",)), path)
    with pytest.raises(AssertionError, match="refused a valid input"):
        _judge(Case(b"name: x\n", "valid"), path)
