"""``/api/graphs``: the published graphs, with their JSON Schemas and Mermaid diagrams."""

from __future__ import annotations

from fastapi import APIRouter

from reflexr_graph.api.deps import ClientDep
from reflexr_graph.api.models import GraphOut
from reflexr_graph.api.problems import Problem
from reflexr_graph.model import ServedVersion

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


@router.get("/{name}/versions", response_model=list[ServedVersion], responses={404: {"model": Problem}})
async def get_graph_versions(name: str, client: ClientDep) -> list[ServedVersion]:
    """Each published version of the graph, newest first: its fingerprint or label, when it was
    first published, its nodes, the live workers that serve it (runs stay on theirs, G9) and what
    its runs do once none does (``on_new_version``, ``on_incompatible``)."""
    await client.graph(name)  # 404 for a graph never published
    return await client.versions(name)
