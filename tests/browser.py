"""A real headless Chromium for the docs-site test, and a local web server for the site.

Debian's `chromium` and `chromedriver` (apt; `make test` installs them): Selenium
is pointed at both, so it never tries to download a browser.
"""

from __future__ import annotations

import functools
import http.server
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)

# Two template slips in the docs page dbt-core 1.11 ships: an SVG <use> whose
# href is fetched before Angular fills in `{{ getIcon(...) }}`, and a favicon
# link left as `${require(...)}`. Each costs a 404 and nothing else; any other
# console error fails the test.
UPSTREAM_DOCS_404S = re.compile(
    r"/(%7B%7B%20getIcon\(item\.type,%20'(on|off)'\)%20%7D%7D"
    r"|\$%7Brequire\('\./assets/favicons/favicon\.ico'\)%7D) - Failed to load resource"
)


@contextmanager
def headless_chromium() -> Iterator[webdriver.Chrome]:
    """A Chromium session that records the browser console; quit at the end."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver: webdriver.Chrome) -> list[str]:
    """Console errors since the last call, but for the docs page's known upstream 404s."""
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE" and not UPSTREAM_DOCS_404S.search(entry["message"])
    ]


@contextmanager
def serve_directory(directory: Path) -> Iterator[str]:
    """Serve `directory` on 127.0.0.1 (a free port), as `make docs-serve` does; its URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base's name)
        pass


def wait_for(condition: Callable[[], object], what: str, timeout: float = 30) -> object:
    """Poll `condition` until it returns something truthy; fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.25)
