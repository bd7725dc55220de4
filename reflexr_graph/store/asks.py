"""External event waits (pydantic-ai's ``wait_for_external_event``), kept on signal waits.

A wait for event ``<name>`` is a signal wait for ``event:<name>`` (store/lua/wait.lua): the run
suspends holding no worker, and the answer wakes it as a signal does (signal.lua). What a signal
lacks is kept here, in the run's ``asks`` hash (keys.asks): the token that may answer (by its
SHA-256), the wait as the inbox shows it, and the one answer it takes (HSETNX, so a second
resolver, or a timer that fired first, is refused).

The token is ``<run id>~<32 url-safe characters>`` (192 random bits): the run id finds the
hash, checked as every run id is (keys.RUN_ID_PATTERN), and only the whole token's digest finds
the wait in it, so no token names another run's key or another wait.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from typing import Any

from reflexr_graph import errors
from reflexr_graph.model import EventWait
from reflexr_graph.store import keys
from reflexr_graph.store.ops import Op, batch, cmd
from reflexr_graph.store.records import text

SIGNAL_PREFIX = "event:"
"""The signal an external event wait waits for is ``event:<name>``; runs show it as ``waiting_for``."""
TOKEN_BYTES = 24
"""Random bytes in a token's secret: 192 bits, 32 url-safe characters."""
_SEPARATOR = "~"
_SECRET = re.compile(r"[A-Za-z0-9_-]{32}")
_ANSWER = "|answer"
_OPEN = "open|"


def signal_of(name: str) -> str:
    return f"{SIGNAL_PREFIX}{name}"


def new_token(run_id: str) -> str:
    """A token for a wait of ``run_id``; ``~`` is in no run id, so the split is unambiguous."""
    return f"{run_id}{_SEPARATOR}{secrets.token_urlsafe(TOKEN_BYTES)}"


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_token(token: object) -> tuple[str, str]:
    """(run id, the token's digest); EventTokenInvalid for anything not shaped as a token."""
    if not isinstance(token, str) or len(token) > keys.MAX_RUN_ID_LENGTH + 40:
        raise errors.EventTokenInvalid()
    run_id, sep, secret = token.rpartition(_SEPARATOR)
    if not sep or not keys.valid_run_id(run_id) or not _SECRET.fullmatch(secret):
        raise errors.EventTokenInvalid()
    return run_id, token_digest(token)


def entry_json(
    token: str, name: str, graph: str, agent: str, since_ms: int, timeout_at_ms: int | None, calls: list[Any]
) -> str:
    entry = {
        "token": token,
        "name": name,
        "graph": graph,
        "agent": agent,
        "since_ms": since_ms,
        "timeout_at_ms": timeout_at_ms,
        "calls": calls,
    }
    return json.dumps(entry, separators=(",", ":"), default=str)


def _wait_of(run_id: str, entry: str, answer: str | None) -> EventWait:
    e = json.loads(entry)
    return EventWait(
        run_id=run_id,
        token=e["token"],
        name=e["name"],
        graph=e["graph"],
        agent=e["agent"],
        since_ms=int(e["since_ms"]),
        timeout_at_ms=e.get("timeout_at_ms"),
        calls=e.get("calls") or [],
        answer=None if answer is None else json.loads(answer),
    )


def open_wait(run_id: str, token: str, entry: str, name: str) -> Op[None]:
    """Keep a new wait, the latest of its name, before its token is handed out.

    An answer to an earlier wait of that name that raced its timer may still sit in the mailbox:
    it goes, so the new wait cannot take it.
    """
    digest = token_digest(token)
    name_digest = hashlib.sha256(name.encode()).hexdigest()[:24]
    yield batch(
        [
            cmd("hset", keys.asks(run_id), mapping={digest: entry, _OPEN + name_digest: digest}),
            # The run's retention expires the key, and purge deletes it, as its other optional keys
            # (lua/_lib.lua present_keys).
            cmd("hset", keys.run(run_id), "asks", "1"),
            cmd("hdel", keys.mailbox(run_id), signal_of(name)),
        ],
        transaction=True,
    )


def settle(run_id: str, digest: str, answer_json: str) -> Op[tuple[bool, str]]:
    """Give the wait its one answer: (whether this one is it, the answer it holds)."""
    field = digest + _ANSWER
    won, holding = yield batch(
        [cmd("hsetnx", keys.asks(run_id), field, answer_json), cmd("hget", keys.asks(run_id), field)],
        transaction=True,
    )
    return bool(won), text(holding)


def read_wait(run_id: str, digest: str) -> Op[EventWait | None]:
    entry, answer = yield cmd("hmget", keys.asks(run_id), digest, digest + _ANSWER)
    if entry is None:
        return None
    return _wait_of(run_id, text(entry), None if answer is None else text(answer))


def waits_of(run_id: str, *, open_only: bool) -> Op[list[EventWait]]:
    """The run's waits, the latest of each name (oldest first); only those without an answer when
    ``open_only``."""
    if not keys.valid_run_id(run_id):
        raise errors.RunNotFound(f"no run has id {run_id!r}")
    found = yield cmd("hgetall", keys.asks(run_id))
    fields = {text(k): text(v) for k, v in found.items()}
    latest = [v for k, v in fields.items() if k.startswith(_OPEN)]
    waits = [_wait_of(run_id, fields[d], fields.get(d + _ANSWER)) for d in latest if d in fields]
    if open_only:
        waits = [w for w in waits if w.answer is None]
    return sorted(waits, key=lambda w: w.since_ms)


def refusal(wait: EventWait) -> errors.EventAnswered:
    """What a second answer is told: who answered, or that the timeout passed."""
    answer = wait.answer or {}
    if answer.get("by") == TIMER:
        return errors.EventAnswered(wait.run_id, wait.name, "timed out")
    return errors.EventAnswered(wait.run_id, wait.name, f"was answered already by {answer.get('by', '?')}")


TIMER = "timeout"
"""Who 'answered' a wait whose timeout passed first."""
