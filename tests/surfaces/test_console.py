"""The web console in a real headless Chromium, against a real server, Redis and workers.

One browser serves the whole session; each test takes screenshots of the pages it visits into
the session's output directory (``<pytest basetemp>/console-screenshots``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import redis
from selenium import webdriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from reflexr_graph import local_processes, schemas
from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.fleet.outcome import Outcome
from reflexr_graph.fleet.task import handle
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from tests.ai import approval_graphs
from tests.fleet.graphs import fanout
from tests.fleet.inproc import fleet_app
from tests.surfaces.browser import chromium, find, until
from tests.surfaces.conftest import ROOT, ApiServer, serving
from tests.surfaces.graphs import chain, journey, ok_key, orders, release_key, talker
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="session")
def browser() -> Iterator[webdriver.Chrome]:
    with chromium() as driver:
        yield driver


@pytest.fixture(scope="session")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.getbasetemp() / "console-screenshots"
    path.mkdir(exist_ok=True)
    return path


@dataclass
class Console:
    """What a console test drives: the browser, the server it opens, the test's Redis, where shots go."""

    browser: webdriver.Chrome
    server: ApiServer
    redis: redis.Redis
    shots: Path

    def shot(self, name: str, at: str | None = None) -> None:
        """A screenshot of the window, scrolled first to the element ``at`` (a CSS selector)."""
        if at is not None:
            self.browser.execute_script("document.querySelector(arguments[0]).scrollIntoView()", at)
        self.browser.save_screenshot(str(self.shots / f"{name}.png"))


def _fresh(browser: webdriver.Chrome, server: ApiServer) -> None:
    """Empty the server origin's storage in the browser (the token, the remembered choices), as a
    new origin has it: the tests share one server, so they share its origin."""
    browser.get(f"{server.url}/healthz")  # leaves the test before's page, and its event streams
    browser.execute_script("localStorage.clear(); sessionStorage.clear()")


@pytest.fixture
def console(
    browser: webdriver.Chrome, api_server: ApiServer, redis_client: redis.Redis, shots: Path
) -> Console:
    """The browser on the module's server, with nothing left in its storage by the test before; a
    test that stops its server takes :func:`own_console`."""
    _fresh(browser, api_server)
    return Console(browser, api_server, redis_client, shots)


@pytest.fixture
def own_console(
    browser: webdriver.Chrome, own_api_server: ApiServer, redis_client: redis.Redis, shots: Path
) -> Console:
    """The browser on a server of the test's own, which the test may stop."""
    _fresh(browser, own_api_server)
    return Console(browser, own_api_server, redis_client, shots)


def _open(browser: webdriver.Chrome, server: ApiServer, page: str) -> None:
    """Open the console with the server's token entered, as a person would, then go to ``page``."""
    browser.get(f"{server.url}/#/{page}")
    until(browser, lambda d: find(d, "#token"), "the console")
    browser.execute_script("sessionStorage.clear()")
    box = browser.find_element(By.ID, "token")
    box.clear()
    box.send_keys(server.token)
    browser.find_element(By.CSS_SELECTOR, "#token-form button").click()


# The pages re-render as runs change, so state is read in one script call, never through an
# element found earlier (which a re-render makes stale).


def _text(browser: webdriver.Chrome, css: str) -> str:
    found = browser.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : ''", css
    )
    return str(found)


def _click(browser: webdriver.Chrome, css: str) -> None:
    browser.execute_script("document.querySelector(arguments[0]).click()", css)


def _click_svg_until(
    browser: webdriver.Chrome, css: str, shown: Callable[[webdriver.Chrome], bool], what: str
) -> None:
    """Click the SVG element ``css`` (it has no click(): the event a click sends) until ``shown``:
    the chart is drawn again as the run's events come in, and a click that lands on a span the
    redraw has just replaced goes nowhere. Clicked again at most once a second."""
    clicked_at = [-1.0]

    def clicked_and_shown(driver: webdriver.Chrome) -> bool:
        if shown(driver):
            return True
        if time.monotonic() - clicked_at[0] >= 1.0:
            clicked_at[0] = time.monotonic()
            driver.execute_script(  # gone once the click took the page elsewhere
                "document.querySelector(arguments[0])"
                "?.dispatchEvent(new MouseEvent('click', {bubbles: true}))",
                css,
            )
        return False

    until(browser, clicked_and_shown, what)


def _status_in_row(browser: webdriver.Chrome, run_id: str) -> str:
    return _text(browser, f'tr[data-run="{run_id}"] .badge')


def _marks(browser: webdriver.Chrome) -> dict[str, str]:
    script = (
        "return Object.fromEntries([...document.querySelectorAll('#node-marks li')]"
        ".map(li => [li.dataset.node, li.dataset.mark]))"
    )
    return dict(browser.execute_script(script))


def test_a_run_goes_from_queued_to_succeeded_without_a_reload(
    console: Console, start_worker: Callable[[], subprocess.Popen[bytes]]
) -> None:
    browser, api_server, redis_client = console.browser, console.server, console.redis
    _open(browser, api_server, "runs")
    browser.execute_script("window.__sameDocument = true")  # gone if the page reloads
    with api_server.http() as http:
        run_id = http.post("/api/runs", json={"graph": "blocker", "inputs": "live-1"}).json()["run_id"]
    until(browser, lambda d: _status_in_row(d, run_id) == "queued", "the new run, queued")
    start_worker()
    until(browser, lambda d: _status_in_row(d, run_id) == "running", "the run to start")
    console.shot("runs")
    redis_client.rpush(release_key("live-1"), 1)
    until(browser, lambda d: _status_in_row(d, run_id) == "succeeded", "the run to succeed")
    assert browser.execute_script("return window.__sameDocument") is True

    _click(browser, f'a[href="#/run/{run_id}"]')
    until(browser, lambda d: find(d, "#run-output") is not None, "the run's output")
    until(browser, lambda d: _marks(d).get("hold") == "done", "the diagram's node marked done")
    assert _text(browser, "#run-output") == '"live-1"'
    until(browser, lambda d: find(d, '#timeline tr[data-event="run_succeeded"]'), "the timeline's last event")
    assert browser.find_elements(By.CSS_SELECTOR, "#run-diagram svg")
    console.shot("run")


def test_a_run_page_follows_the_run_again_after_the_server_restarts(
    own_console: Console, env: dict[str, str]
) -> None:
    """The run's event stream ends when its server stops; the page follows it again from the last
    event it saw once a server answers on that address, without a reload."""
    browser, api_server = own_console.browser, own_console.server
    with api_server.http() as http:
        run_id = http.post("/api/runs", json={"graph": "blocker", "inputs": "restart"}).json()["run_id"]
    _open(browser, api_server, f"run/{run_id}")
    until(browser, lambda d: find(d, '#timeline tr[data-event="run_enqueued"]'), "the timeline")
    browser.execute_script("window.__sameDocument = true")  # gone if the page reloads
    api_server.proc.send_signal(signal.SIGTERM)
    api_server.proc.wait(timeout=30)
    port = int(api_server.url.rsplit(":", 1)[1])
    with serving(env, port) as again, again.http() as http:
        assert http.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"
        until(browser, lambda d: find(d, '#run-summary [data-status="cancelled"]'), "the run, cancelled")
        until(browser, lambda d: find(d, '#timeline tr[data-event="run_cancelled"]'), "its cancel event")
    assert len(browser.find_elements(By.CSS_SELECTOR, '#timeline tr[data-event="run_enqueued"]')) == 1
    assert browser.execute_script("return window.__sameDocument") is True


