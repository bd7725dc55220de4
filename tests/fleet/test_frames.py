"""Issue 34: a recorded traceback shows the user's frames, with the framework frames between them
folded into one line each (fleet/frames.py, used by fleet/redaction.py's safe_traceback)."""

from __future__ import annotations

import asyncio

from reflexr_graph.fleet import redaction


def user_step() -> None:
    raise ValueError("user broke")


async def user_coroutine() -> None:
    user_step()


def test_framework_frames_between_the_users_are_folded_into_one_line() -> None:
    try:
        asyncio.run(user_coroutine())
    except ValueError as exc:
        tb = redaction.safe_traceback(exc)
    files = [line.strip() for line in tb.splitlines() if line.strip().startswith(("File", "..."))]
    assert [f.split(",")[0] if f.startswith("File") else f.split(" (")[-1] for f in files] == [
        f'File "{__file__}"',
        "asyncio)",
        f'File "{__file__}"',
        f'File "{__file__}"',
    ], tb
    assert "base_events.py" not in tb and "framework frames (asyncio)" in tb
    assert tb.endswith("builtins.ValueError: user broke\n")
