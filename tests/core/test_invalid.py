"""core/invalid.py: the one place a ValidationError is told, never with the values it rejected (G6)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError, field_validator

import reflexr_graph
from reflexr_graph.cli.report import problem_of
from reflexr_graph.core import invalid

SECRET = "s3cr3t-value-4711"


class Item(BaseModel):
    name: str
    count: int


class Order(BaseModel):
    items: list[Item]
    note: int

    @field_validator("note")
    @classmethod
    def _small(cls, value: int) -> int:
        if value > 10:
            raise ValueError("must be at most 10")
        return value


def _error() -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        Order.model_validate({"items": [{"name": "a", "count": 1}, {"name": 7, "count": SECRET}], "note": 11})
    return caught.value


def test_fields_keep_where_and_why_and_never_the_value() -> None:
    found = invalid.fields(_error(), under=("inputs",))
    assert [f["loc"] for f in found] == [
        ["inputs", "items", 1, "name"],
        ["inputs", "items", 1, "count"],
        ["inputs", "note"],
    ]
    assert found[2] == {"loc": ["inputs", "note"], "msg": "must be at most 10", "type": "value_error"}
    assert all(set(f) == {"loc", "msg", "type"} for f in found)
    assert SECRET not in repr(found) and SECRET in str(_error()), "pydantic's own text does quote it"


def test_describe_and_summary_name_locations_as_the_cli_prints_them() -> None:
    text = invalid.describe(_error(), under=("inputs",))
    assert text.startswith("inputs.items[1].name: Input should be a valid string; inputs.items[1].count: ")
    assert text.endswith("; inputs.note: must be at most 10")
    with pytest.raises(ValidationError) as root:
        TypeAdapter(int).validate_python(SECRET)
    assert (
        invalid.describe(root.value)
        == "(root): Input should be a valid integer, unable to parse string as an integer"
    )
    assert invalid.describe(root.value, where=lambda loc: "") == (
        "Input should be a valid integer, unable to parse string as an integer"
    )
    summary = invalid.summary(_error())
    assert summary.startswith("3 validation error(s) for Order: items[1].name: ") and SECRET not in summary
    # The same helper reads FastAPI's error dicts, which carry the input too.
    assert invalid.fields([{"loc": ("body", "x"), "msg": "bad", "type": "t", "input": SECRET}]) == [
        {"loc": ["body", "x"], "msg": "bad", "type": "t"}
    ]


def test_an_unexpected_validation_error_in_the_cli_names_its_locations() -> None:
    message = problem_of(_error()).message
    assert "3 validation error(s) for Order: items[1].name: Input should be a valid string" in message
    assert SECRET not in message


def test_no_other_module_renders_a_validation_error_itself() -> None:
    """The helper is the only reader of ``ValidationError.errors()`` and ``error_count()``."""
    package = Path(reflexr_graph.__file__).parent
    readers = {
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if re.search(r"\.errors\(include_|\.error_count\(\)", path.read_text())
    }
    assert readers == {"core/invalid.py"}
