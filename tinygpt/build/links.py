"""The checks step: every internal link and #anchor in dist/ resolves, no page
carries inline script or style (the CSP would block it), and the output fits
Cloudflare Pages (25 MiB per file, 20,000 files). A failure names the page,
its source file and the link."""
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from .context import BuildError, Context
from .deploy import REDIRECTS

MAX_FILE_BYTES = 25 * 1024 * 1024
MAX_FILES = 20_000
LINK_ATTRS = {("a", "href"), ("link", "href"), ("script", "src"), ("img", "src"), ("source", "src"),
              ("iframe", "src"), ("form", "action")}
DATA_SCRIPT_TYPES = {"application/json", "application/ld+json"}


class PageScan(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.inline: list[str] = []
        self._script_without_src = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id",) + (("name",) if tag == "a" else ()):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for key, value in attrs.items():
            if (tag, key) in LINK_ATTRS and value is not None:
                self.links.append(value)
            elif key.startswith("data-") and value and value.startswith("/assets/"):
                self.links.append(value)  # asset URLs handed to scripts (worker, wasm)
            if key == "style" or key.startswith("on"):
                self.inline.append(f"<{tag} {key}=...>")
        if tag == "style":
            self.inline.append("<style> element")
        self._script_without_src = tag == "script" and "src" not in attrs and attrs.get("type") not in DATA_SCRIPT_TYPES

    def handle_data(self, data):
        if self._script_without_src and data.strip():
            self.inline.append("inline <script>")

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


def check(out: Path, sources: dict[str, str] | None = None) -> int:
    """Raise BuildError for the first broken link (others listed after it); returns links checked."""
    sources = sources or {}
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
        where = sources.get(page_url, f"dist/{name}")
        for what in scan.inline:
            problems.append((where, f"{name}: {what} is not allowed (the CSP blocks inline script and style)"))
        for link in scan.links:
            count += 1
            parts = urlsplit(urljoin(page_url, link))
            if parts.scheme == "javascript":
                problems.append((where, f"{name}: javascript: link {link!r}"))
            if parts.scheme or parts.netloc:  # another site, mailto:, data:
                continue
            target_path = parts.path or page_url
            target_path = redirects.get(target_path, target_path)
            target = resolve(out, target_path)
            if target is None:
                problems.append((where, f"{name}: broken link {link!r} (no file for {target_path})"))
            elif parts.fragment and target.suffix == ".html":
                if unquote(parts.fragment) not in scans[target].ids:
                    problems.append((where, f"{name}: broken anchor {link!r} (no id {parts.fragment!r} "
                                            f"in {target.relative_to(out)})"))
    if problems:
        where, message = problems[0]
        rest = "".join(f"\n{w}: {m}" for w, m in problems[1:21])
        raise BuildError(message + rest, where)
    return count


def check_redirects(out: Path):
    for source, target, _ in REDIRECTS:
        if resolve(out, target) is None:
            raise BuildError(f"_redirects sends {source} to {target}, which has no page", "tinygpt/build/deploy.py")


def check_limits(out: Path) -> int:
    files = [p for p in out.rglob("*") if p.is_file()]
    if len(files) > MAX_FILES:
        raise BuildError(f"{len(files)} files: Cloudflare Pages allows {MAX_FILES}")
    for p in files:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise BuildError(f"{p.relative_to(out)} is {p.stat().st_size / 2**20:.1f} MiB: "
                             "Cloudflare Pages allows 25 MiB per file")
    return len(files)


def run(ctx: Context) -> str:
    links = check(ctx.out, {p["url"]: p["source"] for p in ctx.pages})
    check_redirects(ctx.out)
    n_files = check_limits(ctx.out)
    size = sum(p.stat().st_size for p in ctx.out.rglob("*") if p.is_file())
    return f"{links} links ok, no inline script/style; {n_files} files, {size / 2**20:.1f} MiB (Pages limits ok)"
