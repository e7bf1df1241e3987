"""The pages step: content/*.md through markdown.py and the jinja2 templates in
site/templates into dist/<url>/index.html, plus the generated index pages and
the top-level 404.html.

Every template gets:
- `assets`: ctx.assets, logical name -> URL ("app", "app_css", "worker", "wasm", "site_css")
- `facts`: tinygpt.facts.FACTS
- `page`: title, description, url, html (body), toc (HTML, may be ""), date (or None),
  published (a devlog post's date and time as an aware UTC datetime, else None), kind, slug,
  section, source
- `site`: name, url (absolute base), app (URL of the app page, None until it
  exists), nav, docs (sections of pages), docs_nav(url) (the docs sidebar HTML
  with url marked current), posts (newest first by date and time: title, url,
  date, published, description), feed (URL)
- `explainers`: [{slug, url, title, pill, metric, html}] (one of pill/metric is "")
- `plots`, `unplotted`: measured results for the speedup page (plots.load)
Markdown bodies may use `{{ facts... }}` so numbers come from facts.json, and
`{{ gallery_fields }}` (gallery.doc_rows(): key, kind, meaning) so the manifest's
keys are listed from the table the build checks them with; the `pct` filter
writes a fraction as a percentage (0.005 -> "0.5%").
"""
import datetime
import functools
import hashlib
import importlib.metadata
import json
import os
from pathlib import Path

import jinja2
import jinja2.meta
from markupsafe import Markup

from tinygpt.facts import FACTS

from . import content, gallery, markdown, plots
from .context import BuildError, Context, read_text

SITE_URL = os.environ.get("TINYGPT_SITE_URL", "https://tinygpt.pages.dev").rstrip("/")
NAV = [("App", "/app/"), ("Guide", "/guide/"), ("Explainers", "/explainers/"), ("Docs", "/docs/"),
       ("Devlog", "/devlog/"), ("Roadmap", "/roadmap/"), ("Speedup", "/speedup/")]


def _template_where(exc: BaseException, templates: Path, fallback: str) -> str:
    """file:line of the innermost template frame of a jinja2 error's traceback (fallback:1 if none)."""
    if isinstance(exc, jinja2.TemplateSyntaxError) and exc.lineno:
        name = exc.filename or fallback
        return f"{name}:{exc.lineno}"
    where = f"{fallback}:1"
    tb = exc.__traceback__
    while tb:
        filename = tb.tb_frame.f_code.co_filename
        if filename.startswith(str(templates)) or filename == "<template>":
            where = f"{filename if filename != '<template>' else fallback}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def published(page: content.Page) -> datetime.datetime | None:
    """When a devlog post was written (content.py requires its date and time), in UTC."""
    if page.kind != "devlog":
        return None
    return datetime.datetime.combine(page.meta["date"], page.meta["time"], datetime.timezone.utc)


class Renderer:
    def __init__(self, root: Path, assets: dict):
        self.root = root
        self.templates = root / "site" / "templates"
        for path in self.templates.rglob("*.html"):  # jinja2's own decode error names no file
            read_text(path, str(path.relative_to(root)))
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(self.templates),
            autoescape=jinja2.select_autoescape(["html", "xml"]),
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        # Markdown gets facts as plain text: markdown-it escapes the HTML it renders.
        self.text_env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
        for env in (self.env, self.text_env):
            env.filters["pct"] = lambda fraction: f"{fraction * 100:g}%"
        self.assets = assets

    @functools.cache
    def chain(self, name: str) -> list[str]:
        """name and the templates it extends, includes or imports, as site/templates/... paths."""
        found, todo = [], [name]
        while todo:
            if (t := todo.pop(0)) is not None and t not in found:  # None: a name computed at render time
                found.append(t)
                todo += jinja2.meta.find_referenced_templates(self.env.parse(self.env.loader.get_source(self.env, t)[0]))
        return [f"site/templates/{t}" for t in found]

    def substitute(self, page: content.Page) -> str:
        """The page's Markdown with `{{ facts... }}` filled in."""
        text = page.body
        if "{{" in text or "{%" in text:
            try:
                text = self.text_env.from_string(text).render(facts=FACTS, gallery_fields=gallery.doc_rows())
            except jinja2.TemplateError as e:
                where = _template_where(e, self.templates, page.source)
                if where.startswith(page.source + ":"):  # line within the body -> line within the file
                    where = f"{page.source}:{int(where.rsplit(':', 1)[1]) + page.body_line - 1}"
                raise BuildError(f"in Markdown: {e}", where) from None
        return text

    def page(self, page: content.Page, site: dict, explainers: list, extra: dict) -> str:
        view = {
            "title": page.title, "description": page.meta.get("description", ""), "url": page.url,
            "html": Markup(page.html), "toc": Markup(page.toc), "date": page.meta.get("date"),
            "published": published(page), "kind": page.kind, "slug": page.slug, "section": page.meta.get("section", ""), "source": page.source,
        }
        try:
            template = self.env.get_template(page.template)
            return template.render(assets=self.assets, facts=FACTS, page=view, site=site,
                                   explainers=explainers, **extra)
        except jinja2.TemplateError as e:  # a missing page template is content.py's error; this is an include's
            where = _template_where(e, self.templates, str(self.templates / page.template))
            where = where.replace(str(self.root) + os.sep, "")
            message = f"template {e.name!r} not found in site/templates" if isinstance(e, jinja2.TemplateNotFound) \
                else f"{type(e).__name__}: {e}"
            raise BuildError(f"{message} (rendering {page.source})", where) from None


