"""Reading content/: TOML front matter between `+++` lines, checked keys, URLs.

Front matter keys: title (required), description, section and order (docs),
date and time (devlog: YYYY-MM-DD and HH:MM in UTC, both required, so posts of
one day sort in the order they were written), template (default per folder), slug, and for
explainers exactly one of pill (a lever or backend id from facts.json) or metric
(a metric id from facts.json). Errors read `content/path.md:LINE: message`; a
duplicate address names both files, each at its `slug` line (line 1 where the
file name is the slug).
"""
import datetime
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from tinygpt.facts import FACTS

from .context import BuildError, read_text

KEYS = {"title": str, "description": str, "section": str, "order": int, "date": (str, datetime.date),
        "time": str, "template": str, "slug": str, "pill": str, "metric": str}
FOLDERS = ("docs", "devlog", "explainers")  # each page of these lives at /<folder>/<slug>/
DEFAULT_TEMPLATES = {"docs": "doc.html", "devlog": "post.html", "explainers": "explainer.html",
                     "index": "home.html", "roadmap": "roadmap.html", "speedup": "speedup.html"}


@dataclass
class Page:
    source: str  # path relative to the repository, for error messages
    kind: str  # "docs", "devlog", "explainers" or "page" (top level)
    slug: str
    url: str
    meta: dict
    body: str  # Markdown
    body_line: int  # line number of the body's first line in the source
    html: str = ""
    toc: str = ""
    links: dict = field(default_factory=dict)  # href -> file:line of the Markdown that wrote it
    extra: dict = field(default_factory=dict)

    @property
    def title(self) -> str:
        return self.meta["title"]

    @property
    def template(self) -> str:
        return self.meta.get("template") or DEFAULT_TEMPLATES.get(self.kind if self.kind in FOLDERS else self.slug,
                                                                  "page.html")


def _key_line(lines: list[str], key: str) -> int:
    for i, line in enumerate(lines):
        if re.match(rf"\s*{re.escape(key)}\s*=", line):
            return i + 2  # +1 for 1-based, +1 for the opening +++
    return 1


def parse(text: str, source: str) -> tuple[dict, str, int]:
    """Split and check front matter; returns (meta, Markdown body, body's first line)."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "+++":
        raise BuildError("the file must start with a '+++' line opening TOML front matter", f"{source}:1")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "+++")
    except StopIteration:
        raise BuildError("front matter is not closed: no second '+++' line", f"{source}:1") from None
    front = lines[1:end]
    try:
        meta = tomllib.loads("\n".join(front))
    except tomllib.TOMLDecodeError as e:
        at = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        where = f"{source}:{int(at[1]) + 1}" if at else f"{source}:1"
        message = re.sub(r" \(at .*\)$", "", str(e))
        raise BuildError(f"invalid TOML front matter: {message}", where) from None
    for key, value in meta.items():
        if key not in KEYS:
            raise BuildError(f"unknown front matter key {key!r} (known: {', '.join(KEYS)})",
                             f"{source}:{_key_line(front, key)}")
        if not isinstance(value, KEYS[key]):
            raise BuildError(f"front matter key {key!r} has the wrong type ({type(value).__name__})",
                             f"{source}:{_key_line(front, key)}")
    if not str(meta.get("title", "")).strip():
        raise BuildError("front matter has no title", f"{source}:1")
    if "date" in meta:
        try:
            meta["date"] = datetime.date.fromisoformat(str(meta["date"]))
        except ValueError:
            raise BuildError(f"date {meta['date']!r} is not YYYY-MM-DD", f"{source}:{_key_line(front, 'date')}") from None
    if "time" in meta:
        if not re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d", meta["time"]):
            raise BuildError(f"time {meta['time']!r} is not HH:MM (24-hour clock, UTC)",
                             f"{source}:{_key_line(front, 'time')}")
        meta["time"] = datetime.time.fromisoformat(meta["time"])
    if "slug" in meta and not re.fullmatch(r"[a-z0-9][a-z0-9-]*", meta["slug"]):
        raise BuildError(f"slug {meta['slug']!r} must be lowercase letters, digits and dashes",
                         f"{source}:{_key_line(front, 'slug')}")
    return meta, "\n".join(lines[end + 1:]), end + 2


def _check_explainer(meta: dict, source: str, front_lines: list[str]):
    pills = {lever["id"] for lever in FACTS["levers"]} | {b["id"] for b in FACTS.get("backends", [])}
    metrics = {m["id"] for m in FACTS.get("metrics", [])}
    if ("pill" in meta) == ("metric" in meta):
        raise BuildError("an explainer needs exactly one of `pill` or `metric`", f"{source}:1")
    if "pill" in meta and meta["pill"] not in pills:
        raise BuildError(f"unknown pill {meta['pill']!r} (facts.json levers and backends: {', '.join(sorted(pills))})",
                         f"{source}:{_key_line(front_lines, 'pill')}")
    if "metric" in meta and meta["metric"] not in metrics:
        raise BuildError(f"unknown metric {meta['metric']!r} (facts.json metrics: {', '.join(sorted(metrics))})",
                         f"{source}:{_key_line(front_lines, 'metric')}")


def load(root: Path) -> list[Page]:
    """Every Markdown page under root/content, checked, with unique URLs."""
    pages: list[Page] = []
    seen: dict[str, str] = {}
    content = root / "content"
    for path in sorted(content.rglob("*.md")):
        rel = path.relative_to(content)
        source = str(path.relative_to(root))
        if len(rel.parts) > 2 or (len(rel.parts) == 2 and rel.parts[0] not in FOLDERS):
            raise BuildError(f"content pages live at the top level or in {', '.join(FOLDERS)}/", f"{source}:1")
        text = read_text(path, source)
        meta, body, body_line = parse(text, source)
        front = text.split("\n")[1:body_line - 2]
        kind = rel.parts[0] if len(rel.parts) == 2 else "page"
        slug = meta.get("slug", path.stem)
        if kind == "devlog":
            for key, form in (("date", "YYYY-MM-DD"), ("time", "HH:MM, UTC")):
                if key not in meta:
                    raise BuildError(f"a devlog post needs a {key} ({form})", f"{source}:1")
        if kind == "explainers":
            _check_explainer(meta, source, front)
        if "template" in meta and not (root / "site" / "templates" / meta["template"]).is_file():
            raise BuildError(f"template {meta['template']!r} not found in site/templates",
                             f"{source}:{_key_line(front, 'template')}")
        url = "/" if (kind, slug) == ("page", "index") else (f"/{slug}/" if kind == "page" else f"/{kind}/{slug}/")
        where = f"{source}:{_key_line(front, 'slug') if 'slug' in meta else 1}"  # the file name is the slug
        if url in seen:
            raise BuildError(f"duplicate slug: {url} is also made by {seen[url]}", where)
        seen[url] = where
        pages.append(Page(source, kind, slug, url, meta, body, body_line))
    return pages
