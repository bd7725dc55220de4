"""Who answered a wait reaches the agent as each call's ``answered_by`` (issue 35), and a token
names its run and nothing else."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter
from pydantic_ai.tools import DeferredToolResults

from reflexr_graph import errors
from reflexr_graph.ai.events import outcome_of
from reflexr_graph.store import asks


def test_the_answerer_is_each_calls_answered_by_unless_the_decision_names_one() -> None:
    payload = {"approvals": {"c1": True, "c2": False}, "answered_by": {"c2": "policy"}}
    got = outcome_of({"payload": payload, "by": "alice", "at": 1})
    results = TypeAdapter(DeferredToolResults).validate_python(got)
    assert results.answered_by == {"c1": "alice", "c2": "policy"}
    assert outcome_of({"payload": "yes", "by": "alice"}) == "yes"  # not deferred results: as it is


def test_a_token_is_checked_before_it_names_any_key() -> None:
    token = asks.new_token("run-1")
    run_id, digest = asks.parse_token(token)
    assert run_id == "run-1" and digest == asks.token_digest(token) and len(token) == len("run-1~") + 32
    for bad in ["", "run-1", "run-1~short", "rg:{s1}:x~" + "A" * 32, "run-1~" + "A" * 31 + "!", 7]:
        with pytest.raises(errors.EventTokenInvalid):
            asks.parse_token(bad)