def test_a_dead_run_is_replayed_with_the_button_and_succeeds(
    console: Console, worker: subprocess.Popen[bytes]
) -> None:
    browser, api_server, redis_client = console.browser, console.server, console.redis
    with api_server.http() as http:
        run_id = http.post(
            "/api/runs", json={"graph": "counter", "inputs": {"key": "poison", "n": 4}}
        ).json()["run_id"]
    _open(browser, api_server, "dead")
    until(browser, lambda d: find(d, f'#dead-body tr[data-run="{run_id}"]'), "the dead letter")
    assert "s2 is told to fail" in _text(browser, f'tr[data-run="{run_id}"]')
    console.shot("dead-letters")

    _click(browser, f'a[href="#/run/{run_id}"]')
    until(browser, lambda d: find(d, "#run-traceback") is not None, "the traceback")
    until(browser, lambda d: _marks(d) == {"s1": "done", "s2": "failed"}, "s1 done and s2 failed")
    shown = _text(browser, "#run-traceback")
    assert "RunFailure" in shown
    # Issue 34: the user's step is the first frame shown whole; the framework's are folded.
    assert "framework frames" in shown and "celery/app/trace.py" not in shown
    console.shot("dead-run")

    redis_client.set(ok_key("poison"), 1)  # the cause is fixed
    browser.find_element(By.ID, "replay").click()
    until(browser, lambda d: d.find_element(By.ID, "confirm").is_displayed(), "the confirmation")
    assert "from its last checkpoint" in browser.find_element(By.ID, "confirm-text").text
    browser.find_element(By.ID, "confirm-yes").click()
    until(
        browser,
        lambda d: find(d, '#run-summary [data-status="succeeded"]') is not None,
        "the replay to succeed",
    )
    until(browser, lambda d: _marks(d) == {"s1": "done", "s2": "done", "s3": "done"}, "every node done")
    until(browser, lambda d: _text(d, "#run-output") == "5", "the output: 4 from s1, 1 from s2")
    # Issue 34: the replay's attempt is numbered on after the dead run's, not "attempt 1" again.
    rows = _gantt(browser)
    assert [r["attempt"] for r in rows] == ["1", "1"], "the store numbers the replay's attempts afresh"
    assert [r["label"] for r in rows] == ["attempt 1", "attempt 2"]


def test_graphs_show_their_diagrams_and_enqueue_through_a_form_from_the_schema(
    console: Console, worker: subprocess.Popen[bytes]
) -> None:
    browser, api_server, redis_client = console.browser, console.server, console.redis
    redis_client.set(ok_key("formed"), 1)
    with api_server.http() as http:  # the page reads the graphs once: the worker's are published first
        wait_for(lambda: http.get("/api/graphs/chain").status_code == 200, what="the worker's graphs")
    _open(browser, api_server, "graphs")
    until(
        browser,
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "section[data-graph] .diagram svg")) == 8,
        "diagrams",
    )
    console.shot("graphs")
    # The budget each run gets, not "default", for a graph whose action sets none (issue 25).
    assert _text(browser, 'section[data-graph="blocker"] p.muted').endswith("max attempts 5")
    # Each graph's versions (issue 20): the one this worker serves, with its nodes and the worker.
    row = 'details[data-versions="counter"] tbody tr'
    until(browser, lambda d: find(d, row), "the counter graph's versions")
    shown = browser.find_element(By.CSS_SELECTOR, row).get_attribute("textContent") or ""
    assert "s1, s2" in shown and "no live worker" not in shown, shown
    browser.find_element(By.ID, "enqueue-counter-key").send_keys("formed")
    browser.find_element(By.ID, "enqueue-counter-n").send_keys("5")
    browser.find_element(By.ID, "enqueue-counter").click()
    until(
        browser, lambda d: find(d, '#run-summary [data-status="succeeded"]') is not None, "the enqueued run"
    )
    until(browser, lambda d: _text(d, "#run-output") == "6", "the output")


def test_a_waiting_run_takes_its_signal_through_a_form_from_the_signal_schema(
    console: Console, worker: subprocess.Popen[bytes]
) -> None:
    browser, api_server = console.browser, console.server
    with api_server.http() as http:
        run_id = http.post("/api/runs", json={"graph": "approvals", "inputs": "contract"}).json()["run_id"]
    _open(browser, api_server, f"run/{run_id}")
    until(browser, lambda d: find(d, "#signal-by") is not None, "the signal form of the waiting run")
    until(browser, lambda d: _marks(d) == {"decide": "waiting"}, "the waiting node marked")
    # Numbered as the timeline numbers it, and as the CLI shows it: attempt 1, which did not count.
    summary = _text(browser, "#run-summary")
    assert (
        "attempt1 (0/" in summary and "counted toward max attempts; 1 ended waiting, not counted" in summary
    )
    browser.find_element(By.ID, "signal-approved").click()
    browser.find_element(By.ID, "signal-by").send_keys("on-call")
    console.shot("waiting-run")
    _click(browser, "#send-signal")
    until(
        browser, lambda d: find(d, '#run-summary [data-status="succeeded"]') is not None, "the run to finish"
    )
    until(browser, lambda d: _text(d, "#run-output") == '"contract: approved by on-call"', "the output")
    assert find(browser, "#signal-by") is None, "a finished run has no signal form"


def test_a_checkpoint_is_shown_and_forked_with_an_edited_state(
    console: Console, worker: subprocess.Popen[bytes]
) -> None:
    browser, api_server = console.browser, console.server
    schemas.publish(console.redis, [chain])
    with api_server.http() as http:
        source = http.post("/api/runs", json={"graph": "chain", "inputs": "tt"}).json()["run_id"]
    _open(browser, api_server, f"run/{source}")
    until(browser, lambda d: find(d, '#run-summary [data-status="succeeded"]') is not None, "the run")
    until(
        browser,
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#checkpoints tbody tr")) == 6,
        "6 checkpoints",
    )
    _click(browser, '.show-checkpoint[data-seq="3"]')
    until(browser, lambda d: find(d, "#fork-state") is not None, "checkpoint 3 with its state")
    assert '"next_inputs": "tt"' in _text(browser, "#checkpoint-values")
    state = browser.find_element(By.ID, "fork-state")
    assert '"total": 6' in str(state.get_attribute("value"))
    state.clear()
    state.send_keys('{"total": 100, "visited": ["edited"]}')
    console.shot("checkpoint")
    _click(browser, "#fork")
    until(browser, lambda d: d.find_element(By.ID, "confirm").is_displayed(), "the confirmation")
    assert "checkpoint #3" in browser.find_element(By.ID, "confirm-text").text
    browser.find_element(By.ID, "confirm-yes").click()
    until(browser, lambda d: find(d, "#forked-from") is not None, "the fork's page, with its lineage")
    assert _text(browser, "#forked-from") == source
    until(browser, lambda d: _text(d, "#run-output") == "115", "the fork's output: 100 + t4 + t5 + t6")
    # What the fork ran, not what its source ran before the checkpoint it was forked from.
    until(browser, lambda d: _marks(d) == {"t4": "done", "t5": "done", "t6": "done"}, "the fork's steps")


