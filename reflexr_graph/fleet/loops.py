"""Where an attempt's event loop runs, for each Celery pool the fleet supports.

- prefork: each pool child runs attempts on its own thread, one at a time, with one event
  loop kept for the child's life (building one per attempt was a tenth of a short run's cost).
- threads: several attempts run at once in one process, one per pool thread, so each
  thread keeps its own loop; one loop shared by threads fails with "This event loop is
  already running".
- solo: the attempt runs in the worker's main process, whose main thread must stay free
  for Celery's signal handlers: a soft shutdown sleeps in that thread for its timeout,
  which would freeze the step. The attempt's loop runs on a thread of its own instead, and
  the main thread waits for it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_runners: dict[tuple[int, int], asyncio.Runner] = {}
"""Each thread's loop, by (pid, thread id): kept for the process's life, as the pool's threads are."""
_runners_lock = threading.Lock()
_offload = False
_offload_lock = threading.Lock()
_loop_thread: tuple[int, asyncio.AbstractEventLoop] | None = None


def offload_from_main_thread() -> None:
    """Run attempts started on this process's main thread on a loop thread (the solo pool).

    Only when called on the main thread: a worker embedded in a test runs its pool elsewhere.
    """
    global _offload
    if threading.current_thread() is threading.main_thread():
        _offload = True


def _runner() -> asyncio.Runner:
    """This thread's loop, kept across attempts; a forked pool child never reuses its parent's."""
    key = (os.getpid(), threading.get_ident())
    with _runners_lock:
        runner = _runners.get(key)
        if runner is None:
            runner = _runners[key] = asyncio.Runner()
        return runner


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop_thread
    with _offload_lock:
        pid = os.getpid()
        if _loop_thread is None or _loop_thread[0] != pid:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="reflexr-attempt-loop", daemon=True)
            thread.start()
            _loop_thread = (pid, loop)
        return _loop_thread[1]


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run an attempt's coroutine to its end on the loop this thread should use, and return its result."""
    if _offload and threading.current_thread() is threading.main_thread():
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, _background_loop())
        try:
            # Waiting on a future is interruptible: Celery's signal handlers still run in this thread.
            return future.result()
        except FutureCancelled:
            # The attempt's task was cancelled: the same as on a thread's own loop.
            raise asyncio.CancelledError from None
    return _runner().run(coro)
