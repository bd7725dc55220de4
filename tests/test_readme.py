"""The README's configuration table and CLI reference must match the code."""

from __future__ import annotations

import re
from pathlib import Path

from reflexr_graph.config.settings import ENV_PREFIX, Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _config_rows() -> dict[str, str]:
    rows = re.findall(r"^\| `(REFLEXR_[A-Z_]+)` \| ([^|]+) \|", README, flags=re.MULTILINE)
    return {name: default.strip() for name, default in rows}


def test_readme_leads_with_the_two_commands() -> None:
    head = README[: README.index("## ")]
    assert "make run" in head and "make test" in head


def test_every_setting_is_documented_with_its_default() -> None:
    rows = _config_rows()
    expected = {f"{ENV_PREFIX}{name.upper()}": field for name, field in Settings.model_fields.items()}
    assert set(rows) == set(expected), "README configuration table and Settings disagree"
    for env_name, field in expected.items():
        default = field.default
        shown = "(none)" if default in ((), None, "") else f"`{default}`"
        assert rows[env_name] == shown, f"{env_name}: README says {rows[env_name]}, code says {shown}"


def test_every_cli_command_is_in_the_reference() -> None:
    from typer.main import get_command

    from reflexr_graph.cli import app

    root = get_command(app)
    names: list[str] = []
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        sub = getattr(command, "commands", None)
        names += [f"{name} {s}" for s in sub] if sub else [name]
    for name in names:
        assert f"| `{name}" in README, f"`reflexr-graph {name}` is missing from the README's CLI reference"
