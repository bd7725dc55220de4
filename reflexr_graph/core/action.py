"""``GraphAction``: a pydantic-graph graph made durable.

Building one analyses the graph once: every node's input type, which boundaries are
safe to checkpoint, and the fingerprint that tells a checkpoint from another graph.
"""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any, Literal, TypeVar, cast

from pydantic import TypeAdapter, ValidationError

from reflexr_graph.core import invalid, pg
from reflexr_graph.core.boundaries import BoundaryMap, build_boundary_map, forked_nodes
from reflexr_graph.core.checkpoint import CheckpointCodec
from reflexr_graph.core.controls import StepControls, seconds_or_none
from reflexr_graph.core.fingerprint import fingerprint
from reflexr_graph.core.input_types import adapter_or_none, infer_input_types
from reflexr_graph.core.limits import Limit, check_limits
from reflexr_graph.core.pg import AnyGraph
from reflexr_graph.core.policy import NO_POLICY, RetryPolicy
from reflexr_graph.core.readback import Codec
from reflexr_graph.core.signals import check_waits, declare
from reflexr_graph.core.steps import StepSpec, wrapper
from reflexr_graph.core.unsafe_types import unsafe_fields
from reflexr_graph.errors import DurabilityWarning, GraphDefinitionError, InvalidInputs

T = TypeVar("T")

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
NAME_RULE = "1 to 100 of A-Z a-z 0-9 _ . - starting with a letter or digit"
""":data:`NAME_PATTERN` in words, for messages."""
"""Graph names: each names a Celery queue (``reflexr.<name>``) and scopes idempotency keys."""


def _required_adapter(tp: Any, what: str, graph_name: str) -> TypeAdapter[Any]:
    adapter = adapter_or_none(tp)
    if adapter is None:
        raise GraphDefinitionError(
            f"graph {graph_name!r}: its {what} type {tp!r} cannot be serialized by pydantic; "
            "use a pydantic model, a dataclass or JSON types so checkpoints can hold it"
        )
    return adapter


def _warn_unsafe_state(adapter: TypeAdapter[Any], graph_name: str) -> None:
    found = unsafe_fields(adapter)
    if not found:
        return
    fields = "; ".join(f"{path} {why}" for path, why in found)
    warnings.warn(
        f"graph {graph_name!r}: state field(s) {fields}. A value there that is not plain JSON cannot "
        "be checkpointed, and every boundary while it holds one is skipped, so a retry repeats the "
        "steps since the last saved boundary. Give those fields concrete types, or keep such objects "
        "out of the state (build them in deps)",
        DurabilityWarning,
        stacklevel=3,
    )


def _label(version: str | None, graph: str) -> str | None:
    if version is None:
        return None
    if not isinstance(version, str) or not NAME_PATTERN.fullmatch(version):
        raise GraphDefinitionError(
            f"graph {graph!r}: its version label is not usable: use 1 to 100 letters, digits, '_', '.' "
            "or '-', starting with a letter or digit (it names the version's queue)"
        )
    return version


OnNewVersion = Literal["pinned", "auto_upgrade"]
"""What a run does when no live worker serves its version any more (G9): waits for one ("pinned"),
or moves by itself to the newest served version ("auto_upgrade", fleet/auto_upgrade.py)."""
OnIncompatible = Literal["hold", "restart"]
"""What an auto-upgrading run does when the new version cannot read its checkpoint: stays held,
saying why ("hold"), or starts over on the new version ("restart")."""


def _behaviour(on_new_version: str, on_incompatible: str, graph: str) -> tuple[OnNewVersion, OnIncompatible]:
    if on_new_version not in ("pinned", "auto_upgrade"):
        raise GraphDefinitionError(
            f"graph {graph!r}: on_new_version must be 'pinned' or 'auto_upgrade', got {on_new_version!r}"
        )
    if on_incompatible not in ("hold", "restart"):
        raise GraphDefinitionError(
            f"graph {graph!r}: on_incompatible must be 'hold' or 'restart', got {on_incompatible!r}"
        )
    return cast(OnNewVersion, on_new_version), cast(OnIncompatible, on_incompatible)


def _created_in(action: object) -> str:
    """Where ``GraphAction(...)`` was called, as ``module, line N``, for messages about this action.

    The first frame outside the constructors of ``action`` (a subclass's ``__init__`` calling
    ``super().__init__`` is skipped too), so an error can point at the user's code.
    """
    frame = inspect.currentframe()
    frame = frame.f_back if frame is not None else None
    while frame is not None and frame.f_code.co_name == "__init__" and frame.f_locals.get("self") is action:
        frame = frame.f_back
    if frame is None:  # an interpreter without frame introspection
        return "an unknown module"
    return f"{frame.f_globals.get('__name__', '?')}, line {frame.f_lineno}"


def _known(kinds: Mapping[str, Any], given: Mapping[str, T] | None, what: str, graph: str) -> dict[str, T]:
    found = dict(given or {})
    for node in found:
        if node not in kinds:
            raise GraphDefinitionError(f"graph {graph!r}: {what} names node {node!r}, which it does not have")
    return found


