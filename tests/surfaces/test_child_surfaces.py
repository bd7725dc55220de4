"""Child runs on the surfaces: ``status`` (CLI), the API's run and the console's run page show a
child's parent and a parent's children, each a link to the other."""

from __future__ import annotations

import json

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from reflexr_graph.client import Client
from reflexr_graph.store.children import ChildRequest
from tests.store.support import make_run, start
from tests.surfaces.browser import chromium, find, until
from tests.surfaces.conftest import ApiServer, Cli

pytestmark = pytest.mark.timeout(120)


def _family(client: Client) -> tuple[str, str]:
    """A parent run whose attempt made one child (as run_child does), waiting for it."""
    parent = make_run(client.store, f"parent-{id(client)}")
    ctx = start(client.store, parent)
    request = ChildRequest("demo", '{"n": 1}', {}, 3, "c|spawn|-|d|child:demo|0")
    child, _ = client.store.make_child(ctx, request, dispatch_grace_ms=60_000)
    client.store.wait_for_children(ctx, [child], f"child:{child}")
    return parent, child


def test_status_shows_the_parent_and_the_children(client: Client, cli: Cli) -> None:
    parent, child = _family(client)
    shown = cli("status", parent)
    assert shown.returncode == 0, shown.stderr
    assert "children" in shown.stdout and child in shown.stdout
    assert f"child run {child} to end (reflexr-graph status {child})" in shown.stdout
    shown = cli("status", child)
    assert "parent" in shown.stdout and parent in shown.stdout
    found = json.loads(cli("status", child, "--json").stdout)
    assert found["parent_run_id"] == parent
    assert json.loads(cli("status", parent, "--json").stdout)["children"] == [child]


def test_the_api_and_the_console_link_a_parent_and_its_children(
    client: Client, api_server: ApiServer
) -> None:
    parent, child = _family(client)
    with api_server.http() as http:
        assert http.get(f"/api/runs/{parent}").json()["children"] == [child]
        assert http.get(f"/api/runs/{child}").json()["parent_run_id"] == parent
    with chromium() as browser:
        _open_run(browser, api_server, child)
        until(browser, lambda d: find(d, "#run-parent"), "the child's page, with its parent")
        # The pages re-render as runs change: read and click in one script call each.
        browser.execute_script("document.querySelector('#run-parent').click()")
        until(browser, lambda d: find(d, "#run-children"), "the parent's page, with its children")
        links = browser.execute_script(
            "return [...document.querySelectorAll('#run-children a')].map(a => [a.textContent, a.href])"
        )
        assert len(links) == 1 and links[0][0] == child and links[0][1].endswith(f"#/run/{child}")


def _open_run(browser: webdriver.Chrome, server: ApiServer, run_id: str) -> None:
    browser.get(f"{server.url}/#/run/{run_id}")
    until(browser, lambda d: find(d, "#token"), "the console")
    box = browser.find_element(By.ID, "token")
    box.clear()
    box.send_keys(server.token)
    browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
