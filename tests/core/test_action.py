"""GraphAction registration: names, input_types checks, serializable types, the fingerprint."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, GraphDefinitionError
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
