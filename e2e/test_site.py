"""The built site in headless Chromium, served with the production headers."""
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.request import urlopen

import pytest
from playwright.sync_api import expect

from appdriver import wait_for

ROOT = Path(__file__).resolve().parent.parent
ATOM = "{http://www.w3.org/2005/Atom}"
SITEMAP = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
PLACEHOLDER = re.compile(r"lorem ipsum|\bTODO\b|\bTBD\b|\bFIXME\b", re.I)


def sitemap_paths(site_url: str) -> list[str]:
    with urlopen(site_url + "/sitemap.xml") as r:
        root = ET.fromstring(r.read())
    return [re.sub(r"^https?://[^/]+", "", loc.text) for loc in root.iter(f"{SITEMAP}loc")]


def test_sitemap_is_valid_xml_listing_every_page(site_url, dist):
    paths = sitemap_paths(site_url)
    built = {"/" + str(p.relative_to(dist).parent).replace(".", "").strip("/") for p in dist.rglob("index.html")}
    built = {p if p == "/" else p + "/" for p in built}
    assert set(paths) == built
    assert "/docs/getting-started/" in paths


def test_every_page_loads_clean_and_isolated(browser, open_page, site_url):
    # The app last: a page loaded after it, in this browser, could wait on its lever checks (conftest).
    paths = sorted(sitemap_paths(site_url), key=lambda path: path == "/app/")
    assert paths[-1] == "/app/"
    visit = open_page(browser, paths[0])
    for path in paths:
        assert visit.goto(path).status == 200, path
        assert visit.problems() == [], path
        assert visit.page.evaluate("crossOriginIsolated") is True, path


@pytest.mark.parametrize("width", [320, 390])
def test_no_page_scrolls_sideways_on_a_phone(browser_no_webgpu, open_page, site_url, width):
    visit = open_page(browser_no_webgpu, "/404.html")
    visit.page.set_viewport_size({"width": width, "height": 800})
    wide = {}
    for path in sitemap_paths(site_url) + ["/404.html"]:
        visit.goto(path)
        scroll_width = visit.page.evaluate("document.documentElement.scrollWidth")
        if scroll_width > width:
            wide[path] = scroll_width
    assert wide == {}, f"pages wider than a {width} px phone (their scrollWidth)"
    assert visit.problems() == []


def test_pages_load_clean_without_webgpu(browser_no_webgpu, open_page):
    visit = open_page(browser_no_webgpu, "/")
    for path in ["/", "/docs/", "/speedup/"]:
        assert visit.goto(path).status == 200, path
        assert visit.problems() == [], path


def test_navigation_follows_nav_and_docs_links(browser_no_webgpu, open_page):
    visit = open_page(browser_no_webgpu, "/")
    page = visit.page
    page.get_by_role("navigation", name="Site").get_by_role("link", name="Docs").click()
    page.wait_for_url("**/docs/")
    assert page.locator("h1").inner_text() == "Docs"
    page.get_by_role("link", name="Getting started").first.click()
    page.wait_for_url("**/docs/getting-started/")
    toc_link = page.locator(".toc a").first
    anchor = toc_link.get_attribute("href")
    toc_link.click()
    assert page.url.endswith(anchor)
    assert page.locator(anchor).is_visible()
    assert visit.problems() == []


def test_missing_page_gets_the_404_page(browser_no_webgpu, open_page):
    visit = open_page(browser_no_webgpu, "/no/such/page/")
    assert visit.response.status == 404
    assert visit.page.locator("h1").inner_text() == "Page not found"
    assert visit.problems() == []
    visit.page.get_by_role("link", name="home page").click()
    visit.page.wait_for_url(lambda url: url.endswith("/"))


def test_feed_is_atom_with_every_post(site_url, dist):
    with urlopen(site_url + "/feed.xml") as r:
        assert r.headers["Cache-Control"].startswith("public, max-age=0")
        feed = ET.fromstring(r.read())
    assert feed.tag == f"{ATOM}feed"
    entries = feed.findall(f"{ATOM}entry")
    posts = list((dist / "devlog").glob("*/index.html"))
    assert len(entries) == len(posts) >= 1
    for entry in entries:
        assert entry.find(f"{ATOM}title").text and entry.find(f"{ATOM}updated").text


@pytest.mark.parametrize("path", ["/", "/docs/", "/feed.xml", "/gallery/manifest.json"])
def test_production_headers_on_every_kind_of_path(site_url, path):
    with urlopen(site_url + path) as r:
        h = r.headers
    assert h["Cross-Origin-Opener-Policy"] == "same-origin"
    assert h["Cross-Origin-Embedder-Policy"] == "require-corp"
    assert "default-src 'self'" in h["Content-Security-Policy"]
    assert "unsafe-inline" not in h["Content-Security-Policy"]
    assert h["X-Content-Type-Options"] == "nosniff"
    assert "immutable" not in h["Cache-Control"]


def test_hashed_assets_are_immutable(site_url, dist):
    asset = next(p for p in (dist / "assets").iterdir() if p.suffix == ".css")
    with urlopen(f"{site_url}/assets/{asset.name}") as r:
        assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"
        assert r.headers["Cross-Origin-Embedder-Policy"] == "require-corp"


