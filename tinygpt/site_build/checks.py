"""The checks step: every internal link and #anchor in dist/ resolves, no page
carries inline script or style (the CSP would block it) or one id twice (a
script's lookup would find the first), and the output fits
Cloudflare Pages (facts.json "pages": size per file, number of files). A failure names the file and
line that wrote the link (a Markdown line, or a template line for links and
markup the templates write) and the page it broke."""
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from .context import PAGES_FILE_LIMIT, PAGES_MAX_FILE_BYTES as MAX_FILE_BYTES, PAGES_MAX_FILES as MAX_FILES, BuildError, Context, code_line
from .deploy import REDIRECTS

LINK_ATTRS = {("a", "href"), ("link", "href"), ("script", "src"), ("img", "src"), ("source", "src"),
              ("iframe", "src"), ("form", "action")}
DATA_SCRIPT_TYPES = {"application/json", "application/ld+json"}


class PageScan(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.repeated: list[tuple[str, int]] = []  # (an id already used on the page, line)
        self.links: list[tuple[str, int]] = []  # (URL, line in this HTML)
        self.inline: list[tuple[tuple[str, str], int]] = []  # ((what, a regex that finds it in a template), line)
        self._script_without_src = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id") in self.ids:
            self.repeated.append((attrs["id"], self.getpos()[0]))
        for key in ("id",) + (("name",) if tag == "a" else ()):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for key, value in attrs.items():
            if (tag, key) in LINK_ATTRS and value is not None:
                self.links.append((value, self.getpos()[0]))
            elif key.startswith("data-") and value and value.startswith("/assets/"):
                self.links.append((value, self.getpos()[0]))  # asset URLs handed to scripts (worker, wasm)
            if key == "style" or key.startswith("on"):
                self.inline.append(((f"<{tag} {key}=...>", rf"<{tag}\b[^>]*\s{key}="), self.getpos()[0]))
        if tag == "style":
            self.inline.append((("<style> element", r"<style\b"), self.getpos()[0]))
        self._script_without_src = tag == "script" and "src" not in attrs and attrs.get("type") not in DATA_SCRIPT_TYPES

    def handle_data(self, data):
        if self._script_without_src and data.strip():
            self.inline.append((("inline <script>", r"<script(?![^>]*\ssrc=)"), self.getpos()[0]))

    def handle_endtag(self, tag):
        if tag == "script":
            self._script_without_src = False


def url_of(out: Path, path: Path) -> str:
    rel = path.relative_to(out).as_posix()
    return "/" + rel[: -len("index.html")] if rel.endswith("index.html") else "/" + rel


def resolve(out: Path, path: str) -> Path | None:
    """The file Pages would serve for a URL path (folder URLs -> index.html)."""
    target = out / unquote(path).lstrip("/")
    if path.endswith("/"):
        target = target / "index.html"
    elif target.is_dir():
        target = target / "index.html"
    return target if target.is_file() and target.resolve().is_relative_to(out.resolve()) else None


LINK_IN_TEMPLATE = re.compile(r'\s(?:href|src|action|data-[\w-]+)="([^"]*)"')
JINJA = re.compile(r"{{.*?}}|{%.*?%}")


class Origins:
    """Where a page's links and markup were written. A link Markdown wrote: that Markdown line (the
    page's own, else any page's, as explainers are shown inside the app page too). Anything else
    comes from the page's templates: the line whose attribute matches the link with the most literal
    text (`/roadmap/#{{ lever.id }}` before `{{ e.url }}`), or the first line matching the markup."""

    def __init__(self, root: Path, pages: list[dict]):
        self.pages = {p["url"]: p for p in pages}
        self.markdown: dict[str, str] = {}
        for p in pages:
            for href, where in p["links"].items():
                self.markdown.setdefault(href, where)
        self.templates = {name: (root / name).read_text(encoding="utf-8").split("\n")
                          for p in pages for name in p["templates"]}

    def _lines(self, url: str):
        for name in self.pages[url]["templates"]:
            for number, line in enumerate(self.templates[name], 1):
                yield f"{name}:{number}", line

    def link(self, url: str, href: str) -> str:
        if written := self.pages[url]["links"].get(href) or self.markdown.get(href):
            return written
        matches = [(len(JINJA.sub("", value)), where) for where, line in self._lines(url)
                   for value in LINK_IN_TEMPLATE.findall(line)
                   if re.fullmatch(".*?".join(map(re.escape, JINJA.split(value))), href)]
        return max(matches, key=lambda m: m[0], default=(0, f"{self.pages[url]['source']}:1"))[1]

    def markup(self, url: str, pattern: str) -> str:
        return next((where for where, line in self._lines(url) if re.search(pattern, line)),
                    f"{self.pages[url]['source']}:1")


def _problem(out: Path, scans: dict, redirects: dict, page_url: str, link: str) -> str | None:
    """What is wrong with a link on the page at page_url, or None."""
    parts = urlsplit(urljoin(page_url, link))
    if parts.scheme == "javascript":
        return f"javascript: link {link!r}"
    if parts.scheme or parts.netloc:  # another site, mailto:, data:
        return None
    target_path = redirects.get(parts.path or page_url, parts.path or page_url)
    target = resolve(out, target_path)
    if target is None:
        return f"broken link {link!r} (no file for {target_path})"
    if parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in scans[target].ids:
        return f"broken anchor {link!r} (no id {parts.fragment!r} in {target.relative_to(out)})"
    return None


def check(out: Path, origins: Origins | None = None) -> int:
    """Raise BuildError for the first broken link (others listed after it); returns links checked.
    Without origins (or for a page they do not know) a problem is placed in the output HTML."""
    scans = {}
    for path in sorted(out.rglob("*.html")):
        scan = PageScan()
        scan.feed(path.read_text(encoding="utf-8"))
        scans[path] = scan
    redirects = {a: b for a, b, _ in REDIRECTS}
    problems = []
    count = 0
    for path, scan in scans.items():
        page_url = url_of(out, path)
        name = str(path.relative_to(out))
        known = origins is not None and page_url in origins.pages
        for (what, pattern), line in scan.inline:
            where = origins.markup(page_url, pattern) if known else f"dist/{name}:{line}"
            problems.append((where, f"{name}: {what} is not allowed (the CSP blocks inline script and style)"))
        for id_, line in scan.repeated:
            where = origins.markup(page_url, rf'\bid="{re.escape(id_)}"') if known else f"dist/{name}:{line}"
            problems.append((where, f"{name}: id {id_!r} is used twice on the page (line {line} repeats it)"))
        for link, line in scan.links:
            count += 1
            problem = _problem(out, scans, redirects, page_url, link)
            if problem:  # only then look for its origin: that reads templates
                problems.append((origins.link(page_url, link) if known else f"dist/{name}:{line}", f"{name}: {problem}"))
    if problems:
        where, message = problems[0]
        rest = "".join(f"\n{w}: {m}" for w, m in problems[1:21])
        raise BuildError(message + rest, where)
    return count


def check_redirects(out: Path):
    for source, target, _ in REDIRECTS:
        if resolve(out, target) is None:
            raise BuildError(f"_redirects sends {source} to {target}, which has no page",
                             code_line("tinygpt/site_build/deploy.py", f'("{source}", "{target}"'))


def check_limits(out: Path) -> int:
    files = [p for p in out.rglob("*") if p.is_file()]
    if len(files) > MAX_FILES:
        raise BuildError(f"{len(files)} files: Cloudflare Pages allows {MAX_FILES}")
    for p in files:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise BuildError(f"{p.relative_to(out)} is {p.stat().st_size / 2**20:.1f} MiB, over {PAGES_FILE_LIMIT}")
    return len(files)


def run(ctx: Context) -> str:
    links = check(ctx.out, Origins(ctx.root, ctx.pages))
    check_redirects(ctx.out)
    n_files = check_limits(ctx.out)
    size = sum(p.stat().st_size for p in ctx.out.rglob("*") if p.is_file())
    return f"{links} links ok, no inline script/style, no repeated id; {n_files} files, {size / 2**20:.1f} MiB (Pages limits ok)"