def _shown(browser: webdriver.Chrome, graph: str, *names: str) -> list[object]:
    script = (
        "return arguments[1].map((n) => { const f = document.getElementById(`enqueue-${arguments[0]}-${n}`);"
        " return f.type === 'checkbox' ? f.checked : f.value; })"
    )
    return list(browser.execute_script(script, graph, list(names)))


def _enqueued_inputs(console: Console) -> object:
    """The inputs recorded for the run the form just enqueued (its page is open)."""
    until(
        console.browser,
        lambda d: str(d.execute_script("return location.hash")).startswith("#/run/"),
        "the run",
    )
    run_id = str(console.browser.execute_script("return decodeURIComponent(location.hash.slice(6))"))
    # Inputs longer than a listpack value are a key of their own (keys.inputs), short ones a field.
    recorded = console.redis.hget(keys.run(run_id), "inputs") or console.redis.get(keys.inputs(run_id))
    assert recorded is not None, run_id
    return json.loads(recorded)


def test_the_enqueue_form_shows_each_default_and_sends_what_the_user_set(console: Console) -> None:
    """A bool that defaults to True starts checked and is sent as true (it used to be sent as false)."""
    browser, api_server = console.browser, console.server
    schemas.publish(console.redis, [orders])
    _open(browser, api_server, "graphs")
    until(browser, lambda d: find(d, "#enqueue-orders-require_approval"), "the enqueue form")
    fields = ("item", "require_approval", "rush", "copies")
    assert _shown(browser, "orders", *fields) == ["", True, False, "2"]
    console.shot("enqueue-defaults")
    browser.find_element(By.ID, "enqueue-orders-item").send_keys("book")
    browser.find_element(By.ID, "enqueue-orders").click()
    assert _enqueued_inputs(console) == {
        "item": "book",
        "require_approval": True,
        "rush": False,
        "copies": 2,
    }

    _open(browser, api_server, "graphs")
    until(browser, lambda d: find(d, "#enqueue-orders-require_approval"), "the enqueue form")
    browser.find_element(By.ID, "enqueue-orders-item").send_keys("pen")
    browser.find_element(By.ID, "enqueue-orders-require_approval").click()
    browser.find_element(By.ID, "enqueue-orders-rush").click()
    copies = browser.find_element(By.ID, "enqueue-orders-copies")
    copies.clear()
    copies.send_keys("3")
    assert _shown(browser, "orders", *fields) == ["pen", False, True, "3"]
    browser.find_element(By.ID, "enqueue-orders").click()
    assert _enqueued_inputs(console) == {
        "item": "pen",
        "require_approval": False,
        "rush": True,
        "copies": 3,
    }


def test_diagrams_keep_mermaids_styles_under_a_csp_without_unsafe_inline(console: Console) -> None:
    browser, api_server = console.browser, console.server
    schemas.publish(console.redis, [orders])
    with api_server.http() as http:
        csp = http.get("/").headers["content-security-policy"]
        run_id = http.post("/api/runs", json={"graph": "orders", "inputs": {"item": "ink"}}).json()["run_id"]
    assert "style-src 'self';" in csp and "unsafe-inline" not in csp
    _open(browser, api_server, f"run/{run_id}")
    until(browser, lambda d: _marks(d) == {"place": "current"}, "the queued run's node marked current")
    until(browser, lambda d: find(d, "#run-diagram svg"), "the diagram")
    console.shot("diagram-under-csp")
    probe = browser.execute_script(
        """
        const svg = document.querySelector('#run-diagram svg');
        const node = [...svg.querySelectorAll('g.node')].find((g) => g.textContent.trim() === 'place');
        return {
          styleElements: document.querySelectorAll('#view style').length,
          marked: getComputedStyle(node.querySelector('rect, path, polygon')).fill,
          edge: getComputedStyle(svg.querySelector('path.transition')).stroke,
        };
        """
    )
    assert probe["styleElements"] == 0, "no inline <style> reaches the page"
    assert probe["marked"] == "rgb(219, 234, 254)", "the current node's classDef fill, set through the CSSOM"
    assert probe["edge"] not in ("none", ""), "mermaid's own rules apply (an unstyled SVG path has no stroke)"


def _gantt(browser: webdriver.Chrome) -> list[dict[str, object]]:
    """Each attempt row of the Gantt chart: its spans (kind, label, hover text) and marks."""
    script = """
        return [...document.querySelectorAll('#gantt .gantt-row')].map((g) => ({
          attempt: g.dataset.attempt,
          number: g.dataset.number,
          label: g.querySelector('text').textContent,
          spans: [...g.querySelectorAll('.gantt-span')].map((s) =>
            [s.dataset.kind, s.dataset.label, s.querySelector('title').textContent]),
          marks: [...g.querySelectorAll('.gantt-mark')].map((m) => m.dataset.kind),
        }));
    """
    return list(browser.execute_script(script))