def _budget(max_attempts: int | None, retry: RetryPolicy | None) -> tuple[RetryPolicy, int | None]:
    """The action's retry policy and the run's attempt budget, from either way of giving it."""
    if max_attempts is not None and max_attempts < 1:
        raise GraphDefinitionError(f"max_attempts must be at least 1, got {max_attempts}")
    policy = retry or NO_POLICY
    if max_attempts is not None and policy.max_attempts not in (None, max_attempts):
        raise GraphDefinitionError("max_attempts and retry=RetryPolicy(max_attempts=...) disagree; give one")
    return policy, max_attempts if max_attempts is not None else policy.max_attempts


def _controls(
    graph: str,
    kinds: Mapping[str, Any],
    timeouts: Mapping[str, float] | None,
    default: float | None,
    limits: Mapping[str, Limit] | None,
) -> StepControls:
    checked: dict[str, float] = {}
    for node, t in _known(kinds, timeouts, "step_timeouts", graph).items():
        seconds = seconds_or_none(t, f"step_timeouts[{node!r}]")
        if seconds is None:
            raise GraphDefinitionError(
                f"graph {graph!r}: step_timeouts[{node!r}] must be a number of seconds"
            )
        checked[node] = seconds
    return StepControls(
        timeouts=checked,
        default_timeout=seconds_or_none(default, "default_step_timeout"),
        limits=check_limits(limits, kinds, graph),
    )


