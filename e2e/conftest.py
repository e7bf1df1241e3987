"""End-to-end fixtures: the built dist/ served with the production headers, and
headless Chromium driven by Playwright.

Nothing here builds: `python build.py test` builds first, and these fixtures fail
clearly when dist/ is missing.

Fixtures
- `dist` (session): Path of the built dist/ folder.
- `site_url` (session): base URL ("http://127.0.0.1:PORT", no trailing slash) of
  dist/ served by tinygpt.site_build.serve, the same server code as `build.py serve`.
- `browser` (session): Chromium with `--enable-unsafe-webgpu` (a WebGPU adapter:
  SwiftShader on CPU-only machines).
- `browser_no_webgpu` (session): Chromium without that flag (no adapter on Linux),
  for the CPU fallback, and for the site's tests, which need no WebGPU: in `browser`,
  once an app page has been left or closed with its lever checks under way, SwiftShader's
  GPU process drew no frame of any page for up to 28 s (2026-12-04, on 2 cores),
  and a click or a page load waits for frames.
- `browser_webnn_flag` (session): Chromium without WebGPU but with
  `--enable-features=WebMachineLearningNeuralNetwork`: `navigator.ml` exists, and on
  Linux its `createContext` throws NotSupportedError (the WebNN lever's fallback).
- `open_page` (function): `open_page(browser, "/docs/", wait_until="load",
  init_script=None)` opens the path (or a full URL, whose origin then counts as
  the site's) in a fresh browser context, with `init_script` run first in every
  page of it (through DevTools, so the CSP does not apply), and returns a `Visit`:
  `.page` (Playwright Page), `.response` (the navigation's Response),
  `.problems()` (console errors, page errors, failed requests, HTTP errors of
  sub-resources and requests to any other origin, as readable strings; assert it
  is empty), `.websockets` (the URL of every WebSocket the page opened), and
  `.goto(path)` to load another page in the same tab (problems accumulate;
  `.response` becomes the new navigation's). Contexts are closed
  after the test.
- `open_module_page` (module): the same, its contexts closed after the module's
  last test: for a visit that costs minutes and that several tests read (the
  GPU levers' real gates on SwiftShader).

Browser choice: env TINYGPT_CHROMIUM, else /usr/bin/chromium if present, else the
Chromium Playwright manages.
"""
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tinygpt.site_build import serve

ROOT = Path(__file__).resolve().parent.parent
# Chromium headless as root in a container or CI: no sandbox (it needs a user namespace), and
# nothing that phones home (QUIC, first-run pages, background networking, component updates, sync).
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_executable() -> str | None:
    if os.environ.get("TINYGPT_CHROMIUM"):
        return os.environ["TINYGPT_CHROMIUM"]
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    return None  # Playwright's own


@pytest.fixture(scope="session")
def dist() -> Path:
    path = ROOT / "dist"
    if not (path / "index.html").is_file():
        pytest.fail(f"{path} is missing or has no index.html: run `python build.py` first "
                    "(`python build.py test` does)", pytrace=False)
    return path


@pytest.fixture(scope="session")
def site_url(dist):
    server, url = serve.start_in_thread(dist)
    yield url
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def _playwright():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


def _launch(playwright, extra: list[str]):
    return playwright.chromium.launch(executable_path=chromium_executable(), headless=True,
                                      args=CHROMIUM_FLAGS + extra)


@pytest.fixture(scope="session")
def browser(_playwright):
    b = _launch(_playwright, ["--enable-unsafe-webgpu"])
    yield b
    b.close()


@pytest.fixture(scope="session")
def browser_no_webgpu(_playwright):
    b = _launch(_playwright, [])
    yield b
    b.close()


@pytest.fixture(scope="session")
def browser_webnn_flag(_playwright):
    b = _launch(_playwright, ["--enable-features=WebMachineLearningNeuralNetwork"])
    yield b
    b.close()


@dataclass
class Visit:
    page: object
    response: object
    base: str = ""
    console_errors: list[tuple[str, str]] = field(default_factory=list)  # (text, url of its source)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    foreign_requests: list[str] = field(default_factory=list)
    failed_navigations: set[str] = field(default_factory=set)
    websockets: list[str] = field(default_factory=list)

    def goto(self, path_or_url: str, wait_until: str = "load"):
        url = path_or_url if "://" in path_or_url else self.base + path_or_url
        self.response = self.page.goto(url, wait_until=wait_until)
        return self.response

    def problems(self) -> list[str]:
        # Chromium also logs a failed navigation as a console error; its status is the test's to check.
        console = [f"{text} ({url})" for text, url in self.console_errors
                   if not (text.startswith("Failed to load resource") and url in self.failed_navigations)]
        return ([f"console error: {m}" for m in console]
                + [f"page error: {m}" for m in self.page_errors]
                + [f"failed request: {m}" for m in self.failed_requests]
                + [f"request to another origin: {m}" for m in self.foreign_requests])


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc


def _opener(site_url, contexts: list):
    def open_(browser, path_or_url: str, wait_until: str = "load", init_script: str | None = None) -> Visit:
        context = browser.new_context()
        contexts.append(context)
        if init_script:
            context.add_init_script(init_script)
        page = context.new_page()
        # A full URL (another local server) sets the origin that counts as "ours" for this visit.
        base = "{}://{}".format(*_origin(path_or_url)) if "://" in path_or_url else site_url
        site_origin = _origin(base)
        visit = Visit(page=page, response=None, base=base)

        def on_request(request):
            if request.url.startswith(("data:", "blob:")):
                return
            if _origin(request.url) != site_origin:
                visit.foreign_requests.append(request.url)

        def on_response(response):
            # A navigation's own status is the test's to check (the 404 page is meant to 404).
            request = response.request
            if response.status < 400:
                return
            if request.is_navigation_request() and request.frame == page.main_frame:
                visit.failed_navigations.add(response.url)
            else:
                visit.failed_requests.append(f"{response.status} {response.url}")

        page.on("console", lambda m: m.type == "error" and visit.console_errors.append(
            (m.text, m.location.get("url", ""))))
        page.on("pageerror", lambda e: visit.page_errors.append(str(e)))
        # ERR_ABORTED: cancelled because the tab moved on (a favicon fetch when a test navigates fast)
        page.on("requestfailed", lambda r: r.failure != "net::ERR_ABORTED"
                and visit.failed_requests.append(f"{r.url}: {r.failure}"))
        page.on("request", on_request)
        page.on("response", on_response)
        page.on("websocket", lambda ws: visit.websockets.append(ws.url))
        visit.goto(path_or_url, wait_until)
        return visit

    return open_


@pytest.fixture
def open_page(site_url):
    contexts = []
    yield _opener(site_url, contexts)
    for context in contexts:
        context.close()


@pytest.fixture(scope="module")
def open_module_page(site_url):
    contexts = []
    yield _opener(site_url, contexts)
    for context in contexts:
        context.close()
