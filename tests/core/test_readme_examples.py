"""The guide's map/join example runs as it is written: its code block is taken from docs/guide.md and
run to the end by real attempts against the test's Redis (tests/core/harness.py), as a worker runs
them; an edit of the guide that breaks it fails here."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from reflexr_graph import GraphAction
from tests.core.harness import Harness

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide.md"
MARKER = "<!-- tested: tests/core/test_readme_examples.py runs this block as it is -->"


def _block() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    found = re.search(re.escape(MARKER) + r"\n```python\n(.*?)\n```", text, flags=re.S)
    assert found, "the guide's tested map/join block is gone, or its marker moved off it"
    return found.group(1)


@pytest.fixture
def docpipe() -> Iterator[GraphAction]:
    """The block run as a module of its own (its dataclass and steps resolve their names there)."""
    module = types.ModuleType("guide_docpipe")
    sys.modules[module.__name__] = module
    try:
        exec(compile(_block(), "<docs/guide.md: Map and join>", "exec"), module.__dict__)
        action = module.__dict__["docpipe"]
        assert isinstance(action, GraphAction)
        yield action
    finally:
        del sys.modules[module.__name__]


def test_the_guides_map_and_join_example_runs_to_the_output_it_states(
    harness: Harness, docpipe: GraphAction
) -> None:
    run_id = harness.create(docpipe, "report")
    assert harness.attempt(docpipe, run_id) == "Page 1 of report | Page 2 of report | Page 3 of report"
    # As the guide says: a checkpoint before the map (its next node), one after the join, the end.
    assert harness.progressed(run_id) == ["map", "combine", ""]