def test_a_runs_timeline_reads_as_words_and_its_attempts_as_a_gantt_chart(
    console: Console, worker: subprocess.Popen[bytes]
) -> None:
    """``journey`` fails once, retries after a backoff, waits for a signal, then succeeds: the
    chart has one row per attempt with its steps, the failure, the backoff and the wait; the
    table shows dates and durations, never epoch milliseconds or empty fields. Another, cancelled
    while it waits, ends its wait there."""
    browser, api_server = console.browser, console.server
    with api_server.http() as http:
        wait_for(lambda: http.get("/api/graphs/journey").status_code == 200, what="the worker's graphs")
        run_id = http.post("/api/runs", json={"graph": "journey", "inputs": "trip"}).json()["run_id"]
    _open(browser, api_server, f"run/{run_id}")
    until(browser, lambda d: find(d, "#signal-go") is not None, "the run waiting for go")
    until(browser, lambda d: len(_gantt(d)) == 2, "two attempts in the chart")
    first, second = _gantt(browser)
    assert [s[:2] for s in first["spans"]] == [["failed", "fetch"], ["backoff", "backoff"]]
    assert first["marks"] == ["failed"]
    assert [s[:2] for s in second["spans"]] == [["step", "fetch"], ["step", "pause"], ["wait", "signal go"]]
    hover = second["spans"][0][2]
    assert str(hover).startswith("step fetch, attempt 2: ") and str(hover).endswith("ms")
    # Issue 34: the waiting run is not shown as failing; attempt 1's failure is its last failure.
    assert _text(browser, "#run-summary").count("first_time") == 1 and find(browser, "#run-error") is None
    assert re.fullmatch(
        r"attempt 1 at .+: first_time, RunFailure: fetch fails its first time",
        _text(browser, "#run-last-failure"),
    )
    console.shot("gantt-waiting", at="#run-gantt")

    _click(browser, "#send-signal")
    until(browser, lambda d: find(d, '#run-summary [data-status="succeeded"]') is not None, "the run")
    until(browser, lambda d: len(_gantt(d)) == 3 and _gantt(d)[2]["marks"], "the attempt after the signal")
    third = _gantt(browser)[2]
    assert [s[:2] for s in third["spans"]] == [["step", "pause"], ["step", "finish"]]
    assert third["marks"] == ["succeeded"]
    until(browser, lambda d: find(d, "#checkpoints") is not None, "the checkpoints")
    _click_svg_until(
        browser,
        '#gantt .gantt-span[data-label="fetch"][data-seq]',
        lambda d: "Checkpoint #" in _text(d, "#checkpoint-detail h3"),
        "the step's checkpoint",
    )
    console.shot("gantt-succeeded", at="#run-gantt")

    table = _text(browser, "#timeline")
    assert not re.search(r"\d{12}", table), "no epoch milliseconds"
    retry = _text(browser, '#timeline tr[data-event="run_retrying"] .details')
    assert re.fullmatch(r"attempt=1, reason=first_time, due \d\d:\d\d:\d\d\.\d{3} \(in [\d.]+m?s\)", retry), (
        retry
    )
    waited = _text(browser, '#timeline tr[data-event="run_waiting"] .details')
    assert waited == "attempt=2, signal=go", "no empty wake_at"
    assert re.fullmatch(r"\d+ms", _text(browser, '#timeline tr[data-event="run_progressed"] .took'))

    # Another run, cancelled while it waits for go: its wait is hatched up to the cancel, not on.
    with api_server.http() as http:
        run_id = http.post("/api/runs", json={"graph": "journey", "inputs": "called-off"}).json()["run_id"]
        _open(browser, api_server, f"run/{run_id}")
        until(browser, lambda d: find(d, "#signal-go") is not None, "the run waiting for go")
        assert http.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"
    until(browser, lambda d: [r["marks"] for r in _gantt(d)][-1:] == [["ended"]], "the cancel in the chart")
    kind, label, hover = _gantt(browser)[-1]["spans"][-1]
    assert (kind, label) == ("wait", "signal go") and not str(hover).endswith("so far"), hover


def test_a_run_held_for_its_graph_version_waits_hatched_in_the_gantt_chart(
    console: Console, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``journey`` run fails its first attempt, then its version's workers are gone (its record
    names a version none serves): it is held, and the chart hatches that wait after the backoff."""
    monkeypatch.setenv("REFLEXR_REDIS_URL", redis_url)  # journey's steps count in the test's Redis
    app = fleet_app(redis_url, journey, version_grace_s=0)
    store = app.store()
    try:
        run_id, _ = store.create_run(
            "held-for-a-version",
            graph="journey",
            inputs_json='"held"',
            max_attempts=3,
            dispatch_grace_ms=60_000,
        )
        assert handle(app, run_id, (), {"graph": "journey"}).outcome is Outcome.RETRYING
        console.redis.hset(keys.run(run_id), "version", "v-gone")
        wait_for(lambda: handle(app, run_id, (), {"graph": "journey"}).outcome is Outcome.HELD, what="held")
    finally:
        store.close()
        app.close()
    _open(console.browser, console.server, f"run/{run_id}")
    until(console.browser, lambda d: len(_gantt(d)) == 1 and len(_gantt(d)[0]["spans"]) == 3, "the wait")
    kind, label, hover = _gantt(console.browser)[0]["spans"][-1]
    assert (kind, label) == ("wait", "version v-gone")
    assert str(hover).startswith("waiting for version v-gone, attempt 1: ") and str(hover).endswith("so far")


def _lanes(browser: webdriver.Chrome) -> list[list[str]]:
    """Each map branch drawn in the Gantt chart: its row's attempt, its branch, hover and checkpoint."""
    script = """
        return [...document.querySelectorAll('#gantt .gantt-row')].flatMap((g) =>
          [...g.querySelectorAll('.gantt-lane')].map((l) => [g.dataset.attempt, l.dataset.branch,
            l.querySelector('title').textContent, l.dataset.seq || '']));
    """
    return list(browser.execute_script(script))


def test_a_maps_branches_are_drawn_side_by_side_under_the_attempt_that_ran_them(
    console: Console, worker: subprocess.Popen[bytes]
) -> None:
    """``spread`` maps over four items, each held until the test releases it; item 3 fails its
    first time. Released while the page is open, items 0 to 2 show up as lanes, live (no event
    announces them); then attempt 1's row has those, attempt 2's the lane of item 3, each hovering
    with its step, branch, attempt and duration, and a click opens the checkpoint that took in
    its result. Then a ``kin`` run waits for a ``spread`` child, hatched as ``child <id>`` (not
    ``signal child:<id>``); the child, left to run at its own pace, is the picture."""
    browser, api_server = console.browser, console.server
    with api_server.http() as http:
        wait_for(lambda: http.get("/api/graphs/spread").status_code == 200, what="the worker's graphs")
        run_id = http.post("/api/runs", json={"graph": "spread", "inputs": "hold-gantt"}).json()["run_id"]
    _open(browser, api_server, f"run/{run_id}")
    under_way = [["step", "plan"], ["step", "map"]]
    until(
        browser,
        lambda d: [[s[:2] for s in r["spans"]] for r in _gantt(d)] == [under_way],
        "the map under way",
    )
    assert _lanes(browser) == []
    for item in range(3):
        console.redis.rpush(release_key(f"hold-gantt:{item}"), 1)
    until(browser, lambda d: len(_lanes(d)) == 3, "the branches that ended, while item 3 is held")
    assert find(browser, '#run-summary [data-status="running"]') is not None, "no event announced them"
    console.redis.rpush(release_key("hold-gantt:3"), 1)
    until(browser, lambda d: find(d, '#run-summary [data-status="succeeded"]') is not None, "the run")
    until(browser, lambda d: len(_lanes(d)) == 4, "the four branches")
    lanes = _lanes(browser)
    assert sorted((a, b.rpartition(":")[2]) for a, b, _, _ in lanes) == [
        ("1", "0"), ("1", "1"), ("1", "2"), ("2", "3"),
    ]  # fmt: skip
    for attempt, branch, hover, seq in lanes:
        assert re.fullmatch(
            rf"step work, branch {branch.rpartition(':')[2]}, attempt {attempt}: [\d.]+m?s", hover
        )
        assert seq, "a branch opens the checkpoint that holds its result"
    first = next(r for r in _gantt(browser) if r["attempt"] == "1")
    assert first["marks"] == ["failed"]
    tops = browser.execute_script(
        "return [...document.querySelectorAll('#gantt .gantt-row[data-attempt=\"1\"] .gantt-lane rect')]"
        ".map((r) => Number(r.getAttribute('y')))"
    )
    assert len(set(tops)) == 3, "the three branches that ran at once are side by side, not on one line"
    until(browser, lambda d: find(d, "#checkpoints") is not None, "the checkpoints")
    _click_svg_until(
        browser,
        '#gantt .gantt-row[data-attempt="2"] .gantt-lane',
        lambda d: "Checkpoint #" in _text(d, "#checkpoint-detail h3"),
        "the branch's checkpoint",
    )
    with api_server.http() as http:  # a kin run, whose child spread runs at its own pace
        parent = http.post("/api/runs", json={"graph": "kin", "inputs": "elder"}).json()["run_id"]
        wait_for(lambda: http.get(f"/api/runs/{parent}").json()["status"] == "succeeded", what="the parent")
        (child,) = http.get(f"/api/runs/{parent}").json()["children"]
    _open(browser, api_server, f"run/{parent}")  # it waited for its child: hatched under its name
    until(browser, lambda d: [r["marks"] for r in _gantt(d)] == [[], ["succeeded"]], "the two attempts")
    assert [s[:2] for s in _gantt(browser)[0]["spans"]] == [["step", "ask"], ["wait", f"child {child}"]]
    assert _text(browser, '#timeline tr[data-event="run_waiting"] .details') == f"attempt=1, child {child}"
    _open(browser, api_server, f"run/{child}")  # the child, for the picture
    until(browser, lambda d: find(d, '#run-summary [data-status="succeeded"]') and len(_lanes(d)) == 4, "it")
    # Off the link the token form's button left the pointer on, whose address Chromium shows.
    ActionChains(browser).move_to_element(browser.find_element(By.TAG_NAME, "h1")).perform()
    console.shot("gantt-branches", at="#run-gantt")


