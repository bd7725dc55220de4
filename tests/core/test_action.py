"""GraphAction registration: names, input_types checks, serializable types, the fingerprint."""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, GraphDefinitionError
from reflexr_graph.errors import DurabilityWarning
from tests.core import graphs


def _tiny(name: str | None = "tiny", state_type: Any = graphs.Counted) -> Any:
    g = GraphBuilder(name=name, state_type=state_type, input_type=int, output_type=int)

    @g.step
    async def only(ctx: StepContext[Any, None, int]) -> int:
        return ctx.inputs

    g.add(g.edge_from(g.start_node).to(only), g.edge_from(only).to(g.end_node))
    return g.build()


def test_graph_without_a_name_is_refused() -> None:
    with pytest.raises(GraphDefinitionError, match="no name"):
        GraphAction(_tiny(name=None))
    assert GraphAction(_tiny(name=None), name="given").name == "given"


class _Named(GraphAction):
    def __init__(self, graph: Any) -> None:
        super().__init__(graph, name="named")


def test_an_action_knows_the_module_and_line_that_created_it() -> None:
    """created_in points at the caller, past a subclass's constructor: registry errors cite it."""
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    plain, sub = GraphAction(_tiny()), _Named(_tiny())
    assert plain.created_in == sub.created_in == f"{__name__}, line {line}"


def test_not_a_graph_is_refused() -> None:
    with pytest.raises(GraphDefinitionError, match=r"pydantic_graph\.Graph"):
        GraphAction("nope")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("node", "match"),
    [("ghost", "not in the graph"), ("reduce_list_append", "join"), ("__end__", "end node")],
)
def test_input_types_refuses_unknown_ids_joins_and_the_end(node: str, match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        GraphAction(graphs.map_join().graph, input_types={node: int})
    assert node in str(info.value)


def test_explicit_type_pydantic_cannot_handle_raises() -> None:
    with pytest.raises(GraphDefinitionError, match="cannot serialize"):
        GraphAction(graphs.decision_after_step().graph, input_types={"decide": graphs.NoSchema})


def test_inferred_type_without_schema_is_dropped() -> None:
    action = graphs.uninferable("noschema")
    assert "decide" not in action.input_types


def test_state_type_must_serialize() -> None:
    with pytest.raises(GraphDefinitionError, match="state type"):
        GraphAction(_tiny(state_type=graphs.NoSchema))


def test_fingerprint_is_stable_and_sensitive() -> None:
    assert graphs.linear().fingerprint == graphs.linear().fingerprint
    assert graphs.linear().fingerprint != graphs.linear(n=4).fingerprint
    assert graphs.linear().fingerprint != graphs.linear(transform=True).fingerprint


def test_max_attempts_must_be_positive() -> None:
    with pytest.raises(GraphDefinitionError, match="max_attempts"):
        GraphAction(_tiny(), max_attempts=0)


class _Client:
    """A plain object a user might keep in the state (a client, a connection)."""


@dataclass
class _WithAny:
    notes: list[str] = field(default_factory=list)
    client: Any = None


class _WithObject(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    client: _Client | None = None
    payload: dict[str, Any] = {}


def test_a_state_type_that_cannot_be_seen_to_checkpoint_warns_when_built() -> None:
    """Issue 14, item 8: a state field typed Any warns at build time, naming the field (an arbitrary
    class is refused outright: pydantic cannot write it down at all); JSON containers of Any
    (dict[str, Any]) and concrete types do not warn."""
    with pytest.warns(DurabilityWarning, match=r"state field\(s\) client is typed Any") as caught:
        GraphAction(_tiny(state_type=_WithAny))
    assert "notes" not in str(caught[0].message)
    with pytest.raises(GraphDefinitionError, match="cannot be serialized"):
        GraphAction(_tiny(state_type=_WithObject))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GraphAction(_tiny(state_type=graphs.Counted))


def test_graph_names_must_be_usable_as_queue_names() -> None:
    """A graph name names its Celery queue and scopes idempotency keys: no spaces, colons or slashes."""
    for bad in ("two words", "a:b", "x/y", "-lead", "x" * 101):
        with pytest.raises(GraphDefinitionError, match="is not usable"):
            GraphAction(_tiny(), name=bad)
    assert GraphAction(_tiny(), name="doc-proc_2.v1").name == "doc-proc_2.v1"


def test_versioning_behaviour_is_pinned_by_default_and_refuses_unknown_values() -> None:
    """GraphAction(on_new_version=..., on_incompatible=...): "pinned" and "hold" unless given; a
    value that is neither choice is refused when the action is built, not when a deploy meets it."""
    default = GraphAction(_tiny())
    assert (default.on_new_version, default.on_incompatible) == ("pinned", "hold")
    auto = GraphAction(_tiny(), on_new_version="auto_upgrade", on_incompatible="restart")
    assert (auto.on_new_version, auto.on_incompatible) == ("auto_upgrade", "restart")
    assert auto.version == default.version, "the behaviour is not part of the version"
    with pytest.raises(GraphDefinitionError, match="on_new_version must be 'pinned' or 'auto_upgrade'"):
        GraphAction(_tiny(), on_new_version="auto")  # type: ignore[arg-type]
    with pytest.raises(GraphDefinitionError, match="on_incompatible must be 'hold' or 'restart'"):
        GraphAction(_tiny(), on_incompatible="drop")  # type: ignore[arg-type]
