"""The deploy step: what Cloudflare Pages reads beside the pages: `_headers`
(from headers.py, the one definition `serve` uses too), `_redirects`,
`sitemap.xml`, `robots.txt`, the Atom feed of the devlog, and the live feed's
static answer (facts.live.status), which a host running the site's Functions
answers the other way (functions/live/)."""
import datetime
import json
from xml.sax.saxutils import escape

from . import headers
from tinygpt.facts import FACTS

from .context import Context
from .pages import SITE_URL

# Old addresses that must keep working: (from, to, status).
REDIRECTS = [
    ("/playground/", "/app/", 301),  # where the original TinyGPT playground lived
    ("/blog/", "/devlog/", 301),
]


def sitemap(pages: list[dict]) -> str:
    urls = "".join(f"<url><loc>{escape(SITE_URL + p['url'])}</loc>"
                   + (f"<lastmod>{p['date'].isoformat()}</lastmod>" if p.get("date") else "") + "</url>\n"
                   for p in sorted(pages, key=lambda p: p["url"]) if p["url"].endswith("/"))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n{urls}</urlset>\n')


def feed(pages: list[dict]) -> str:
    posts = sorted((p for p in pages if p["kind"] == "devlog"), key=lambda p: p["published"], reverse=True)

    def stamp(t: datetime.datetime) -> str:
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")

    updated = stamp(posts[0]["published"]) if posts else "2026-11-30T00:00:00Z"
    entries = "".join(
        f"<entry><title>{escape(p['title'])}</title><link href=\"{escape(SITE_URL + p['url'])}\"/>"
        f"<id>{escape(SITE_URL + p['url'])}</id><updated>{stamp(p['published'])}</updated>"
        f"<summary>{escape(p['description'])}</summary><content type=\"html\">{escape(p['html'])}</content></entry>\n"
        for p in posts)
    return ('<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom">\n'
            f"<title>TinyGPT devlog</title><link href=\"{SITE_URL}/devlog/\"/>"
            f"<link rel=\"self\" href=\"{SITE_URL}/feed.xml\"/><id>{SITE_URL}/devlog/</id>"
            f"<updated>{updated}</updated><author><name>The TinyGPT team</name></author>\n{entries}</feed>\n")


def run(ctx: Context) -> str:
    (ctx.out / "_headers").write_text(headers.headers_file())
    (ctx.out / "_redirects").write_text("".join(f"{a} {b} {code}\n" for a, b, code in REDIRECTS))
    (ctx.out / "sitemap.xml").write_text(sitemap(ctx.pages))
    (ctx.out / "robots.txt").write_text(f"User-agent: *\nAllow: /\nSitemap: {SITE_URL}/sitemap.xml\n")
    (ctx.out / "feed.xml").write_text(feed(ctx.pages))
    live = ctx.out / FACTS["live"]["status"].lstrip("/")
    live.parent.mkdir(parents=True, exist_ok=True)
    live.write_text(json.dumps({"live": False}) + "\n")
    return f"_headers ({len(headers.RULES)} rules), _redirects ({len(REDIRECTS)}), sitemap, robots.txt, feed, live status"