def test_the_workers_page_lists_the_live_worker_with_its_graphs_and_runs_in_flight(
    console: Console, worker: subprocess.Popen[bytes]
) -> None:
    browser, api_server = console.browser, console.server
    with api_server.http() as http:
        wait_for(lambda: http.get("/api/graphs/blocker").json()["workers"], what="the worker's graphs")
        run_id = http.post("/api/runs", json={"graph": "blocker", "inputs": "on-shift"}).json()["run_id"]
    _open(browser, api_server, "graphs")
    until(browser, lambda d: find(d, 'section[data-graph="blocker"] a.served-by'), "the graph's workers")
    _click(browser, 'section[data-graph="blocker"] a.served-by')  # the graph page links to its workers
    until(browser, lambda d: find(d, "#workers-body tr[data-worker]"), "the live worker")
    row = "#workers-body tr[data-worker]"
    until(browser, lambda d: run_id in _text(d, f"{row} .in-flight"), "the blocker run in flight")
    cells = browser.execute_script(
        "return [...document.querySelectorAll('#workers-body tr[data-worker] td')].map((c) => c.textContent)"
    )
    name, host, pool, concurrency, graphs, _, beat, skew, _ = cells
    assert name.startswith("surfaces-") and host and name.endswith(f"@{host}")
    assert (pool, concurrency) == ("prefork", "1")
    assert {"blocker", "counter", "journey"} <= set(str(graphs).split(", "))
    assert str(beat).endswith(" ago")
    assert re.fullmatch(r"[+-]\d+ms", str(skew)), f"its clock against Redis's: {skew}"
    assert "active" in str(browser.find_element(By.ID, "nav-workers").get_attribute("class"))
    console.shot("workers")
    console.redis.rpush(release_key("on-shift"), 1)
    until(browser, lambda d: _text(d, f"{row} .in-flight") == "none", "the run done, none in flight")


@pytest.mark.slow
def test_the_gantt_chart_marks_where_a_lease_lapsed_with_its_worker(
    console: Console, client: Client, env: dict[str, str], start_worker: Callable[[], subprocess.Popen[bytes]]
) -> None:
    """The worker running a step is killed: its lease lapses, another worker's reaper counts the
    attempt abandoned, and the run goes on there; the chart marks the lapse on attempt 1."""
    browser, api_server = console.browser, console.server
    env["REFLEXR_LEASE_TTL_S"] = "2"  # the workers started below lapse soon after they are gone
    first = start_worker()
    with api_server.http() as http:
        run_id = http.post("/api/runs", json={"graph": "blocker", "inputs": "crash"}).json()["run_id"]
    _open(browser, api_server, f"run/{run_id}")
    until(browser, lambda d: [r["attempt"] for r in _gantt(d)] == ["1"], "attempt 1 running")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    start_worker()
    until(browser, lambda d: len(_gantt(d)) == 2, "attempt 2, on the other worker", timeout_s=90)
    lapsed = _gantt(browser)[0]
    # Issue 34: the killed attempt's bar ends at its last heartbeat; the gap to the lapse the
    # reaper found is drawn apart, and the legend says what each kind of bar is.
    assert lapsed["marks"] == ["lapsed"] and [s[0] for s in lapsed["spans"]] == ["failed", "lapse", "backoff"]
    failed = next(e for e in client.history(run_id) if e.type == "attempt_failed")
    beat = int(failed.fields["last_beat_at"]) / 1000
    started = next(e.at for e in client.history(run_id) if e.type == "attempt_started")
    assert started <= beat < failed.at, "the last beat is within the attempt, before the lapse was found"
    legend = browser.execute_script(
        "return [...document.querySelectorAll('#gantt-legend [data-kind]')].map((g) => g.dataset.kind)"
    )
    assert {"step", "failed", "wait", "backoff", "lapse"} <= set(legend)
    console.redis.rpush(release_key("crash"), 1)
    until(browser, lambda d: _gantt(d)[-1]["marks"] == ["succeeded"], "the run to succeed on attempt 2")
    console.shot("gantt-lapsed", at="#run-gantt")


def _bars(browser: webdriver.Chrome, svg: str) -> dict[str, int]:
    script = (
        "return Object.fromEntries([...document.querySelectorAll(`${arguments[0]} g.bar`)]"
        ".map((g) => [g.dataset.label, Number(g.dataset.count)]))"
    )
    return dict(browser.execute_script(script, svg))


def _series(browser: webdriver.Chrome) -> dict[str, int]:
    script = (
        "return Object.fromEntries([...document.querySelectorAll('#chart-runs g.series')]"
        ".map((g) => [g.dataset.series, Number(g.dataset.total)]))"
    )
    return dict(browser.execute_script(script))


@pytest.fixture
def quick_dispatch_console(
    browser: webdriver.Chrome, env: dict[str, str], published: None, redis_client: redis.Redis, shots: Path
) -> Iterator[Console]:
    """:func:`console` on a server whose runs a reaper sends again after 3 s, not 30: a run of a graph
    that no worker serves is seen waiting for one after that (REFLEXR_DISPATCH_GRACE_S)."""
    with serving({**env, "REFLEXR_DISPATCH_GRACE_S": "3"}) as server:
        yield Console(browser, server, redis_client, shots)


