"""``/api/graphs``: the published graphs, with their JSON Schemas and Mermaid diagrams."""

from __future__ import annotations

from fastapi import APIRouter

from reflexr_graph.api.deps import ClientDep
from reflexr_graph.api.models import GraphOut
from reflexr_graph.api.problems import Problem

router = APIRouter(prefix="/graphs", tags=["graphs"])


@router.get("", response_model=list[GraphOut])
async def list_graphs(client: ClientDep) -> list[GraphOut]:
    """Every published graph, by name, with the live workers that serve it."""
    graphs = await client.graphs()
    serving = await client.serving([g.name for g in graphs])
    return [GraphOut(graph=g, workers=serving.get(g.name, [])) for g in graphs]


@router.get("/{name}", response_model=GraphOut, responses={404: {"model": Problem}})
async def get_graph(name: str, client: ClientDep) -> GraphOut:
    """One published graph."""
    graph = await client.graph(name)
    return GraphOut(graph=graph, workers=(await client.serving([name]))[name])
