"""Named API tokens and their roles: who may read, act on runs, or administer.

``REFLEXR_API_TOKENS`` names a file of ``name role token-hash`` lines (``#`` comments and blank
lines allowed), the hash being the token's SHA-256 in hex (``reflexr-graph token new NAME ROLE``
prints a line and its token once). The one ``REFLEXR_API_TOKEN`` (or the token ``serve``
generates) is one more, named :data:`SINGLE_TOKEN_NAME`, an admin. Only digests are kept, and a
token is found by comparing its digest with each one in constant time.

A role includes the ones below it: a ``viewer`` reads, an ``operator`` also signals, approves,
cancels and replays, an ``admin`` also purges, upgrades, rekeys and deletes schedules. What each
route needs is in ``api/roles.py``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from reflexr_graph.errors import SettingsError


class Role(IntEnum):
    """What a token may do; a higher role may do all a lower one may."""

    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        return self.name.lower()


SINGLE_TOKEN_NAME = "admin"
"""The name the single ``REFLEXR_API_TOKEN`` acts under (an admin)."""
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
"""A token's name: it is recorded as ``by`` on what the token does, so plain and short."""
HEX_DIGEST = re.compile(r"^[0-9a-f]{64}$")
NEW_TOKEN_BYTES = 32


def token_digest(token: str) -> bytes:
    """What the app keeps of a token, and compares: its SHA-256."""
    return hashlib.sha256(token.encode("utf-8")).digest()


def token_hash(token: str) -> str:
    """The hex SHA-256 a tokens file holds for ``token``."""
    return token_digest(token).hex()


@dataclass(frozen=True)
class Caller:
    """Who sent a request: the token's name (recorded as ``by``) and its role."""

    name: str
    role: Role


@dataclass(frozen=True)
class TokenEntry:
    name: str
    role: Role
    digest: bytes


class TokenBook:
    """The tokens a server takes, by digest only."""

    def __init__(self, entries: list[TokenEntry]) -> None:
        self.entries = tuple(entries)

    def __len__(self) -> int:
        return len(self.entries)

    def find(self, token: str) -> Caller | None:
        """The caller ``token`` is, or None. Every digest is compared, in constant time each, so the
        time taken does not tell which entry (or how much of one) matched."""
        given = token_digest(token)
        found: Caller | None = None
        for entry in self.entries:
            if hmac.compare_digest(given, entry.digest) and found is None:
                found = Caller(entry.name, entry.role)
        return found


def new_line(name: str, role: str) -> tuple[str, str]:
    """A fresh random token and the tokens-file line that names it ``name`` with ``role``."""
    _check_name(name, "the name")
    _role(role, "the role")
    token = secrets.token_urlsafe(NEW_TOKEN_BYTES)
    return token, f"{name} {role} {token_hash(token)}"


def load_book(path: str, single_token: str = "") -> TokenBook:
    """The tokens of the file at ``path`` ('' for none), and ``single_token`` as the admin named
    :data:`SINGLE_TOKEN_NAME` when one is given. SettingsError naming the file and line of the
    first malformed line (never its hash), or a name given twice."""
    entries = read_tokens_file(path) if path else []
    if single_token:
        entries.append(TokenEntry(SINGLE_TOKEN_NAME, Role.ADMIN, token_digest(single_token)))
    seen: set[str] = set()
    for entry in entries:
        if entry.name in seen:
            where = f"{path}: " if path else ""
            raise SettingsError(
                f"{where}the token name {entry.name!r} is given twice (REFLEXR_API_TOKEN is named "
                f"{SINGLE_TOKEN_NAME!r}): each name must be one token's, as it is recorded as 'by'"
            )
        seen.add(entry.name)
    return TokenBook(entries)


def read_tokens_file(path: str) -> list[TokenEntry]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise SettingsError(f"REFLEXR_API_TOKENS: cannot read {path}: {why}") from None
    entries = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if line:
            entries.append(_entry(line, f"{path}:{number}"))
    if not entries:
        raise SettingsError(f"REFLEXR_API_TOKENS: {path} names no token: add 'name role sha256-hex' lines")
    return entries


def _entry(line: str, where: str) -> TokenEntry:
    parts = line.split()
    if len(parts) != 3:
        raise SettingsError(
            f"{where}: expected 'name role token-sha256-hex' (3 fields), found {len(parts)} fields"
        )
    name, role, digest = parts
    _check_name(name, f"{where}: the name")
    if not HEX_DIGEST.match(digest.lower()):
        raise SettingsError(
            f"{where}: the third field must be the token's SHA-256 as 64 hex digits "
            "(reflexr-graph token hash), not the token itself"
        )
    return TokenEntry(name, _role(role, f"{where}: the role"), bytes.fromhex(digest))


def _check_name(name: str, what: str) -> None:
    if not NAME.match(name):
        raise SettingsError(
            f"{what} must be 1-64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit"
        )


def _role(role: str, what: str) -> Role:
    try:
        return Role[role.upper()]
    except KeyError:
        choices = ", ".join(r.label for r in Role)
        raise SettingsError(f"{what} must be one of {choices}") from None