def test_the_overview_shows_a_redis_that_may_lose_runs_as_a_banner(console: Console) -> None:
    """Persistence turned off under a running console: the overview says so in a banner, as the
    workers' log and ``health --redis`` say it, and hides it again once persistence is back."""
    browser, redis_client = console.browser, console.redis
    _open(browser, console.server, "")
    until(browser, lambda d: find(d, "#chart-runs"), "the overview")
    assert browser.find_element(By.ID, "redis-warning").get_attribute("hidden") is not None
    redis_client.config_set("appendonly", "no")
    try:
        until(browser, lambda d: "persistence is off" in _text(d, "#redis-warning"), "the banner")
        assert browser.find_element(By.ID, "redis-warning").is_displayed()
        assert "set appendonly yes" in _text(browser, "#redis-warning")
    finally:
        redis_client.config_set("appendonly", "yes")
    until(browser, lambda d: not d.find_element(By.ID, "redis-warning").is_displayed(), "no banner")


def test_the_overview_is_the_home_page_and_charts_the_last_hour_from_real_runs(
    quick_dispatch_console: Console, worker: subprocess.Popen[bytes]
) -> None:
    """Two runs succeed, one dies, ``journey`` retries and waits for a signal, and ``orders``
    (which no worker serves) waits queued for a worker: the home page shows each, live."""
    console = quick_dispatch_console
    browser, api_server, redis_client = console.browser, console.server, console.redis
    schemas.publish(redis_client, [orders])
    for key in ("ov-1", "ov-2"):
        redis_client.set(ok_key(key), 1)
    with api_server.http() as http:
        wait_for(lambda: http.get("/api/graphs/journey").status_code == 200, what="the worker's graphs")
        _open(browser, api_server, "")
        until(browser, lambda d: find(d, "#chart-runs"), "the overview")
        assert "active" in str(browser.find_element(By.ID, "nav-overview").get_attribute("class"))
        for body in (
            {"graph": "counter", "inputs": {"key": "ov-1", "n": 1}},
            {"graph": "counter", "inputs": {"key": "ov-2", "n": 2}},
            {"graph": "counter", "inputs": {"key": "ov-dead", "n": 1}},
            {"graph": "journey", "inputs": "ov-trip"},
            {"graph": "orders", "inputs": {"item": "ov-ink"}},
        ):
            assert http.post("/api/runs", json=body).status_code == 201
    until(
        browser,
        lambda d: _series(d) == {"started": 5, "succeeded": 2, "dead": 1, "retried": 1},
        "the runs per minute, without a reload",
    )
    until(browser, lambda d: _bars(d, "#waiting-bars").get("signal") == 1, "journey waiting for go")
    until(browser, lambda d: _bars(d, "#waiting-bars").get("worker") == 1, "orders waiting for a worker")
    statuses = _bars(browser, "#status-bars")
    assert (statuses["succeeded"], statuses["dead"], statuses["waiting"], statuses["queued"]) == (2, 1, 1, 1)
    assert _text(browser, '#queues tr[data-graph="orders"] .depth') == "1"
    assert re.fullmatch(r"\d+(ms|\.\ds)", _text(browser, '#durations tr[data-graph="counter"] .p95'))
    assert find(browser, '#chart-dead a.reason[data-reason="max_attempts"] rect') is not None
    console.shot("overview")
    _click(browser, '#overview-dead .legend a[data-reason="max_attempts"]')  # to the filtered list
    until(browser, lambda d: _text(d, "#dead-reason") == "max_attempts", "the dead letters of the reason")
    until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#dead-body tr[data-run]")) == 1, "one")
    browser.back()
    until(browser, lambda d: find(d, '#status-bars a[href="#/runs/waiting"]'), "the overview again")
    _click_svg_until(
        browser,
        '#status-bars a[href="#/runs/waiting"]',
        lambda d: find(d, "#filter-status") is not None,
        "the runs list",
    )
    assert browser.find_element(By.ID, "filter-status").get_attribute("value") == "waiting"
    until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#runs-body tr[data-run]")) == 1, "journey")


def test_the_schedules_page_lists_pauses_fires_and_deletes_a_schedule(console: Console) -> None:
    browser, api_server = console.browser, console.server
    with api_server.http() as http:
        body = {"name": "nightly", "graph": "approvals", "cron": "0 3 * * *", "inputs": "nightly"}
        assert http.post("/api/schedules", json=body).status_code == 201
    _open(browser, api_server, "schedules")
    row = 'tr[data-schedule="nightly"]'
    until(browser, lambda d: find(d, row), "the schedule")
    assert _text(browser, f"{row} td.mono + td") == "approvals" and "0 3 * * *" in _text(browser, row)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d 03:00:00", _text(browser, f"{row} .next"))
    _click(browser, f"{row} .toggle")
    until(browser, lambda d: _text(d, f"{row} .next") == "paused", "the pause")
    _click(browser, f"{row} .trigger")
    until(browser, lambda d: find(d, "#run-summary"), "the run the fire made")
    run_id = browser.execute_script("return location.hash").rsplit("/", 1)[1]
    with api_server.http() as http:
        assert http.get(f"/api/runs/{run_id}").json()["tags"] == {"schedule": "nightly"}
    _open(browser, api_server, "schedules")
    until(browser, lambda d: find(d, f'{row} .last a[href="#/run/{run_id}"]'), "the last fire's run")
    _click(browser, f"{row} .delete")
    until(browser, lambda d: d.find_element(By.ID, "confirm").is_displayed(), "the confirmation")
    assert "Delete schedule nightly?" in browser.find_element(By.ID, "confirm-text").text
    browser.find_element(By.ID, "confirm-yes").click()
    until(browser, lambda d: find(d, row) is None, "the schedule gone")


def test_the_runs_list_shows_tags_and_filters_by_them(console: Console) -> None:
    browser, api_server = console.browser, console.server
    with api_server.http() as http:
        acme, globex = (
            http.post(
                "/api/runs", json={"graph": "approvals", "inputs": name, "tags": {"tenant": name}}
            ).json()["run_id"]
            for name in ("acme", "globex")
        )
    _open(browser, api_server, "runs")
    until(browser, lambda d: find(d, f'tr[data-run="{globex}"]'), "the runs")
    assert _text(browser, f'tr[data-run="{acme}"] .tag') == "tenant=acme"
    browser.find_element(By.ID, "filter-tag").send_keys("tenant=acme")
    until(browser, lambda d: find(d, f'tr[data-run="{globex}"]') is None, "the tag filter to hide globex")
    assert find(browser, f'tr[data-run="{acme}"]') is not None


