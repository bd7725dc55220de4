"""Store operations written once, run by a synchronous or an asynchronous executor.

An operation is a generator: it builds keys and arguments, *yields* each Redis request it
needs (a command, a script call, a pipeline), receives the reply, parses it, and returns its
result. It does no I/O itself, so the same code serves ``RedisStore`` (redis-py, blocking)
and the native ``AsyncClient`` (``redis.asyncio``): only :func:`drive` and
:func:`drive_async`, which pass each request to a handler and send back its reply, differ.

A handler that fails throws its exception into the operation, which may catch it (the
client's enqueue does, to say that a recorded run will still be sent).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from reflexr_graph import errors
from reflexr_graph.model import RunInfo
from reflexr_graph.store import keys
from reflexr_graph.store.records import pairs_to_map, run_info, text

T = TypeVar("T")

ScriptArg = str | int | float

# A script answers {'idem', key} when it was called with a wrong guess of the run's
# idempotency key; the key of a run never changes, so one more round always settles it.
IDEM_ROUNDS = 3


@dataclass(frozen=True)
class Command:
    """One Redis command, named by its redis-py method (both clients parse its reply alike)."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    decoded: bool = True
    """False: the reply comes back as Redis holds it, payload envelopes left as they are
    (:func:`as_stored`), for the few readers that handle envelopes themselves: ``rekey`` writes
    them again, the payload sweep reads which files they refer to, the keyspace migration tells
    a run id from long inputs."""


@dataclass(frozen=True)
class Eval:
    """One call of a registered Lua script (``store/lua``): one EVALSHA."""

    name: str
    keys: Sequence[str]
    args: Sequence[ScriptArg]


@dataclass(frozen=True)
class Batch:
    """Commands and script calls sent together in one pipeline; the reply is their replies.

    ``transaction`` wraps them in MULTI/EXEC, for the few that must see one moment of the data.
    A script call in a pipeline is an EVALSHA; a script the server lost is loaded and the
    pipeline sent again (``Scripts.pipelined``). A batch of one script call alone is sent as that
    call: a pipeline of scripts asks SCRIPT EXISTS first, a command more.
    """

    commands: tuple[Command | Eval, ...]
    transaction: bool = False


ScanCursor = int | tuple[tuple[str, int], ...]
"""Where a walk of the keyspace stands (:class:`Scan`): SCAN's cursor on one server; on a cluster,
each primary not done yet with its own cursor, which only the executor reads. Falsy once done."""
SCAN_START: ScanCursor = 0


@dataclass(frozen=True)
class Scan:
    """One page of a walk over the whole keyspace: SCAN ``cursor`` MATCH ``match`` COUNT ``count``.

    The reply is ``(next cursor, keys)``; the walk sends the next cursor as it got it, and is done
    when it is falsy. On a cluster each primary holds its own keys, so the first page asks every
    primary and each later page one of those not done yet (``store/cluster.py: scan_page``), as
    redis-py's ``scan_iter`` does, but a page per request: each goes through the executor, which
    translates its errors. A key may come twice (SCAN's guarantee): a walk must not mind."""

    match: str
    count: int
    cursor: ScanCursor = SCAN_START


@dataclass(frozen=True)
class Publish:
    """Send the Celery message of a recorded run (handled by the client, not the store)."""

    run_id: str
    graph: str
    priority: int | None = None
    """The broker priority of the message (config/dispatch.py: PRIORITIES), None for the default."""


@dataclass(frozen=True)
class QueuedMessage:
    """A run's Celery message as kombu's Redis transport queues it: the item, and the list it goes
    onto (``keys.broker_queue``)."""

    queue_key: str
    item: str


@dataclass(frozen=True)
class Envelope:
    """The Celery message of a run, built by the client (not the store): the reply is a
    :class:`QueuedMessage`, or None when the broker is not the store's Redis and only
    :class:`Publish` can send it. A script that records or queues the run (``create_run.lua``,
    ``signal.lua``) pushes the item itself, so the message and the write that makes the run due
    land together, in one round trip."""

    run_id: str
    graph: str
    priority: int | None = None


