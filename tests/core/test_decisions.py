"""Case 7: decisions and forks infer their input type; the class guard; input_types wins."""

from __future__ import annotations

from typing import Any

import pytest

from tests.core import graphs
from tests.core.graphs import CALLS, FAIL, Boom
from tests.core.harness import Harness


def test_type_from_return_annotation_without_annotated_metadata(harness: Harness) -> None:
    """Amendment 09-29: a decision's type is its incoming step's return type, Annotated metadata dropped."""
    action = graphs.decision_after_step(annotate="annotated")
    assert action.input_types["decide"] is int
    run_id = harness.create(action, 5)
    # 5 violates the Field(gt=100) metadata, which the graph never checked: the boundary is still saved.
    assert harness.attempt(action, run_id, inputs=5) == "odd"
    assert harness.progressed(run_id)[0] == "decide"


def test_resume_before_a_decision(harness: Harness) -> None:
    """G2 through a decision: a failure after it resumes at the decision, not before read."""
    action = graphs.decision_after_step()
    run_id = harness.create(action, 4)
    FAIL["even"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id, inputs=4)
    assert harness.attempt(action, run_id, inputs=4) == "even"
    assert CALLS["read"] == 1 and CALLS["even"] == 2


def test_type_from_graph_start_and_a_chain_of_decisions(harness: Harness) -> None:
    """Amendment 09-29: the start carries the graph's input type; decisions after decisions infer too."""
    action = graphs.decision_from_start()
    assert action.input_types["decide1"] is int and action.input_types["decide2"] is int
    run_id = harness.create(action, 42)
    assert harness.attempt(action, run_id, inputs=42) == "big"
    assert harness.progressed(run_id)[:2] == ["decide2", "big"]


@pytest.mark.parametrize(("text", "saved"), [("routine", True), ("!fire", False)])
def test_decision_boundary_needs_inputs_to_keep_their_class(harness: Harness, text: str, saved: bool) -> None:
    """Amendment 09-29: a subclass written down as its declared base would route differently: not saved."""
    action = graphs.decision_by_class()
    run_id = harness.create(action, text)
    assert harness.attempt(action, run_id, inputs=text) == ("filed" if saved else "paged")
    assert ("decide" in harness.progressed(run_id)) is saved


def test_explicit_input_types_win(harness: Harness) -> None:
    """Amendment 09-29: input_types overrides an annotation or an inference."""
    assert graphs.decision_after_step(explicit={"decide": float}).input_types["decide"] is float
    action = graphs.decision_after_step(annotate="none", explicit={"decide": int})
    assert action.input_types["decide"] is int
    run_id = harness.create(action, 3)
    harness.attempt(action, run_id, inputs=3)
    assert "decide" in harness.progressed(run_id)


@pytest.mark.parametrize("annotate", ["none", "any", "typevar"])
def test_unreadable_return_annotation_leaves_the_decision_unsaved(harness: Harness, annotate: str) -> None:
    """Amendment 09-29: no return annotation, Any or a TypeVar: no checkpoint before the decision."""
    action = graphs.decision_after_step(annotate=annotate)
    assert "decide" not in action.input_types
    run_id = harness.create(action, 3)
    assert harness.attempt(action, run_id, inputs=3) == "odd"
    assert "decide" not in harness.progressed(run_id)


@pytest.mark.parametrize("case", ["transform", "join", "fork", "mixed", "noschema"])
def test_what_inference_cannot_decide_stays_untyped(case: str) -> None:
    """Amendment 09-29: transforms, joins, forks, differing types and schema-less types leave no type."""
    action = graphs.uninferable(case)
    assert "decide" not in action.input_types
    assert action.node_codec("decide") is None


@pytest.mark.parametrize(("case", "inputs"), [("transform", 1), ("mixed", 1)])
def test_untyped_decision_boundary_is_not_saved(harness: Harness, case: str, inputs: Any) -> None:
    """The engine saves no boundary before a decision whose type inference could not decide."""
    action = graphs.uninferable(case)
    run_id = harness.create(action, inputs)
    assert harness.attempt(action, run_id, inputs=inputs) == "b"
    assert "decide" not in harness.progressed(run_id)
    assert CALLS["b"] == 1