def test_the_runs_list_shows_created_and_duration_and_filters_by_text(
    console: Console, worker: subprocess.Popen[bytes]
) -> None:
    """A waiting run shows how long it has been going on, never what it "took"; run ids never wrap."""
    browser, api_server = console.browser, console.server
    with api_server.http() as http:
        waiting = http.post("/api/runs", json={"graph": "approvals", "inputs": "listed"}).json()["run_id"]
        other = http.post("/api/runs", json={"graph": "blocker", "inputs": "listed"}).json()["run_id"]
        wait_for(lambda: http.get(f"/api/runs/{waiting}").json()["status"] == "waiting", what="the wait")
    _open(browser, api_server, "runs")
    until(browser, lambda d: find(d, f'tr[data-run="{other}"]'), "the runs")
    browser.find_element(By.ID, "filter-text").send_keys("approv")
    until(browser, lambda d: find(d, f'tr[data-run="{other}"]') is None, "the filter to hide blocker")
    row = f'tr[data-run="{waiting}"]'
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", _text(browser, f"{row} .created"))
    assert _text(browser, f"{row} .duration").endswith(" so far")
    box = browser.find_element(By.ID, "filter-text")
    box.clear()
    box.send_keys(other[:8])
    until(browser, lambda d: find(d, f'tr[data-run="{waiting}"]') is None, "the id prefix filter")
    assert find(browser, f'tr[data-run="{other}"]') is not None
    browser.set_window_size(700, 900)  # narrow: the ids still keep to one line
    try:
        height = browser.execute_script(
            "const a = document.querySelector(arguments[0]); return [a.getClientRects().length,"
            " getComputedStyle(a).whiteSpace]",
            f'tr[data-run="{other}"] td.run-id a',
        )
        assert height == [1, "nowrap"]
        console.shot("runs-filtered")
        _open(browser, api_server, f"run/{waiting}")
        until(browser, lambda d: find(d, '#run-summary [data-status="waiting"]'), "the waiting run")
        summary = _text(browser, "#run-summary")
        assert "took" not in summary and "so far" in summary
        assert browser.execute_script(
            "return getComputedStyle(document.querySelector('h1 .run-id')).whiteSpace"
        ) == ("nowrap")
    finally:
        browser.set_window_size(1360, 960)


def test_times_are_utc_until_the_switch_chooses_local_time_which_is_remembered(
    console: Console, worker: subprocess.Popen[bytes]
) -> None:
    browser, api_server = console.browser, console.server
    browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Kolkata"})
    try:
        with api_server.http() as http:
            run_id = http.post("/api/runs", json={"graph": "approvals", "inputs": "zoned"}).json()["run_id"]
            created = http.get(f"/api/runs/{run_id}").json()["created_at"]
        _open(browser, api_server, f"run/{run_id}")
        until(browser, lambda d: find(d, '#timeline tr[data-event="run_enqueued"]'), "the timeline")
        utc = time.strftime("%H:%M:%S", time.gmtime(created))
        assert browser.find_element(By.ID, "time-zone").get_attribute("value") == "utc"
        assert utc in _text(browser, "#run-summary") and "time (UTC)" in _text(
            browser, "#timeline-table thead"
        )
        Select(browser.find_element(By.ID, "time-zone")).select_by_value("local")
        local = time.strftime("%H:%M:%S", time.gmtime(created + 5.5 * 3600))
        until(browser, lambda d: local in _text(d, "#run-summary"), "the created time in Kolkata's time")
        assert "time (UTC+05:30)" in _text(browser, "#timeline-table thead")
        browser.refresh()
        until(browser, lambda d: local in _text(d, "#run-summary"), "local time, remembered after a reload")
        assert browser.find_element(By.ID, "time-zone").get_attribute("value") == "local"
    finally:
        browser.execute_script("localStorage.clear()")
        browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ""})


def test_maps_and_joins_are_labelled_and_an_optional_float_is_a_number_with_its_label_above(
    console: Console,
) -> None:
    browser, api_server = console.browser, console.server
    schemas.publish(console.redis, [orders, fanout])
    _open(browser, api_server, "graphs")
    until(browser, lambda d: find(d, 'section[data-graph="fanout"] .diagram svg'), "the fanout diagram")
    drawn = _text(browser, 'section[data-graph="fanout"] .diagram svg')
    assert "map: map, fan out" in drawn and "reduce_list_append: join" in drawn
    until(browser, lambda d: find(d, "#enqueue-orders-discount"), "the orders form")
    field = browser.find_element(By.ID, "enqueue-orders-discount")
    assert (field.tag_name, field.get_attribute("type")) == ("input", "number")
    apart = browser.execute_script(
        "return [...document.querySelectorAll('section[data-graph=\"orders\"] .field:not(.check)')]"
        ".map((f) =>"
        " f.querySelector('label').getBoundingClientRect().bottom <="
        " f.querySelector('input, textarea').getBoundingClientRect().top)"
    )
    assert apart and all(apart), "each label sits above its input"
    console.shot("forms", at='section[data-graph="orders"]')
    browser.find_element(By.ID, "enqueue-orders-item").send_keys("ink")
    field.send_keys("0.25")
    browser.find_element(By.ID, "enqueue-orders").click()
    assert _enqueued_inputs(console) == {
        "item": "ink",
        "require_approval": True,
        "rush": False,
        "copies": 2,
        "discount": 0.25,
    }


def test_a_run_page_shows_the_stream_live_with_the_restart_marked(
    console: Console, start_worker: Callable[[], subprocess.Popen[bytes]]
) -> None:
    """``talker`` streams "Hello, world!": its first attempt fails after "Hello, ", its second stops
    after "Hello, " until released. The page shows the first tokens struck through under a restart
    line while the run still runs, then the whole text."""
    browser, api_server, redis_client = console.browser, console.server, console.redis
    schemas.publish(redis_client, [talker])
    with api_server.http() as http:
        run_id = http.post("/api/runs", json={"graph": "talker", "inputs": "console"}).json()["run_id"]
    _open(browser, api_server, f"run/{run_id}")
    until(browser, lambda d: find(d, "#run-stream"), "the stream panel")
    start_worker()
    until(browser, lambda d: find(d, "#run-stream .restart"), "the restart, marked")
    tokens = "#run-stream .item"
    until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, tokens)) == 4, "the new tokens")
    voided = browser.execute_script(
        "return [...document.querySelectorAll('#run-stream .item.void')].map(e => e.textContent)"
    )
    assert voided == ["Hello", ", "]
    assert "step speak runs again (attempt 2)" in _text(browser, "#run-stream .restart")
    # Shown live, while the run runs: the second attempt holds the run until released below. The
    # badge follows the run's own updates, which can reach the page after the stream's items (it
    # read `retrying`, the state between the restart and the second claim), so it is waited for.
    until(browser, lambda d: _text(d, "#run-summary .badge") == "running", "the badge of the running run")
    console.shot("run-stream", at="#run-stream")
    redis_client.rpush(release_key("console"), 1)
    until(browser, lambda d: _text(d, "#run-summary .badge") == "succeeded", "the run to succeed")
    until(browser, lambda d: _text(d, "#run-stream").endswith("Hello, world!"), "the whole text")


