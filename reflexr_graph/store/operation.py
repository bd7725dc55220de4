"""One store operation, written once as a sans-IO function of its concern module, and a method of
``RedisStore``: the descriptor behind the store's table of operations (``store/redis_store.py``).

A concern module (``reads.py``, ``recovery.py``...) writes each operation as a function that
takes the store's settings (``store/settings.py``) and the call's arguments and returns an
``Op[T]`` (``store/ops.py``): it builds keys and arguments, yields its requests and parses their
replies, doing no I/O. :func:`store_operation` makes it a method of the store, which runs it
through the store's executor (``StoreBase.do``, whose ``handle`` translates errors), named as the table
names it, documented, signed and typed as the function is: ``help(RedisStore.get)``,
``inspect.signature`` and type checkers read the method. :func:`plain_operation` does the same
for an operation that reads no setting.

The signature helpers here serve the client's operation table too (``client/operation.py``):
the client imports the store, not the reverse, so they live below both.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator
from types import MethodType
from typing import (
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    TypeVar,
    get_args,
    get_origin,
    get_type_hints,
    overload,
)

from reflexr_graph.store.base import StoreBase
from reflexr_graph.store.ops import Op
from reflexr_graph.store.settings import StoreSettings

P = ParamSpec("P")
T = TypeVar("T")


class StoreOperation(Generic[P, T]):
    """A method of the store: ``Callable[P, T]`` on a store, running the operation ``build`` makes
    from the store's settings and the call's arguments."""

    def __init__(
        self, build: Callable[Concatenate[StoreSettings, P], Op[T]], signature: inspect.Signature
    ) -> None:
        self.build = build
        self.method = described(_run(build), build, signature)

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.method.__name__, self.method.__qualname__ = name, f"{owner.__qualname__}.{name}"

    @overload
    def __get__(self, store: None, owner: type[Any]) -> Callable[Concatenate[StoreBase, P], T]: ...
    @overload
    def __get__(self, store: StoreBase, owner: type[Any] | None = None) -> Callable[P, T]: ...

    def __get__(self, store: StoreBase | None, owner: type[Any] | None = None) -> Callable[..., T]:
        return self.method if store is None else MethodType(self.method, store)


def store_operation(build: Callable[Concatenate[StoreSettings, P], Op[T]]) -> StoreOperation[P, T]:
    """A method of the store that runs ``build(store's settings, *args, **kwargs)``; its parameters
    are ``build``'s after the settings."""
    params = list(signature_of(build, op_result).parameters.values())[1:]
    return StoreOperation(build, _as_method(signature_of(build, op_result), params))


def plain_operation(build: Callable[P, Op[T]]) -> StoreOperation[P, T]:
    """A method of the store that runs ``build(*args, **kwargs)``, an operation that reads no setting
    (one the clients run too); its parameters are ``build``'s."""

    def with_settings(_store: StoreSettings, /, *args: P.args, **kwargs: P.kwargs) -> Op[T]:
        return build(*args, **kwargs)

    signature = signature_of(build, op_result)
    made: StoreOperation[P, T] = StoreOperation(
        with_settings, _as_method(signature, signature.parameters.values())
    )
    made.method.__doc__, made.method.__module__ = build.__doc__, build.__module__
    return made


def _run(build: Callable[Concatenate[StoreSettings, P], Op[T]]) -> Callable[Concatenate[StoreBase, P], T]:
    # Not wrapped in translate_errors: ``do`` samples the clock before the operation runs, and its
    # ``handle`` translates each request's Redis errors (then thrown into the operation), so a
    # second translation and clock check around the whole call would only repeat them.
    def method(store: StoreBase, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return store.do(build(store, *args, **kwargs))

    return method


def _as_method(signature: inspect.Signature, params: Any) -> inspect.Signature:
    """``signature`` with ``params``, after ``self``: a method's."""
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return signature.replace(parameters=[this, *params])


def signature_of(build: Callable[..., Any], result: Callable[[object], object]) -> inspect.Signature:
    """``build``'s signature, resolved in its module (where its names are), returning ``result`` of
    its return hint: for an operation's builder, what its operation returns (``Op[RunInfo]`` reads
    ``RunInfo``: :func:`op_result`)."""
    hints = get_type_hints(build)
    params = [
        p.replace(annotation=hints.get(p.name, p.empty)) for p in inspect.signature(build).parameters.values()
    ]
    return inspect.Signature(params, return_annotation=result(hints["return"]))


def described(
    method: Callable[..., Any], build: Callable[..., Any], signature: inspect.Signature
) -> Callable[..., Any]:
    """``method`` named, documented and signed as ``build``: for help(), inspect and
    ``typing.get_type_hints``."""
    method.__name__, method.__qualname__ = build.__name__, build.__qualname__
    method.__module__, method.__doc__ = build.__module__, build.__doc__
    method.__signature__ = signature  # type: ignore[attr-defined]
    hints = {p.name: p.annotation for p in signature.parameters.values() if p.annotation is not p.empty}
    method.__annotations__ = {**hints, "return": signature.return_annotation}
    return method


def op_result(hint: object) -> object:
    """``T`` of an ``Op[T]`` hint."""
    if get_origin(hint) is Generator:
        result = get_args(hint)[2]
        return None if result is type(None) else result  # signed ``-> None``, as written
    raise TypeError(f"an operation's builder returns Op[T], not {hint!r}")
