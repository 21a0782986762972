"""Errors that name the parameters they are about, for callers that spell them otherwise.

Every message about a bad argument names the parameter in backticks, the form of
:mod:`robuststats._validation` (``\\`alpha\\` must be a number in (0, 1), got 0.0.``). A
:class:`ParameterError` keeps those names apart from the wording: ``str(error)`` spells each
parameter as the function that raised it does, :meth:`ParameterError.spelled` as a caller
exposes it. ``robuststats power`` prints ``\\`--alpha\\` must be ...`` from the same error,
without rewriting the message.

The checkers below are those of :mod:`robuststats._validation` (the checks and their
wording live there), raising a :class:`ParameterError` that names the checked parameter;
the power planners and the pilot estimates validate through them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from robuststats import _validation
from robuststats.errors import InputError

__all__ = [
    "ParameterError",
    "as_float_array",
    "as_outcomes",
    "check_choice",
    "check_confidence_level",
    "check_int",
    "check_number",
    "check_probability",
]

T = TypeVar("T")


class ParameterError(InputError):
    """An :class:`~robuststats.errors.InputError` whose message names parameters.

    ``template`` is a :meth:`str.format` string: its fields listed in ``parameters`` are the
    parameters the message names (each printed in backticks), the other fields are the
    ``values`` it quotes.

    >>> error = ParameterError("{baseline} + {effect} = {total:g} is not an accuracy.",
    ...                        ["baseline", "effect"], total=1.02)
    >>> str(error)
    '`baseline` + `effect` = 1.02 is not an accuracy.'
    >>> error.spelled({"effect": "--effect"})
    '`baseline` + `--effect` = 1.02 is not an accuracy.'
    """

    def __init__(self, template: str, parameters: Iterable[str] = (), /, **values: Any) -> None:
        self.template = template
        self.parameters = tuple(parameters)
        self.values = values
        super().__init__(self.spelled({}))

    @classmethod
    def about(cls, parameter: str, rest: str) -> ParameterError:
        """The message ``\\`parameter\\``` followed by ``rest``: the checkers' one form."""
        if not parameter.isidentifier():  # e.g. "fixed['e']": not a template field
            return cls("{_message}", _message=f"`{parameter}`{rest}")
        return cls("{" + parameter + "}{_rest}", [parameter], _rest=rest)

    def spelled(self, names: Mapping[str, str]) -> str:
        """The message with each parameter ``p`` spelled ``names.get(p, p)``, in backticks."""
        fields = {p: f"`{names.get(p, p)}`" for p in self.parameters}
        return self.template.format(**self.values, **fields)

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), dict(self.__dict__))


def _rebuild(cls: type[ParameterError], state: dict[str, Any]) -> ParameterError:
    """Unpickle a :class:`ParameterError` (its constructor does not take the message)."""
    error = cls.__new__(cls)
    error.__dict__.update(state)
    error.args = (error.spelled({}),)
    return error


def _naming(check: Callable[..., T]) -> Callable[..., T]:
    """``check`` raising a :class:`ParameterError` about the parameter it checks."""
    default = inspect.signature(check).parameters["name"].default

    @functools.wraps(check)
    def checked(value: Any, *args: Any, **kwargs: Any) -> T:
        try:
            return check(value, *args, **kwargs)
        except InputError as exc:
            name = args[0] if args else kwargs.get("name", default)
            message, head = str(exc), f"`{name}`"
            if not message.startswith(head):
                raise
            raise ParameterError.about(name, message[len(head):]) from None

    return checked


as_float_array = _naming(_validation.as_float_array)
as_outcomes = _naming(_validation.as_outcomes)
check_choice = _naming(_validation.check_choice)
check_confidence_level = _naming(_validation.check_confidence_level)
check_int = _naming(_validation.check_int)
check_number = _naming(_validation.check_number)
check_probability = _naming(_validation.check_probability)