def test_the_run_page_shows_an_encrypted_offloaded_output_that_redis_never_holds(
    browser: webdriver.Chrome,
    env: dict[str, str],
    start_worker: Callable[[], subprocess.Popen[bytes]],
    redis_client: redis.Redis,
    tmp_path: Path,
) -> None:
    """G10 through the console: a worker and a server with keys and a payload store; the page
    reads the output back, and neither Redis nor the store's files hold it in plain text."""
    from tests.fleet.test_payloads import KEY_SPEC
    from tests.store.test_payloads import every_value

    marker = "okapi-console-7d2e"
    store = tmp_path / "payloads"
    env.update(
        REFLEXR_PAYLOAD_KEYS=KEY_SPEC, REFLEXR_PAYLOAD_STORE=f"file://{store}", REFLEXR_OFFLOAD_BYTES="1024"
    )
    start_worker()
    with serving(env) as server, server.http() as http:
        run_id = http.post("/api/runs", json={"graph": "approvals", "inputs": marker + "x" * 5000}).json()[
            "run_id"
        ]
        wait_for(lambda: http.get(f"/api/runs/{run_id}").json()["status"] == "waiting", what="the wait")
        signal = {"name": "approval", "value": {"approved": True, "by": marker}}
        assert http.post(f"/api/runs/{run_id}/signal", json=signal).status_code == 200
        wait_for(lambda: http.get(f"/api/runs/{run_id}").json()["status"] == "succeeded", what="the run")
        _open(browser, server, f"run/{run_id}")
        until(browser, lambda d: f"approved by {marker}" in _text(d, "#run-result"), "the output, decrypted")
    assert marker.encode() not in every_value(redis_client)
    files = [p for p in store.rglob("*") if p.is_file()]
    assert files and all(marker.encode() not in p.read_bytes() for p in files), "offloaded, encrypted"


class _Page(BaseHTTPRequestHandler):
    """Serves one page (``page``), as a site of another origin would."""

    page = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def _other_site(page: str) -> Iterator[str]:
    """A site on another origin (another port of this machine) serving ``page``: its URL."""
    handler = type("Page", (_Page,), {"page": page.encode()})
    site = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}/"
    finally:
        site.shutdown()
        site.server_close()
        thread.join(timeout=10)


def test_the_console_takes_the_printed_token_and_another_sites_form_changes_nothing(
    browser: webdriver.Chrome, env: dict[str, str], published: None
) -> None:
    """``serve`` with no token prints the console's URL with the one it made: opening it is all the
    console needs (the token leaves the address bar). A page on another origin that posts a form
    to resume a paused schedule is refused as from another site, and the schedule stays paused."""
    with serving(env, token=None) as server, server.http() as http:
        body = {"name": "nightly", "graph": "approvals", "cron": "0 3 * * *", "inputs": "n"}
        assert http.post("/api/schedules", json=body).status_code == 201
        assert http.post("/api/schedules/nightly/pause").status_code == 200
        printed = re.search(r"(http://\S+/#token=\S+)", server.printed)
        assert printed is not None, server.printed
        browser.get(f"{server.url}/healthz")
        browser.execute_script("localStorage.clear(); sessionStorage.clear()")
        browser.get(printed.group(1))
        until(browser, lambda d: find(d, "#nav-overview.active"), "the console")
        kept = browser.execute_script("return sessionStorage.getItem('reflexr-api-token')")
        assert kept == server.token and server.token not in browser.current_url
        browser.get(f"{server.url}/#/schedules")
        until(browser, lambda d: _text(d, 'tr[data-schedule="nightly"] .next') == "paused", "the schedule")
        form = (
            f'<form method="post" enctype="text/plain" action="{server.url}/api/schedules/nightly/resume">'
            '<input name="x" value="y"></form><script>document.forms[0].submit()</script>'
        )
        with _other_site(form) as site:
            browser.get(site)
            until(browser, lambda d: "another site" in d.page_source, "the form's answer")
        assert http.get("/api/schedules/nightly").json()["schedule"]["paused"] is True


def test_an_approval_by_button_wakes_the_run_and_its_page_shows_who_answered(
    console: Console, env: dict[str, str], queue: str
) -> None:
    """Issue 35: the inbox lists the agent's deferred call with its validated arguments; Approve
    answers it, the run finishes with the tool's result, and the run's page says who answered."""
    argv = local_processes.celery_worker_argv(
        "workers",
        queue,
        "approvals",
        loglevel="warning",
        command=[sys.executable, "-m", "reflexr_graph", "worker"],
    )
    worker_env = {**env, "REFLEXR_GRAPHS": "tests.ai.approval_graphs:pay_graph", "REMAP_SIGTERM": "SIGQUIT"}
    worker = local_processes.spawn(argv, worker_env, cwd=ROOT)
    client = Client(load_settings(redis_url=env["REFLEXR_REDIS_URL"], queue=queue))
    try:
        wait_for(lambda: any(g.name == "ai_pay" for g in client.graphs()), 60, "the worker's ai_pay")
        run_id = client.enqueue("ai_pay", {"amount": 5})
        wait_for(lambda: console.redis.llen(approval_graphs.token_key(run_id)), 60, "the token")
        wait_for(lambda: client.get(run_id).status is Status.WAITING, 30, "the run to wait")
        browser = console.browser
        _open(browser, console.server, "approvals")
        card = f'section.approval[data-run="{run_id}"]'
        until(browser, lambda d: _text(d, f"{card} .tool") == "pay", "the call in the inbox")
        assert json.loads(_text(browser, f"{card} .args")) == {"amount": 5}
        assert "agent payer" in _text(browser, card)
        console.shot("approvals")
        _click(browser, f'{card} tr[data-call="pay-1"] button.approve')
        info = client.wait(run_id, timeout=60)
        assert info.status is Status.SUCCEEDED and info.output == "done: paid 5", info
        until(browser, lambda d: not _text(d, card), "the answered wait to leave the inbox")

        _open(browser, console.server, f"run/{run_id}")
        until(browser, lambda d: _text(d, "#run-event-waits .answered-by") == "admin", "who answered")
        assert '"pay-1": true' in _text(browser, "#run-event-waits .answer")
        console.shot("approvals-answered", at="#run-approvals")
    finally:
        client.close()
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)


def test_an_ended_run_that_emitted_nothing_and_an_empty_dead_letters_page_say_so(
    console: Console, client: Client
) -> None:
    """Issue 34: "Nothing emitted yet." stayed on a finished run's page, and the dead letters page
    was an empty table with no word."""
    browser, api_server = console.browser, console.server
    run_id = client.enqueue("counter", {"key": "quiet", "n": 1})
    client.cancel(run_id)
    _open(browser, api_server, f"run/{run_id}")
    until(browser, lambda d: _text(d, "#stream-empty") == "This run emitted nothing.", "the empty stream")
    _open(browser, api_server, "dead")
    until(browser, lambda d: _text(d, "#dead-none") == "None: no run is dead-lettered.", "the none line")
