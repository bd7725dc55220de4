"""The web console: one page and its script, style and vendored Mermaid, all from the package.

No CDN and no build step: ``static/`` holds every file the page loads, and
``static/vendor/README.md`` says where each vendored file came from and under what license.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

router = APIRouter(include_in_schema=False)

STATIC = Path(str(resources.files("reflexr_graph.api") / "static"))


@router.get("/")
async def index() -> FileResponse:
    return FileResponse(STATIC / "index.html", media_type="text/html")


def static_files() -> StaticFiles:
    return StaticFiles(directory=STATIC)