@dataclass(frozen=True)
class Layout:
    """Asks the store how its indexes are sharded (the reply: a ``keys.Shards``); no Redis
    command is sent, the store knows it from its kind (``store/cluster.py: shards``)."""


Request = Command | Eval | Batch | Scan | Publish | Envelope | Layout
Op = Generator[Request, Any, T]
"""An operation: yields requests, receives their replies, returns its result."""


def cmd(method: str, *args: Any, **kwargs: Any) -> Command:
    return Command(method, args, kwargs)


def as_stored(method: str, *args: Any, **kwargs: Any) -> Command:
    """A command whose reply comes back as Redis holds it, envelopes not decoded (:attr:`Command.decoded`)."""
    return Command(method, args, kwargs, decoded=False)


def batch(commands: Sequence[Command | Eval], *, transaction: bool = False) -> Batch:
    return Batch(tuple(commands), transaction)


def one(request: Command | Eval | Batch | Scan) -> Op[Any]:
    """The operation of one request, whose result is its reply (payloads decoded)."""
    reply = yield request
    return reply


async def drive_async(op: Op[T], handle: Callable[[Request], Awaitable[Any]]) -> T:
    """Run ``op`` to its result, each request answered by awaiting ``handle``."""
    reply: Any = None
    failure: BaseException | None = None
    while True:
        try:
            request = op.send(reply) if failure is None else op.throw(failure)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            reply, failure = await handle(request), None
        except Exception as exc:
            reply, failure = None, exc


def drive(op: Op[T], handle: Callable[[Request], Any]) -> T:
    """Run ``op`` to its result, each request answered by ``handle`` (blocking).

    The same loop as :func:`drive_async`: with a handler that never suspends, its coroutine runs
    to the end in one step, so there is one driver to get right.
    """

    async def answer(request: Request) -> Any:
        return handle(request)

    stepper = drive_async(op, answer)
    try:
        stepper.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    stepper.close()
    raise RuntimeError("a blocking handler suspended the operation")


# -- helpers shared by the operations ---------------------------------------------------------


def ping() -> Op[None]:
    """One round trip to Redis; StoreUnavailable when it does not answer."""
    yield cmd("ping")


def not_found(run_id: str) -> errors.RunNotFound:
    return errors.RunNotFound(f"no run {run_id}: it never existed, or its retention has passed")


def layout() -> Op[keys.Shards]:
    """The store's sharding (:class:`Layout`)."""
    found: keys.Shards = yield Layout()
    return found


def per_run(
    name: str,
    run_id: str,
    idem_guess: str,
    now: int,
    args: Sequence[ScriptArg],
    extra_keys: Sequence[str] = (),
) -> Op[Any]:
    """Call a per-run script; if it names the run's real idempotency key, call it again with that."""
    shards = yield from layout()
    for _ in range(IDEM_ROUNDS):
        script_keys = keys.script_keys(run_id, idem_guess, shards, extra_keys)
        reply = yield Eval(name, script_keys, [run_id, now, idem_guess, *args])
        if not (isinstance(reply, list) and len(reply) == 2 and text(reply[0]) == "idem"):
            return reply
        idem_guess = text(reply[1])
    raise errors.OperationRefused(f"run {run_id} kept changing during {name}; try again")


def snapshot(run_id: str, reply: list[Any], refusal: str) -> RunInfo:
    """The run a script answered with, or RunNotFound / OperationRefused (with ``refusal``)."""
    outcome = text(reply[0])
    if outcome == "missing":
        raise not_found(run_id)
    if outcome == "refused":
        status = text(reply[1])
        raise errors.OperationRefused(f"run {run_id} is {status}; {refusal}", status=status)
    return run_info(pairs_to_map(reply[1:]), run_id)
