"""The part of the Lua prelude (``lua/_lib.lua``) that one script uses.

Redis runs a script's whole text on every EVALSHA: each ``local function`` of the prelude is
made again, and each of its tables built, whether the script calls it or not. Most scripts call
a third of it, so each is given only the top-level definitions its body reaches (directly or
through the definitions it uses), in the prelude's order. The cut is made only where the
prelude is plainly laid out, each top-level statement starting at column 0 with ``local``; any
other top-level line (an assignment, a call) keeps the whole prelude, so nothing is ever left
out that a line outside a definition would need.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FUNCTION = re.compile(r"local function ([A-Za-z_][A-Za-z0-9_]*)")
_STRING = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")
_COMMENT = re.compile(r"--[^\n]*")
_CLOSERS = ("end", "}", ")")


@dataclass(frozen=True)
class _Definition:
    names: frozenset[str]
    text: str
    uses: frozenset[str]


def _names_used(code: str) -> set[str]:
    return set(_NAME.findall(_COMMENT.sub("", _STRING.sub("''", code))))


def _defines(head: str) -> frozenset[str]:
    found = _FUNCTION.match(head)
    if found:
        return frozenset({found.group(1)})
    targets = head.removeprefix("local ").split("=", 1)[0]
    return frozenset(name.strip() for name in targets.split(","))


def _split(lib: str) -> tuple[str, list[_Definition]] | None:
    """The header before the first definition, and the definitions (each with the comments just
    above it); None when a top-level line is neither a definition nor one's continuation."""
    header: list[str] = []
    pending: list[str] = []
    blocks: list[list[str]] = []
    for line in lib.splitlines():
        if line.startswith("local "):
            blocks.append([*pending, line])
            pending = []
        elif not line.strip() or line.startswith("--"):
            (pending if blocks else header).append(line)
        elif line[0].isspace() or line.startswith(_CLOSERS):
            if not blocks:
                return None
            blocks[-1] += [*pending, line]
            pending = []
        else:
            return None
    definitions = []
    for block in blocks:
        head = next(line for line in block if line.startswith("local "))
        text = "\n".join(block)
        definitions.append(_Definition(_defines(head), text, frozenset(_names_used(text))))
    return "\n".join(header), definitions


def needed(lib: str, body: str) -> str:
    """The prelude ``lib`` cut to the definitions ``body`` reaches, in their order."""
    split = _split(lib)
    if split is None:
        return lib
    header, definitions = split
    defined = {name for d in definitions for name in d.names}
    want = _names_used(body) & defined
    grew = True
    while grew:
        grew = False
        for d in definitions:
            if d.names & want and not (d.uses & defined) <= want:
                want |= d.uses & defined
                grew = True
    kept = [d.text for d in definitions if d.names & want]
    return "\n".join([header, *kept])
