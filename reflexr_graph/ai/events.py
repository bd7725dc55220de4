"""pydantic-ai's external events inside a step: a wait that holds no worker, answered by token.

``StepDurability`` installs a :class:`StepEventWaiter` for each durable agent run in a step, so
``wait_for_external_event``, and ``HandleDeferredToolCalls`` with a handler that takes a resume
token, wait durably. A wait is three recorded calls around a signal wait:

- ``<agent>.event.<name>.token`` makes the token and keeps the wait (store/asks.py), so a retry
  or a replay hands out no second token;
- ``<agent>.event.<name>.ask`` calls ``ask(token)`` once; an answer it gives ends the wait;
- otherwise the step waits for signal ``event:<name>`` (core/waits.py), which the token's
  resolver sends (``Client.resolve_event``); the run is ``waiting``, holding no worker. A
  ``timeout`` is the wait's durable timer, and ``<agent>.event.<name>.timeout`` records that it
  passed (or the answer that came first), and the wait raises ``ExternalEventError``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from contextvars import ContextVar
from datetime import timedelta
from typing import Any

from pydantic import JsonValue
from pydantic_ai.external_events import ExternalEventError, ExternalEventWaiter, external_event_scope
from pydantic_ai.tools import DeferredToolRequests

from reflexr_graph import clock
from reflexr_graph.core.context import current_run_or_none
from reflexr_graph.core.durable import durable_call
from reflexr_graph.core.signals import SIGNAL_NAME
from reflexr_graph.core.steps import current_execution
from reflexr_graph.core.waits import wait_outcome
from reflexr_graph.errors import DurableAgentError, NotInRun
from reflexr_graph.store import asks

_requests: ContextVar[DeferredToolRequests | None] = ContextVar("reflexr_deferred_requests", default=None)
"""The deferred tool calls of the agent's run in this context, seen by StepDurability's hook,
which runs before the handler that waits: the inbox shows them with the wait."""


def note_requests(requests: DeferredToolRequests) -> None:
    """Keep the deferred calls for a wait that may follow in this context."""
    _requests.set(requests)


def calls_of(requests: DeferredToolRequests | None) -> list[dict[str, Any]]:
    """Each deferred call as the inbox shows it: its tool, kind and validated arguments."""
    if requests is None:
        return []
    return [
        {
            "tool_call_id": call.tool_call_id,
            "tool_name": call.tool_name,
            "kind": requests.kind(call.tool_call_id),
            "args": requests.validated_args.get(call.tool_call_id, call.args_as_dict()),
        }
        for call in (*requests.approvals, *requests.calls)
    ]


def with_answered_by(payload: Any, by: str) -> Any:
    """A ``DeferredToolResults`` payload with ``answered_by`` filled in for each call it answers
    (a decision's own ``answered_by`` is kept); any other payload as it is."""
    if not isinstance(payload, dict) or not ({"approvals", "calls"} & set(payload)):
        return payload
    answered = {
        call_id: by
        for part in ("approvals", "calls")
        if isinstance(payload.get(part), dict)
        for call_id in payload[part]
    }
    return {**payload, "answered_by": {**answered, **(payload.get("answered_by") or {})}}


def outcome_of(answer: dict[str, Any]) -> JsonValue:
    """The payload the wait returns, or ExternalEventError with the reason it failed."""
    if "error" in answer:
        raise ExternalEventError(str(answer["error"]))
    result: JsonValue = with_answered_by(answer.get("payload"), str(answer.get("by", "")))
    return result


class StepEventWaiter(ExternalEventWaiter):
    """The wait of one durable agent's runs in a step (see the module)."""

    def __init__(self, agent: str) -> None:
        self.agent = agent

    async def wait(
        self, name: str, *, ask: Callable[[str], Awaitable[JsonValue]], timeout: timedelta | None
    ) -> JsonValue:
        if not SIGNAL_NAME.fullmatch(name):
            raise DurableAgentError(
                f"an external event's wait name {name!r} is not usable; use 1 to 100 letters, digits, "
                "'_', '.' or '-', starting with a letter or digit"
            )
        timeout_s = None if timeout is None else timeout.total_seconds()
        base = f"{self.agent}.event.{name}" if self.agent else f"event.{name}"
        token: str = await durable_call(f"{base}.token", self._open, name, timeout_s, result_type=str)
        answer: JsonValue = await durable_call(f"{base}.ask", ask, token, result_type=Any)
        if answer is not None:
            # The token may no longer be answered: the wait is over.
            await durable_call(f"{base}.answered", self._settle, token, {"payload": answer, "by": "ask"})
            return answer
        outcome = await wait_outcome(asks.signal_of(name), timeout_s, f"wait_for_external_event({name!r})")
        if "signal" in outcome:
            return outcome_of(outcome["signal"])
        reason = f"no answer arrived within {timeout_s:g}s"
        # An answer that landed as the timer fired still counts, as in pydantic-ai's own waiter.
        held = await durable_call(f"{base}.timeout", self._settle, token, {"error": reason, "by": asks.TIMER})
        return outcome_of(held)

    def _open(self, name: str, timeout_s: float | None) -> str:
        execution, run = current_execution(), current_run_or_none()
        if execution is None or run is None:  # pragma: no cover - durable_call refused it already
            raise NotInRun("an external event's wait runs only inside a step")
        token = asks.new_token(run.run_id)
        now = clock.now_ms()
        timeout_at = None if timeout_s is None else now + int(timeout_s * 1000)
        calls = calls_of(_requests.get())
        entry = asks.entry_json(token, name, run.graph, self.agent, now, timeout_at, calls)
        journal = execution.journal
        journal.port.open_event(journal.ctx, token=token, entry_json=entry, name=name)
        return token

    def _settle(self, token: str, answer: dict[str, Any]) -> dict[str, Any]:
        execution = current_execution()
        if execution is None:  # pragma: no cover - durable_call refused it already
            raise NotInRun("an external event's wait runs only inside a step")
        journal = execution.journal
        stamped = json.dumps({**answer, "at": clock.now_ms()}, separators=(",", ":"))
        held: dict[str, Any] = json.loads(
            journal.port.settle_event(journal.ctx, token=token, answer_json=stamped)
        )
        return held


def step_scope() -> AbstractContextManager[ExternalEventWaiter]:
    """The wait ``wait_for_external_event`` called directly in a step uses (core/steps.py STEP_SCOPES);
    a durable agent's run inside the step installs its own, named after the agent."""
    return external_event_scope(StepEventWaiter(""))
