"""Tags: ``key=value`` labels a producer gives a run (``enqueue(..., tags={...})``), to find and
operate runs in groups ("every run of tenant acme", "every run schedule nightly started").

Keys and values keep to a small charset with no ``=``, ``,`` or space, so ``--tag k=v`` on the
command line, a query string and the store's index key (``store/keys.py: tag_index``) each read
them back unambiguously. Errors name the tag's position or key, never its value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from reflexr_graph import errors

MAX_TAGS = 16
"""The most tags one run carries; each is one index entry, written when the run is created."""
MAX_KEY_CHARS = 63
MAX_VALUE_CHARS = 128
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/]*")
_VALUE = re.compile(r"[A-Za-z0-9_.:@/\-]+")

Tags = dict[str, str]


def _invalid(loc: list[object], msg: str, kind: str) -> errors.InvalidInputs:
    return errors.InvalidInputs(f"invalid tags: {msg}", [{"loc": loc, "msg": msg, "type": kind}])


def _check_key(key: object, position: int) -> str:
    if not isinstance(key, str) or not _KEY.fullmatch(key) or len(key) > MAX_KEY_CHARS:
        raise _invalid(
            ["tags", position],
            f"tag key {position + 1} must be 1 to {MAX_KEY_CHARS} of A-Z a-z 0-9 _ . - / starting with a "
            "letter or digit",
            "tag_key",
        )
    return key


def _check_value(key: str, value: object) -> str:
    if not isinstance(value, str) or not _VALUE.fullmatch(value) or len(value) > MAX_VALUE_CHARS:
        raise _invalid(
            ["tags", key],
            f"the value of tag {key!r} must be a string of 1 to {MAX_VALUE_CHARS} of A-Z a-z 0-9 _ . : @ / -",
            "tag_value",
        )
    return value


def check_tags(tags: Mapping[str, Any] | None) -> Tags:
    """``tags`` validated, keys sorted; an empty dict for none. InvalidInputs says what to fix."""
    if not tags:
        return {}
    if not isinstance(tags, Mapping):
        raise _invalid(["tags"], "tags must be a mapping of key to value", "tags")
    if len(tags) > MAX_TAGS:
        raise _invalid(["tags"], f"a run takes at most {MAX_TAGS} tags", "too_many_tags")
    checked = {_check_key(k, i): v for i, (k, v) in enumerate(tags.items())}
    return {k: _check_value(k, checked[k]) for k in sorted(checked)}


def parse_tag(text: str) -> tuple[str, str]:
    """``key=value`` (the CLI's ``--tag``, the API's ``tag`` query) as a checked pair."""
    key, sep, value = text.partition("=")
    if not sep:
        raise _invalid(["tags"], "a tag is written key=value", "tag_syntax")
    ((key, value),) = check_tags({key: value}).items()
    return key, value


def parse_tags(texts: Sequence[str] | None) -> Tags:
    """Several ``key=value`` texts as one checked mapping; a key given twice is refused."""
    pairs = [parse_tag(t) for t in texts or ()]
    found = dict(pairs)
    if len(found) != len(pairs):
        raise _invalid(["tags"], "each tag key may be given once", "tag_repeated")
    return check_tags(found)


def tags_json(tags: Tags) -> str:
    """The run hash's ``tags`` field: compact JSON, keys sorted; '' for none (no field written)."""
    return json.dumps(tags, separators=(",", ":"), sort_keys=True) if tags else ""


def tags_of(raw: str) -> Tags:
    """The tags of a run hash's ``tags`` field ('' for none)."""
    if not raw:
        return {}
    found = json.loads(raw)
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def matches(tags: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    """True when ``tags`` has every key of ``wanted`` with its value."""
    return all(tags.get(k) == v for k, v in wanted.items())
