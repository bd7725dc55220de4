"""One client operation, written once and run by both clients: the descriptor behind their methods.

A method of the operation table (``client/operations.py``) builds a sans-IO operation
(``store/ops.py``) from its arguments; :func:`operation` turns it into an :class:`Operation`,
which reads on ``Client`` as a blocking method and on ``AsyncClient`` as a coroutine method,
each running the operation through that client's ``_do`` with the operation's retry class
(``client/failover.py``). Name, parameters, docstring and retry class are the table's, so the
two clients cannot drift apart, and ``help(Client.get)``, ``inspect.signature`` and type
checkers read the same method on both. How a method is signed and documented from its builder
(``store/operation.py``) is shared with the store's own table of operations.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from types import MethodType
from typing import (
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    Protocol,
    TypeVar,
    get_args,
    get_origin,
    overload,
)

from reflexr_graph.client.core import ClientBase
from reflexr_graph.client.failover import READ, Repeat, keyed
from reflexr_graph.store.operation import described, op_result, signature_of
from reflexr_graph.store.ops import Op
from reflexr_graph.store.settings import StoreOptions

P = ParamSpec("P")
T = TypeVar("T")
F = TypeVar("F", bound="Facade")
S = TypeVar("S", bound="SyncFacade")
A = TypeVar("A", bound="AsyncFacade")


class OperationStore(Protocol):
    """What an operation reads of its client's store besides answering requests: settings."""

    @property
    def options(self) -> StoreOptions: ...

    @property
    def max_block_ms(self) -> int | None: ...


class Facade(ClientBase):
    """A client the table's operations run on: its settings, ``by``, core and store."""

    store: OperationStore


class SyncFacade(Facade):
    """A client that runs an operation to its result, blocking (``Client``)."""

    def _do(self, op: Op[T], repeat: Repeat = READ) -> T:
        """Run ``op`` to its result, its requests retried as ``repeat`` allows (``Client._do``)."""
        raise NotImplementedError


class AsyncFacade(Facade):
    """A client that runs an operation on the event loop (``AsyncClient``)."""

    async def _do(self, op: Op[T], repeat: Repeat = READ) -> T:
        """Run ``op`` to its result on the loop, as ``repeat`` allows (``AsyncClient._do``)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Keyed(Generic[T]):
    """An operation whose call may carry an idempotency key: with one it is safe to repeat whatever
    the table's retry class (the key names the same run: ``failover.keyed``)."""

    op: Op[T]
    idempotency_key: str | None


Build = Callable[Concatenate[Any, P], Op[T] | Keyed[T]]
"""A method of the table. Its ``self`` is the table (``operations.Operations``, which both clients
are), named in :func:`operation`'s signature, where the table's class is the type variable ``F``."""


class Operation(Generic[P, T]):
    """A method of both clients: ``Callable[P, T]`` on a ``Client``, ``Callable[P, Coroutine[..., T]]``
    on an ``AsyncClient``, both running the operation ``build`` makes, retried as ``repeat`` allows."""

    def __init__(self, build: Build[P, T], repeat: Repeat) -> None:
        self.build, self.repeat = build, repeat
        signature = signature_of(build, _result)
        self.blocking = described(_blocking(build, repeat), build, signature)
        self.awaited = described(_awaited(build, repeat), build, signature)

    @overload
    def __get__(
        self, client: None, owner: type[A]
    ) -> Callable[Concatenate[A, P], Coroutine[Any, Any, T]]: ...
    @overload
    def __get__(self, client: None, owner: type[S]) -> Callable[Concatenate[S, P], T]: ...
    @overload
    def __get__(
        self, client: AsyncFacade, owner: type[Any] | None = None
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...
    @overload
    def __get__(self, client: SyncFacade, owner: type[Any] | None = None) -> Callable[P, T]: ...

    def __get__(self, client: Facade | None, owner: type[Any] | None = None) -> Callable[..., object]:
        awaited = isinstance(client, AsyncFacade) or (client is None and _is_async(owner))
        method = self.awaited if awaited else self.blocking
        return method if client is None else MethodType(method, client)


def operation(repeat: Repeat) -> Callable[[Callable[Concatenate[F, P], Op[T] | Keyed[T]]], Operation[P, T]]:
    """Make a method of the table an operation of both clients, its requests retried as ``repeat``
    allows (as a read when it returns a :class:`Keyed` call that has an idempotency key)."""

    def make(build: Callable[Concatenate[F, P], Op[T] | Keyed[T]]) -> Operation[P, T]:
        return Operation(build, repeat)

    return make


def _is_async(owner: type[Any] | None) -> bool:
    return owner is not None and issubclass(owner, AsyncFacade)


def _planned(made: Op[T] | Keyed[T], repeat: Repeat) -> tuple[Op[T], Repeat]:
    return (made.op, keyed(made.idempotency_key, repeat)) if isinstance(made, Keyed) else (made, repeat)


def _blocking(build: Build[P, T], repeat: Repeat) -> Callable[Concatenate[SyncFacade, P], T]:
    def method(client: SyncFacade, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return client._do(*_planned(build(client, *args, **kwargs), repeat))

    return method


def _awaited(
    build: Build[P, T], repeat: Repeat
) -> Callable[Concatenate[AsyncFacade, P], Coroutine[Any, Any, T]]:
    # The operation is built when the call is awaited, as a coroutine method's body runs.
    async def method(client: AsyncFacade, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await client._do(*_planned(build(client, *args, **kwargs), repeat))

    return method


def _result(hint: object) -> object:
    """``T`` of the table's ``Op[T]`` or ``Keyed[T]``."""
    if get_origin(hint) is Keyed:
        return get_args(hint)[0]
    return op_result(hint)
