"""pydantic-ai agents inside steps, durable with no code of their own: ``durable_agent(agent)``.

Needs the ``ai`` extra, ``pip install 'reflexr-graph[ai]'``; ``import reflexr_graph`` alone
never loads pydantic-ai.
"""

from reflexr_graph.core.steps import STEP_SCOPES
from reflexr_graph.errors import ExtraNotInstalled

try:
    from reflexr_graph.ai.agent import DurableAgent, durable_agent
    from reflexr_graph.ai.capability import StepDurability
    from reflexr_graph.ai.events import step_scope
except ImportError as missing:
    if not (missing.name or "").startswith("pydantic_ai"):
        raise
    raise ExtraNotInstalled(
        "reflexr_graph.ai needs pydantic-ai-slim 2.68 or later (below 3): install the ai extra, "
        "pip install 'reflexr-graph[ai]'"
    ) from missing

if step_scope not in STEP_SCOPES:
    # wait_for_external_event called directly in a step waits durably too, not in the process.
    STEP_SCOPES.append(step_scope)

__all__ = ["DurableAgent", "StepDurability", "durable_agent"]
