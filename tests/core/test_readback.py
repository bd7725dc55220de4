"""Cases 8-10: checkpoints read back as they were, or are not saved."""

from __future__ import annotations

import logging

import pytest

from reflexr_graph.errors import DurabilityWarning
from tests.core import graphs
from tests.core.graphs import CALLS, FAIL, SEEN, Boom, Doc
from tests.core.harness import Harness


def test_int_for_a_float_step_is_saved_and_resumes_as_float(harness: Harness) -> None:
    """Amendment 09-29: 3 given to a step typed float reads back equal, is saved, and resumes as 3.0."""
    action = graphs.float_step()
    run_id = harness.create(action, 0)
    FAIL["take"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id, inputs=0)
    assert harness.progressed(run_id) == ["take"]
    assert harness.attempt(action, run_id, inputs=0) == 3.0
    first, resumed = SEEN["take"]
    assert type(first) is int and type(resumed) is float and resumed == 3.0
    assert CALLS["give"] == 1


def test_model_given_to_a_stream_step_is_not_saved(harness: Harness) -> None:
    """Amendment 09-29: a stream step reads its input as Any; a model would come back a dict."""
    action = graphs.stream_graph(payload="model", explicit=False)
    run_id = harness.create(action, "hi")
    assert harness.attempt(action, run_id, inputs="hi") == ["hi"]
    assert "tail" not in harness.progressed(run_id)


def test_stream_step_typed_by_input_types_is_saved_and_resumes(harness: Harness) -> None:
    """Amendment 09-29: input_types names a stream step's type; it then resumes with the model."""
    action = graphs.stream_graph(payload="model", explicit=True)
    run_id = harness.create(action, "hi")
    FAIL["tail"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id, inputs="hi")
    assert harness.progressed(run_id) == ["tail"]
    assert harness.attempt(action, run_id, inputs="hi") == ["hi"]
    assert CALLS["head"] == 1 and isinstance(SEEN["tail"][-1], Doc)


def test_stream_step_with_json_values_is_saved_without_input_types(harness: Harness) -> None:
    """Amendment 09-29: JSON values read back through Any, so a stream step given them is saved."""
    action = graphs.stream_graph(payload="json", explicit=False)
    run_id = harness.create(action, "hi")
    assert harness.attempt(action, run_id, inputs="hi") == ["hi"]
    assert "tail" in harness.progressed(run_id)


def test_base_node_input_is_not_saved(harness: Harness) -> None:
    """Amendment 09-29: a BaseNode's NodeStep reads its input as Any; the node would come back a dict."""
    action = graphs.base_nodes()
    run_id = harness.create(action, "abc")
    assert harness.attempt(action, run_id, inputs="abc") == "ABC"
    progressed = harness.progressed(run_id)
    assert "First" not in progressed and "Second" not in progressed


def test_any_state_field_holding_a_model_blocks_middle_checkpoints(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """Amendment 09-29: a state that would not read back equal is never saved; the output still is.
    Issue 14: said loudly: a DurabilityWarning when the action is built (its state has an Any field),
    a WARNING line per kind of skipped boundary, and the count on the run and in its history."""
    with pytest.warns(DurabilityWarning, match=r"state field\(s\) anything is typed Any"):
        action = graphs.any_state()
    run_id = harness.create(action, "x")
    with caplog.at_level(logging.WARNING, logger="reflexr_graph.core.tally"):
        assert harness.attempt(action, run_id, inputs="x") == "x"
    assert harness.progressed(run_id) == [""]
    info = harness.store.get(run_id)
    assert info.skipped_boundaries >= 1
    warned = [r.getMessage() for r in caplog.records if "is not checkpointed (state" in r.getMessage()]
    assert len(warned) == len({m.split(" is not")[0] for m in warned}), "one line per kind, per attempt"
    skipped = [e for e in harness.store.events(run_id) if e.type == "boundaries_skipped"]
    assert sum(int(e.fields["count"]) for e in skipped) == info.skipped_boundaries
    assert all("state" in e.fields["kinds"] for e in skipped)


def test_generator_feeding_a_map_is_never_written_down(harness: Harness) -> None:
    """Amendment 09-29: a one-shot iterator is not serialized, so the map still gets every item."""
    action = graphs.generator_map()
    run_id = harness.create(action, 4)
    assert harness.attempt(action, run_id, inputs=4) == [0, 1, 4, 9]
    assert "map" not in harness.progressed(run_id)
    assert CALLS["square"] == 4