class GraphAction:
    """A durable graph: checkpointed at safe boundaries, resumed after a crash.

    Args:
        graph: a graph built with pydantic-graph's ``GraphBuilder``.
        name: the name runs are enqueued under; defaults to the graph's name.
        input_types: node id -> input type, for nodes whose type reflexr cannot read or
            infer (steps without an annotation, stream steps, forks and decisions after a
            transform...). It overrides annotations and inference.
        max_attempts: attempts before a failing run is dead-lettered. Without it (or
            ``retry=RetryPolicy(max_attempts=...)``), the ``REFLEXR_MAX_ATTEMPTS`` of the workers
            that publish the graph; the number is published with the graph's schema, and every
            new run takes it from there, whether a Client or a foreign producer made it (a
            producer's own ``REFLEXR_MAX_ATTEMPTS`` plays no part).
        deps: a callable that builds the graph's deps for each attempt.
        signals: signal name -> type of its value, for each signal a step may wait for
            (``wait_for_signal``). Their JSON Schemas are published with the graph's, so a
            client validates a signal's value without the graph's code.
        step_timeouts: node id -> seconds; a step past its timeout is cancelled and the attempt
            fails with reason ``step_timeout`` (retried as any failure).
        default_step_timeout: the timeout of every step not in ``step_timeouts``.
        attempt_timeout: seconds one whole attempt may run (reason ``attempt_timeout``).
        retry: the action's RetryPolicy; its ``max_attempts`` is the run's budget.
        step_retries: node id -> RetryPolicy for failures of that node; unset fields come
            from ``retry``.
        limits: node id -> Limit: fleet-wide rate and concurrency limits (core/limits.py).
        version: a label for this version of the graph (``"2024-06-01"``, ``"v2"``); without
            one the version is the fingerprint. A run finishes on the version it started on.
        on_new_version: ``"pinned"`` (the default): a run whose version no live worker serves
            waits for one, until an operator moves it (``upgrade``). ``"auto_upgrade"``: after
            ``REFLEXR_VERSION_GRACE_S`` it moves by itself to the newest version a live worker
            serves, resuming from its checkpoint when that graph reads it. The workers of this
            version publish the choice; it governs the runs that started on this version.
        on_incompatible: what an auto-upgrading run does when the new version cannot read its
            checkpoint: ``"hold"`` (the default) keeps it waiting and says why (``waiting_for``
            and an ``upgrade_held`` event); ``"restart"`` starts it over on the new version.
    """

    def __init__(
        self,
        graph: AnyGraph,
        *,
        name: str | None = None,
        input_types: Mapping[str, Any] | None = None,
        max_attempts: int | None = None,
        deps: Callable[[], Any] | None = None,
        signals: Mapping[str, Any] | None = None,
        step_timeouts: Mapping[str, float] | None = None,
        default_step_timeout: float | None = None,
        attempt_timeout: float | None = None,
        retry: RetryPolicy | None = None,
        step_retries: Mapping[str, RetryPolicy] | None = None,
        limits: Mapping[str, Limit] | None = None,
        version: str | None = None,
        on_new_version: OnNewVersion = "pinned",
        on_incompatible: OnIncompatible = "hold",
    ) -> None:
        if not isinstance(graph, AnyGraph):
            raise GraphDefinitionError(
                "GraphAction needs a pydantic_graph.Graph (from GraphBuilder(...).build()), "
                f"got {type(graph).__name__}"
            )
        self.name = name or graph.name or ""
        if not self.name:
            raise GraphDefinitionError(
                "this graph has no name: pass GraphBuilder(name=...) or GraphAction(graph, name=...)"
            )
        if not NAME_PATTERN.fullmatch(self.name):
            raise GraphDefinitionError(
                f"graph name {self.name!r} is not usable: use 1 to 100 letters, digits, '_', '.' or '-', "
                "starting with a letter or digit (it names the graph's queue)"
            )
        self.retry, self.max_attempts = _budget(max_attempts, retry)
        self.graph = graph
        self.created_in = _created_in(self)
        self.deps = deps
        self.state_adapter = _required_adapter(graph.state_type, "state", self.name)
        _warn_unsafe_state(self.state_adapter, self.name)
        self.inputs_adapter = _required_adapter(graph.input_type, "input", self.name)
        self.output_adapter = adapter_or_none(graph.output_type) or TypeAdapter(Any)
        self.kinds = pg.node_kinds(graph)
        self.edges = pg.edges(graph)
        self.input_types: dict[str, Any] = infer_input_types(graph, input_types)
        self.boundaries: BoundaryMap = build_boundary_map(self.kinds, self.edges, pg.parent_forks(graph))
        self.fingerprint = fingerprint(self.kinds, self.edges, self.input_types)
        self.label = _label(version, self.name)
        self.version: str = self.label or self.fingerprint
        """The version runs are pinned to: the label, else the fingerprint."""
        self.on_new_version, self.on_incompatible = _behaviour(on_new_version, on_incompatible, self.name)
        self.signal_adapters = declare(signals, self.name)
        self.signals: dict[str, Any] = dict(signals or {})
        steps = ((n, fn) for n in self.kinds if (fn := pg.step_function(pg.node_of(graph, n))) is not None)
        check_waits(steps, self.signals, self.name)
        self.controls = _controls(self.name, self.kinds, step_timeouts, default_step_timeout, limits)
        self.attempt_timeout = seconds_or_none(attempt_timeout, "attempt_timeout")
        known = _known(self.kinds, step_retries, "step_retries", self.name)
        self.step_retries = {n: p.under(self.retry) for n, p in known.items()}
        self._codecs = {n: Codec(TypeAdapter(tp)) for n, tp in self.input_types.items()}
        results = {
            node: Codec(adapter)
            for node in self.kinds
            if (tp := pg.step_return_type(pg.node_of(graph, node))) is not pg.UNKNOWN
            and (adapter := adapter_or_none(tp)) is not None
        }
        forked = forked_nodes(self.kinds, self.edges)
        spec = StepSpec(
            self.fingerprint, Codec(self.state_adapter), self._codecs.get, results, self.controls, forked
        )
        self.runnable = pg.with_wrapped_steps(graph, wrapper(spec))

    @cached_property
    def checkpoints(self) -> CheckpointCodec:
        return CheckpointCodec(
            graph_name=self.name,
            fingerprint=self.fingerprint,
            state=Codec(self.state_adapter),
            inputs=Codec(self.inputs_adapter),
            output=Codec(self.output_adapter),
            node_codec=self._codecs.get,
        )

    def policy_for(self, node_id: str | None) -> RetryPolicy:
        """The retry policy of a failure of ``node_id`` (the action's when None or not refined)."""
        return self.step_retries.get(node_id or "", self.retry)

    def node_codec(self, node_id: str) -> Codec | None:
        return self._codecs.get(node_id)

    def validate_inputs(self, inputs: Any) -> Any:
        """The graph inputs as their type; InvalidInputs lists each failing location."""
        return self._validate(self.inputs_adapter, "inputs", inputs)

    def initial_state(self, state: Any) -> Any:
        """The state a fresh run starts with: the given one validated, or the state type's default."""
        if state is None:
            try:
                factory: Callable[[], Any] = self.graph.state_type
                return factory()
            except TypeError:
                if self.graph.state_type in (type(None), None):
                    return None
                raise InvalidInputs(
                    f"graph {self.name!r} needs an initial state: its state type has no default"
                ) from None
        return self._validate(self.state_adapter, "state", state)

    def _validate(self, adapter: TypeAdapter[Any], part: str, value: Any) -> Any:
        try:
            return adapter.validate_python(value)
        except ValidationError as exc:
            found = invalid.fields(exc, under=(part,))
            raise InvalidInputs(f"graph {self.name!r}: {invalid.describe(found)}", found) from None

    def schemas(self) -> dict[str, Any]:
        """JSON Schemas of the inputs, state, output and signals (name -> schema), as workers publish them."""
        return {
            "inputs": self.inputs_adapter.json_schema(),
            "state": self.state_adapter.json_schema(),
            "output": self.output_adapter.json_schema(),
            "signals": {name: adapter.json_schema() for name, adapter in self.signal_adapters.items()},
        }

    def mermaid(self) -> str:
        return self.graph.render()

    def __repr__(self) -> str:
        return f"GraphAction(name={self.name!r}, version={self.version!r})"
