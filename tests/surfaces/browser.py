"""Headless Chromium driven by Selenium, from Debian's ``chromium`` and ``chromium-driver`` packages.

``make test`` installs both when they are missing (``scripts/ensure-chromium.sh``). Selenium is
given the driver's path, so Selenium Manager never tries to download one; Chromium starts with
its background networking off (this machine's network is closed) and a fresh profile.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1360,960",
)  # fmt: skip
WAIT_S = 30


@contextmanager
def chromium() -> Iterator[webdriver.Chrome]:
    """One headless Chromium with a fresh profile, quit (and its profile removed) afterwards."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.fail(
            f"{CHROMIUM} or {CHROMEDRIVER} is missing: run `make browser` (Debian chromium, chromium-driver)"
        )
    profile = tempfile.mkdtemp(prefix="rg-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def until(
    driver: webdriver.Chrome,
    condition: Callable[[webdriver.Chrome], object],
    what: str,
    timeout_s: float = WAIT_S,
) -> object:
    """Wait for ``condition`` in the page (polling, never a sleep); fail naming ``what``."""
    wait = WebDriverWait(driver, timeout_s, poll_frequency=0.05)
    return wait.until(condition, message=f"waiting for {what}")


def find(driver: webdriver.Chrome, css: str) -> WebElement | None:
    found = driver.find_elements("css selector", css)
    return found[0] if found else None
