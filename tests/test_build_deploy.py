"""_headers (one definition with serve), _redirects, sitemap and feed."""
import datetime
import xml.etree.ElementTree as ET

from tinygpt.site_build import deploy, headers


def test_headers_file_sets_isolation_csp_and_caching():
    text = headers.headers_file()
    blocks = {b.splitlines()[0]: b.splitlines()[1:] for b in text.strip().split("\n\n")}
    everywhere = dict(line.strip().split(": ", 1) for line in blocks["/*"])
    assert everywhere["Cross-Origin-Opener-Policy"] == "same-origin"
    assert everywhere["Cross-Origin-Embedder-Policy"] == "require-corp"
    assert everywhere["X-Content-Type-Options"] == "nosniff"
    assert "Referrer-Policy" in everywhere
    csp = dict(d.split(" ", 1) for d in everywhere["Content-Security-Policy"].split("; "))
    assert csp["script-src"] == "'self' 'wasm-unsafe-eval'"
    assert csp["style-src"] == "'self'" and csp["connect-src"] == "'self'" and csp["object-src"] == "'none'"
    assert "unsafe-inline" not in text
    assert [line.strip() for line in blocks["/assets/*"]] == ["! Cache-Control",
                                                              "Cache-Control: public, max-age=31536000, immutable"]


def test_path_headers_follow_pages_rules():
    page = dict(headers.for_path("/docs/deploy/"))
    asset = dict(headers.for_path("/assets/app-ABC.js"))
    assert page["Cache-Control"] == headers.SHORT_CACHE
    assert asset["Cache-Control"] == headers.LONG_CACHE  # detached, not joined with the short one
    assert asset["Cross-Origin-Embedder-Policy"] == "require-corp"
    for path in ("/feed.xml", "/gallery/manifest.json", "/corpora/manifest.json", "/404.html"):
        assert dict(headers.for_path(path))["Cache-Control"] == headers.SHORT_CACHE


def test_sitemap_and_feed_are_valid_xml(tmp_path):
    pages = [
        {"url": "/", "title": "Home", "date": None, "kind": "page", "html": "", "description": ""},
        {"url": "/devlog/a/", "title": "A & B", "date": datetime.date(2026, 11, 30), "kind": "devlog",
         "published": datetime.datetime(2026, 11, 30, 14, 13, tzinfo=datetime.timezone.utc),
         "html": "<p>Hi</p>", "description": "first"},
        {"url": "/404.html", "title": "404", "date": None, "kind": "special", "html": "", "description": ""},
    ]
    sm = ET.fromstring(deploy.sitemap(pages))
    locs = [e.text for e in sm.iter("{http://www.sitemaps.org/schemas/sitemap/0.9}loc")]
    assert [loc.removeprefix(deploy.SITE_URL) for loc in locs] == ["/", "/devlog/a/"]
    feed = ET.fromstring(deploy.feed(pages))
    atom = "{http://www.w3.org/2005/Atom}"
    (entry,) = feed.findall(f"{atom}entry")
    assert entry.find(f"{atom}title").text == "A & B"
    assert entry.find(f"{atom}content").text == "<p>Hi</p>"
    assert entry.find(f"{atom}updated").text == "2026-11-30T14:13:00Z"


def test_feed_lists_posts_of_one_day_newest_first_by_time():
    def post(slug, hour):
        return {"url": f"/devlog/{slug}/", "title": slug, "date": datetime.date(2026, 11, 30), "kind": "devlog",
                "published": datetime.datetime(2026, 11, 30, hour, 0, tzinfo=datetime.timezone.utc),
                "html": "", "description": ""}

    # Slugs in the reverse order of their times: the time decides.
    feed = ET.fromstring(deploy.feed([post("c", 9), post("a", 19), post("b", 14)]))
    atom = "{http://www.w3.org/2005/Atom}"
    entries = feed.findall(f"{atom}entry")
    assert [e.find(f"{atom}title").text for e in entries] == ["a", "b", "c"]
    assert [e.find(f"{atom}updated").text[11:16] for e in entries] == ["19:00", "14:00", "09:00"]
    assert feed.find(f"{atom}updated").text == "2026-11-30T19:00:00Z"