def test_no_placeholder_text_on_any_built_page(dist):
    for page in dist.rglob("*.html"):
        text = page.read_text()
        match = PLACEHOLDER.search(re.sub(r"<[^>]+>", " ", text))
        assert match is None, f"{page.relative_to(dist)}: placeholder text {match[0]!r}"


def test_serve_live_reload_obeys_the_csp_and_reloads(browser_no_webgpu, open_page, dist):
    from tinygpt.site_build import serve

    live = serve.LiveReload()
    server, url = serve.start_in_thread(dist, 0, live)
    try:
        visit = open_page(browser_no_webgpu, url + "/docs/")
        wait_for(lambda: visit.page.evaluate("performance.getEntriesByName(location.origin + '/__livereload').length > 0"),
                 10, "the live-reload request")
        with visit.page.expect_navigation():
            live.bump()
        assert visit.problems() == []
    finally:
        server.shutdown()
        server.server_close()


def test_devlog_home_and_feed_list_posts_newest_first_by_date_and_time(browser_no_webgpu, open_page, site_url):
    from tinygpt.site_build import content, pages

    posts = sorted((p for p in content.load(ROOT) if p.kind == "devlog"), key=pages.published, reverse=True)
    expected = [p.url for p in posts]
    assert len({pages.published(p) for p in posts}) == len(posts), "two posts share a date and time"
    visit = open_page(browser_no_webgpu, "/devlog/")
    listed = visit.page.locator(".post-list li > a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert listed == expected
    stamps = visit.page.locator(".post-list time").evaluate_all("ts => ts.map(t => t.getAttribute('datetime'))")
    assert stamps == [pages.published(p).isoformat() for p in posts]
    visit.goto("/")
    home = visit.page.locator(".post-list li > a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert home == expected[:3]
    with urlopen(site_url + "/feed.xml") as r:
        feed = ET.fromstring(r.read())
    entries = feed.findall(f"{ATOM}entry")
    assert [e.find(f"{ATOM}id").text.removeprefix(pages.SITE_URL) for e in entries] == expected
    assert [e.find(f"{ATOM}updated").text for e in entries] == [
        pages.published(p).strftime("%Y-%m-%dT%H:%M:%SZ") for p in posts]
    assert visit.problems() == []


# Per shown plot: the least rendered height of its labels (px), and pairs of x labels whose
# boxes overlap, compared in the frame of the first label (slanted labels share one rotation).
PLOT_TEXT = """() => [...document.querySelectorAll('svg.plot')].filter(s => s.getClientRects().length).map(svg => {
    const texts = [...svg.querySelectorAll('text')];
    const ticks = [...svg.querySelectorAll('text.tick-x')];
    const overlaps = [];
    for (let i = 0; i + 1 < ticks.length; i++) {
        const a = ticks[i], b = ticks[i + 1], box = a.getBBox(), other = b.getBBox();
        const m = a.getCTM().inverse().multiply(b.getCTM());
        const corners = [[other.x, other.y], [other.x + other.width, other.y], [other.x, other.y + other.height],
                         [other.x + other.width, other.y + other.height]].map(([x, y]) => new DOMPoint(x, y).matrixTransform(m));
        const xs = corners.map(p => p.x), ys = corners.map(p => p.y);
        if (Math.min(...xs) < box.x + box.width && Math.max(...xs) > box.x &&
            Math.min(...ys) < box.y + box.height && Math.max(...ys) > box.y) overlaps.push([a.textContent, b.textContent]);
    }
    const size = Math.min(...texts.map(t => parseFloat(getComputedStyle(t).fontSize) * svg.getScreenCTM().a));
    return {title: svg.getAttribute('aria-label'), size, overlaps};
})"""


@pytest.mark.parametrize("width", [320, 390, 1280])
def test_speedup_plots_have_readable_labels_that_do_not_overlap(browser_no_webgpu, open_page, width):
    visit = open_page(browser_no_webgpu, "/speedup/")
    visit.page.set_viewport_size({"width": width, "height": 800})
    plots = visit.page.evaluate(PLOT_TEXT)
    assert len(plots) == visit.page.locator("figure").count() >= 1, "one drawing of each plot is shown"
    assert [p for p in plots if p["size"] < 10] == [], "labels under 10 px"
    assert [p for p in plots if p["overlaps"]] == []
    assert visit.problems() == []


def test_the_user_guide_and_the_explainers_are_in_the_main_navigation(browser_no_webgpu, open_page):
    visit = open_page(browser_no_webgpu, "/app/")
    page = visit.page
    nav = page.get_by_role("navigation", name="Site")
    page.locator("#app").get_by_role("link", name="user guide").click()
    page.wait_for_url("**/guide/")
    assert page.locator("h1").inner_text() == "User guide"
    expect(nav.get_by_role("link", name="Guide")).to_have_attribute("aria-current", "page")
    nav.get_by_role("link", name="Explainers").click()
    page.wait_for_url("**/explainers/")
    assert page.locator("h1").inner_text() == "Explainers"
    assert visit.problems() == []
