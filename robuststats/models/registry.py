"""One registry by name for the study's extension points (tasks, trainers).

A name is either registered (``arithmetic``, ``builtin``) or a ``package.module:attr``
reference to a user's factory: a class or a function called with the study file's
``params``. Unknown names and attributes are answered with "did you mean ...?"::

    TASKS = Registry("task")

    @TASKS.register("arithmetic")
    class ArithmeticTask(Task): ...

    TASKS.build("arithmetc")        # InputError: unknown task 'arithmetc' (did you mean
                                    # 'arithmetic'?); available: arithmetic, gsm8k.
    TASKS.build("mypkg.tasks:make_task", n=40)
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from robuststats.errors import InputError, closest_match, did_you_mean

__all__ = ["ParamsSpec", "Registry", "is_reference", "resolve_params"]

T = TypeVar("T")

#: parameter name -> (validator(key, value) -> value, default), as declared by a task or
#: trainer class in ``params_spec``
ParamsSpec = Mapping[str, tuple[Callable[[str, Any], Any], Any]]


def resolve_params(kind: str, name: str, spec: ParamsSpec,
                   params: Mapping[str, Any]) -> dict[str, Any]:
    """Every declared parameter, validated when given and defaulted otherwise.

    Unknown keys are :class:`InputError` with a "did you mean" and the accepted names:
    ``unknown parameter 'step' for trainer 'builtin' (did you mean 'steps'?); accepted:
    ...``.
    """
    for key in params:
        if key not in spec:
            raise InputError(f"unknown parameter {key!r} for {kind} {name!r}"
                             f"{did_you_mean(key, spec)}; "
                             f"accepted: {', '.join(sorted(spec))}.")
    return {key: (check(key, params[key]) if key in params else default)
            for key, (check, default) in spec.items()}


def is_reference(name: str) -> bool:
    """True for a ``package.module:attr`` reference (a user's factory, not a registered name)."""
    return ":" in name


def _load(reference: str) -> Callable[..., Any]:
    module_name, _, attr = reference.partition(":")
    if not module_name or not attr:
        raise InputError(f"cannot load {reference!r}: a reference looks like "
                         "'package.module:factory'.")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"cannot load {reference!r}: {exc}") from None
    factory = getattr(module, attr, None)
    if factory is None:
        close = closest_match(attr, [n for n in dir(module) if not n.startswith("_")])
        hint = f" (did you mean '{module_name}:{close}'?)" if close else ""
        raise InputError(f"cannot load {reference!r}: module {module_name!r} has no attribute "
                         f"{attr!r}{hint}.")
    if not callable(factory):
        raise InputError(f"cannot load {reference!r}: {attr!r} is not a class or function, "
                         f"got {type(factory).__name__}.")
    return factory


class Registry(Generic[T]):
    """Factories of one kind of object by name, plus ``module:attr`` references."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Any], Any]:
        """Decorator: register a class (its ``name`` attribute is set) or a function."""

        def decorator(factory: Any) -> Any:
            if name in self._factories and self._factories[name] is not factory:
                raise InputError(f"{self.kind} {name!r} is already registered "
                                 f"({self._factories[name]!r}).")
            if isinstance(factory, type):
                factory.name = name
            self._factories[name] = factory
            return factory

        return decorator

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def factory(self, name: str) -> Callable[..., T]:
        """The class or function ``name`` stands for (imports a ``module:attr`` reference)."""
        if not isinstance(name, str) or not name:
            raise InputError(f"`{self.kind}` name must be a non-empty string, got {name!r}.")
        if is_reference(name):
            return _load(name)
        if name not in self._factories:
            raise InputError(f"unknown {self.kind} {name!r}"
                             f"{did_you_mean(name, self._factories)}; available: "
                             f"{', '.join(self.names())}, or a 'package.module:factory' "
                             "reference.")
        return self._factories[name]

    def build(self, name: str, /, **params: Any) -> T:
        """``factory(name)(**params)``: the object, its parameters validated by its class.

        A user's factory whose signature does not take ``params`` is an :class:`InputError`
        naming it, not a ``TypeError`` from somewhere inside.
        """
        factory = self.factory(name)
        try:
            signature = inspect.signature(factory)
        except (TypeError, ValueError):  # a builtin without a signature: let it decide
            signature = None
        if signature is not None:
            try:
                signature.bind(**params)
            except TypeError as exc:
                raise InputError(f"{self.kind} {name!r} does not take the parameters "
                                 f"{sorted(params)}: {exc}.") from None
        return factory(**params)
