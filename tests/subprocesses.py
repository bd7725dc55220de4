"""The environment every Python subprocess of the suite starts with (workers, CLIs, servers, demos).

They import reflexr_graph and ``workers`` from this checkout (``ROOT`` on PYTHONPATH), and run
without logfire as a deployment does (tests/without_logfire). Only the span probe of
tests/observability needs logfire; it starts from :func:`with_logfire`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WITHOUT_LOGFIRE = ROOT / "tests" / "without_logfire"
PYTHONPATH = os.pathsep.join([str(WITHOUT_LOGFIRE), str(ROOT)])
ENV = {
    "PYTHONPATH": PYTHONPATH,
    # logfire's pydantic plugin (an entry point) would warn at each start that it cannot load.
    "PYDANTIC_DISABLE_PLUGINS": "logfire-plugin",
}


def install() -> None:
    """Make :data:`ENV` this process's, so every subprocess inherits it (tests/conftest.py)."""
    os.environ.update(ENV)


def with_logfire(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without :data:`ENV`: a subprocess that imports the installed logfire."""
    return {k: v for k, v in env.items() if k not in ENV}