def generated_pages() -> list[content.Page]:
    """Pages made from templates alone: section indexes and the 404 page."""
    def make(kind, slug, url, title, description, template):
        meta = {"title": title, "description": description, "template": template}
        return content.Page(f"site/templates/{template}", kind, slug, url, meta, "", 1)

    return [
        make("index", "docs", "/docs/", "Docs", "How to use, build and extend TinyGPT.", "docs_index.html"),
        make("index", "devlog", "/devlog/", "Devlog", "Notes from building TinyGPT, newest first.", "devlog_index.html"),
        make("index", "explainers", "/explainers/", "Explainers",
             "What each capability pill and metric in the app means.", "explainers_index.html"),
        make("special", "404", "/404.html", "Page not found", "There is no page at this address.", "404.html"),
    ]


def site_view(pages: list[content.Page]) -> dict:
    docs = sorted((p for p in pages if p.kind == "docs"), key=lambda p: (p.meta.get("order", 1000), p.title))
    sections: dict[str, list] = {}
    for p in docs:
        sections.setdefault(p.meta.get("section", "General"), []).append({"title": p.title, "url": p.url,
                                                                          "description": p.meta.get("description", "")})
    posts = sorted((p for p in pages if p.kind == "devlog"), key=published, reverse=True)
    urls = {p.url for p in pages} | {p.url for p in generated_pages()}
    docs_view = [{"section": s, "pages": ps} for s, ps in sections.items()]
    return {
        "name": "TinyGPT",
        "url": SITE_URL,
        "app": "/app/" if "/app/" in urls else None,
        "nav": [{"title": t, "url": u} for t, u in NAV if u in urls],
        "docs": docs_view,
        "posts": [{"title": p.title, "url": p.url, "date": p.meta["date"], "published": published(p),
                   "description": p.meta.get("description", "")} for p in posts],
        "feed": "/feed.xml",
    }


def output_path(out: Path, url: str) -> Path:
    return out / url.lstrip("/") if url.endswith(".html") else out / url.lstrip("/") / "index.html"


def _renderer_version() -> str:
    """Changes whenever Markdown output could: our renderer's code or the libraries' versions."""
    libs = [f"{name}={importlib.metadata.version(name)}" for name in ("markdown-it-py", "mdit-py-plugins", "pygments")]
    return hashlib.sha256(Path(markdown.__file__).read_bytes() + "|".join(libs).encode()).hexdigest()


def load_cache(path: Path | None) -> dict:
    if path is None or not path.exists():
        return {}
    data = json.loads(path.read_text())
    return data["entries"] if data.get("version") == _renderer_version() else {}


def save_cache(path: Path | None, entries: dict):
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"version": _renderer_version(), "entries": entries}))


def render_all(root: Path, out: Path, assets: dict, pages: list[content.Page], extra: dict,
               cache_path: Path | None = None) -> list[dict]:
    """Render pages into out/; returns what deploy and the link checker need about each (url, title,
    date, published, kind, source, html, links: {href: "file:line" of the Markdown that wrote it}, templates: the
    template files that rendered it).
    With cache_path, Markdown already rendered by an earlier build is reused from there."""
    renderer = Renderer(root, assets)
    cache = load_cache(cache_path)
    sources = [renderer.substitute(p) for p in pages]
    keys = [hashlib.sha256(t.encode()).hexdigest() for t in sources]
    texts = dict(zip(keys, sources))
    todo = [k for k in texts if k not in cache]
    cache.update((k, markdown.render(texts[k])) for k in todo)
    for p, key in zip(pages, keys):
        p.html, p.toc, found = cache[key]
        p.links = {}
        for href, line in found:
            p.links.setdefault(href, f"{p.source}:{line + p.body_line - 1}")
    save_cache(cache_path, {k: cache[k] for k in keys})
    explainers = [{"slug": p.slug, "url": p.url, "title": p.title, "pill": p.meta.get("pill", ""),
                   "metric": p.meta.get("metric", ""), "html": Markup(p.html)}
                  for p in pages if p.kind == "explainers"]
    site = site_view(pages)
    # The docs sidebar is the same on every docs page but for the current link: render it once.
    sidebar = renderer.env.get_template("_docs_nav.html").render(site=site)
    site["docs_nav"] = lambda url: Markup(sidebar.replace(f'<a href="{url}">', f'<a href="{url}" aria-current="page">', 1))
    written = []
    for p in pages + generated_pages():
        html = renderer.page(p, site, explainers, extra)
        path = output_path(out, p.url)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
        written.append({"url": p.url, "title": p.title, "date": p.meta.get("date"), "published": published(p),
                        "kind": p.kind,
                        "source": p.source, "html": p.html, "description": p.meta.get("description", ""),
                        "links": p.links, "templates": renderer.chain(p.template)})
    return written


def run(ctx: Context) -> str:
    pages = content.load(ctx.root)
    plotted, unplotted = plots.load(ctx.root)
    extra = {"plots": plotted, "unplotted": unplotted}
    for u in unplotted:
        ctx.notes.append(f"speedup: {u['source']} has no 'series' (shape in tinygpt/site_build/plots.py): listed, not plotted")
    ctx.pages = render_all(ctx.root, ctx.out, ctx.assets, pages, extra, ctx.cache / "markdown.json")
    return f"{len(ctx.pages)} pages ({sum(p['kind'] == 'docs' for p in ctx.pages)} docs, " \
           f"{sum(p['kind'] == 'devlog' for p in ctx.pages)} posts, " \
           f"{sum(p['kind'] == 'explainers' for p in ctx.pages)} explainers); " \
           f"measured results: {len(plotted)} plotted, {len(unplotted)} not in the plot shape"
