"""The shared value types (``cli._types``) and options (``cli._options``)."""

from __future__ import annotations

import argparse

import pytest

from robuststats.cli import _options as opts
from robuststats.cli import build_parser
from robuststats.cli._types import (
    alpha,
    checked,
    int_in,
    non_negative_float,
    open_unit,
    positive_int,
    positive_int_up_to,
    workers,
)


@pytest.mark.parametrize(("kind", "text", "value"), [
    (positive_int, "3", 3), (positive_int, " 7 ", 7), (workers, "256", 256),
    (int_in(2, 10), "10", 10), (open_unit, "0.5", 0.5), (alpha, "0.5", 0.5),
    (non_negative_float, "0", 0.0), (positive_int_up_to(1000), "1_000", 1000),
])
def test_a_type_returns_the_converted_value(kind, text, value) -> None:
    assert kind(text) == value


@pytest.mark.parametrize(("kind", "text", "message"), [
    (positive_int, "x", "must be a positive integer, got 'x'"),
    (positive_int, "0", "must be a positive integer, got '0'"),
    (workers, "257", "must be at most 256, got '257'"),
    (positive_int_up_to(10_000), "10001", "must be at most 10,000, got '10001'"),
    (int_in(2, 1 << 20), "1", "must be an integer in [2, 1048576], got '1'"),
    (int_in(2, 1 << 20), "x", "must be an integer in [2, 1048576], got 'x'"),
    (open_unit, "nan", "must be a number in (0, 1), got 'nan'"),
    (alpha, "0.7", "must be a number in (0, 0.5], got '0.7'"),
    (non_negative_float, "x", "must be a number >= 0, got 'x'"),
    (non_negative_float, "inf", "must be a finite number >= 0, got 'inf'"),
])
def test_a_type_refuses_with_its_rule_s_message(kind, text, message) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as exc:
        kind(text)
    assert str(exc.value) == message


def test_rules_apply_in_order() -> None:
    even_and_small = checked(int, ((lambda v: v % 2 == 0), "must be even"),
                             ((lambda v: v < 10), "must be below 10"))
    assert even_and_small("4") == 4
    for text, message in (("3", "must be even"), ("12", "must be below 10"),
                          ("x", "must be even")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            even_and_small(text)


def test_a_shared_option_reads_the_same_in_every_command() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions
                    if isinstance(a, argparse._SubParsersAction)).choices
    helps = {name: {a.dest: a.help for a in sub._actions}
             for name, sub in commands.items()}
    with_progress = [n for n in helps if "no_progress" in helps[n]]
    assert sorted(with_progress) == ["diagnose", "divergence", "gate", "search", "study"]
    assert {helps[n]["no_progress"] for n in with_progress} == {opts.NO_PROGRESS[1]["help"]}
    for name in ("diagnose", "divergence", "search", "study"):
        assert helps[name]["format"] == opts.FORMAT[1]["help"]


def test_groups_keep_the_order_of_their_options() -> None:
    parser = argparse.ArgumentParser(prog="x", add_help=False)
    opts.add_options(parser, [opts.option("--a"), opts.Group("g", "about g", [
        opts.option("--b"), opts.option("--c")]), opts.option("--d")])
    assert parser.format_usage() == "usage: x [--a A] [--b B] [--c C] [--d D]\n"
    assert "g:\n  about g\n\n  --b B\n  --c C" in parser.format_help()


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every (sub)command parser below it."""
    out = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                out += _parsers(sub)
    return out


def test_no_parser_takes_abbreviations() -> None:
    parsers = _parsers(build_parser())
    assert len(parsers) > 12  # the commands and the results actions
    assert all(p.allow_abbrev is False for p in parsers)


@pytest.mark.parametrize(("argv", "line"), [
    # the regression: `--seed 2` was silently taken as `--seeds 2`
    (["study", "studies/e8_smoke.yaml", "--seed", "2", "--check"],
     "robuststats study: error: unrecognized arguments: --seed 2 (did you mean '--seeds'?)"),
    (["study", "studies/e8_smoke.yaml", "--chek"],
     "robuststats study: error: unrecognized arguments: --chek (did you mean '--check'?)"),
    (["results", "diff", "a", "b", "--rtl=1"],
     "robuststats results diff: error: unrecognized arguments: --rtl=1 (did you mean "
     "'--rtol'?)"),
    (["power", "--zzzzzz"], "robuststats power: error: unrecognized arguments: --zzzzzz (see"),
    # a misspelt command or choice: argparse's message, and the nearest choice
    (["stdy"], "robuststats: error: argument COMMAND: invalid choice: 'stdy' (choose from "),
    (["results", "lst"], "robuststats results: error: argument ACTION: invalid choice: 'lst'"),
])
def test_an_unknown_flag_gets_one_line_with_the_nearest_flag(argv, line, capsys) -> None:
    from robuststats.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(line), err
    hint = {"stdy": "study", "lst": "list"}.get(argv[-1])
    if hint:
        assert f"(did you mean '{hint}'?) (see " in err, err
