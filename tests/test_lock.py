"""The suite tests the locked set: every installed package that uv.lock names is at its locked version.

``make install`` syncs the lock exactly (``uv sync --locked``); a venv that drifted from it (a hand
``pip install -U``, an old venv, a lock refreshed without a sync) would test one set and ship
another. ``make test-latest`` tests the newest allowed releases on purpose, and says so with
``TEST_LATEST=1``, the one case where this check stands aside.
"""

from __future__ import annotations

import os
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from reflexr_graph.config.settings import check_environment

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    os.environ.get("TEST_LATEST") == "1",
    reason="make test-latest runs the newest releases, not the lock",
)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_versions() -> dict[str, set[str]]:
    """Each package of uv.lock, with every version it is locked at (one per marker split, usually one)."""
    doc = tomllib.loads((ROOT / "uv.lock").read_text())
    versions: dict[str, set[str]] = {}
    for package in doc["package"]:
        if "version" in package:
            versions.setdefault(canonical(package["name"]), set()).add(package["version"])
    return versions


def installed_versions() -> dict[str, str]:
    return {canonical(d.metadata["Name"]): d.version for d in metadata.distributions()}


def test_every_installed_package_the_lock_names_is_at_its_locked_version() -> None:
    locked, installed = locked_versions(), installed_versions()
    drift = {
        name: f"{installed[name]} installed, {' or '.join(sorted(versions))} locked"
        for name, versions in locked.items()
        if name in installed and name != "reflexr-graph" and installed[name] not in versions
    }
    assert not drift, f"the venv is not the locked set (run `make install`): {drift}"


def test_the_engine_s_own_dependencies_are_installed_from_the_lock() -> None:
    """The packages the engine is built on are present: a lock that lost one would test without it."""
    locked, installed = locked_versions(), installed_versions()
    for name in ("pydantic-graph", "pydantic-ai-slim", "redis", "celery", "kombu", "pytest-celery", "boto3"):
        assert name in locked, f"{name} is not in uv.lock"
        assert name in installed, f"{name} is locked but not installed (run `make install`)"


def test_the_lock_matches_pyproject() -> None:
    """uv.lock records the requirements it was resolved from; pyproject.toml's must be the same."""
    doc = tomllib.loads((ROOT / "uv.lock").read_text())
    project = next(p for p in doc["package"] if p["name"] == "reflexr-graph")
    locked_reqs = {canonical(r["name"]) for r in project["metadata"]["requires-dist"]}
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [
        *pyproject["dependencies"],
        *(r for reqs in pyproject["optional-dependencies"].values() for r in reqs),
    ]
    names = {canonical(re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0]) for r in declared}
    assert names == locked_reqs, "pyproject.toml changed since uv.lock was resolved: run `make lock`"


def test_the_makefile_exports_no_reflexr_variable_that_is_not_a_setting() -> None:
    """Every process of the suite refuses an unknown ``REFLEXR_*`` variable (config/settings.py), so
    a Makefile target that exported one (``make test-latest`` did) failed every test that starts a
    worker or loads the settings."""
    exported = re.findall(r"^(?:\S+:\s*)?export\s+(REFLEXR_\w+)", (ROOT / "Makefile").read_text(), re.M)
    for name in exported:
        check_environment({name: "1"})
