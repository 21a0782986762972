"""ParameterError: messages that name parameters apart from their wording."""

from __future__ import annotations

import pickle

import pytest

from robuststats import _validation as iv
from robuststats.errors import InputError
from robuststats.stats import (
    ParameterError,
    TooFewSeedsError,
    UnreachablePowerError,
    power_gate,
    power_mcnemar,
    power_seeds,
)
from robuststats.stats import _parameters as named


def test_spelled_renames_only_the_parameters() -> None:
    error = ParameterError("{baseline} + {effect} = {total:g}, not {given!r}.",
                           ["baseline", "effect"], total=1.02, given="{effect}")
    assert isinstance(error, InputError)
    assert str(error) == "`baseline` + `effect` = 1.02, not '{effect}'."
    assert error.spelled({"effect": "--effect"}) == "`baseline` + `--effect` = 1.02, not '{effect}'."


@pytest.mark.parametrize("check, args", [
    ("check_probability", (1.5, "alpha")),
    ("check_int", (0, "n", {"low": 1})),
    ("check_number", (float("nan"), "seed_sd")),
    ("check_choice", ("exakt", "method", ("exact", "midp"))),
    ("check_confidence_level", (3.0,)),
    ("as_outcomes", ([0, 0.5], "x", {"binary": True})),
])
def test_the_checkers_say_the_same_and_name_the_parameter(check, args) -> None:
    kwargs = args[-1] if isinstance(args[-1], dict) else {}
    args = args[:-1] if kwargs else args
    with pytest.raises(InputError) as plain:
        getattr(iv, check)(*args, **kwargs)
    with pytest.raises(ParameterError) as wrapped:
        getattr(named, check)(*args, **kwargs)
    assert str(wrapped.value) == str(plain.value)
    (name,) = wrapped.value.parameters
    assert wrapped.value.spelled({name: "--flag"}) == str(plain.value).replace(
        f"`{name}`", "`--flag`", 1)


def test_a_name_that_is_no_field_keeps_the_message() -> None:
    error = ParameterError.about("fixed['e']", " must be > 0.")
    assert str(error) == "`fixed['e']` must be > 0." and error.parameters == ()


def test_errors_pickle_with_their_fields() -> None:
    error = UnreachablePowerError("{reason}; raise {n_seeds}.", ["n_seeds"], reason="capped")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is UnreachablePowerError and str(again) == str(error)
    assert again.reason == "capped" and again.spelled({"n_seeds": "--seeds"}) == (
        "capped; raise `--seeds`.")


def test_the_planners_raise_parameter_errors() -> None:
    with pytest.raises(ParameterError, match=r"^impossible: `baseline` \+ `effect`") as info:
        power_mcnemar(0.03, power=0.8, discordance=0.1, baseline=0.99)
    assert info.value.parameters == ("baseline", "effect")
    with pytest.raises(TooFewSeedsError) as few:
        power_seeds(0.03, None, 2, 0.8, discordance=0.2, seed_sd=0.03)
    assert isinstance(few.value, UnreachablePowerError)
    assert few.value.spelled({"seed_sd": "--seed-sd"}).startswith("with `--seed-sd` = 0.03, ")
    with pytest.raises(UnreachablePowerError) as gate:
        power_gate(0.3, None, 3, 0.8, seed_sd=0.12, resid_sd=0.7)
    assert gate.value.reason == str(gate.value).split(";")[0]
