"""The README and the docs pages against the code and against each other: every relative link and
anchor resolves, docs/configuration.md lists exactly the settings with their defaults, docs/cli.md
exactly the CLI's commands, and no page names a setting or a command the code lacks."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from pydantic.fields import FieldInfo

from reflexr_graph.config.settings import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CONFIGURATION = DOCS / "configuration.md"
CLI_REFERENCE = DOCS / "cli.md"
PAGES = [README, *sorted(DOCS.glob("*.md")), ROOT / "deploy" / "README.md"]
# Where code, tests and deploy files cite a page's section as ``docs/<page>.md#<anchor>``.
CITING = ["reflexr_graph", "tests", "deploy", "scripts", "bench", "workers"]
CITING_SUFFIXES = {".py", ".lua", ".sh", ".yaml", ".yml", ".conf", ".toml", ".md", ".js", ".html", ".css"}

FENCE = re.compile(r"^\s*```")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")
CITED = re.compile(r"\b((?:docs/[\w-]+|README)\.md)#([\w-]+)")
COMMAND = re.compile(r"\breflexr-graph ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?(?=[\s`'\"]|$)")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _prose_and_code(path: Path) -> tuple[list[str], list[str]]:
    """The page's lines outside fenced code blocks, and those inside them."""
    prose: list[str] = []
    code: list[str] = []
    fenced = False
    for line in _text(path).splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        (code if fenced else prose).append(line)
    return prose, code


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: link text kept, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def _anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    for line in _prose_and_code(path)[0]:
        heading = re.match(r"#{1,6} (.+)", line)
        if heading:
            slug = _slug(heading.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(anchors)


def _config_rows() -> dict[str, str]:
    rows = re.findall(r"^\| `(REFLEXR_[A-Z_]+)` \| ([^|]+) \|", _text(CONFIGURATION), flags=re.MULTILINE)
    return {name: default.strip() for name, default in rows}


def _settings() -> dict[str, FieldInfo]:
    return {f"{ENV_PREFIX}{name.upper()}": field for name, field in Settings.model_fields.items()}


def _cli_commands() -> dict[str, set[str]]:
    """Each command of the CLI, with its subcommands when it is a group."""
    from typer.main import get_command

    from reflexr_graph.cli import app

    root = get_command(app)
    return {
        name: set(getattr(command, "commands", None) or ())
        for name, command in root.commands.items()  # type: ignore[attr-defined]
    }


def _known(command: str, sub: str | None) -> bool:
    commands = _cli_commands()
    if command not in commands:
        return False
    return not commands[command] or sub is None or sub in commands[command]


def test_readme_leads_with_the_two_commands() -> None:
    readme = _text(README)
    head = readme[: readme.index("## ")]
    assert "make run" in head and "make test" in head


def test_readme_is_short() -> None:
    """A newcomer reads what it is, a graph, the concepts and the guarantees; the rest is in docs/."""
    assert len(_text(README).splitlines()) < 400


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken: list[str] = []
    for line in _prose_and_code(page)[0]:
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{target}: no such file")
            elif anchor and (file.suffix != ".md" or anchor not in _anchors(file)):
                broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, broken


def test_every_page_section_the_code_cites_exists() -> None:
    """``docs/design.md#celery-on-redis`` in a comment or a message names a heading that is there."""
    broken: list[str] = []
    for top in CITING:
        for file in (ROOT / top).rglob("*"):
            if file.suffix not in CITING_SUFFIXES or "vendor" in file.parts or not file.is_file():
                continue
            for page, anchor in CITED.findall(_text(file)):
                if anchor not in _anchors(ROOT / page):
                    broken.append(f"{file.relative_to(ROOT)}: {page}#{anchor}")
    assert not broken, broken


def test_every_setting_is_documented_with_its_default() -> None:
    rows = _config_rows()
    expected = _settings()
    assert set(rows) == set(expected), "docs/configuration.md's table and Settings disagree"
    for env_name, field in expected.items():
        default = field.default
        shown = "(none)" if default in ((), None, "") else f"`{default}`"
        assert rows[env_name] == shown, f"{env_name}: the page says {rows[env_name]}, code says {shown}"


def test_every_setting_a_page_names_exists() -> None:
    named = {
        (page.name, name)
        for page in PAGES
        for name in re.findall(r"\b(REFLEXR_[A-Z][A-Z0-9_]*[A-Z0-9])\b", _text(page))
    }
    unknown = sorted(f"{page}: {name}" for page, name in named if name not in _settings())
    assert not unknown, unknown


def test_every_cli_command_is_in_the_reference() -> None:
    reference = _text(CLI_REFERENCE)
    for name, subs in _cli_commands().items():
        for full in [f"{name} {sub}" for sub in subs] or [name]:
            row = re.search(rf"^\| `{re.escape(full)}[ `]", reference, flags=re.MULTILINE)
            assert row, f"`reflexr-graph {full}` is missing from docs/cli.md"


def test_every_command_in_the_reference_exists() -> None:
    rows = re.findall(r"^\| `([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", _text(CLI_REFERENCE), flags=re.MULTILINE)
    assert rows, "docs/cli.md has no command table"
    unknown = [" ".join(filter(None, row)) for row in rows if not _known(row[0], row[1] or None)]
    assert not unknown, f"docs/cli.md documents commands the CLI lacks: {unknown}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_a_page_shows_exists(page: Path) -> None:
    """``reflexr-graph <command>`` in an example or an inline code span is a command the CLI has."""
    prose, code = _prose_and_code(page)
    spans = [span for line in prose for span in re.findall(r"`([^`]+)`", line)]
    unknown = [
        " ".join(filter(None, found))
        for text in code + spans
        for found in COMMAND.findall(text)
        if not _known(found[0], found[1] or None)
    ]
    assert not unknown, f"{page.name} shows commands the CLI lacks: {unknown}"
